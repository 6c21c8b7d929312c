"""What the distributed layer's check catches and what it lets pass: bugs of a collective
backend against correct backends that order or accumulate differently, judged by the layer's
own comparison (``verify/oota_distributed.py`` ``mismatch``: exact on two ranks, the vendor's
tolerance for a reduction over more).

For each dtype of the reference vendor, each world size and each collective, every rank's
inputs come from the layer's own seeds (``rank_input``), and each "backend" gives every rank
its outputs:

* bug classes: a wrong reduction (1 added to every element, as refdev's
  ``REFDEV_COLLECTIVE_WRONG``; one rank's contribution dropped; max taken for sum; the last
  element's sum off by one unit in the last place) and a rank that receives stale data (its
  output untouched, as ``REFDEV_COLLECTIVE_STALE``; the previous call's data: the same
  collective's outputs from another case's inputs);
* correct backends: the ranks summed in reverse order, and half-precision sums accumulated in
  float32 and rounded once (as NCCL and gloo may).

It prints, per class × dtype, the outputs the bug changed and those the check caught, and per
correct backend the false alarms. Run it with a Python that has torch, from the repository's
root::

    python benchmarks/bench_detection_collectives.py [--worlds 2,3,4] [--record]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "verify"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import oota_distributed as dist  # noqa: E402 - the suite's module, in verify/
import torch  # noqa: E402
import yaml  # noqa: E402

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
Backend = Callable[[dist.Case, int, list[Any]], list[list[Any]]]


def _right(case: dist.Case, world: int, inputs: list[Any]) -> list[list[Any]]:
    return [dist.expected(case, r, world) for r in range(world)]


def _sum(values: list[Any], *, reverse: bool = False, wide: bool = False) -> Any:
    order = list(reversed(values)) if reverse else values
    out = order[0].to(torch.float32 if wide else order[0].dtype).clone()
    for value in order[1:]:
        out += value.to(out.dtype)
    return out.to(values[0].dtype)


def _reduced(case: dist.Case, world: int, inputs: list[Any], total: Callable[[list[Any]], Any]
             ) -> list[list[Any]] | None:
    """Each rank's outputs with the sum replaced by ``total``; None for data movement."""
    if case.collective == "all_reduce":
        return [[total(inputs)] for _ in range(world)]
    if case.collective == "reduce_scatter":
        return [[total([x.chunk(world)[r] for x in inputs])] for r in range(world)]
    return None


def reverse_order(case: dist.Case, world: int, inputs: list[Any]) -> list[list[Any]]:
    found = _reduced(case, world, inputs, lambda v: _sum(v, reverse=True))
    return found if found is not None else _right(case, world, inputs)


def wide_accumulation(case: dist.Case, world: int, inputs: list[Any]) -> list[list[Any]]:
    wide = inputs[0].is_floating_point() and inputs[0].element_size() == 2
    found = _reduced(case, world, inputs, lambda v: _sum(v, wide=wide))
    return found if found is not None else _right(case, world, inputs)


def plus_one(case: dist.Case, world: int, inputs: list[Any]) -> list[list[Any]]:
    return [[t + 1 for t in outs] for outs in _right(case, world, inputs)]


def dropped_rank(case: dist.Case, world: int, inputs: list[Any]) -> list[list[Any]] | None:
    return _reduced(case, world, inputs, lambda v: _sum(v[:-1]))


def max_for_sum(case: dist.Case, world: int, inputs: list[Any]) -> list[list[Any]] | None:
    return _reduced(case, world, inputs, lambda v: torch.stack(v).amax(0))


def last_ulp(case: dist.Case, world: int, inputs: list[Any]) -> list[list[Any]] | None:
    def total(values: list[Any]) -> Any:
        out = _sum(values)
        if out.is_floating_point():
            out[-1] = torch.nextafter(out[-1], torch.tensor(float("inf"), dtype=out.dtype))
        else:
            out[-1] += 1
        return out
    return _reduced(case, world, inputs, total)


def untouched(case: dist.Case, world: int, inputs: list[Any]) -> list[list[Any]]:
    outs = _right(case, world, inputs)
    outs[-1] = [torch.full_like(t, dist.SENTINEL) for t in outs[-1]]
    return outs


