"""The rubric's items a verification's results measure: PyTorch's smoke test in its three
environments, the dtypes and eager mode the device ran, its C++ extension, and the coverage
of operators, unit tests and models. Pure: each function takes one vendor's cells of one
torch release and returns the item's scored parts (:mod:`oota.report.scoremodel`).

Where a measure is about the device, it is taken from the copy of each cell that ran on the
device (a test of a device layer passed there: the positive evidence the verdicts rest on),
the worst of them where several did; a cell with no such copy measures nothing. Over several
cells the lowest measure counts: every supported configuration of the release must reach it.
A coverage share counts what did not run as not covered (the time budget's unrun operators, a
vendor's skips), so a share is never more than the evidence shows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from oota.report import rubric
from oota.report.coverage import CPU, DEVICE, FAILED, MISSING, UNKNOWN, category, pair_of
from oota.report.rows import CellGroup, CellRow, TestRow
from oota.report.scoremodel import Evidence, PartScore, not_measured
from oota.vocab import (
    BAD,
    DEVICE_LAYERS,
    SMOKE_ENVIRONMENTS,
    STATUS_ORDER,
    Status,
    budget_unrun,
    not_compared_reason,
    worst,
)

SMOKE_LAYER, OPS, MODELS = "smoke", "ops", "models"
# The smoke layer's record of the environment its run was in (its tests' data.environment),
# in the words of PyTorch's smoke-test requirement: (key, words).
CPP_TEST = "test_cpp_extension_runs_on_the_device"
# The layers that run PyTorch's unit tests (ModuleInfo, optimizers, autograd, the runtime).
UNIT_LAYERS = ("modules", "optimizers", "autograd", "runtime")
# Skips of an operator × dtype that are not a test case PyTorch has for the platform: the
# OpInfo does not declare the dtype, PyTorch's own test skips or expects it to fail, or no
# sample exists. They leave the denominator; every other pair not passed counts against.
NOT_A_CASE = frozenset({
    "dtype the OpInfo lacks on the CPU", "dtype the OpInfo lacks on the device",
    "skipped by PyTorch's own test", "expected to fail by PyTorch's own test",
    "no sample inputs", "every sample refused by the CPU"})
TRIED = (DEVICE, UNKNOWN, CPU, MISSING, FAILED)


@dataclass(frozen=True, kw_only=True, slots=True)
class Release:
    """One vendor's cells of one torch release, as the measures read them."""

    vendor: str
    torch: str
    groups: tuple[CellGroup, ...]

    def on_device(self) -> list[tuple[str, CellRow]]:
        """(cell id, the copy that ran on the device) for every cell that has one."""
        found = []
        for group in self.groups:
            copies = [row for row in group.copies if _device_ran(row)]
            if copies:
                found.append((group.id, min(copies, key=lambda r: STATUS_ORDER.index(r.status))))
        return found

    def without_device(self) -> list[str]:
        return [g.id for g in self.groups if not any(_device_ran(r) for r in g.copies)]

    def tests(self) -> list[tuple[str, TestRow]]:
        """Every test of every copy, with its cell."""
        return [(g.id, t) for g in self.groups for row in g.copies for t in row.tests]


def _device_ran(row: CellRow) -> bool:
    return any(t.layer in DEVICE_LAYERS and t.status == "passed" for t in row.tests)


def _share(n: int, of: int) -> str:
    return f"{n} of {of} ({100 * n / of:.1f}%)" if of else "0 of 0"


def _no_device(release: Release, what: str) -> str:
    cells = ", ".join(release.without_device()) or "none"
    return (f"no copy of these cells ran on the device (cells: {cells}), so {what} was not "
            "measured: a run on a host with the hardware measures it")


# -- prerequisite 1: the smoke test in three environments -------------------------------------

