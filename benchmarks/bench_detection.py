"""What the judge catches and what it lets pass: realistic kernel bugs against correct
implementations that round differently, on PyTorch's OpInfo samples and on larger shapes.

Every "device" here is a function of one operator sample computed on the CPU: correct variants
(``detection_variants.py``: float64 rounded once, float32 accumulation for half dtypes,
reordered reductions, split-K half-precision GEMM, ``torch._refs`` decompositions, tie
permutations in sorts, faithful rounding, a 2-ulp math library, separate roundings for a
multiply-add, flush to zero, online softmax, Welford variance, and the CPU-overflow case) and
bug classes (``detection_bugs.py``: an approximation swapped in, one wrong element among
large ones, a dropped or shifted term, a transposed output, NaN not propagated,
half-precision accumulation, rounding toward zero, ordering bugs; ``detection_kernel_bugs.py``:
a wrong tie rule or reduction identity, a pooling divisor, ignored strides, a norm's epsilon,
naive formulas, an unshifted softmax, one-pass variance, round-half-away, -0 lost, a last-ulp
bias, a flipped convolution kernel, subnormal inputs read as zero). Each output becomes a case
of the ops layer's kind (its rule chosen as the ops layer chooses it for a CUDA device) and is
judged by ``verify/oota_judge.py``.

It prints, per bug class × dtype, the cases whose output the bug changed and those the judge
caught (and, for biased rounding, the cases of at least 64 elements), and per correct variant
× dtype, the cases judged and the false alarms. Run it with a Python that has torch, from the
repository's root (the CPU image has one)::

    python benchmarks/bench_detection.py [--samples 3] [--ops a,b] [--json OUT] [--list]

``--quick`` runs a fixed subset (a minute on a 2-core machine). docs/design/judging.md shows
its table. ``--record`` writes the rows to benchmarks/results/ (the performance page shows
them); ``--before OLD.json`` records an earlier run's ``--json`` beside them, under its
``--label`` (an older judge, run from a copy of its checkout on the same machine).
The bug classes no single kernel shows (a gradient, an optimizer's step, a stream, the
allocator) are refdev's faults run through the suite's layers: ``bench_detection_layers.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "verify"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import detection_samples as corpus  # noqa: E402
import detection_variants as variants  # noqa: E402
import oota_cases  # noqa: E402 - the suite's modules, in verify/
import oota_judge  # noqa: E402
import oota_opinfo  # noqa: E402
import oota_rules  # noqa: E402
import torch  # noqa: E402

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
DEVICE_TYPE = "cuda"  # whose PyTorch decisions (skips, the dtype PyTorch judges) apply
LARGE_BIAS_ELEMENTS = 64
# A bug is material where some element's error is more than this many times every correct
# variant's error there and one ulp of the element: beyond what a correct kernel can do.
MATERIAL = 4.0
# Gross: beyond this many times every correct variant's error and one ulp at some element (in
# float32 a thousand ulp at least: the outside tester's gross misses were 1,650 ulp and a
# relative 1.6e-4), or a non-finite value, an integer or an index that a correct kernel does
# not give.
GROSS = 1000.0
ALWAYS_MATERIAL = ("NaN not propagated", "topk(sorted=True) out of order",
                   "stable sort reorders ties", "index points at another value")

def _with_nan(input_: Any) -> Any | None:
    if not isinstance(input_, torch.Tensor) or not input_.is_floating_point() or \
            input_.numel() < 2:
        return None
    poisoned = input_.clone()
    poisoned.reshape(-1)[input_.numel() // 2] = float("nan")
    return poisoned



# -- judging ---------------------------------------------------------------------------------------

def _rule(op: Any, dtype_name: str) -> oota_rules.Rule | None:
    decided = oota_opinfo.decisions(op, DEVICE_TYPE, getattr(torch, dtype_name))
    if decided.skip or not decided.device_dtypes:
        return None
    return oota_rules.choose(dtype_name, pytorch_judges=dtype_name == decided.compare_dtype,
                             override=(decided.atol, decided.rtol))


def _case(sample: variants.Sample, device: Any, rule: oota_rules.Rule, dtype_name: str,
          index: int) -> dict[str, Any]:
    return oota_cases.make_case(
        op=sample.name, dtype=dtype_name, sample=index, input_=sample.input, args=sample.args,
        kwargs=sample.kwargs, cpu=sample.cpu, device=device, reference=sample.reference,
        rule=rule, device_type=DEVICE_TYPE, copy=False)


def _judge(sample: variants.Sample, device: Any, rule: oota_rules.Rule, dtype_name: str,
           index: int) -> oota_cases.Verdict:
    case = _case(sample, device, rule, dtype_name, index)
    if not hasattr(oota_judge, "Rerun"):  # a judge before the element rule (--against)
        return oota_judge.judge(case, DEVICE_TYPE, {})
    rerun = oota_judge.Rerun(call=lambda i, a, k: sample.op(i, *a, **k))
    return oota_judge.judge(case, DEVICE_TYPE, {}, rerun=rerun)


def _changed(device: Any, sample: variants.Sample, correct: Any) -> bool:
    plain = oota_cases.plain(device, copy=False)
    return not oota_judge.identical(plain, oota_cases.plain(sample.cpu, copy=False)) and (
        correct is None or not oota_judge.identical(plain, oota_cases.plain(correct,
                                                                             copy=False)))


def _prepare(sample: variants.Sample) -> bool:
    """The CPU's output and the float64 reference; False where the CPU refuses the sample."""
    try:
        sample.cpu = sample.call(sample.input)
    except Exception:  # noqa: BLE001 - nothing to compare with
        return False
    try:
        sample.reference = sample.run_in(torch.float64)
    except Exception:  # noqa: BLE001 - judged without a float64 reference
        sample.reference = None
    poisoned = _with_nan(sample.input)
    if poisoned is not None:
        try:
            out = sample.call(poisoned)
            leaves = [t for t in oota_cases.leaves(oota_cases.plain(out, copy=False))
                      if isinstance(t, torch.Tensor) and t.is_floating_point()]
            if any(bool(t.isnan().any()) for t in leaves):
                sample.extra["nan_input"] = poisoned
                sample.extra["nan_cpu"] = out
        except Exception:  # noqa: BLE001 - no NaN case for this sample
            pass
    return True


