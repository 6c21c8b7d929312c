"""The report as data, built from typed results; the writers (JSON, Markdown, HTML) only lay
it out. Nothing here reads or writes a file except :func:`collect` and :func:`collect_merged`,
which load the results.

The data (:class:`Report`) holds three views of the same results: the models × vendors table
of the out-of-tree accelerator RFC, the cells × layers table per vendor, and each vendor's skip
debt; plus, with ``--compare``, what changed since a previous run (:mod:`oota.report.compare`).

A report merged from several results folders (``--merge``: runners' artifacts side by side)
may hold the same cell more than once, made on different hosts. Every copy is kept
(:class:`CellGroup`): the matrix shows the worst of them and whether they agree, never one
copy overwriting another. A copy is known by its origin (:class:`Origin`).
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from oota.report.compare import Comparison, compare, known_models, load_previous, model_of
from oota.report.workload import LAYER as WORKLOAD_LAYER
from oota.report.workload import WorkloadRow
from oota.results.assemble import now
from oota.results.model import (
    CellRef,
    Host,
    Image,
    JSONObject,
    Package,
    Result,
    ResultFormatError,
    SkipRule,
    Stage,
    TorchInfo,
    host_key,
    place_name,
)
from oota.results.store import RESULT_FILE, load, load_found
from oota.vocab import BAD, LAYERS, budget_unrun, not_compared_reason, worst

# The report's columns: the build stage, then the suite's layers (oota.vocab.LAYERS).
COLUMNS = ("build", *LAYERS)
SYMBOL = {"passed": "✓", "failed": "✗", "error": "✗", "interrupted": "stopped",
          "skipped": "skip", "unsupported-here": "n/a here", "": "–"}
WORD = {"passed": "passed", "failed": "failed", "error": "error", "interrupted": "interrupted",
        "skipped": "skipped", "unsupported-here": "n/a here", "": "not run"}
CELL_FILES = (RESULT_FILE, "junit.xml", "build.log", "verify.log")
EXPIRY_WINDOW_DAYS = 30
OPS_REASONS_SHOWN = 3  # the ops layer's reasons in its table entry


@dataclass(frozen=True, kw_only=True, slots=True)
class Mark:
    """One table entry: a status and why (skip reason, failure message, which cells)."""

    status: str = ""  # "" when nothing was tested
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
    status: str
    duration_s: float
    message: str
    model: str | None
    data: JSONObject


@dataclass(frozen=True, kw_only=True, slots=True)
class CellRow:
    id: str
    vendor: str
    status: str
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

    def workload(self) -> list[WorkloadRow]:
        """The workload layer's figures, one row per model (none where it did not run)."""
        rows = (WorkloadRow.of(t.status, t.message, t.data) for t in self.tests
                if t.layer == WORKLOAD_LAYER)
        return [row for row in rows if row is not None]

    @property
    def ops(self) -> OpsSummary | None:
        return ops_summary(self.id, [self])


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
    status: str  # the worst of the copies
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
class SkipEntry:
    id: str
    reason: str
    owner: str
    added: str | None
    expires: str
    age_days: int | None
    days_left: int | None
    matched: int
    expired: bool

    @property
    def expires_soon(self) -> bool:
        return (not self.expired and self.days_left is not None
                and self.days_left <= EXPIRY_WINDOW_DAYS)


