"""Device coverage of the ops layer: per operator × vendor, where its pairs (one per dtype)
computed. A pair ran on the device's own kernels and passed, ran on the CPU (the backend's
fallback computed it: ``cpu-fallback``, reported apart and never as a pass), was missing a
kernel on the device (not implemented), failed, or was not compared.

What ran where comes from the suite's two witnesses: PyTorch's dispatcher, asked for every
vendor which kernel serves each operator a sample called on the device (verify/oota_dispatch.py),
and a vendor's fallback counters (verify/oota_hooks.py: PyTorch/XLA's ``aten::`` counters,
refdev's host fallback). A pass neither could place (results from before the dispatcher's
view; composites on a key with a boxed fallback and no counters) is "passed, where unknown",
never a device pass. The CPU vendor's device is the CPU: its runs are on its own kernels and
compare nothing. Built over the worst copy of each cell, as the report's ops lines are; the
dispatcher's view per vendor is :mod:`oota.report.served`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oota.report.rows import CellGroup, TestRow
from oota.report.served import MISSING as SERVED_MISSING, ServedView, pair_view, served_view
from oota.results.jsonfields import JSONObject
from oota.vocab import BAD, FALLBACK, UNRUN_PARAM

OPS = "ops"
PAIR_TESTS = ("test_op_runs", "test_op_matches_cpu")  # verify/test_ops.py: one test per pair
# The categories of a pair, in the order a table entry shows them, with their symbols.
DEVICE, UNKNOWN, CPU, MISSING, FAILED, NOT_COMPARED = (
    "device", "passed", "cpu", "missing", "failed", "not compared")
CATEGORIES = (DEVICE, UNKNOWN, CPU, MISSING, FAILED, NOT_COMPARED)
SYMBOL = {DEVICE: "✓", UNKNOWN: "✓?", CPU: "cpu", MISSING: "∅", FAILED: "✗", NOT_COMPARED: "–"}
WORDS = {DEVICE: "ran on the device's own kernels and passed",
         UNKNOWN: "passed, where it ran not known", CPU: "ran on the CPU (fell back)",
         MISSING: "missing: no kernel on the device", FAILED: "failed",
         NOT_COMPARED: "not compared"}
LEGEND = tuple(f"{SYMBOL[c]} {WORDS[c]}" for c in CATEGORIES)
# Rows of the table in matrix.md (those where a vendor ran an operator on the CPU or failed
# it); index.html has every operator.
ROWS_SHOWN = 200


@dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    """One operator on one vendor: its pairs by category (dtypes, over the vendor's cells)."""

    counts: tuple[tuple[str, int], ...]  # (category, pairs) in CATEGORIES order, none zero

    def get(self, category: str) -> int:
        return dict(self.counts).get(category, 0)

    @property
    def text(self) -> str:
        """'2✓ 1cpu' (two dtypes on the device, one on the CPU); '' for no pair."""
        return " ".join(f"{n}{SYMBOL[c]}" for c, n in self.counts)

    @property
    def css(self) -> str:
        """The category that marks the entry: a failure, else a CPU run, else the rest."""
        for category, style in ((FAILED, "failed"), (CPU, FALLBACK), (MISSING, "skipped"),
                                (DEVICE, "passed"), (UNKNOWN, "passed")):
            if self.get(category):
                return style
        return "skipped" if self.counts else "none"


@dataclass(frozen=True, kw_only=True, slots=True)
class VendorCoverage:
    """One vendor's pairs by category, over every operator, and whether it declares where its
    operators run (a verify hook with fallback counters)."""

    vendor: str
    declared: bool
    totals: tuple[tuple[str, int], ...]
    view: ServedView | None = None  # its operators by how the device served them
    own_device: bool = False  # the CPU vendor: its device is the CPU, nothing compared

    @property
    def text(self) -> str:
        shown = ", ".join(f"{n} {WORDS[c]}" for c, n in self.totals) or "no pair"
        if self.own_device:
            return (f"{self.vendor} (the CPU is its own device: its pairs ran on its own kernels "
                    f"and compare nothing): {shown}")
        undeclared = "" if self.declared else (
            " (nothing in its results tells its device's runs from a CPU fallback)")
        return f"{self.vendor}: {shown}{undeclared}"


@dataclass(frozen=True, kw_only=True, slots=True)
class CoverageTable:
    """Operators × vendors: each operator's entry per vendor (None: not in its runs)."""

    vendors: tuple[VendorCoverage, ...]
    rows: tuple[tuple[str, tuple[Entry | None, ...]], ...]  # (operator, entry per vendor)

    def to_json(self) -> JSONObject:
        names = [v.vendor for v in self.vendors]
        return {"vendors": {v.vendor: {"declared": v.declared, "pairs": dict(v.totals),
                                       "own_device": v.own_device,
                                       "served": v.view.to_json() if v.view else None}
                            for v in self.vendors},
                "operators": {op: {name: dict(e.counts) for name, e in zip(names, entries,
                                                                           strict=True) if e}
                              for op, entries in self.rows}}

    def notable(self) -> list[tuple[str, tuple[Entry | None, ...]]]:
        """The rows where some vendor ran the operator on the CPU, lacked a kernel for it, or
        failed it."""
        return [(op, entries) for op, entries in self.rows
                if any(e is not None and (e.get(CPU) or e.get(MISSING) or e.get(FAILED))
                       for e in entries)]


def category(test: TestRow) -> str:
    """Where one ops-layer pair computed, and how it ended."""
    if test.status in BAD:
        return FAILED
    if test.status == FALLBACK:
        return CPU
    if test.status == "passed":
        # The CPU vendor's runs (compared: false) are on its own device, the CPU.
        on_device = test.data.get("ran_on") == "device" or test.data.get("compared") is False
        return DEVICE if on_device else UNKNOWN
    if pair_view(test) == SERVED_MISSING:
        return MISSING
    return NOT_COMPARED  # skipped (by its reason) or not run here


def pair_of(test: TestRow) -> tuple[str, str] | None:
    """(operator, dtype) of an ops-layer test of one pair, those skipped without data too
    (their pair is in their id: ``test_op_runs[abs-float32]``); None for any other test."""
    op, dtype = test.data.get("op"), test.data.get("dtype")
    if test.layer != OPS:
        return None
    if isinstance(op, str) and isinstance(dtype, str):
        return op, dtype
    name, _, param = test.id.rpartition("::")[2].partition("[")
    if name not in PAIR_TESTS or param.rstrip("]") == UNRUN_PARAM:
        return None
    op, _, dtype = param.rstrip("]").rpartition("-")
    return (op, dtype) if op and dtype else None


def _pairs(group: CellGroup) -> list[TestRow]:
    """The cell's operator × dtype pairs."""
    return [t for t in group.worst_copy.tests
            if t.layer == OPS and isinstance(t.data.get("op"), str)]


def _counts(found: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple((c, found[c]) for c in CATEGORIES if found.get(c))


def coverage_table(groups: Sequence[CellGroup], vendors: Sequence[str]) -> CoverageTable | None:
    """The table over ``groups`` (None when no vendor compared an operator)."""
    per: dict[str, dict[str, dict[str, int]]] = {}  # vendor -> op -> category -> pairs
    declared: dict[str, bool] = {}
    tests: dict[str, list[TestRow]] = {}
    for group in groups:
        tests.setdefault(group.vendor, []).extend(_pairs(group))
        for test in _pairs(group):
            ops = per.setdefault(group.vendor, {}).setdefault(str(test.data["op"]), {})
            kind = category(test)
            ops[kind] = ops.get(kind, 0) + 1
            if test.data.get("ran_on") in ("device", "cpu"):
                declared[group.vendor] = True
    shown = [v for v in vendors if v in per]
    if not shown:
        return None
    operators = sorted({op for v in shown for op in per[v]})
    rows = tuple((op, tuple(Entry(counts=_counts(per[v][op])) if op in per[v] else None
                            for v in shown)) for op in operators)
    totals = []
    for vendor in shown:
        summed: dict[str, int] = {}
        for found in per[vendor].values():
            for kind, n in found.items():
                summed[kind] = summed.get(kind, 0) + n
        totals.append(VendorCoverage(
            vendor=vendor, declared=declared.get(vendor, False), totals=_counts(summed),
            view=served_view(vendor, tests[vendor]),
            own_device=all(t.data.get("compared") is False for t in tests[vendor])))
    return CoverageTable(vendors=tuple(totals), rows=rows)
