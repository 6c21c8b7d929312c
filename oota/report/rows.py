"""The report's rows: a test, a cell (one copy of it), the copies of one cell, a model across
vendors, each with its marks; and the words and symbols a status is shown as. Pure data,
built by :mod:`oota.report.data`; the ops layer's summary of a cell or a vendor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oota.report.compiled import CompileRow
from oota.report.workload import WorkloadRow
from oota.results.jsonfields import JSONObject
from oota.results.model import Host, Image, Result, SkipRule, Stage, place_name
from oota.results.software import Package, TorchInfo
from oota.results.store import RESULT_FILE
from oota.vocab import (
    BAD,
    COMPILE_LAYER,
    DATABASE_UNITS,
    FALLBACK,
    LAYERS,
    WORKLOAD_LAYER,
    MaybeStatus,
    Status,
    budget_unrun,
    not_compared_reason,
)

if TYPE_CHECKING:  # databases.py builds on these rows; a cell's row imports it when asked
    from oota.report.databases import LayerSummary

# The report's columns: the build stage, then the suite's layers (oota.vocab.LAYERS).
COLUMNS = ("build", *LAYERS)
SYMBOL = {"passed": "✓", "failed": "✗", "error": "⚠", "interrupted": "stopped",
          "skipped": "skip", "unsupported-here": "n/a here", "cpu-fallback": "on CPU",
          "not-claimed": "not claimed", "flaky": "≈ flaky", "": "–"}
WORD = {"passed": "passed", "failed": "failed", "error": "error", "interrupted": "interrupted",
        "skipped": "skipped", "unsupported-here": "n/a here", "cpu-fallback": "ran on the CPU",
        "not-claimed": "not claimed", "flaky": "flaky (passed on a retry)", "": "not run"}
CELL_FILES = (RESULT_FILE, "junit.xml", "build.log", "verify.log")
OPS_REASONS_SHOWN = 3  # the ops layer's reasons in its table entry
OPS_LAYER, AUTOGRAD_LAYER = "ops", "autograd"
# What one test of each layer of operator pairs counts: the ops layer's as oota.vocab's
# DATABASE_UNITS says; the autograd layer's summed over its checks, so a pair of each.
PAIRS = {OPS_LAYER: DATABASE_UNITS[OPS_LAYER], AUTOGRAD_LAYER: "operator×dtype×check pairs"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Mark:
    """One table entry: a status and why (skip reason, failure message, which cells)."""

    status: MaybeStatus = ""  # "" when nothing was tested
    reason: str = ""
    note: str = ""  # "1/2 cells" when a vendor's cells disagree

    @property
    def symbol(self) -> str:
        return SYMBOL.get(self.status, self.status)

    @property
    def css(self) -> str:
        return self.status or "none"

    def to_json(self) -> JSONObject:
        return {"status": self.status or None, "reason": self.reason, "note": self.note}


@dataclass(frozen=True, kw_only=True, slots=True)
class TestRow:
    __test__ = False  # not a pytest test class, despite its name

    id: str
    layer: str
    status: Status
    duration_s: float
    message: str
    model: str | None
    data: JSONObject


@dataclass(frozen=True, kw_only=True, slots=True)
class CellRow:
    id: str
    vendor: str
    status: Status
    message: str
    coordinates: dict[str, str | None]
    layers: dict[str, Mark]
    stages: Mapping[str, Stage]
    tests: tuple[TestRow, ...]
    torch: TorchInfo
    packages: Mapping[str, Package]
    image: Image
    host: Host
    skips: tuple[SkipRule, ...]
    files: tuple[str, ...]  # which of CELL_FILES lie beside result.json
    started_at: str
    finished_at: str
    origin: str = ""  # which copy: the host it ran on (and the run, when that is ambiguous)
    folder: str = ""  # the folder its result.json was read from ("" when built in memory)

    @property
    def coords_text(self) -> str:
        c = self.coordinates
        toolkit = f" {c['toolkit']} {c['toolkit_version']}" if c.get("toolkit") else ""
        return f"torch {c['torch']}{toolkit}, py{c['python']}, {c['os']}"

    @property
    def overall(self) -> Mark:
        return Mark(status=self.status, reason=self.message)

    def sorted_tests(self) -> list[TestRow]:
        """By layer in report order, then by id."""
        order = {layer: i for i, layer in enumerate(COLUMNS)}
        return sorted(self.tests, key=lambda t: (order.get(t.layer, len(COLUMNS)), t.layer, t.id))

    def model_tests(self) -> list[TestRow]:
        return [t for t in self.tests if t.model is not None]

    def compiled(self) -> list[CompileRow]:
        """The compile layer's figures, one row per model compiled (none where it did not
        run)."""
        rows = (CompileRow.of(t.id, t.status, t.message, t.data) for t in self.tests
                if t.layer == COMPILE_LAYER)
        return [row for row in rows if row is not None]

    def workload(self) -> list[WorkloadRow]:
        """The workload layer's figures, one row per model (none where it did not run)."""
        rows = (WorkloadRow.of(t.status, t.message, t.data) for t in self.tests
                if t.layer == WORKLOAD_LAYER)
        return [row for row in rows if row is not None]

    @property
    def ops(self) -> OpsSummary | None:
        return ops_summary(self.id, [self])

    @property
    def autograd(self) -> OpsSummary | None:
        return ops_summary(self.id, [self], AUTOGRAD_LAYER)

    @property
    def databases(self) -> tuple[LayerSummary, ...]:
        """The modules and optimizers layers of this cell (oota.report.databases)."""
        from oota.report.databases import vendor_summaries

        return vendor_summaries([(self.id, [self])])