def smoke(release: Release) -> tuple[PartScore, ...]:
    item = rubric.BY_KEY["prereq.stability"]
    found: dict[str, list[tuple[str, TestRow]]] = {}
    for cell, test in release.tests():
        where = test.data.get("environment") if test.layer == SMOKE_LAYER else None
        if isinstance(where, str):
            found.setdefault(where, []).append((cell, test))
    lines, statuses = [], []
    for key, words in SMOKE_ENVIRONMENTS:
        tests = found.get(key, [])
        status = worst(t.status for _, t in tests)
        statuses.append(status)
        failing = [t.id for _, t in tests if t.status in BAD] or [t.id for _, t in tests]
        lines.append(Evidence.of(f"{words}: " + (f"smoke layer {status} ({len(tests)} tests)"
                                                 if tests else "no smoke run in it here"),
                                 cells=[c for c, _ in tests], tests=failing))
    covered = ", ".join(k for (k, _), s in zip(SMOKE_ENVIRONMENTS, statuses, strict=True)
                        if s == "passed")
    if any(s in BAD for s in statuses):
        return (PartScore(key="", label=item.category, max=item.points, points=0,
                          how="the smoke layer failed in an environment (every one must pass)",
                          evidence=tuple(lines)),)
    if all(s == "passed" for s in statuses):
        return (PartScore(key="", label=item.category, max=item.points, points=item.points,
                          how="the smoke layer passed in all three environments",
                          evidence=tuple(lines)),)
    how = (f"passed in: {covered}; the other environments have no passing smoke run among "
           "these results" if covered else "no environment's smoke run passed here (skipped)"
           if found else "no smoke layer ran here (results from before it, or from a vendor "
           "without it)")
    return (PartScore(key="", label=item.category, max=item.points, points=None, how=(
        f"{how}: copies of the cell from a host with the hardware, one without it, and a "
        "minimal image without the compute stack cover the three"), evidence=tuple(lines)),)


# -- feature support ----------------------------------------------------------------------------

def cpp_extension(release: Release) -> tuple[PartScore, ...]:
    item = rubric.BY_KEY["features.cpp_extension"]
    ran = [(c, t) for c, t in release.tests() if t.layer == SMOKE_LAYER
           and t.id.rpartition("::")[2].startswith(CPP_TEST) and t.status != "skipped"]
    cells, ids = [c for c, _ in ran], [t.id for _, t in ran]
    if not ran:
        return (not_measured("", item.category, item.points, (
            "the smoke layer ran no C++ extension on the device here (the vendor does not "
            "claim cpp_extension, or these results predate the smoke layer)")),)
    status = worst(t.status for _, t in ran)
    points = item.points if status == "passed" else 0
    return (PartScore(key="", label=item.category, max=item.points, points=points,
                      how=f"a C++ extension built against this torch ran on the device: {status}",
                      evidence=(Evidence.of(f"{len(ran)} run(s) of {CPP_TEST}: {status}",
                                            cells=cells, tests=ids),)),)


def _dtype_key(name: str) -> str | None:
    """The rubric's dtype a torch dtype name counts for (float8_e4m3fn -> float8)."""
    for key in rubric.DTYPES:
        if name == key or (key in ("float8", "float4") and name.startswith(key)):
            return key
    return None


def _pairs(row: CellRow) -> list[TestRow]:
    """The ops layer's operator × dtype tests, those skipped without data included (their
    pair is in their id: ``test_op_runs[abs-float32]``)."""
    return [t for t in row.tests if t.layer == OPS and pair_of(t) is not None]


def dtypes(release: Release) -> tuple[PartScore, ...]:
    cells = release.on_device()
    per: dict[str, list[tuple[str, int, int]]] = {}  # dtype -> (cell, passed, tried)
    for cell, row in cells:
        counted: dict[str, list[int]] = {}
        for test in _pairs(row):
            pair = pair_of(test)
            key = _dtype_key(pair[1]) if pair else None
            kind = category(test)
            if key and kind in TRIED:
                n = counted.setdefault(key, [0, 0])
                n[0] += kind == DEVICE
                n[1] += 1
        for key, (passed, tried) in counted.items():
            per.setdefault(key, []).append((cell, passed, tried))
    return tuple(_dtype_part(part, per.get(part.key, []), release)
                 for part in rubric.BY_KEY["features.dtypes"].parts)


