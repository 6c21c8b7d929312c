"""The report as data, built from typed results; the writers (JSON, Markdown, HTML) only lay
it out. Nothing here reads or writes a file except :func:`collect`, which loads the results.

The data (:class:`Report`) holds three views of the same results: the models × vendors table
of the out-of-tree accelerator RFC, the cells × layers table per vendor, and each vendor's skip
debt; plus, with ``--compare``, what changed since a previous run (:mod:`oota.report.compare`).
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oota.report.compare import Comparison, compare, known_models, load_previous, model_of
from oota.results.assemble import now
from oota.results.model import (
    Host,
    Image,
    JSONObject,
    Package,
    Result,
    SkipRule,
    Stage,
    TorchInfo,
)
from oota.results.store import RESULT_FILE, load_all
from oota.vocab import LAYERS, worst

# The report's columns: the build stage, then the suite's layers (oota.vocab.LAYERS).
COLUMNS = ("build", *LAYERS)
SYMBOL = {"passed": "✓", "failed": "✗", "error": "✗", "interrupted": "stopped",
          "skipped": "skip", "unsupported-here": "n/a here", "": "–"}
WORD = {"passed": "passed", "failed": "failed", "error": "error", "interrupted": "interrupted",
        "skipped": "skipped", "unsupported-here": "n/a here", "": "not run"}
CELL_FILES = (RESULT_FILE, "junit.xml", "build.log", "verify.log")
EXPIRY_WINDOW_DAYS = 30


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
class Report:
    generated_at: str
    results: tuple[Result, ...]
    problems: tuple[str, ...]
    rows: tuple[CellRow, ...] = ()
    models: tuple[ModelRow, ...] = ()
    skip_debt: tuple[SkipDebt, ...] = ()
    comparison: Comparison | None = None
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def vendors(self) -> list[str]:
        return list(dict.fromkeys(r.cell.vendor for r in self.results))

    def vendor_rows(self, vendor: str) -> list[CellRow]:
        return [r for r in self.rows if r.vendor == vendor]

    def counts_text(self) -> str:
        """'1 failed, 3 passed' (or 'none')."""
        return ", ".join(f"{n} {WORD.get(s, s)}" for s, n in sorted(self.counts.items())) \
            or "none"


# -- building the data ------------------------------------------------------------------------

def _mark(items: Sequence[tuple[str, str]]) -> Mark:
    """One mark for several (status, message): the worst status, the messages that explain it."""
    status = worst(s for s, _ in items)
    if status == "passed":
        return Mark(status=status)
    reasons = sorted({m.strip() for s, m in items if s == status and m and m.strip()})
    return Mark(status=status, reason="; ".join(reasons))


def layer_mark(result: Result, layer: str) -> Mark:
    if layer == "build":
        stage = result.stages.get("build")
        return _mark([(stage.status, stage.message)]) if stage else Mark()
    return _mark([(t.status, t.message) for t in result.tests if t.layer == layer])


def _vendor_mark(per_cell: dict[str, Mark]) -> Mark:
    """Several cells of one vendor in one column: the worst, and which cell said what."""
    if len(set(per_cell.values())) == 1:  # every cell says the same
        return next(iter(per_cell.values()))
    status = worst(m.status for m in per_cell.values())
    agreeing = sum(m.status == status for m in per_cell.values())
    lines = [f"{cell}: {WORD[m.status]}" + (f" ({m.reason})" if m.reason else "")
             for cell, m in per_cell.items() if m.status != "passed"]
    note = f"{agreeing}/{len(per_cell)} cells" if agreeing < len(per_cell) else ""
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


def _cell_row(result: Result, files: tuple[str, ...], known: list[str]) -> CellRow:
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
        started_at=result.started_at, finished_at=result.finished_at)


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


def build_report(results: Sequence[Result], problems: Sequence[str], *,
                 generated_at: str | None = None,
                 files: Mapping[str, tuple[str, ...]] | None = None,
                 comparison: Comparison | None = None) -> Report:
    """The report as data from typed results; no file is read or written."""
    ordered = sorted(results, key=lambda r: (r.cell.vendor, r.cell.id))
    generated_at = generated_at or now()
    today = _date(generated_at) or dt.date.today()
    vendors = list(dict.fromkeys(r.cell.vendor for r in ordered))
    known = known_models(ordered)
    counts: dict[str, int] = {}
    for result in ordered:
        counts[result.status] = counts.get(result.status, 0) + 1
    return Report(
        generated_at=generated_at, results=tuple(ordered), problems=tuple(problems),
        rows=tuple(_cell_row(r, (files or {}).get(r.cell.id, ()), known) for r in ordered),
        models=_model_rows(ordered, vendors), comparison=comparison, counts=counts,
        skip_debt=tuple(skip_debt(v, [r for r in ordered if r.cell.vendor == v], today)
                        for v in vendors))


def collect(results_dir: Path, previous_dir: Path | None = None) -> Report:
    """Load the results (and, with ``previous_dir``, compare with an earlier run's)."""
    results, problems = load_all(results_dir)
    files = {r.cell.id: tuple(n for n in CELL_FILES if (results_dir / r.cell.id / n).is_file())
             for r in results}
    comparison = None
    if previous_dir is not None:
        previous, old_problems = load_previous(previous_dir)
        comparison = compare(previous, results, previous_name=str(previous_dir),
                             current_name=str(results_dir), problems=old_problems)
    return build_report(results, problems, files=files, comparison=comparison)