@dataclass(frozen=True, kw_only=True, slots=True)
class Links:
    """Where a page finds a copy's files (result.json, logs): each cell folder relative to the
    page, or, for a row built in memory, ``results_rel``/<cell-id>."""

    results_rel: str = "../results"
    folders: Mapping[str, str] = field(default_factory=dict)

    def cell(self, row: CellRow) -> str:
        return self.folders.get(row.folder) or f"{self.results_rel}/{row.id}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Origin:
    """Where a copy of a cell's result was made. ``engine`` is the host's name in hosts.yaml
    ('local' for the default engine) and ``endpoint`` its Docker endpoint; results written
    before hosts existed know only the machine's ``hostname``."""

    engine: str | None = None
    endpoint: str | None = None
    hostname: str | None = None
    run_id: str | None = None

    @classmethod
    def of(cls, result: Result) -> Origin:
        host = result.host
        return cls(engine=host.text("engine"), endpoint=host.text("endpoint"),
                   hostname=host.text("hostname"), run_id=result.run_id)

    @property
    def place(self) -> str:
        """The engine's name; for the default engine ('local' on every CI runner) and for
        older results, the machine's name (:func:`oota.results.model.place_name`)."""
        return place_name(self.engine, self.hostname)

    def to_json(self) -> JSONObject:
        return {"engine": self.engine, "endpoint": self.endpoint, "hostname": self.hostname,
                "run_id": self.run_id}


@dataclass(frozen=True, kw_only=True, slots=True)
class Loaded:
    """A result as read from disk: its folder, and which of CELL_FILES lie beside it."""

    result: Result
    folder: str = ""
    files: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, Origin, str]:
        """The same key twice is the same result file reached twice (a folder passed twice)."""
        origin = Origin.of(self.result)
        return self.result.cell.id, origin, self.result.run_id or self.result.started_at


@dataclass(frozen=True, kw_only=True, slots=True)
class CellGroup:
    """One cell of the matrix with every copy of its result: one, or several when results
    folders from several hosts are merged. ``differences`` lists what the copies disagree on
    ('test_x: passed on lab-a, failed on lab-b'); empty when they agree."""

    id: str
    vendor: str
    status: MaybeStatus  # the worst of the copies
    copies: tuple[CellRow, ...]
    layers: dict[str, Mark]
    differences: tuple[str, ...] = ()
    hosts: int = 1  # how many Engines made the copies (one Engine may have made several)

    @property
    def first(self) -> CellRow:
        return self.copies[0]

    @property
    def several(self) -> bool:
        return len(self.copies) > 1

    @property
    def worst_copy(self) -> CellRow:
        return next((r for r in self.copies if r.status == self.status), self.first)

    @property
    def agreement(self) -> str | None:
        """'agree' or 'disagree' for a cell with several copies, else None."""
        if not self.several:
            return None
        return "disagree" if self.differences else "agree"

    @property
    def agreement_text(self) -> str:
        return f"{len(self.copies)} copies, they {self.agreement}" if self.several else ""

    @property
    def overall(self) -> Mark:
        if not self.several:
            return self.first.overall
        return Mark(status=self.status, reason="; ".join(self.differences),
                    note="disagree" if self.differences else "")


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRow:
    model: str
    marks: dict[str, Mark]  # vendor -> mark


@dataclass(frozen=True, kw_only=True, slots=True)
class OpsFailure:
    """One operator × dtype of the ops layer that did not pass (or the layer's own failure);
    ``built_on`` names another failing operator this one called (it fails through it)."""

    cell: str
    test: str  # 'add-float16', or the test's id when it is not an operator's
    message: str
    built_on: str = ""

    @property
    def text(self) -> str:
        """The message, with the operator it fails through first when there is one."""
        if not self.built_on:
            return self.message
        return f"fails through {self.built_on}, which fails too: {self.message}"