@dataclass(frozen=True, kw_only=True, slots=True)
class SkipDebt:
    vendor: str
    entries: tuple[SkipEntry, ...]
    unmatched: tuple[str, ...]  # entries that matched no test in any of the vendor's cells

    @property
    def ages(self) -> list[int]:
        return [e.age_days for e in self.entries if e.age_days is not None]

    @property
    def oldest_days(self) -> int | None:
        return max(self.ages) if self.ages else None

    @property
    def median_days(self) -> float | None:
        return statistics.median(self.ages) if self.ages else None

    @property
    def expiring_soon(self) -> int:
        return sum(e.expires_soon for e in self.entries)

    @property
    def expired(self) -> int:
        return sum(e.expired for e in self.entries)

    @property
    def undated(self) -> int:
        return sum(e.age_days is None for e in self.entries)

    def to_json(self) -> JSONObject:
        return {"vendor": self.vendor, "entries": len(self.entries),
                "oldest_days": self.oldest_days, "median_days": self.median_days,
                "undated": self.undated, "expiring_within_30_days": self.expiring_soon,
                "expired": self.expired, "unmatched": list(self.unmatched),
                "items": [{"id": e.id, "reason": e.reason, "owner": e.owner, "added": e.added,
                           "expires": e.expires, "age_days": e.age_days,
                           "days_left": e.days_left, "matched": e.matched,
                           "expired": e.expired} for e in self.entries]}


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

    @property
    def not_run(self) -> int:
        return sum(count for _, count in self.not_compared)

    @property
    def text(self) -> str:
        cells = f"; {self.cells} cells" if self.cells > 1 else ""
        reasons = ", ".join(f"{count} {reason}" for reason, count in self.not_compared)
        return (f"ops: {self.passed} of {self.tried} operator×dtype pairs pass "
                f"(not compared: {reasons or 'none'}{cells})")

    def to_json(self) -> JSONObject:
        return {"label": self.label, "cells": self.cells, "passed": self.passed,
                "tried": self.tried, "not_run": self.not_run,
                "not_compared": dict(self.not_compared),
                "failures": [{"cell": f.cell, "test": f.test, "message": f.message,
                              "built_on": f.built_on} for f in self.failures]}


def _ops_pair(test: TestRow) -> str:
    op, dtype = test.data.get("op"), test.data.get("dtype")
    return f"{op}-{dtype}" if op and dtype else test.id


def _not_compared(pairs: Sequence[TestRow]) -> tuple[tuple[str, int], ...]:
    counts: dict[str, int] = {}
    for test in pairs:
        reason = not_compared_reason(test.message)
        counts[reason] = counts.get(reason, 0) + (
            budget_unrun(test.status, test.message, test.data) or 1)
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


def ops_summary(label: str, rows: Sequence[CellRow]) -> OpsSummary | None:
    """The ops layer's counts and failures over ``rows`` (None when none of them ran it)."""
    ran = [(row.id, t) for row in rows for t in row.tests if t.layer == "ops"]
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
        label=label, cells=len({cell for cell, _ in ran}), tried=len(tried),
        passed=sum(t.status == "passed" for t in tried), not_compared=_not_compared(skipped),
        failures=tuple(OpsFailure(cell=cell, test=_ops_pair(t), built_on=roots.get(i, ""),
                                  message=t.message.strip().removeprefix("Failed: "))
                       for i, (cell, t) in enumerate(bad)))


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    generated_at: str
    results: tuple[Result, ...]
    problems: tuple[str, ...]
    rows: tuple[CellRow, ...] = ()
    models: tuple[ModelRow, ...] = ()
    skip_debt: tuple[SkipDebt, ...] = ()
    comparison: Comparison | None = None
    counts: dict[str, int] = field(default_factory=dict)  # per cell, not per copy
    groups: tuple[CellGroup, ...] = ()
    sources: tuple[str, ...] = ()  # the folders merged (--merge); empty for one folder
    ops: tuple[OpsSummary, ...] = ()  # per vendor that ran the ops layer

    @property
    def vendors(self) -> list[str]:
        return list(dict.fromkeys(r.cell.vendor for r in self.results))

    @property
    def merged(self) -> bool:
        return bool(self.sources)

    def vendor_rows(self, vendor: str) -> list[CellRow]:
        return [r for r in self.rows if r.vendor == vendor]

    def vendor_groups(self, vendor: str) -> list[CellGroup]:
        return [g for g in self.groups if g.vendor == vendor]

    def several_copies(self) -> list[CellGroup]:
        return [g for g in self.groups if g.several]

    def on_several_hosts(self) -> list[CellGroup]:
        """The cells whose copies come from more than one Engine."""
        return [g for g in self.groups if g.hosts > 1]

    def repeated_on_one_host(self) -> list[CellGroup]:
        """The cells one Engine made more than one copy of (a re-run, two runs merged)."""
        return [g for g in self.groups if len(g.copies) > g.hosts]

    def disagreeing(self) -> list[CellGroup]:
        return [g for g in self.groups if g.differences]

    def counts_text(self) -> str:
        """'1 failed, 3 passed' (or 'none')."""
        return ", ".join(f"{n} {WORD.get(s, s)}" for s, n in sorted(self.counts.items())) \
            or "none"


# -- building the data ------------------------------------------------------------------------