class Tally:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(
            lambda: {"cases": 0, "caught": 0, "material": 0, "material_caught": 0, "large": 0,
                     "large_caught": 0, "gross": 0, "gross_caught": 0, "examples": []})

    def add(self, kind: str, variant: str, dtype: str, caught: bool, large: bool,
            example: str, material: bool = False, gross: bool = False) -> None:
        row = self.rows[(kind, variant, dtype)]
        row["cases"] += 1
        row["caught"] += caught
        row["material"] += material
        row["material_caught"] += caught and material
        row["gross"] += gross
        row["gross_caught"] += caught and gross
        row["large"] += large
        row["large_caught"] += caught and large
        wrong = caught if kind == "correct" else not caught
        if wrong and len(row["examples"]) < 40:
            row["examples"].append(("GROSS " if gross else "MATERIAL " if material else "")
                                   + example)


def _float_leaves(tree: Any) -> list[Any]:
    return [t for t in oota_cases.leaves(oota_cases.plain(tree, copy=False))]


def material(device: Any, sample: variants.Sample, correct: list[Any],
             factor: float = MATERIAL) -> bool:
    """Whether the bug's output is beyond every correct variant's at some element: a
    non-finite value where the correct one is finite (or the reverse), a different integer or
    index, or a floating element whose error against float64 is more than ``factor`` times
    the largest of the correct variants' errors there and of one ulp of the element. Each
    element by its own error: a small element far off is material however large the others
    are. With ``factor`` GROSS: whether it is gross."""
    if sample.reference is None:
        return False
    got = _float_leaves(device)
    refs = _float_leaves(sample.reference)
    wants = _float_leaves(sample.cpu)
    others = [_float_leaves(c) for c in correct if c is not None]
    if len(got) != len(refs) or len(got) != len(wants):
        return True
    for index, (mine, ref, want) in enumerate(zip(got, refs, wants, strict=True)):
        if not isinstance(want, torch.Tensor) or want.layout != torch.strided:
            continue
        if not (want.is_floating_point() or want.is_complex()):
            if not torch.equal(mine, want):
                return True
            continue
        if _beyond_correct(mine, ref, want, [o[index] for o in others if index < len(o)],
                           factor):
            return True
    return False


