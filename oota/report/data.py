"""The report as data, built from typed results; the writers (JSON, Markdown, HTML) only lay
it out. Nothing here reads or writes a file except :func:`collect` and :func:`collect_merged`,
which load the results.

The data (:class:`Report`) holds three views of the same results: the models × vendors table
of the out-of-tree accelerator RFC, the cells × layers table per vendor (its rows:
:mod:`oota.report.rows`), and each vendor's skip debt (:mod:`oota.report.skips`); plus, with
``--compare``, what changed since a previous run (:mod:`oota.report.compare`).

A report merged from several results folders (``--merge``: runners' artifacts side by side)
may hold the same cell more than once, made on different hosts. Every copy is kept
(:class:`CellGroup`): the matrix shows the worst of them and whether they agree, never one
copy overwriting another. A copy is known by its origin (:class:`Origin`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from oota.report.compare import Comparison, compare, known_models, load_previous, model_of
from oota.report.coverage import CoverageTable, coverage_table
from oota.report.databases import LayerSummary, vendor_summaries
from oota.report.gonogo import CandidateRow, candidate_rows
from oota.report.parity import ParityTable
from oota.report.rows import (
    AUTOGRAD_LAYER,
    CELL_FILES,
    COLUMNS,
    OPS_LAYER,
    OPS_REASONS_SHOWN,
    WORD,
    CellGroup,
    CellRow,
    Loaded,
    Mark,
    ModelRow,
    OpsSummary,
    Origin,
    TestRow,
    ops_summary,
)
from oota.report.skips import SkipDebt, date_of, skip_debt
from oota.report.smokeenv import SMOKE_LAYER, with_environments
from oota.results.assemble import now
from oota.results.jsonfields import ResultFormatError
from oota.results.model import CellRef, Image, Result, host_key
from oota.results.software import TorchInfo
from oota.results.store import RESULT_FILE, load, load_found
from oota.vocab import DATABASE_UNITS, MaybeStatus, worst


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
    autograd: tuple[OpsSummary, ...] = ()  # per vendor that ran the autograd layer
    # the modules and optimizers layers, per layer and vendor that ran it (report.databases)
    databases: tuple[LayerSummary, ...] = ()
    coverage: CoverageTable | None = None  # operators × vendors: where each pair computed
    parity: ParityTable | None = None  # operator × dtype beside a reference device (--parity)
    # Per cell of today's matrix, the vendor facts it rests on that no source confirms
    # (oota.plan.Cell.unverified_facts), as sentences; the report and get-started pages mark
    # those cells.
    unverified: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def candidates(self) -> tuple[CandidateRow, ...]:
        """Each release candidate's cell beside its release's: the go/no-go table."""
        return candidate_rows(self.groups)

    def unverified_cells(self) -> list[tuple[str, tuple[str, ...]]]:
        """(cell id, facts) of this report's cells that rest on an unverified fact."""
        return [(g.id, self.unverified[g.id]) for g in self.groups if self.unverified.get(g.id)]

    @property
    def vendors(self) -> list[str]:
        return list(dict.fromkeys(r.cell.vendor for r in self.results))

    @property
    def merged(self) -> bool:
        return bool(self.sources)

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

def _mark(items: Sequence[tuple[MaybeStatus, str]], most: int | None = None) -> Mark:
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
    # The layers with a test per operator, module or optimizer × dtype (those that walk a
    # PyTorch test database): their failures are listed on their own.
    return _mark([(t.status, t.message) for t in result.tests if t.layer == layer],
                 OPS_REASONS_SHOWN if layer in DATABASE_UNITS else None)


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
    per: dict[str, dict[str, dict[str, list[tuple[MaybeStatus, str]]]]] = {}
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
                     "fingerprint": cell.fingerprint,
                     **({"channel": cell.channel} if cell.channel else {}),
                     **({"platform": cell.platform} if cell.platform else {})},
        layers=_with_smoke({layer: layer_mark(result, layer) for layer in COLUMNS}, tests),
        stages=result.stages, tests=tests,
        torch=installed.torch if installed else TorchInfo(),
        packages=installed.packages if installed else {},
        image=result.image or Image(tag=""), host=result.host,
        skips=result.skips.entries if result.skips else (), files=files,
        started_at=result.started_at, finished_at=result.finished_at, origin=origin,
        folder=folder)


def _with_smoke(layers: dict[str, Mark], tests: Sequence[TestRow]) -> dict[str, Mark]:
    """The layers' marks, the smoke layer's noting which of PyTorch's three smoke-test
    environments the tests cover (oota.report.smokeenv)."""
    if SMOKE_LAYER not in layers:
        return layers
    return {**layers, SMOKE_LAYER: with_environments(layers[SMOKE_LAYER], tests)}


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
    # Copies made on several hosts may cover several smoke environments between them.
    layers = first.layers if len(rows) == 1 else _with_smoke({
        column: _vendor_mark({r.origin: r.layers[column] for r in rows}, "copies")
        for column in COLUMNS}, [t for r in rows for t in r.tests])
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
    today = date_of(generated_at) or dt.date.today()
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
        autograd=_vendor_ops(groups, vendors, AUTOGRAD_LAYER),
        databases=vendor_summaries([(v, [g.worst_copy for g in groups if g.vendor == v])
                                    for v in vendors]),
        coverage=coverage_table(groups, vendors),
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


def _vendor_ops(groups: Sequence[CellGroup], vendors: Sequence[str],
                layer: str = OPS_LAYER) -> tuple[OpsSummary, ...]:
    """Per vendor, over the worst copy of each cell (copies from several hosts count once)."""
    found = (ops_summary(v, [g.worst_copy for g in groups if g.vendor == v], layer)
             for v in vendors)
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


def collect_run(results_dir: Path, results: Sequence[Result]) -> Report:
    """The report after a run: its ``results`` as they are in memory (each in its cell's
    folder of ``results_dir``), beside the results of the folder's other cells, which earlier
    runs wrote (those are read; the run's own are not read back)."""
    mine = {r.cell.id for r in results}
    others, problems = load_found(results_dir, skip=frozenset(mine))
    loaded = [Loaded(result=r, folder=str(results_dir / r.cell.id),
                     files=_files(results_dir / r.cell.id)) for r in results]
    loaded += [Loaded(result=r, folder=str(p), files=_files(p)) for p, r in others]
    return build_from(loaded, problems)


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
