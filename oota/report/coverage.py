"""Device coverage of the ops layer: per operator × vendor, where its pairs (one per dtype)
computed. A pair ran on the device and passed, ran on the CPU (the backend's fallback computed
it: ``cpu-fallback``, reported apart and never as a pass), failed, or was not compared.

What ran where comes from the vendor's verify hook (verify/oota_hooks.py: PyTorch/XLA's
``aten::`` counters, refdev's host fallback); a vendor that declares no way to tell has its
passes counted as "passed, where unknown", never as device passes. The CPU vendor is left out:
its device is the CPU, and it compares nothing. Built over the worst copy of each cell, as the
report's ops lines are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oota.report.rows import CellGroup, TestRow
from oota.results.jsonfields import JSONObject
from oota.vocab import BAD, FALLBACK

OPS = "ops"
# The categories of a pair, in the order a table entry shows them, with their symbols.
DEVICE, UNKNOWN, CPU, FAILED, NOT_COMPARED = "device", "passed", "cpu", "failed", "not compared"
CATEGORIES = (DEVICE, UNKNOWN, CPU, FAILED, NOT_COMPARED)
SYMBOL = {DEVICE: "✓", UNKNOWN: "✓?", CPU: "cpu", FAILED: "✗", NOT_COMPARED: "–"}
WORDS = {DEVICE: "ran on the device and passed", UNKNOWN: "passed, where it ran not declared",
         CPU: "ran on the CPU", FAILED: "failed", NOT_COMPARED: "not compared"}
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
        for category, style in ((FAILED, "failed"), (CPU, FALLBACK), (DEVICE, "passed"),
                                (UNKNOWN, "passed")):
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

    @property
    def text(self) -> str:
        shown = ", ".join(f"{n} {WORDS[c]}" for c, n in self.totals) or "no pair"
        undeclared = "" if self.declared else (
            " (the vendor declares no way to tell its device's runs from a CPU fallback)")
        return f"{self.vendor}: {shown}{undeclared}"


@dataclass(frozen=True, kw_only=True, slots=True)
class CoverageTable:
    """Operators × vendors: each operator's entry per vendor (None: not in its runs)."""

    vendors: tuple[VendorCoverage, ...]
    rows: tuple[tuple[str, tuple[Entry | None, ...]], ...]  # (operator, entry per vendor)

    def to_json(self) -> JSONObject:
        names = [v.vendor for v in self.vendors]
        return {"vendors": {v.vendor: {"declared": v.declared, "pairs": dict(v.totals)}
                            for v in self.vendors},
                "operators": {op: {name: dict(e.counts) for name, e in zip(names, entries,
                                                                           strict=True) if e}
                              for op, entries in self.rows}}

    def notable(self) -> list[tuple[str, tuple[Entry | None, ...]]]:
        """The rows where some vendor ran the operator on the CPU or failed it."""
        return [(op, entries) for op, entries in self.rows
                if any(e is not None and (e.get(CPU) or e.get(FAILED)) for e in entries)]


def category(test: TestRow) -> str:
    """Where one ops-layer pair computed, and how it ended."""
    if test.status in BAD:
        return FAILED
    if test.status == FALLBACK:
        return CPU
    if test.status == "passed":
        return DEVICE if test.data.get("ran_on") == "device" else UNKNOWN
    return NOT_COMPARED  # skipped (by its reason) or not run here


def _pairs(group: CellGroup) -> list[TestRow]:
    """The cell's compared operator × dtype pairs (the CPU vendor's runs compare nothing)."""
    return [t for t in group.worst_copy.tests
            if t.layer == OPS and isinstance(t.data.get("op"), str)
            and t.data.get("compared", True) is not False]


def _counts(found: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple((c, found[c]) for c in CATEGORIES if found.get(c))


def coverage_table(groups: Sequence[CellGroup], vendors: Sequence[str]) -> CoverageTable | None:
    """The table over ``groups`` (None when no vendor compared an operator)."""
    per: dict[str, dict[str, dict[str, int]]] = {}  # vendor -> op -> category -> pairs
    declared: dict[str, bool] = {}
    for group in groups:
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
        totals.append(VendorCoverage(vendor=vendor, declared=declared.get(vendor, False),
                                     totals=_counts(summed)))
    return CoverageTable(vendors=tuple(totals), rows=rows)