def _mark(items: Sequence[tuple[str, str]], most: int | None = None) -> Mark:
    """One mark for several (status, message): the worst status, the messages that explain it
    (the first ``most`` of them, when given)."""
    status = worst(s for s, _ in items)
    if status == "passed":
        return Mark(status=status)
    reasons = sorted({m.strip() for s, m in items if s == status and m and m.strip()})
    if most is not None and len(reasons) > most:
        reasons = [*reasons[:most], f"and {len(reasons) - most} more (see the operators' list)"]
    return Mark(status=status, reason="; ".join(reasons))


def layer_mark(result: Result, layer: str) -> Mark:
    if layer == "build":
        stage = result.stages.get("build")
        return _mark([(stage.status, stage.message)]) if stage else Mark()
    # The ops layer has a test per operator × dtype: its failures are listed on their own.
    return _mark([(t.status, t.message) for t in result.tests if t.layer == layer],
                 OPS_REASONS_SHOWN if layer == "ops" else None)


def _vendor_mark(per_cell: dict[str, Mark], noun: str = "cells") -> Mark:
    """Several cells of one vendor (or copies of one cell) in one column: the worst, and which
    cell said what."""
    if len(set(per_cell.values())) == 1:  # every cell says the same
        return next(iter(per_cell.values()))
    status = worst(m.status for m in per_cell.values())
    agreeing = sum(m.status == status for m in per_cell.values())
    lines = [f"{cell}: {WORD[m.status]}" + (f" ({m.reason})" if m.reason else "")
             for cell, m in per_cell.items() if m.status != "passed"]
    note = f"{agreeing}/{len(per_cell)} {noun}" if agreeing < len(per_cell) else ""
    return Mark(status=status, reason="; ".join(lines), note=note)


def _model_rows(results: Sequence[Result], vendors: list[str]) -> tuple[ModelRow, ...]:
    known = known_models(results)
    per: dict[str, dict[str, dict[str, list[tuple[str, str]]]]] = {}
    for result in results:
        for test in result.tests:
            model = model_of(test, known)
            if model is not None:
                cells = per.setdefault(model, {}).setdefault(result.cell.vendor, {})
                cells.setdefault(result.cell.id, []).append((test.status, test.message))
    return tuple(ModelRow(model=model, marks={
        vendor: _vendor_mark({cell: _mark(items) for cell, items in by_cell[vendor].items()})
        for vendor in vendors if vendor in by_cell}) for model, by_cell in sorted(per.items()))


def _cell_row(result: Result, files: tuple[str, ...], known: list[str], *, origin: str = "",
              folder: str = "") -> CellRow:
    cell = result.cell
    installed = result.installed
    tests = tuple(TestRow(id=t.id, layer=t.layer, status=t.status, duration_s=t.duration_s,
                          message=t.message, model=model_of(t, known), data=t.data)
                  for t in result.tests)
    return CellRow(
        id=cell.id, vendor=cell.vendor, status=result.status, message=result.message,
        coordinates={"os": cell.os, "python": cell.python, "torch": cell.torch,
                     "toolkit": cell.toolkit, "toolkit_version": cell.toolkit_version,
                     "fingerprint": cell.fingerprint},
        layers={layer: layer_mark(result, layer) for layer in COLUMNS},
        stages=result.stages, tests=tests,
        torch=installed.torch if installed else TorchInfo(),
        packages=installed.packages if installed else {},
        image=result.image or Image(tag=""), host=result.host,
        skips=result.skips.entries if result.skips else (), files=files,
        started_at=result.started_at, finished_at=result.finished_at, origin=origin,
        folder=folder)


def _date(text: str | None) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(text)[:10])
    except ValueError:
        return None


def _skip_entry(rule: SkipRule, matched: int, flagged: bool, today: dt.date) -> SkipEntry:
    added, expires = _date(rule.added), _date(rule.expires)
    days_left = (expires - today).days if expires else None
    return SkipEntry(id=rule.id, reason=rule.reason, owner=rule.owner, added=rule.added,
                     expires=rule.expires, age_days=(today - added).days if added else None,
                     days_left=days_left, matched=matched,
                     expired=flagged or (days_left is not None and days_left < 0))


def skip_debt(vendor: str, results: Sequence[Result], today: dt.date) -> SkipDebt:
    """A vendor's skip list across its cells (each cell carries the vendor's list)."""
    entries: dict[str, SkipRule] = {}
    matched: dict[str, int] = {}
    expired: set[str] = set()
    unmatched: list[set[str]] = []
    for result in results:
        if result.skips is None:
            continue
        for rule in result.skips.entries:
            entries[rule.id] = rule
            matched[rule.id] = matched.get(rule.id, 0) + rule.matched
        expired |= set(result.skips.expired)
        unmatched.append(set(result.skips.unmatched))
    never = set.intersection(*unmatched) if unmatched else set()
    return SkipDebt(vendor=vendor, unmatched=tuple(sorted(never)), entries=tuple(
        _skip_entry(e, matched[i], i in expired, today) for i, e in sorted(entries.items())))


