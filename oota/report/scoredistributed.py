"""The rubric's distributed items, read from the distributed layer's results
(verify/test_distributed.py): "distributed backend" (the vendor's c10d backend ran its
collectives on the device) and "distributed tested" (every collective and the DDP training
passed). Pure, like :mod:`oota.report.scoreresults`: one vendor's cells of one torch release
in, the items' scored parts out. A vendor that claims no backend is not measured, saying so,
never scored as passed.
"""

from __future__ import annotations

from oota.report import rubric
from oota.report.rows import TestRow
from oota.report.scoremodel import Evidence, PartScore, not_measured
from oota.report.scoreresults import Release, _no_device
from oota.vocab import BAD, NOT_CLAIMED

LAYER = "distributed"
DDP = "ddp"


def _ran(release: Release) -> list[tuple[str, list[TestRow]]]:
    """(cell, the distributed layer's tests) of each cell's copy that ran on the device."""
    found = []
    for cell, row in release.on_device():
        tests = [t for t in row.tests if t.layer == LAYER]
        if tests:
            found.append((cell, tests))
    return found


def _why_none(release: Release) -> str:
    if not release.on_device():
        return _no_device(release, "the distributed backend")
    claimed = any(t.layer == LAYER and t.status != NOT_CLAIMED for _, t in release.tests())
    return ("the distributed layer ran no collective on the device here" if claimed else
            "the vendor claims no collective backend (verify.distributed in its vendor.yaml): "
            "not claimed, not tested")


def _line(cell: str, tests: list[TestRow]) -> Evidence:
    collectives = [t for t in tests if t.data.get("collective") not in (None, DDP)]
    passed = sum(t.status == "passed" for t in collectives)
    ddp = [t.status for t in tests if t.data.get("collective") == DDP]
    backend = next((str(t.data["backend"]) for t in tests if t.data.get("backend")), "?")
    sizes = sorted({str(t.data["world_size"]) for t in tests if t.data.get("world_size")})
    return Evidence.of(f"{cell}: {backend} on world size {', '.join(sizes) or '?'}: {passed} of "
                       f"{len(collectives)} collectives passed; DDP "
                       f"{', '.join(ddp) or 'not run'}", cells=[cell],
                       tests=[t.id for t in tests if t.status in BAD])


def _ran_collectives(tests: list[TestRow]) -> list[TestRow]:
    return [t for t in tests if t.data.get("collective") not in (None, DDP)
            and t.status != NOT_CLAIMED]


def backend(release: Release) -> tuple[PartScore, ...]:
    """A collective backend: every cell's collectives ran and none failed."""
    item = rubric.BY_KEY["features.distributed"]
    found = [(c, t) for c, t in _ran(release) if _ran_collectives(t)]
    if not found:
        return (not_measured("", item.category, item.points, _why_none(release)),)
    ok = all(all(x.status == "passed" for x in _ran_collectives(t)) for _, t in found)
    return (PartScore(key="", label=item.category, max=item.points,
                      points=item.points if ok else 0,
                      how="the vendor's c10d backend ran every collective on the device, each "
                      "rank's outputs equal to the CPU's" if ok else
                      "a collective failed on the vendor's backend in a cell",
                      evidence=tuple(_line(c, t) for c, t in found)),)


def tested(release: Release) -> tuple[PartScore, ...]:
    """Distributed mode tested: every collective and the DDP training passed in every cell."""
    item = rubric.BY_KEY["testing.distributed"]
    found = [(c, t) for c, t in _ran(release) if _ran_collectives(t)]
    if not found:
        return (not_measured("", item.category, item.points, _why_none(release)),)
    ok = all(all(x.status == "passed" for x in t)
             and any(x.data.get("collective") == DDP for x in t) for _, t in found)
    return (PartScore(key="", label=item.category, max=item.points,
                      points=item.points if ok else 0,
                      how="every collective and a DDP training on the device passed, in every "
                      "cell" if ok else "a test of the distributed layer did not pass (each "
                      "must: the collectives and DDP)",
                      evidence=tuple(_line(c, t) for c, t in found)),)


MEASURES = {"features.distributed": backend, "testing.distributed": tested}