def _dtype_part(part: rubric.Part, found: list[tuple[str, int, int]],
                release: Release) -> PartScore:
    if not found:
        why = ("the ops layer compared no operator in this dtype on the device here"
               if release.on_device() else _no_device(release, part.label))
        return not_measured(part.key, part.label, part.points, why)
    lines = tuple(Evidence.of(f"{cell}: {_share(passed, tried)} pairs in {part.key} passed on "
                              "the device's own kernels", cells=[cell])
                  for cell, passed, tried in found)
    ok = all(passed for _, passed, _ in found)
    return PartScore(key=part.key, label=part.label, max=part.points,
                     points=part.points if ok else 0, evidence=lines,
                     how=("an operator passed on the device's own kernels in this dtype, in "
                          "every cell that compared it") if ok else
                     "a cell compared operators in this dtype and none passed on its kernels")


# -- testing coverage ---------------------------------------------------------------------------

def eager(release: Release) -> tuple[PartScore, ...]:
    item = rubric.BY_KEY["testing.modes"]
    eager_part, graph_part = item.parts
    cells = release.on_device()
    graph = not_measured(graph_part.key, graph_part.label, graph_part.points, (
        "oota's suite runs nothing through torch.compile yet: graph mode is not tested"))
    if not cells:
        return (not_measured(eager_part.key, eager_part.label, eager_part.points,
                             _no_device(release, "eager mode")), graph)
    lines = tuple(Evidence.of(
        f"{cell}: {sum(t.status == 'passed' for t in row.tests if t.layer in DEVICE_LAYERS)} "
        "tests of the device layers passed on the device in eager mode", cells=[cell])
        for cell, row in cells)
    return (PartScore(key=eager_part.key, label=eager_part.label, max=eager_part.points,
                      points=eager_part.points, evidence=lines, how=(
                          "the device layers (device, ops, models) ran eagerly on the device")),
            graph)


@dataclass(frozen=True, kw_only=True, slots=True)
class Coverage:
    """One cell's coverage: passed, out of the cases counted, and the cases not passed."""

    cell: str
    passed: int
    cases: int
    missed: tuple[str, ...]
    note: str = ""

    @property
    def share(self) -> float:
        return self.passed / self.cases if self.cases else 0.0


def _banded(key: str, found: Sequence[Coverage], unit: str, why_none: str) -> PartScore:
    item = rubric.BY_KEY[key]
    if not found or not any(c.cases for c in found):
        return not_measured("", item.category, item.points, why_none)
    low = min(found, key=lambda c: c.share)
    points = rubric.band_points(item, low.share)
    lines = tuple(Evidence.of(f"{c.cell}: {_share(c.passed, c.cases)} {unit} passed on the "
                              f"device{c.note}", cells=[c.cell], tests=c.missed) for c in found)
    above = rubric.next_band(item, low.share)
    nxt = "" if above is None else (
        f"; {above[0]:.0%} ({above[1]} points) needs "
        f"{max(math.ceil(above[0] * low.cases) - low.passed, 1)} more of {low.cell}'s")
    return PartScore(key="", label=item.category, max=item.points, points=points, evidence=lines,
                     share=low.share, how=f"the lowest cell's share, {low.share:.1%}{nxt}")


def ops(release: Release) -> tuple[PartScore, ...]:
    found = [_ops_coverage(cell, row) for cell, row in release.on_device()]
    return (_banded("testing.ops", [c for c in found if c.cases], "operator × dtype pairs",
                    _no_device(release, "operator coverage") if not release.on_device()
                    else "the ops layer compared no operator on the device here"),)


# The pairs not covered, in the order a reader fixes them: failures, missing kernels, then
# fallbacks to the CPU, passes no witness placed, and the rest (skips, pairs not run).
_FIX_ORDER = {FAILED: 0, MISSING: 1, CPU: 2, UNKNOWN: 3}