def _beyond_correct(mine: Any, ref: Any, want: Any, others: list[Any], factor: float) -> bool:
    def wide(t: Any) -> Any:
        return t.to(torch.complex128 if t.is_complex() else torch.float64)
    ref64 = wide(ref)
    finite = torch.isfinite(wide(mine))
    # Non-finite where float64 and the CPU are both finite, or finite where both are not (an
    # overflow the CPU makes too is a correct kernel's: rule 5).
    if bool(((finite != torch.isfinite(ref64)) & (finite != torch.isfinite(want))).any()):
        return True
    error = (wide(mine) - ref64).abs()
    eps = torch.finfo(want.dtype).eps
    legit = torch.clamp(ref64.abs() * eps, min=eps * torch.finfo(want.dtype).tiny)
    for other in others:
        if isinstance(other, torch.Tensor) and other.shape == want.shape:
            legit = torch.maximum(legit, torch.nan_to_num((wide(other) - ref64).abs(),
                                                          nan=0.0, posinf=0.0))
    return bool((error > factor * legit)[torch.isfinite(ref64) & finite].any())


def judge_sample(sample: variants.Sample, rule: oota_rules.Rule, dtype_name: str,
                 index: int, tally: Tally) -> None:
    label = f"{sample.name} ({dtype_name}) {sample.extra['origin']} sample {index}"
    correct = variants.fp64_rounded(sample)
    legit = []
    for name, make in variants.CORRECT.items():
        device = make(sample)
        legit.append(device)
        if device is None or not _changed(device, sample, None):
            continue
        verdict = _judge(sample, device, rule, dtype_name, index)
        tally.add("correct", name, dtype_name, verdict.status == "failed", False,
                  f"{label}: {verdict.message[:400]}")
    for name, make in variants.BUGS.items():
        if name == "NaN not propagated":
            device, judged = make(sample), _nan_sample(sample)
        else:
            device, judged = make(sample), sample
        if device is None or judged is None or not _changed(device, judged, correct if
                                                            judged is sample else None):
            continue
        verdict = _judge(judged, device, rule, dtype_name, index)
        large = corpus.elements(device) >= LARGE_BIAS_ELEMENTS
        ours = judged is sample
        heavy = name in ALWAYS_MATERIAL or (ours and material(device, sample, legit))
        gross = name in ALWAYS_MATERIAL or (ours and heavy and material(
            device, sample, legit, GROSS))
        tally.add("bug", name, dtype_name, verdict.status == "failed", large,
                  f"{label}: {verdict.message[:300]}", heavy, gross)


def _nan_sample(sample: variants.Sample) -> variants.Sample | None:
    if "nan_input" not in sample.extra:
        return None
    poisoned = sample.extra["nan_input"]
    reference = None
    try:
        reference = sample.call(poisoned.to(torch.float64))
    except Exception:  # noqa: BLE001 - judged without a float64 reference
        reference = None
    return variants.Sample(name=sample.name, op=sample.op, input=poisoned, args=sample.args,
                           kwargs=sample.kwargs, dtype=sample.dtype,
                           cpu=sample.extra["nan_cpu"], reference=reference)


def run(names: list[str], samples: int, large: bool) -> Tally:
    ops = oota_opinfo.by_name()
    refs = corpus.python_refs()
    tally = Tally()
    for dtype in DTYPES:
        dtype_name = str(dtype).removeprefix("torch.")
        made: list[variants.Sample] = []
        for name in names:
            if name in ops:
                made += list(corpus.opinfo_samples(ops[name], name, dtype, samples, refs))
        if large:
            made += list(corpus.large_samples(ops, dtype, refs, set(names)))
        for index, sample in enumerate(made):
            rule = _rule(ops[sample.name], dtype_name)
            if rule is None or not _prepare(sample):
                continue
            judge_sample(sample, rule, dtype_name, index, tally)
    return tally


def table(tally: Tally) -> str:
    """Per bug class × dtype: material cases caught of material cases, then all the cases
    the bug changed; biased rounding also over the cases of 64 elements or more. Per correct
    variant × dtype: false alarms of cases judged."""
    dtypes = [str(d).removeprefix("torch.") for d in DTYPES]
    lines = ["| bug class: caught of material (of all changed) | " + " | ".join(dtypes) + " |",
             "|---|" + "---|" * len(dtypes)]
    for name in variants.BUGS:
        cells = []
        for dtype in dtypes:
            row = tally.rows.get(("bug", name, dtype))
            if not row or not row["cases"]:
                cells.append("–")
                continue
            text = f"{row['material_caught']}/{row['material']} ({row['caught']}/{row['cases']})"
            if name.startswith("biased"):
                text = f"≥64 elements: {row['large_caught']}/{row['large']} " \
                       f"(all: {row['caught']}/{row['cases']})"
            cells.append(text)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| **every class: material (gross) caught** | " + " | ".join(
        _totals(tally, dtype) for dtype in dtypes) + " |")
    lines += ["", "| correct variant: false alarms of cases | " + " | ".join(dtypes) + " |",
              "|---|" + "---|" * len(dtypes)]
    for name in variants.CORRECT:
        cells = []
        for dtype in dtypes:
            row = tally.rows.get(("correct", name, dtype))
            cells.append(f"{row['caught']}/{row['cases']}" if row and row["cases"] else "–")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _totals(tally: Tally, dtype: str) -> str:
    rows = [row for (kind, _, d), row in tally.rows.items() if kind == "bug" and d == dtype]
    return (f"{sum(r['material_caught'] for r in rows)}/{sum(r['material'] for r in rows)} "
            f"({sum(r['gross_caught'] for r in rows)}/{sum(r['gross'] for r in rows)})")


