"""The judge: whether a device's result of one operator sample is right, and the recorded cases
it judges, so that a verdict made on real hardware can be made again anywhere.

One **case** is one sample of one operator in one dtype: its inputs, the CPU's result, the
device's result and the CPU's result in float64 (the *reference*), plus the rule that judges it
(``oota_rules.Rule``, chosen when the case was made) and the verdict the run gave. The ops
layer (``test_ops.py``) judges every sample through :func:`judge`; it records every failing case
and a sample of the passing ones in ``cases.pt`` beside its results. ``python oota_judge.py
PATH...`` (or ``oota judge PATH``) judges recorded cases again, on any machine with torch and
no accelerator, and prints the same verdicts and messages as the run.

What is compared, output by output (``output``, or ``output[i]`` of several):

* floating and complex outputs by the case's rule (``oota_rules``: PyTorch's where PyTorch
  judges, else against the float64 reference, else the vendor's tolerance);
* index outputs (sort, argsort, topk, kthvalue, mode, max/min/median with a dim, cummax, cummin,
  argmax, argmin): right when the values they select from the input are right, so indices that
  differ only among equal values pass; a device's values must be exactly the input elements
  its indices point at;
* an output whose dtype is a wider float on the device than on the CPU (float32 statistics of
  half-precision norms): compared by value, and the difference is noted, not failed;
* integer and boolean outputs, and plain numbers: equal;
* NaN or infinity where the CPU and the reference are finite fails whatever the rule.

The file format, and a case as plain data: :mod:`oota_cases`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oota_cases import (
    RECORD_ELEMENTS,
    RecordingError,
    Verdict,
    leaves,
    load,
    shape_of,
)
from oota_indices import INDEX_OUTPUTS, IndexOutput, argument_of, selected
from oota_rules import FLOAT64, SKIP, Errors, Rule

# -- plain data ---------------------------------------------------------------------------------


# -- verdicts --------------------------------------------------------------------------------------


class _Failure(Exception):
    """One output is wrong; the message says which and how."""


@dataclass(kw_only=True, slots=True)
class _Outputs:
    """What judging one case's outputs found so far."""

    rule: Rule
    dtype: str
    device_name: str
    notes: list[str] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)


def _name(index: int, count: int) -> str:
    return "output" if count == 1 else f"output[{index}]"


def _same_number(got: Any, want: Any) -> bool:
    if isinstance(got, float) and isinstance(want, float) and math.isnan(got) and math.isnan(want):
        return True
    return type(got) is type(want) and got == want


def _wide(tensor: Any) -> Any:
    import torch

    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    return tensor.to(torch.complex128 if tensor.is_complex() else torch.float64)


def _nonfinite_mismatch(device: Any, cpu: Any, reference: Any | None) -> int:
    """Elements where the device is NaN or infinite although the CPU (and the reference,
    where there is one) is finite, or where the CPU is NaN/infinite and the device is not the
    same (nor the reference's value)."""
    import torch

    finite_cpu = torch.isfinite(cpu)
    both = finite_cpu if reference is None else finite_cpu & torch.isfinite(reference)
    bad = both & ~torch.isfinite(device)
    like_cpu = (torch.isnan(device) & torch.isnan(cpu)) | (device == cpu)
    if reference is not None:
        like_cpu |= (torch.isnan(device) & torch.isnan(reference)) | (device == reference)
    bad |= ~finite_cpu & ~like_cpu
    return int(bad.sum())


def _compare_close(device: Any, cpu: Any, atol: float, rtol: float, where: str,
                   state: _Outputs, rule_text: str) -> None:
    """isclose(device, cpu) with NaN equal to NaN, as PyTorch's assertEqual compares."""
    import torch

    close = torch.isclose(device, cpu, atol=atol, rtol=rtol, equal_nan=True)
    if bool(close.all()):
        share = (device - cpu).abs() / (atol + rtol * cpu.abs())
        finite = torch.isfinite(share)
        state.ratios.append(float(share[finite].max()) if bool(finite.any()) else 0.0)
        return
    diff = (device - cpu).abs()[~close]
    rel = diff / cpu.abs()[~close]
    state.ratios.append(math.inf)
    raise _Failure(f"{where} on {state.device_name} differs from the CPU: max abs diff "
                   f"{float(diff.max()):.3g}, max rel diff {float(rel.max()):.3g} "
                   f"({rule_text})")


