"""How small a fault the judge catches, per dtype, measured on recorded real-hardware cases.

For every recorded case the judge passes (verify/oota_judge.py), three faults are injected into
the device's result and the case is judged again:

* **scale**: every floating output multiplied by 1+eps; the smallest eps of a grid (1e-8 to 1,
  four steps a decade) that the judge fails is the case's threshold. A case whose outputs are
  all zero, NaN or infinite (the CPU overflows too) cannot show a scale and is counted apart;
* **index**: one index of an index output (sort, topk, argmax, ...) pointed at an element of
  another value (not a tie): must fail;
* **NaN**: one element NaN where the CPU's result is finite: must fail.

Per dtype it prints the median and 90th percentile of the thresholds, the share of cases
caught at eps = 1e-3 and 1e-2, and the index and NaN faults caught. Run it with a Python that
has torch (the CPU image has one), from the repository's root::

    python benchmarks/bench_sensitivity.py [RECORDINGS...] [--json OUT]

(default: tests/data/recordings/cuda-h100-2026-11-24). docs/design/judging.md quotes its
table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "verify"))

import oota_cases  # noqa: E402 - the suite's modules, in verify/
import oota_indices  # noqa: E402 - the suite's modules, in verify/
import oota_judge  # noqa: E402 - the suite's modules, in verify/

GRID = [10 ** (exp / 4) for exp in range(-32, 1)]  # 1e-8 .. 1, four steps a decade
DEFAULT = ROOT / "tests" / "data" / "recordings" / "cuda-h100-2026-11-24"


def _map_floats(tree: Any, change: Callable[[Any], Any], skip: set[int], counter: list[int]
                ) -> Any:
    """``tree`` with every floating tensor leaf changed (leaves numbered in order)."""
    import torch

    if isinstance(tree, (tuple, list)):
        items = [_map_floats(v, change, skip, counter) for v in tree]
        return type(tree)(items) if isinstance(tree, tuple) else items
    index = counter[0]
    counter[0] += 1
    if isinstance(tree, torch.Tensor) and tree.is_floating_point() and index not in skip:
        return change(tree)
    return tree


def _index_leaf(case: dict[str, Any]) -> int | None:
    spec = oota_indices.INDEX_OUTPUTS.get(case["op"])
    if spec is None or spec.leaf >= len(oota_cases.leaves(case["cpu"])):
        return None
    return spec.leaf


def _with_device(case: dict[str, Any], device: Any) -> dict[str, Any]:
    return {**case, "device": device}


def scaled(case: dict[str, Any], eps: float) -> dict[str, Any]:
    index = _index_leaf(case)
    skip = {index} if index is not None else set()
    return _with_device(case, _map_floats(case["device"], lambda t: t * (1 + eps), skip, [0]))


def threshold(case: dict[str, Any], settings: dict[str, Any]) -> float | None:
    """The smallest eps of GRID whose scale the judge fails (None: none up to 1)."""
    def caught(eps: float) -> bool:
        return oota_judge.judge(scaled(case, eps), "", settings).status == "failed"

    if not caught(GRID[-1]):
        return None
    low, high = -1, len(GRID) - 1  # caught(GRID[high]); not known for low
    while high - low > 1:
        middle = (low + high) // 2
        if caught(GRID[middle]):
            high = middle
        else:
            low = middle
    return GRID[high]


def nothing_to_scale(case: dict[str, Any]) -> bool:
    """Whether no floating output has a finite, non-zero element (scaling changes nothing)."""
    import torch

    floats = [leaf.to_dense() for leaf in oota_cases.leaves(case["device"])
              if isinstance(leaf, torch.Tensor) and leaf.is_floating_point()]
    return all(not bool((torch.isfinite(f) & (f != 0)).any()) for f in floats)


def flipped(case: dict[str, Any]) -> dict[str, Any] | None:
    """The case with one device index pointing at an element of another value (None when the
    input has a single value or the case has no index output)."""
    import torch

    position = _index_leaf(case)
    if position is None or not isinstance(case["input"], torch.Tensor):
        return None
    leaves = oota_cases.leaves(case["device"])
    index = leaves[position].clone()
    flat_input = case["input"].reshape(-1)
    if index.numel() == 0 or flat_input.numel() < 2:
        return None
    spec = oota_indices.INDEX_OUTPUTS[case["op"]]
    want = oota_indices.selected(case["input"], index, spec, case["args"], case["kwargs"])
    flat_index, flat_want = index.reshape(-1), want.reshape(-1)
    size = case["input"].shape[_dim(case, spec)] if case["input"].dim() else 1
    for candidate in range(size):
        trial = flat_index.clone()
        trial[0] = candidate
        got = oota_indices.selected(case["input"], trial.reshape(index.shape), spec,
                                  case["args"], case["kwargs"]).reshape(-1)
        if not torch.equal(got[0:1], flat_want[0:1]):
            new = list(leaves)
            new[position] = trial.reshape(index.shape)
            return _with_device(case, _rebuild(case["device"], iter(new)))
    return None


def _dim(case: dict[str, Any], spec: oota_indices.IndexOutput) -> int:
    dim = oota_indices.argument_of(case["args"], case["kwargs"], spec.dim, "dim", spec.default)
    return -1 if dim is None else int(dim)


def _rebuild(tree: Any, new: Iterator[Any]) -> Any:
    if isinstance(tree, (tuple, list)):
        items = [_rebuild(v, new) for v in tree]
        return type(tree)(items) if isinstance(tree, tuple) else items
    return next(new)


def with_nan(case: dict[str, Any]) -> dict[str, Any] | None:
    """The case with one element NaN where the CPU's result is finite (None: nowhere)."""
    import torch

    device, cpu = oota_cases.leaves(case["device"]), oota_cases.leaves(case["cpu"])
    for position, (got, want) in enumerate(zip(device, cpu, strict=True)):
        if position == _index_leaf(case) or not isinstance(got, torch.Tensor) or \
                not got.is_floating_point() or got.layout != torch.strided:
            continue
        finite = torch.isfinite(want.to(got.dtype)).reshape(-1)
        if bool(finite.any()):
            out = got.clone().reshape(-1)
            out[int(finite.nonzero()[0])] = float("nan")
            new = list(device)
            new[position] = out.reshape(got.shape)
            return _with_device(case, _rebuild(case["device"], iter(new)))
    return None


