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
from oota.vocab import COUNT_COLUMNS, MaybeStatus, layer_counts, worst

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