def _compare_float64(device: Any, cpu: Any, reference: Any, where: str,
                     state: _Outputs) -> None:
    import torch

    mask = torch.isfinite(reference) & torch.isfinite(cpu)
    if not bool(mask.any()):
        state.ratios.append(0.0)
        return
    errors = Errors(device=float((device - reference).abs()[mask].max()),
                    cpu=float((cpu - reference).abs()[mask].max()),
                    scale=float(reference.abs()[mask].max()))
    ratio = errors.ratio(state.rule, state.dtype)
    state.ratios.append(ratio)
    if ratio > 1:
        raise _Failure(f"{where} on {state.device_name}: {errors.message(state.rule, state.dtype)}")


def _judge_floats(device: Any, cpu: Any, reference: Any | None, where: str,
                  state: _Outputs) -> None:
    if state.rule.kind != FLOAT64:
        reference = None  # PyTorch's rule and a tolerance compare with the CPU alone
    bad = _nonfinite_mismatch(device, cpu, reference)
    if bad:
        state.ratios.append(math.inf)
        raise _Failure(f"{where} on {state.device_name}: {bad} element(s) NaN or infinite "
                       "where the CPU's are finite, or finite where the CPU's are not")
    rule = state.rule
    if rule.kind == FLOAT64 and reference is not None:
        _compare_float64(device, cpu, reference, where, state)
        return
    if rule.kind == FLOAT64:  # no float64 reference for this output: the vendor's tolerance
        text = rule.describe_tolerance()
        state.notes.append(f"{where}: no float64 reference, compared with {text}")
        _compare_close(device, cpu, rule.atol, rule.rtol, where, state, text)
        return
    _compare_close(device, cpu, rule.atol, rule.rtol, where, state, rule.describe())


def _accumulation(device: Any, cpu: Any, where: str, state: _Outputs) -> bool:
    """Whether the two dtypes differ only as an accumulation type: both floating (or both
    complex), the device's the wider. Noted; the values are compared."""
    if device.dtype == cpu.dtype:
        return True
    same_kind = (device.is_floating_point() and cpu.is_floating_point()) or (
        device.is_complex() and cpu.is_complex())
    if same_kind and device.element_size() > cpu.element_size():
        state.notes.append(f"{where} is {str(device.dtype).removeprefix('torch.')} on "
                           f"{state.device_name} and {str(cpu.dtype).removeprefix('torch.')} on "
                           "the CPU (an accumulation type): compared by value")
        return True
    return False


def _judge_tensor(device: Any, cpu: Any, reference: Any, where: str, state: _Outputs) -> None:
    import torch

    if not isinstance(device, torch.Tensor):
        raise _Failure(f"{where} is a {type(device).__name__} on {state.device_name}, a tensor "
                       "on the CPU")
    if tuple(device.shape) != tuple(cpu.shape):
        raise _Failure(f"{where} has shape {list(device.shape)} on {state.device_name}, "
                       f"{list(cpu.shape)} on the CPU")
    if not _accumulation(device, cpu, where, state):
        raise _Failure(f"{where} is {str(device.dtype).removeprefix('torch.')} on "
                       f"{state.device_name}, {str(cpu.dtype).removeprefix('torch.')} on the CPU")
    if cpu.is_floating_point() or cpu.is_complex():
        wide = (torch.float64, torch.complex128)
        ref = reference if isinstance(reference, torch.Tensor) and tuple(
            reference.shape) == tuple(cpu.shape) and reference.dtype in wide else None
        _judge_floats(_wide(device), _wide(cpu), None if ref is None else _wide(ref), where,
                      state)
        return
    if not torch.equal(device.to_dense() if device.layout != torch.strided else device,
                       cpu.to_dense() if cpu.layout != torch.strided else cpu):
        differ = int((device != cpu).sum()) if device.layout == torch.strided else "some"
        raise _Failure(f"{where} on {state.device_name} differs from the CPU in {differ} of "
                       f"{cpu.numel()} elements ({str(cpu.dtype).removeprefix('torch.')}: "
                       "compared exactly)")