# -- copies of one cell ------------------------------------------------------------------------

def _labels(copies: Sequence[Loaded]) -> list[str]:
    """Each copy's name: its place, with its run when two copies share a place."""
    origins = [Origin.of(c.result) for c in copies]
    places = [o.place for o in origins]
    return [place if places.count(place) == 1
            else f"{place}, run {origin.run_id or copy.result.started_at}"
            for place, origin, copy in zip(places, origins, copies, strict=True)]


def _differ(subject: str, outcomes: Sequence[tuple[str, str]]) -> list[str]:
    """'subject: passed on a, failed on b' when the copies that have ``subject`` differ."""
    if len(outcomes) < 2 or len({status for _, status in outcomes}) == 1:
        return []
    return [f"{subject}: " + ", ".join(f"{WORD.get(s, s)} on {label}" for label, s in outcomes)]


def differences(copies: Sequence[CellRow]) -> tuple[str, ...]:
    """What the copies of one cell disagree on: their status, a stage, or a test that more
    than one of them ran. Tests only one copy ran are no disagreement."""
    lines = _differ("status", [(c.origin, c.status) for c in copies])
    stages = dict.fromkeys(name for c in copies for name in c.stages)
    for name in stages:
        lines += _differ(f"stage {name}", [(c.origin, c.stages[name].status)
                                           for c in copies if name in c.stages])
    tests = dict.fromkeys(t.id for c in copies for t in c.sorted_tests())
    for test_id in tests:
        lines += _differ(test_id, [(c.origin, t.status) for c in copies
                                   for t in c.tests if t.id == test_id])
    return tuple(lines)


def _group(copies: Sequence[Loaded], known: list[str]) -> CellGroup:
    rows = tuple(_cell_row(c.result, c.files, known, origin=label, folder=c.folder)
                 for c, label in zip(copies, _labels(copies), strict=True))
    first = rows[0]
    layers = first.layers if len(rows) == 1 else {
        column: _vendor_mark({r.origin: r.layers[column] for r in rows}, "copies")
        for column in COLUMNS}
    return CellGroup(id=first.id, vendor=first.vendor, copies=rows, layers=layers,
                     status=worst(r.status for r in rows),
                     differences=differences(rows) if len(rows) > 1 else (),
                     hosts=len({host_key(c.result.host) for c in copies}))


def _distinct(loaded: Sequence[Loaded]) -> list[Loaded]:
    """Each result once: the same file reached twice (same cell, origin and run) is one copy."""
    first: dict[tuple[str, Origin, str], Loaded] = {}
    for item in loaded:
        first.setdefault(item.key, item)
    return list(first.values())


def build_report(results: Sequence[Result], problems: Sequence[str], *,
                 generated_at: str | None = None,
                 files: Mapping[str, tuple[str, ...]] | None = None,
                 comparison: Comparison | None = None) -> Report:
    """The report as data from typed results; no file is read or written."""
    return build_from([Loaded(result=r, files=(files or {}).get(r.cell.id, ())) for r in results],
                      problems, generated_at=generated_at, comparison=comparison)


def build_from(loaded: Sequence[Loaded], problems: Sequence[str], *,
               generated_at: str | None = None, comparison: Comparison | None = None,
               sources: Sequence[str] = ()) -> Report:
    """The report as data from results with their folders; copies of a cell are grouped."""
    distinct = _distinct(loaded)
    order = channel_order([c.result.cell for c in distinct])
    ordered = sorted(distinct, key=lambda c: (
        c.result.cell.vendor, order[c.result.cell.id], Origin.of(c.result).place,
        c.result.started_at))
    results = [c.result for c in ordered]
    generated_at = generated_at or now()
    today = _date(generated_at) or dt.date.today()
    vendors = list(dict.fromkeys(r.cell.vendor for r in results))
    known = known_models(results)
    by_cell: dict[str, list[Loaded]] = {}
    for item in ordered:
        by_cell.setdefault(item.result.cell.id, []).append(item)
    groups = tuple(_group(copies, known) for copies in by_cell.values())
    rows = tuple(row for g in groups for row in g.copies)
    counts: dict[str, int] = {}
    for group in groups:
        counts[group.status] = counts.get(group.status, 0) + 1
    return Report(
        generated_at=generated_at, results=tuple(results), problems=tuple(problems),
        rows=rows, groups=groups,
        models=_model_rows(results, vendors), comparison=comparison, counts=counts,
        sources=tuple(sources), ops=_vendor_ops(groups, vendors),
        skip_debt=tuple(skip_debt(v, [r for r in results if r.cell.vendor == v], today)
                        for v in vendors))


