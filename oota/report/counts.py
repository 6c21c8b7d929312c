"""Counts of tests, the same on every page as in verify.log.

verify.log (the suite's own report, verify/oota_summary.py) counts tests per layer with
:func:`oota.vocab.layer_counts`; the cell pages show that same table from the result's tests,
counted by the same function. The ops layer is also summed up in operator × dtype pairs
(:class:`oota.report.rows.OpsSummary`): a different unit, so next to it :func:`ops_in_tests`
says how the two counts make each other up (why 2893 of 2918 pairs passing is 2894 tests
passed: the layer's own check of its must-pass list passed too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oota.report.data import Report
from oota.report.rows import WORD, CellRow, OpsSummary, ops_summary
from oota.results.jsonfields import JSONObject
from oota.vocab import COUNT_COLUMNS, FLAKY, LAYERS, RAN, MaybeStatus, layer_counts, worst

OPS = "ops"


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerCount:
    """One layer's tests: the worst status, and how many ended in each of COUNT_COLUMNS."""

    layer: str
    status: MaybeStatus
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def layer_table(rows: Sequence[CellRow]) -> list[LayerCount]:
    """verify.log's table, over ``rows`` (one cell, or a vendor's cells)."""
    tests = [(t.layer, t.status) for row in rows for t in row.tests]
    statuses: dict[str, list[MaybeStatus]] = {}
    for layer, status in tests:
        statuses.setdefault(layer, []).append(status)
    return [LayerCount(layer=layer, status=worst(statuses[layer]), counts=counts)
            for layer, counts in layer_counts(tests).items()]


def ops_in_tests(rows: Sequence[CellRow], summary: OpsSummary | None = None) -> str:
    """How the ops layer's pairs make up its tests, as one sentence ('' when it did not run).
    A test of the layer either ran a pair, or left pairs unrun (one each; the test the time
    budget folds holds many), or checks the layer itself (the must-pass list); only the
    last is no pair (:func:`oota.report.rows.ops_summary`)."""
    summary = summary or ops_summary("", rows)
    ops = next((c for c in layer_table(rows) if c.layer == OPS), None)
    if summary is None or ops is None:
        return ""
    shown = ", ".join(f"{ops.counts[c]} {WORD.get(c, c)}" for c in COUNT_COLUMNS if ops.counts[c])
    checks = ops.counts["passed"] - summary.passed
    unrun_tests = ops.total - summary.tried - checks
    parts = [f"{summary.tried} ran an operator×dtype pair ({summary.passed} passed)"]
    if unrun_tests == summary.not_run:
        parts.append(f"{unrun_tests} skipped a pair without running it")
    elif unrun_tests:  # the time budget's pairs are folded into one test
        parts.append(f"{unrun_tests} left {summary.not_run} pairs unrun")
    if checks:
        parts.append(f"{checks} checked the layer itself (its must-pass list)")
    return (f"Counted in tests, as verify.log counts them: {ops.total} ({shown}); of these, "
            + "; ".join(parts) + ".")


def in_tests_by_vendor(report: Report) -> dict[str, str]:
    """:func:`ops_in_tests` for each vendor's ops line (report.ops: over the worst copy of
    each of its cells, as those lines count)."""
    return {ops.label: ops_in_tests([g.worst_copy for g in report.groups
                                     if g.vendor == ops.label], ops) for ops in report.ops}


@dataclass(frozen=True, kw_only=True, slots=True)
class FlakyShare:
    """Of a vendor's tests of one layer that ran (over the worst copy of each of its cells),
    how many were flaky: failed, then passed when run again in a fresh process."""

    vendor: str
    layer: str
    flaky: int
    ran: int

    @property
    def share(self) -> str:
        return f"{self.flaky} of {self.ran} ({self.flaky / self.ran:.1%})" if self.ran else "–"

    def to_json(self) -> JSONObject:
        return {"vendor": self.vendor, "layer": self.layer, "flaky": self.flaky, "ran": self.ran}


def flaky_shares(report: Report) -> list[FlakyShare]:
    """Each vendor's flaky share per layer, where its tests of that layer ran; in the report's
    vendor and layer order."""
    found: dict[tuple[str, str], list[str]] = {}
    for group in report.groups:
        for test in group.worst_copy.tests:
            if test.status in RAN:
                found.setdefault((group.vendor, test.layer), []).append(test.status)
    order = {layer: i for i, layer in enumerate(LAYERS)}
    keys = sorted(found, key=lambda k: (k[0], order.get(k[1], len(order)), k[1]))
    return [FlakyShare(vendor=v, layer=layer, flaky=found[v, layer].count(FLAKY),
                       ran=len(found[v, layer])) for v, layer in keys]