def _identical_leaf(device: Any, cpu: Any) -> bool:
    import torch

    if not isinstance(cpu, torch.Tensor):
        return _same_number(device, cpu)
    if not isinstance(device, torch.Tensor) or device.dtype != cpu.dtype or \
            device.shape != cpu.shape or device.layout != cpu.layout:
        return False
    if device.layout != torch.strided:
        device, cpu = device.to_dense(), cpu.to_dense()
    if device.is_floating_point() or device.is_complex():
        return bool(((device == cpu) | (torch.isnan(device) & torch.isnan(cpu))).all())
    return torch.equal(device, cpu)


def identical(device: Any, cpu: Any) -> bool:
    """Whether two results are the same, element for element (NaN where NaN): then every rule
    passes them, and the float64 reference is not needed."""
    if shape_of(device) != shape_of(cpu):
        return False
    return all(_identical_leaf(d, c) for d, c in zip(leaves(device), leaves(cpu), strict=True))


def _judge_leaf(device: Any, cpu: Any, reference: Any, where: str, state: _Outputs) -> None:
    import torch

    if isinstance(cpu, torch.Tensor):
        _judge_tensor(device, cpu, reference, where, state)
    elif isinstance(cpu, float) and isinstance(device, float):
        _judge_floats(torch.tensor(device, dtype=torch.float64),
                      torch.tensor(cpu, dtype=torch.float64),
                      torch.tensor(reference, dtype=torch.float64)
                      if isinstance(reference, float) else None, where, state)
    elif not _same_number(device, cpu):
        raise _Failure(f"{where} is {device!r} on {state.device_name}, {cpu!r} on the CPU")


def _judge_indices(case: Mapping[str, Any], spec: IndexOutput, device: list[Any],
                   cpu: list[Any], state: _Outputs) -> None:
    """The index output: the device's indices select the values the CPU's select, and the
    device's values are exactly the elements its indices select."""
    import torch

    count = len(cpu)
    where = _name(spec.leaf, count)
    input_, args, kwargs = case["input"], case.get("args") or [], case.get("kwargs") or {}
    try:
        mine = selected(input_, device[spec.leaf], spec, args, kwargs)
        theirs = selected(input_, cpu[spec.leaf], spec, args, kwargs)
    except (IndexError, RuntimeError) as exc:
        raise _Failure(f"{where} on {state.device_name} points outside the input: "
                       f"{str(exc).splitlines()[0][:200]}") from None
    if spec.values is not None:
        values = device[spec.values]
        if not torch.equal(mine.nan_to_num(), values.to(mine.dtype).nan_to_num()) or not \
                torch.equal(mine.isnan(), values.isnan()):
            raise _Failure(f"{where} on {state.device_name} does not select "
                           f"{_name(spec.values, count)}: the input's elements at those "
                           "indices are not the values returned")
    if spec.multiset:
        mine, theirs = mine.sort(dim=-1).values, theirs.sort(dim=-1).values
    same = torch.equal(mine.nan_to_num(), theirs.nan_to_num()) and torch.equal(
        mine.isnan(), theirs.isnan())
    if not same:
        raise _Failure(f"{where} on {state.device_name} selects other values than the CPU's "
                       f"indices: {int((mine != theirs).sum())} of {mine.numel()} differ")
    if not torch.equal(device[spec.leaf], cpu[spec.leaf]):
        state.notes.append(f"{where}: indices differ from the CPU's only among equal values")