@dataclass(frozen=True, kw_only=True, slots=True)
class OpsSummary:
    """The ops layer (PyTorch's OpInfo tests, verify/test_ops.py) of one cell or one vendor.

    ``tried`` counts the operator × dtype pairs that ran (including those the device does not
    implement, which count as not passed) and those that failed; ``not_compared`` the pairs
    skipped before running, by why (oota.vocab.NOT_COMPARED: dtype the OpInfo lacks, PyTorch's
    own skips, skip list, time budget spent...): one test holds all those the time budget
    left unrun, with their count."""

    label: str  # the vendor, or the cell
    cells: int
    passed: int
    tried: int
    not_compared: tuple[tuple[str, int], ...]  # (reason, pairs), most first
    failures: tuple[OpsFailure, ...]
    # The pairs tried that did not pass, by why ('failed', or the skip's reason: 'not
    # implemented on the device', 'every sample refused by the CPU'...), most first.
    not_passed: tuple[tuple[str, int], ...] = ()
    layer: str = OPS_LAYER  # or the autograd layer's, whose pairs are per check too

    @property
    def not_run(self) -> int:
        return sum(count for _, count in self.not_compared)

    @property
    def text(self) -> str:
        cells = f"; {self.cells} cells" if self.cells > 1 else ""
        reasons = ", ".join(f"{count} {reason}" for reason, count in self.not_compared)
        others = "".join(f", {count} {reason}" for reason, count in self.not_passed)
        return (f"{self.layer}: {self.passed} of {self.tried} {PAIRS[self.layer]} pass{others} "
                f"(not compared: {reasons or 'none'}{cells})")

    def to_json(self) -> JSONObject:
        return {"label": self.label, "layer": self.layer, "cells": self.cells,
                "passed": self.passed,
                "tried": self.tried, "not_run": self.not_run,
                "not_compared": dict(self.not_compared),
                "not_passed": dict(self.not_passed),
                "failures": [{"cell": f.cell, "test": f.test, "message": f.message,
                              "built_on": f.built_on} for f in self.failures]}


def _ops_pair(test: TestRow) -> str:
    op, dtype, check = test.data.get("op"), test.data.get("dtype"), test.data.get("check")
    pair = f"{op}-{dtype}" if op and dtype else test.id
    return f"{check} {pair}" if check and op and dtype else pair


def not_compared_counts(pairs: Sequence[TestRow]) -> tuple[tuple[str, int], ...]:
    """The tests skipped before running (operator pairs, modules...), counted by why, most
    first; a test the time budget folded counts as the entries it holds."""
    counts: dict[str, int] = {}
    for test in pairs:
        reason = not_compared_reason(test.message)
        counts[reason] = counts.get(reason, 0) + (
            budget_unrun(test.status, test.message, test.data) or 1)
    return _most_first(counts)


def _not_passed(tried: Sequence[TestRow]) -> tuple[tuple[str, int], ...]:
    """The pairs tried that did not pass, counted by why: every one the sentence counts is
    accounted for."""
    counts: dict[str, int] = {}
    for test in tried:
        if test.status != "passed":
            reason = "failed" if test.status in BAD else WORD[FALLBACK] \
                if test.status == FALLBACK else not_compared_reason(test.message)
            counts[reason] = counts.get(reason, 0) + 1
    return _most_first(counts)


def _most_first(counts: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _built_on(failed: Sequence[tuple[str, TestRow]]) -> dict[int, str]:
    """Index in ``failed`` -> the failing operator (same cell, same dtype first) whose aten
    operator that failure's sample called: ``nn.functional.tanhshrink`` fails through
    ``tanh`` when refdev's tanh is wrong."""
    by_aten: dict[tuple[str, str], str] = {}
    for cell, test in failed:
        aten, op = test.data.get("aten"), test.data.get("op")
        if isinstance(aten, str) and isinstance(op, str):
            by_aten.setdefault((cell, aten), op)
    found: dict[int, str] = {}
    for index, (cell, test) in enumerate(failed):
        calls, own = test.data.get("calls"), test.data.get("aten")
        if not isinstance(calls, list):
            continue
        roots = [by_aten[(cell, c)] for c in calls
                 if isinstance(c, str) and c != own and (cell, c) in by_aten]
        if roots:
            found[index] = roots[0]
    return found


def ops_summary(label: str, rows: Sequence[CellRow],
                layer: str = OPS_LAYER) -> OpsSummary | None:
    """The ops layer's counts and failures over ``rows`` (None when none of them ran it), or
    those of the other layer of operator pairs (the autograd layer)."""
    ran = [(row.id, t) for row in rows for t in row.tests if t.layer == layer]
    if not ran:
        return None
    # Pairs: the tests that ran an operator, and those skipped before running one; a passing
    # test of the layer itself (the must-pass list's names) is not a pair.
    pairs = [t for _, t in ran if t.data.get("op") or t.status != "passed"]
    bad = [(cell, t) for cell, t in ran if t.status in BAD]
    tried = [t for t in pairs if t.data.get("tried") or t.status in BAD]
    skipped = [t for t in pairs if not (t.data.get("tried") or t.status in BAD)]
    roots = _built_on(bad)
    return OpsSummary(
        label=label, layer=layer, cells=len({cell for cell, _ in ran}), tried=len(tried),
        passed=sum(t.status == "passed" for t in tried), not_compared=not_compared_counts(skipped),
        not_passed=_not_passed(tried),
        failures=tuple(OpsFailure(cell=cell, test=_ops_pair(t), built_on=roots.get(i, ""),
                                  message=t.message.strip().removeprefix("Failed: "))
                       for i, (cell, t) in enumerate(bad)))