def previous_call(case: dist.Case, world: int, inputs: list[Any]) -> list[list[Any]]:
    earlier = dist.Case(index=case.index + 100, collective=case.collective, dtype=case.dtype)
    outs = _right(case, world, inputs)
    outs[-1] = dist.expected(earlier, world - 1, world)
    return outs


BUGS: dict[str, Callable[..., list[list[Any]] | None]] = {
    "wrong reduction: +1 on every element": plus_one,
    "wrong reduction: a rank's share dropped": dropped_rank,
    "wrong reduction: max taken for sum": max_for_sum,
    "wrong reduction: last element 1 ulp off": last_ulp,
    "stale: last rank's output untouched": untouched,
    "stale: last rank keeps the previous call's data": previous_call,
}
CORRECT: dict[str, Backend] = {"ranks summed in reverse order": reverse_order,
                               "half dtypes summed in float32, rounded once": wide_accumulation}


def _caught(case: dist.Case, world: int, outs: list[list[Any]],
            tolerance: dict[str, float]) -> bool:
    loose = case.collective in dist.REDUCTIONS and world > 2
    return any(dist.mismatch(case, r, got, dist.expected(case, r, world),
                             tolerance if loose else None) for r, got in enumerate(outs))


def _changed(case: dist.Case, world: int, outs: list[list[Any]]) -> bool:
    return any(not all(torch.equal(a, b) for a, b in zip(got, dist.expected(case, r, world),
                                                         strict=True))
               for r, got in enumerate(outs))


def run(worlds: list[int]) -> list[dict[str, Any]]:
    verify = yaml.safe_load((ROOT / "vendors/reference/vendor.yaml").read_text())["verify"]
    rows: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for world in worlds:
        for index, (dtype, collective) in enumerate(
                (d, c) for d in verify["dtypes"] for c in COLLECTIVES):
            case = dist.Case(index=index, collective=collective, dtype=dtype)
            inputs = [dist.rank_input(case, r, world) for r in range(world)]
            tolerance = verify["tolerances"][dtype]
            for kind, table in (("bug", BUGS), ("correct", CORRECT)):
                for name, backend in table.items():
                    outs = backend(case, world, inputs)
                    if outs is None or not _changed(case, world, outs):
                        continue
                    row = rows.setdefault((kind, name, dtype, str(world)), {
                        "kind": kind, "class": name, "dtype": dtype, "world_size": world,
                        "changed": 0, "caught": 0})
                    row["changed"] += 1
                    row["caught"] += _caught(case, world, outs, tolerance)
    return list(rows.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="2,3,4")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    worlds = [int(w) for w in args.worlds.split(",")]
    rows = run(worlds)
    for row in rows:
        what = "caught" if row["kind"] == "bug" else "false alarms"
        print(f"{row['kind']:8} {row['class']:50} {row['dtype']:9} world {row['world_size']} "
              f"{row['caught']:3} of {row['changed']:3} changed outputs {what}")
    if args.record:
        print(f"wrote {_record(rows, worlds)}")


def _record(rows: list[dict[str, Any]], worlds: list[int]) -> Path:
    import record

    return record.write(
        "bench_detection_collectives.py",
        title="What the distributed layer catches: collective backends broken on purpose and "
              "correct ones that sum in another order",
        what=("Every rank's outputs of all_reduce, all_gather, reduce_scatter, broadcast and "
              "all_to_all on the layer's own inputs (3 elements per rank share, the reference "
              f"vendor's dtypes), world sizes {', '.join(map(str, worlds))}, judged by the "
              "layer's check (exact on 2 ranks, the vendor's tolerance for a reduction over "
              f"more), torch {torch.__version__}. A bug: outputs it changed and those caught; "
              "a correct backend: outputs it changed and the false alarms among them."),
        columns=[("class", ""), ("kind", ""), ("dtype", ""), ("world size", ""),
                 ("changed", "outputs"), ("caught / false alarms", "outputs")],
        rows=[[r["class"], r["kind"], r["dtype"], r["world_size"], r["changed"], r["caught"]]
              for r in rows],
        notes=["A last-ulp error in a sum is caught on two ranks only: over more ranks the "
               "order of a sum is the backend's, and the check allows the vendor's tolerance."])


if __name__ == "__main__":
    main()