def _judge_outputs(case: Mapping[str, Any], state: _Outputs) -> None:
    device, cpu = case["device"], case["cpu"]
    if shape_of(device) != shape_of(cpu):
        raise _Failure(f"the result on {state.device_name} is shaped {shape_of(device)}, on "
                       f"the CPU {shape_of(cpu)}")
    dev, want = leaves(device), leaves(cpu)
    ref_tree = case.get("reference")
    refs = leaves(ref_tree) if ref_tree is not None and shape_of(ref_tree) == shape_of(
        cpu) else [None] * len(want)
    spec = INDEX_OUTPUTS.get(case["op"])
    if spec is not None and spec.leaf >= len(want):
        spec = None  # median without dim returns the value alone
    for index, (got, expected, ref) in enumerate(zip(dev, want, refs, strict=True)):
        if spec is not None and index == spec.leaf:
            continue
        if spec is not None and spec.multiset and index == spec.values:
            got, expected = _sorted_last(got, case, spec), _sorted_last(expected, case, spec)
            ref = _sorted_last(ref, case, spec) if ref is not None else None
        _judge_leaf(got, expected, ref, _name(index, len(want)), state)
    if spec is not None:
        _judge_indices(case, spec, dev, want, state)


def _sorted_last(values: Any, case: Mapping[str, Any], spec: IndexOutput) -> Any:
    """Values in no fixed order, sorted along the operator's dim (compared as multisets)."""
    import torch

    if not isinstance(values, torch.Tensor) or values.dim() == 0:
        return values
    dim = argument_of(case.get("args") or [], case.get("kwargs") or {}, spec.dim, "dim",
                    spec.default)
    return values.sort(dim=int(dim) if dim is not None else -1).values


def tf32_reason(op: str, dtype: str, settings: Mapping[str, Any]) -> str:
    """Why a float32 failure may be TF32's, when the case was made with it allowed."""
    if dtype not in ("float32", "complex64"):
        return ""
    if settings.get("cudnn_allow_tf32") and "conv" in op:
        return ("made with cuDNN's TF32 allowed (PyTorch's default), which rounds a float32 "
                "convolution's inputs to a 10-bit mantissa; oota's suite turns TF32 off")
    if settings.get("matmul_allow_tf32") and any(w in op for w in ("mm", "matmul", "linear",
                                                                   "einsum", "bmm")):
        return ("made with TF32 matrix products allowed, which round float32 inputs to a "
                "10-bit mantissa; oota's suite turns TF32 off")
    return ""


def _verdict(head: str, state: _Outputs, judged: Callable[[], None],
             tf32: str = "") -> Verdict:
    """Run ``judged`` (which raises _Failure on a wrong output) and word the verdict."""
    try:
        judged()
    except _Failure as failure:
        notes = "".join(f"; {n}" for n in [*state.notes, *([tf32] if tf32 else [])])
        return Verdict(status="failed", message=f"{head}: {failure}{notes}",
                       notes=tuple(state.notes), ratio=max(state.ratios, default=math.inf))
    worst = max(state.ratios, default=0.0)
    notes = "".join(f"; {n}" for n in state.notes)
    return Verdict(status="passed", message=f"{head}: within {state.rule.describe()} (the "
                   f"worst output uses {worst:.2g} of it){notes}",
                   notes=tuple(state.notes), ratio=worst)


def judge(case: Mapping[str, Any], device_name: str = "",
          settings: Mapping[str, Any] | None = None) -> Verdict:
    """The verdict on one case (see the module docstring). The message begins with the
    operator, dtype and sample, as the ops layer reports it; ``settings`` are the recording's
    (TF32 allowed or not) and name a failure's likely cause."""
    head = (f"{case['op']} ({case['dtype']}): sample {case['sample']} "
            f"({case.get('description', '')})")
    rule = Rule.from_json(case["rule"])
    if rule.kind == SKIP:
        return Verdict(status="skipped", message=f"{case['op']} ({case['dtype']}): {rule.source}")
    if case.get("truncated"):
        return Verdict(status="skipped", message=f"{head}: recorded without its tensors (more "
                       f"than {RECORD_ELEMENTS} elements); nothing to judge again")
    if identical(case["device"], case["cpu"]):
        return Verdict(status="passed", message=f"{head}: identical to the CPU's result", ratio=0)
    state = _Outputs(rule=rule, dtype=str(case["dtype"]),
                     device_name=device_name or str(case.get("device_type") or "the device"))
    tf32 = tf32_reason(str(case["op"]), state.dtype, settings or {})
    return _verdict(head, state, lambda: _judge_outputs(case, state), tf32)