def measure(paths: list[Path]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = defaultdict(lambda: {
        "cases": 0, "thresholds": [], "zero": 0, "uncaught": [], "index": [0, 0],
        "nan": [0, 0]})
    for path in paths:
        data = oota_cases.load(path)
        settings = (data.get("recorded") or {}).get("settings") or {}
        for case in data["cases"]:
            if oota_judge.judge(case, "", settings).status != "passed":
                continue
            row = found[case["dtype"]]
            row["cases"] += 1
            _scale(case, settings, row)
            for key, faulty in (("index", flipped(case)), ("nan", with_nan(case))):
                if faulty is not None:
                    row[key][1] += 1
                    row[key][0] += oota_judge.judge(faulty, "", settings).status == "failed"
    return found


def _scale(case: dict[str, Any], settings: dict[str, Any], row: dict[str, Any]) -> None:
    if nothing_to_scale(case):
        row["zero"] += 1
        return
    eps = threshold(case, settings)
    if eps is None:
        row["uncaught"].append(f"{case['op']} sample {case['sample']}")
    else:
        row["thresholds"].append(eps)


def summary(found: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for dtype, row in sorted(found.items()):
        values = sorted(row["thresholds"])
        scaled_cases = len(values) + len(row["uncaught"])
        out[dtype] = {
            "cases": row["cases"], "scale_cases": scaled_cases,
            "nothing_to_scale": row["zero"],
            "median_eps": statistics.median(values) if values else None,
            "p90_eps": values[int(0.9 * (len(values) - 1))] if values else None,
            "caught_at_1e-3": sum(v <= 1e-3 for v in values) / scaled_cases if scaled_cases
            else None,
            "caught_at_1e-2": sum(v <= 1e-2 for v in values) / scaled_cases if scaled_cases
            else None,
            "not_caught_up_to_1": row["uncaught"],
            "index_caught": row["index"], "nan_caught": row["nan"]}
    return out


def table(rows: dict[str, dict[str, Any]]) -> str:
    def figure(value: float | None, fmt: str) -> str:
        return "–" if value is None else format(value, fmt)

    lines = ["| dtype | cases | scale 1+eps: median eps caught | 90% caught by | caught at "
             "1e-3 | caught at 1e-2 | index flipped | NaN put in |",
             "|---|---|---|---|---|---|---|---|"]
    for dtype, row in rows.items():
        lines.append(
            f"| {dtype} | {row['cases']} | {figure(row['median_eps'], '.2g')} | "
            f"{figure(row['p90_eps'], '.2g')} | {figure(row['caught_at_1e-3'], '.0%')} | "
            f"{figure(row['caught_at_1e-2'], '.0%')} | {row['index_caught'][0]}/"
            f"{row['index_caught'][1]} | {row['nan_caught'][0]}/{row['nan_caught'][1]} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[DEFAULT])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    files = [f for p in args.paths for f in (sorted(p.rglob("*.pt")) if p.is_dir() else [p])]
    rows = summary(measure(files))
    print(table(rows))
    for dtype, row in rows.items():
        if row["not_caught_up_to_1"]:
            print(f"{dtype}: no scale up to 1 caught in {', '.join(row['not_caught_up_to_1'])}",
                  file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