def channel_order(cells: Sequence[CellRef]) -> dict[str, tuple[str, int]]:
    """A sort key per cell id: a channel's cell (nightly) right after the newest release cell
    of the same coordinates, so the two sit side by side; any other cell by its id."""
    def coordinates(cell: CellRef) -> tuple[str, str, str, str | None]:
        return (cell.vendor, cell.os, cell.python, cell.toolkit_version)

    newest: dict[tuple[str, str, str, str | None], CellRef] = {}
    for cell in cells:
        key = coordinates(cell)
        if cell.channel is None and (key not in newest or _release(cell) > _release(newest[key])):
            newest[key] = cell
    order = {}
    for cell in cells:
        sibling = newest.get(coordinates(cell)) if cell.channel is not None else None
        order[cell.id] = (sibling.id, 1) if sibling is not None else (cell.id, 0)
    return order


def _release(cell: CellRef) -> Version:
    try:
        return Version(cell.torch)
    except ValueError:  # InvalidVersion, or more digits than int() reads
        return Version("0")


def _vendor_ops(groups: Sequence[CellGroup], vendors: Sequence[str]) -> tuple[OpsSummary, ...]:
    """Per vendor, over the worst copy of each cell (copies from several hosts count once)."""
    found = (ops_summary(v, [g.worst_copy for g in groups if g.vendor == v]) for v in vendors)
    return tuple(summary for summary in found if summary is not None)


# -- reading ----------------------------------------------------------------------------------

def _files(folder: Path) -> tuple[str, ...]:
    return tuple(n for n in CELL_FILES if (folder / n).is_file())


# A judge of a result file beyond its content (its signature): why it is refused, or ''.
Accept = Callable[[Path], str]


def load_folder(folder: Path, accept: Accept | None = None) -> tuple[list[Loaded], list[str]]:
    """A results folder (``<cell-id>/result.json`` inside), or one cell's own folder (an
    artifact uploaded per cell holds result.json at its top); ``accept`` may refuse a result
    (a problem naming its file)."""
    if (folder / RESULT_FILE).is_file():
        try:
            found = [(folder, load(folder / RESULT_FILE))]
        except ResultFormatError as exc:
            return [], [f"{folder / RESULT_FILE}: {exc}"]
        problems: list[str] = []
    else:
        found, problems = load_found(folder)
    if accept is not None:
        refused = {p: why for p, _ in found if (why := accept(p / RESULT_FILE))}
        problems += [f"{p / RESULT_FILE}: {why}" for p, why in refused.items()]
        found = [(p, r) for p, r in found if p not in refused]
    return [Loaded(result=r, folder=str(p), files=_files(p)) for p, r in found], problems


def collect(results_dir: Path, previous_dir: Path | None = None,
            accept: Accept | None = None) -> Report:
    """Load the results (and, with ``previous_dir``, compare with an earlier run's)."""
    loaded, problems = load_folder(results_dir, accept)
    comparison = None
    if previous_dir is not None:
        previous, old_problems = load_previous(previous_dir)
        comparison = compare(previous, [c.result for c in loaded],
                             previous_name=str(previous_dir), current_name=str(results_dir),
                             problems=old_problems)
    return build_from(loaded, problems, comparison=comparison)


def collect_merged(folders: Sequence[Path], accept: Accept | None = None) -> Report:
    """One report from several results folders (runners' or hosts' artifacts side by side)."""
    loaded: list[Loaded] = []
    problems: list[str] = []
    for folder in folders:
        found, bad = load_folder(folder, accept)
        loaded += found
        problems += [p for p in bad if p not in problems]  # a folder passed twice warns once
    unique = {f.resolve(): str(f) for f in reversed(folders)}  # the first spelling wins
    return build_from(loaded, problems, sources=list(unique.values())[::-1])