def _ops_coverage(cell: str, row: CellRow) -> Coverage:
    passed, missed, excluded = 0, [], 0
    for test in _pairs(row):
        kind = category(test)
        if kind == DEVICE:
            passed += 1
        elif test.status == "skipped" and not_compared_reason(test.message) in NOT_A_CASE:
            excluded += 1
        else:
            missed.append((_FIX_ORDER.get(kind, len(_FIX_ORDER)), test.id))
    missed.sort()
    unrun = sum(budget_unrun(t.status, t.message, t.data) for t in row.tests if t.layer == OPS
                and pair_of(t) is None)
    note = f" ({excluded} pairs PyTorch has no test case for left out" + (
        f"; {unrun} the time budget left unrun count as not covered)" if unrun else ")")
    return Coverage(cell=cell, passed=passed, cases=passed + len(missed) + unrun,
                    missed=tuple(test_id for _, test_id in missed), note=note)


def unit_tests(release: Release) -> tuple[PartScore, ...]:
    found = []
    for cell, row in release.on_device():
        tests = [t for t in row.tests if t.layer in UNIT_LAYERS]
        if tests:
            passed = [t for t in tests if t.status == "passed"]
            layers = sorted({t.layer for t in tests})
            found.append(Coverage(cell=cell, passed=len(passed), cases=len(tests),
                                  missed=tuple(t.id for t in tests if t.status != "passed"),
                                  note=f" (layers {', '.join(layers)}; a skipped test counts "
                                  "as not covered)"))
    return (_banded("testing.unit", found, "unit tests", (
        f"no test of the unit-test layers ({', '.join(UNIT_LAYERS)}) ran on the device here")),)


def models(release: Release) -> tuple[PartScore, ...]:
    """The dynamo benchmarks item: not scored from oota's tiny models (a proxy is no evidence
    of PyTorch's benchmark suites), but their coverage is shown beside it."""
    item = rubric.BY_KEY["testing.benchmarks"]
    lines = []
    for cell, row in release.on_device():
        names: dict[str, list[Status]] = {}
        for test in row.tests:
            if test.layer == MODELS and test.model:
                names.setdefault(test.model, []).append(test.status)
        good = sorted(m for m, s in names.items() if worst(s) == "passed")
        if names:
            lines.append(Evidence.of(f"{cell}: models layer, {_share(len(good), len(names))} "
                                     f"models passed a training step on the device "
                                     f"({', '.join(sorted(names))})", cells=[cell]))
    why = ("oota's models layer runs a few tiny models built from the classes of the libraries "
           "PyTorch's dynamo benchmark suites draw on, not the suites (torchbench, huggingface, "
           "timm_models): its coverage is shown, not scored")
    return (PartScore(key="", label=item.category, max=item.points, points=None, how=why,
                      evidence=tuple(lines)),)


# -- CI/CD: flaky tests ---------------------------------------------------------------------------

# The status a test marked flaky will have (no such status yet: read when it appears).
FLAKY: Final[str] = "flaky"


def flaky(release: Release, statuses: frozenset[str]) -> tuple[PartScore, ...]:
    """Less than 5% of the tests marked flaky: read from a ``flaky`` status once the results
    have one (``statuses``: the statuses oota knows)."""
    item = rubric.BY_KEY["ci.flaky"]
    if FLAKY not in statuses:
        return (not_measured("", item.category, item.points, (
            "oota marks no test flaky yet (a test that failed and passed on a retry is not "
            "told apart): the share cannot be measured; the HUD's flaky cells are a "
            "different measure (a cell failing once between two passes)")),)
    tests = release.tests()
    marked = [(c, t) for c, t in tests if t.status == FLAKY]
    share = len(marked) / len(tests) if tests else 0.0
    return (PartScore(key="", label=item.category, max=item.points,
                      points=item.points if tests and share < 0.05 else 0, share=share,
                      how=f"{_share(len(marked), len(tests))} tests marked flaky (below 5% "
                      "earns the points)", evidence=(Evidence.of(
                          f"{len(marked)} flaky tests", cells=[c for c, _ in marked],
                          tests=[t.id for _, t in marked]),)),)


Measure = Callable[[Release], tuple[PartScore, ...]]
MEASURES: dict[str, Measure] = {
    "prereq.stability": smoke, "features.dtypes": dtypes,
    "features.cpp_extension": cpp_extension, "testing.modes": eager, "testing.ops": ops,
    "testing.unit": unit_tests, "testing.benchmarks": models}