def judge_named(named: Sequence[tuple[str, Any, Any, Any]], *, rule: Rule, dtype: str,
                device_name: str, head: str) -> Verdict:
    """The verdict on named results that are not an operator's (a model's logits, loss and
    weights): each ``(name, device, cpu, reference)`` judged like an operator's output."""
    state = _Outputs(rule=rule, dtype=dtype, device_name=device_name)

    def each() -> None:
        for where, got, want, reference in named:
            _judge_leaf(got, want, reference, where, state)

    return _verdict(head, state, each)


# -- recordings -----------------------------------------------------------------------------------


# -- sampling which passing cases a run records ----------------------------------------------------


# -- the command line ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class Replayed:
    """One recorded case judged again: what the recording says and what the judge says now."""

    file: str
    op: str
    dtype: str
    sample: int
    recorded: Mapping[str, Any]
    verdict: Verdict

    @property
    def moved(self) -> bool:
        return (self.recorded.get("status"), self.recorded.get("message")) != (
            self.verdict.status, self.verdict.message)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "op": self.op, "dtype": self.dtype, "sample": self.sample,
                "status": self.verdict.status, "message": self.verdict.message,
                "notes": list(self.verdict.notes), "ratio": self.verdict.ratio,
                "recorded": dict(self.recorded), "moved": self.moved}


def replay(paths: Sequence[Path], on_case: Callable[[Replayed], None] | None = None
           ) -> list[Replayed]:
    out: list[Replayed] = []
    for path in paths:
        data = load(path)
        recorded = data.get("recorded") or {}
        device, settings = str(recorded.get("device_type") or ""), recorded.get("settings")
        for index, case in enumerate(data["cases"]):
            try:
                got = Replayed(file=str(path), op=case["op"], dtype=case["dtype"],
                               sample=int(case["sample"]), recorded=case.get("verdict") or {},
                               verdict=judge(case, device, settings))
            except (KeyError, TypeError, ValueError) as exc:  # RuleError is a ValueError
                raise RecordingError(f"{path}: case {index} is not a case this judge reads: "
                                     f"{type(exc).__name__}: {exc}") from None
            out.append(got)
            if on_case:
                on_case(got)
    return out


def _recordings(args: Sequence[str]) -> list[Path]:
    """The files named, and every ``*.pt`` under the folders named (sorted)."""
    paths: list[Path] = []
    for arg in args:
        path = Path(arg)
        paths += sorted(path.rglob("*.pt")) if path.is_dir() else [path]
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="oota_judge.py", description=(
        "Judge recorded cases again and print each verdict. Exit 0: none failed; 1: a case "
        "failed (or, with --check, a verdict moved from the recorded one); 2: a file is not "
        "a recording."))
    parser.add_argument("paths", nargs="+", help="recordings (cases.pt) or folders of them")
    parser.add_argument("--json", action="store_true", help="one JSON object per case")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a verdict or message differs from the recorded one")
    parser.add_argument("--quiet", action="store_true", help="print failed and moved only")
    args = parser.parse_args(argv)

    def show(got: Replayed) -> None:
        if args.json:
            print(json.dumps(got.to_json()), flush=True)
        elif not args.quiet or got.verdict.status == "failed" or got.moved:
            moved = f"  [recorded: {got.recorded.get('status')}]" if got.moved else ""
            print(f"{got.verdict.status.upper():8} {got.verdict.message}{moved}", flush=True)

    try:
        results = replay(_recordings(args.paths), show)
    except RecordingError as exc:
        print(f"oota_judge: {exc}", file=sys.stderr)
        return 2
    counts = {s: sum(r.verdict.status == s for r in results)
              for s in ("passed", "failed", "skipped")}
    moved = sum(r.moved for r in results)
    print(f"{len(results)} cases: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped; {moved} verdict(s) differ from the recording",
          file=sys.stderr)
    return 1 if counts["failed"] or (args.check and moved) else 0


if __name__ == "__main__":
    sys.exit(main())
