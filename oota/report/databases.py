"""The modules, optimizers and distributed layers (PyTorch's ModuleInfo and OptimizerInfo
tests, verify/test_modules.py and test_optimizers.py; torch.distributed's collectives,
verify/test_distributed.py) of one cell or one vendor, counted in what their tests are: module
× dtype pairs, optimizer tests (an optimizer × implementation × dtype, or its state dict moved
between the device and the CPU), collectives (a collective × dtype on a world size, the
barrier, the DDP training). A test the time budget folded counts as the entries it holds; the
layer's check of its must-run list is no entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oota.report.rows import CellRow, TestRow, not_compared_counts
from oota.results.jsonfields import JSONObject
from oota.vocab import BAD, DATABASE_UNITS

# The layers summed up here, each with what one of its entries is (the ops and autograd layers,
# which walk PyTorch's OpInfo database, have their own summary: oota.report.rows.OpsSummary).
UNITS = {**{layer: DATABASE_UNITS[layer] for layer in ("modules", "optimizers")},
         "distributed": "collectives (with the DDP training)"}
FAILURES_SHOWN = 3


@dataclass(frozen=True, kw_only=True, slots=True)
class Failure:
    cell: str
    test: str  # the test's parameters: 'nn.Tanh-float32', 'Adam-foreach-float32'
    message: str


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerSummary:
    """One layer over one cell's or one vendor's results."""

    layer: str
    label: str  # the vendor, or the cell
    cells: int
    passed: int
    failed: int
    # passes whose device runs called the backend's CPU fallback for some operators (their
    # data's ran_on: 'cpu'): the composition ran on the device, some of its arithmetic did not
    fell_back: int = 0
    not_run: tuple[tuple[str, int], ...]  # (reason, entries), most first
    failures: tuple[Failure, ...] = ()

    @property
    def total(self) -> int:
        return self.passed + self.failed + sum(count for _, count in self.not_run)

    @property
    def text(self) -> str:
        cells = f"; {self.cells} cells" if self.cells > 1 else ""
        fell_back = (f", {self.fell_back} of them through the backend's CPU fallback for some "
                     "operators" if self.fell_back else "")
        failed = f", {self.failed} failed" if self.failed else ""
        reasons = ", ".join(f"{count} {reason}" for reason, count in self.not_run)
        return (f"{self.layer}: {self.passed} of {self.total} {UNITS[self.layer]} pass"
                f"{fell_back}{failed} (not run: {reasons or 'none'}{cells})")

    def to_json(self) -> JSONObject:
        return {"layer": self.layer, "label": self.label, "cells": self.cells,
                "passed": self.passed, "fell_back": self.fell_back, "failed": self.failed,
                "total": self.total,
                "not_run": dict(self.not_run),
                "failures": [{"cell": f.cell, "test": f.test, "message": f.message}
                             for f in self.failures]}


def _entry(test: TestRow) -> bool:
    """A test of a module, an optimizer, or the entries a budget left unrun (not the layer's
    own check of its list)."""
    return "[" in test.id


def layer_summary(layer: str, label: str, rows: Sequence[CellRow]) -> LayerSummary | None:
    """``layer`` over ``rows`` (None when none of them ran it)."""
    ran = [(row.id, t) for row in rows for t in row.tests if t.layer == layer and _entry(t)]
    if not ran:
        return None
    bad = [(cell, t) for cell, t in ran if t.status in BAD]
    return LayerSummary(
        layer=layer, label=label, cells=len({cell for cell, _ in ran}),
        passed=sum(t.status == "passed" for _, t in ran), failed=len(bad),
        fell_back=sum(t.status == "passed" and t.data.get("ran_on") == "cpu" for _, t in ran),
        not_run=not_compared_counts([t for _, t in ran
                                     if t.status not in BAD and t.status != "passed"]),
        failures=tuple(Failure(cell=cell, test=t.id.partition("[")[2].removesuffix("]"),
                               message=t.message.strip().removeprefix("Failed: "))
                       for cell, t in bad))


def vendor_summaries(rows_by_vendor: Sequence[tuple[str, Sequence[CellRow]]]
                     ) -> tuple[LayerSummary, ...]:
    """Each layer of UNITS for each vendor that ran it, layer by layer."""
    found = (layer_summary(layer, vendor, rows) for layer in UNITS
             for vendor, rows in rows_by_vendor)
    return tuple(summary for summary in found if summary is not None)