COLUMNS = [("judge", ""), ("kind", ""), ("class or variant", ""), ("dtype", ""),
           ("caught of material", ""), ("material", ""), ("caught of changed", ""),
           ("changed", ""), ("caught of ≥64 elements", ""), ("≥64 elements", ""),
           ("caught of gross", ""), ("gross", "")]


def _rows(label: str, rows: list[dict[str, Any]]) -> list[list[Any]]:
    return [[label, r["kind"], r["variant"], r["dtype"], r["material_caught"], r["material"],
             r["caught"], r["cases"], r["large_caught"], r["large"], r.get("gross_caught"),
             r.get("gross")] for r in rows]


def _record(rows: list[dict[str, Any]], names: list[str], label: str,
            before: dict[str, Any] | None) -> None:
    """benchmarks/results/: this run's rows, and an earlier run's (``--before``) with its
    label, so one file holds both judges measured on one machine."""
    import record

    table_rows = _rows(label, rows)
    what = (f"Every 'device' is a function of one operator sample computed on the CPU: "
            f"{len(variants.CORRECT)} correct variants and {len(variants.BUGS)} bug classes "
            f"(benchmarks/detection_*.py), on the three largest OpInfo samples of {len(names)} "
            f"operators and {len(corpus.LARGE)} larger shapes, in float32, float16 and "
            f"bfloat16, each judged as the ops layer judges it for a CUDA device, torch "
            f"{torch.__version__}. For a bug: cases caught of the material ones (beyond 4 "
            "times every correct variant's error and one ulp at some element) and of all it "
            "changed, and of the gross ones (beyond 1,000 times, a non-finite value, a wrong index "
            "or integer); for a correct variant, 'caught' counts false alarms.")
    if before is not None:
        table_rows = _rows(before["label"], before["rows"]) + table_rows
        what += (f" '{before['label']}' is the judge before this run's, on the same corpus "
                 "and machine, run from a copy of its checkout.")
    record.write("bench_detection.py", title="What the judge catches: realistic kernel bugs "
                 "and correct kernels that round differently", what=what, columns=COLUMNS,
                 rows=table_rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3, help="OpInfo samples per pair")
    parser.add_argument("--ops", help="comma-separated op_db names (default: the benchmark's)")
    parser.add_argument("--quick", action="store_true", help="a fixed subset of operators")
    parser.add_argument("--no-large", action="store_true", help="OpInfo samples only")
    parser.add_argument("--json", type=Path, help="also write every row (with the misses)")
    parser.add_argument("--list", action="store_true", help="print each miss and false alarm")
    parser.add_argument("--record", action="store_true",
                        help="also write the rows to benchmarks/results/ (the docs render it)")
    parser.add_argument("--label", default="element judge",
                        help="the judge's name in the rows (--json, --record)")
    parser.add_argument("--before", type=Path,
                        help="with --record: an earlier run's --json, recorded beside this one")
    args = parser.parse_args()
    default = corpus.QUICK if args.quick else corpus.OPERATORS
    names = args.ops.split(",") if args.ops else list(default)
    started = time.monotonic()
    tally = run(names, args.samples, not args.no_large)
    print(table(tally))
    print(f"\n{len(names)} operators, torch {torch.__version__}, "
          f"{time.monotonic() - started:.0f} s", file=sys.stderr)
    if args.list:
        for (kind, name, dtype), row in sorted(tally.rows.items()):
            for example in row["examples"]:
                word = "FALSE ALARM" if kind == "correct" else "MISSED"
                print(f"{word} [{name}, {dtype}] {example}")
    rows = [{"kind": k, "variant": v, "dtype": d, **row}
            for (k, v, d), row in sorted(tally.rows.items())]
    if args.record:
        before = json.loads(args.before.read_text()) if args.before else None
        _record(rows, names, args.label, before)
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, "label": args.label,
                                         "operators": names, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
