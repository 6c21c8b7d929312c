"""Report: the compatibility matrix, built as data from result files, then written by separate
writers (JSON, Markdown, static HTML). Reads nothing but ``results/*/result.json``.

The data (:class:`Report`) holds three views of the same results: the models × vendors table
of the out-of-tree accelerator RFC, the cells × layers table per vendor, and each vendor's skip
debt; plus, with ``--compare``, what changed since a previous run (:mod:`oota.compare`).

Writers produce ``reports/results.json`` (the data), ``reports/matrix.md`` (for a README or a
PR comment, capped at 1 MiB), ``reports/index.html`` and ``reports/cells/<cell-id>.html``:
static pages with no external asset and no script, linked relatively so they work from
``file://`` and from any static host. Everything taken from a result file is escaped.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from oota import __version__
from oota.report.compare import (
    Comparison,
    compare,
    known_models,
    load_previous,
    model_of,
)
from oota.results.store import load_all, now, write_atomic, write_json

REPORT_SCHEMA = "oota.report/v2"
LAYERS = ("build", "install", "compat", "device", "models", "vendor")
SYMBOL = {"passed": "✓", "failed": "✗", "error": "✗", "skipped": "skip",
          "unsupported-here": "n/a here", "": "–"}
WORD = {"passed": "passed", "failed": "failed", "error": "error", "skipped": "skipped",
        "unsupported-here": "n/a here", "": "not run"}
# Worst first. As in results.overall_status, what this host could not run (no hardware) is never
# shown as a pass; a deliberate skip (listed with its reason) does not hide the passes beside it.
PRECEDENCE = ("error", "failed", "unsupported-here", "passed", "skipped")
CELL_FILES = ("result.json", "junit.xml", "build.log", "verify.log")
MARKDOWN_LIMIT = 1024 * 1024
EXPIRY_WINDOW_DAYS = 30
REASON_CHARS = 400


# -- the data ---------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class Mark:
    """One table entry: a status and why (skip reason, failure message, which cells)."""

    status: str = ""  # "" when nothing was tested
    reason: str = ""
    note: str = ""  # "1/2 cells" when a vendor's cells disagree

    @property
    def symbol(self) -> str:
        return SYMBOL.get(self.status, self.status)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status or None, "reason": self.reason, "note": self.note}


@dataclass(frozen=True, kw_only=True, slots=True)
class TestRow:
    id: str
    layer: str
    status: str
    duration_s: float
    message: str
    model: str | None
    data: dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class CellRow:
    id: str
    vendor: str
    status: str
    message: str
    coordinates: dict[str, str | None]
    layers: dict[str, Mark]
    stages: dict[str, dict[str, Any]]
    tests: tuple[TestRow, ...]
    torch: dict[str, Any]
    packages: dict[str, Any]
    image: dict[str, Any]
    host: dict[str, Any]
    skips: tuple[dict[str, Any], ...]
    files: tuple[str, ...]  # which of CELL_FILES lie beside result.json
    started_at: str
    finished_at: str

    @property
    def coords_text(self) -> str:
        c = self.coordinates
        toolkit = f" {c['toolkit']} {c['toolkit_version']}" if c.get("toolkit") else ""
        return f"torch {c['torch']}{toolkit}, py{c['python']}, {c['os']}"


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

    def to_json(self) -> dict[str, Any]:
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
    results: list[dict[str, Any]]
    problems: list[str]
    rows: tuple[CellRow, ...] = ()
    models: tuple[ModelRow, ...] = ()
    skip_debt: tuple[SkipDebt, ...] = ()
    comparison: Comparison | None = None
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def vendors(self) -> list[str]:
        return list(dict.fromkeys(r["cell"]["vendor"] for r in self.results))

    def cells(self, vendor: str) -> list[dict[str, Any]]:
        return [r for r in self.results if r["cell"]["vendor"] == vendor]

    def vendor_rows(self, vendor: str) -> list[CellRow]:
        return [r for r in self.rows if r.vendor == vendor]


# -- building the data ------------------------------------------------------------------------

def worst(statuses: Iterable[str]) -> str:
    present = set(statuses)
    return next((s for s in PRECEDENCE if s in present), "")


def _mark(items: list[tuple[str, str]]) -> Mark:
    """One mark for several (status, message): the worst status, the messages that explain it."""
    status = worst(s for s, _ in items)
    if status == "passed":
        return Mark(status=status)
    reasons = sorted({m.strip() for s, m in items if s == status and m and m.strip()})
    return Mark(status=status, reason="; ".join(reasons))


def layer_mark(result: dict[str, Any], layer: str) -> Mark:
    if layer == "build":
        stage = result["stages"].get("build")
        return _mark([(stage["status"], stage.get("message", ""))]) if stage else Mark()
    return _mark([(t["status"], t.get("message", "")) for t in result["tests"]
                  if t["layer"] == layer])


def layer_status(result: dict[str, Any], layer: str) -> tuple[str, str]:
    """(status, reason) of one layer of a cell: worst test status, reasons of skips."""
    mark = layer_mark(result, layer)
    return mark.status, mark.reason


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


def _model_rows(results: list[dict[str, Any]], vendors: list[str]) -> tuple[ModelRow, ...]:
    known = known_models(results)
    per: dict[str, dict[str, dict[str, list[tuple[str, str]]]]] = {}
    for result in results:
        for test in result["tests"]:
            model = model_of(test, known)
            if model is not None:
                cells = per.setdefault(model, {}).setdefault(result["cell"]["vendor"], {})
                cells.setdefault(result["cell"]["id"], []).append(
                    (test["status"], test.get("message", "")))
    return tuple(ModelRow(model=model, marks={
        vendor: _vendor_mark({cell: _mark(items) for cell, items in by_cell[vendor].items()})
        for vendor in vendors if vendor in by_cell}) for model, by_cell in sorted(per.items()))


def _cell_row(result: dict[str, Any], files: tuple[str, ...], known: list[str]) -> CellRow:
    cell, installed = result["cell"], result.get("installed") or {}
    tests = tuple(TestRow(id=t["id"], layer=t["layer"], status=t["status"],
                          duration_s=float(t["duration_s"]), message=t.get("message", ""),
                          model=model_of(t, known), data=t.get("data") or {})
                  for t in result["tests"])
    return CellRow(
        id=cell["id"], vendor=cell["vendor"], status=result["status"],
        message=result.get("message", ""),
        coordinates={k: cell.get(k) for k in ("os", "python", "torch", "toolkit",
                                              "toolkit_version", "fingerprint")},
        layers={layer: layer_mark(result, layer) for layer in LAYERS},
        stages=result["stages"], tests=tests, torch=installed.get("torch") or {},
        packages=installed.get("packages") or {}, image=result.get("image") or {},
        host=result["host"], skips=tuple((result.get("skips") or {}).get("entries", [])),
        files=files, started_at=result["started_at"], finished_at=result["finished_at"])


def _date(text: Any) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(text)[:10])
    except ValueError:
        return None


def _skip_entry(entry: dict[str, Any], matched: int, flagged: bool, today: dt.date
                ) -> SkipEntry:
    added, expires = _date(entry.get("added")), _date(entry["expires"])
    days_left = (expires - today).days if expires else None
    return SkipEntry(id=entry["id"], reason=entry["reason"], owner=entry["owner"],
                     added=entry.get("added"), expires=entry["expires"],
                     age_days=(today - added).days if added else None, days_left=days_left,
                     matched=matched,
                     expired=flagged or (days_left is not None and days_left < 0))


def skip_debt(vendor: str, results: list[dict[str, Any]], today: dt.date) -> SkipDebt:
    """A vendor's skip list across its cells (each cell carries the vendor's list)."""
    entries: dict[str, dict[str, Any]] = {}
    matched: dict[str, int] = {}
    expired: set[str] = set()
    unmatched: list[set[str]] = []
    for result in results:
        skips = result.get("skips") or {}
        for entry in skips.get("entries", []):
            entries[entry["id"]] = entry
            matched[entry["id"]] = matched.get(entry["id"], 0) + int(entry.get("matched", 0))
        expired |= set(skips.get("expired", []))
        if skips:
            unmatched.append(set(skips.get("unmatched", [])))
    never = set.intersection(*unmatched) if unmatched else set()
    return SkipDebt(vendor=vendor, unmatched=tuple(sorted(never)), entries=tuple(
        _skip_entry(e, matched[i], i in expired, today) for i, e in sorted(entries.items())))


def build_report(results: list[dict[str, Any]], problems: list[str], *,
                 generated_at: str | None = None,
                 files: dict[str, tuple[str, ...]] | None = None,
                 comparison: Comparison | None = None) -> Report:
    """The report as data from validated result dicts; no file is read or written."""
    results = sorted(results, key=lambda r: (r["cell"]["vendor"], r["cell"]["id"]))
    generated_at = generated_at or now()
    today = _date(generated_at) or dt.date.today()
    vendors = list(dict.fromkeys(r["cell"]["vendor"] for r in results))
    known = known_models(results)
    counts: dict[str, int] = {}
    for result in results:
        counts[result["status"]] = counts.get(result["status"], 0) + 1
    return Report(
        generated_at=generated_at, results=results, problems=list(problems),
        rows=tuple(_cell_row(r, (files or {}).get(r["cell"]["id"], ()), known) for r in results),
        models=_model_rows(results, vendors), comparison=comparison, counts=counts,
        skip_debt=tuple(skip_debt(v, [r for r in results if r["cell"]["vendor"] == v], today)
                        for v in vendors))


def collect(results_dir: Path, previous_dir: Path | None = None) -> Report:
    results, problems = load_all(results_dir)
    files = {r["cell"]["id"]: tuple(n for n in CELL_FILES
                                    if (results_dir / r["cell"]["id"] / n).is_file())
             for r in results}
    comparison = None
    if previous_dir is not None:
        previous, old_problems = load_previous(previous_dir)
        comparison = compare(previous, results, previous_name=str(previous_dir),
                             current_name=str(results_dir), problems=old_problems)
    return build_report(results, problems, files=files, comparison=comparison)


# -- JSON -------------------------------------------------------------------------------------

def to_json(report: Report, results_href: str = "../results") -> dict[str, Any]:
    return {
        "schema": REPORT_SCHEMA, "generated_at": report.generated_at,
        "toolkit": {"name": "oota", "version": __version__}, "problems": report.problems,
        "vendors": report.vendors, "counts": report.counts, "layers": list(LAYERS),
        "models": [{"model": m.model, "vendors": {v: k.to_json() for v, k in m.marks.items()}}
                   for m in report.models],
        "cells": [{"id": r.id, "vendor": r.vendor, "status": r.status, "message": r.message,
                   "cell": report.results[i]["cell"], "summary": report.results[i]["summary"],
                   "layers": {k: v.to_json() for k, v in r.layers.items() if v.status},
                   "torch_installed": r.torch, "image": r.image,
                   "page": f"cells/{r.id}.html",
                   "result": f"{results_href}/{r.id}/result.json"}
                  for i, r in enumerate(report.rows)],
        "skip_debt": [d.to_json() for d in report.skip_debt],
        "comparison": report.comparison.to_json() if report.comparison else None}


# -- Markdown ---------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~!])")


def md_text(text: Any, limit: int = REASON_CHARS) -> str:
    """Result text made inert in a Markdown table: one line, no HTML, no link or emphasis."""
    flat = " ".join(str(text).split())
    if len(flat) > limit:
        flat = flat[:limit - 1] + "…"
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", flat)


def md_code(text: Any) -> str:
    flat = " ".join(str(text).split()).replace("`", "'")
    return f"`{flat}`" if flat else ""


class _Notes:
    """Numbered footnotes shared by the whole document; each block lists the ones it added."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.pending: list[str] = []

    def ref(self, text: str) -> str:
        if not text:
            return ""
        if text not in self.numbers:
            self.numbers[text] = len(self.numbers) + 1
            self.pending.append(text)
        return f" [{self.numbers[text]}]"

    def flush(self) -> list[str]:
        lines = [f"{self.numbers[t]}. {md_text(t)}" for t in self.pending]
        self.pending = []
        return ["", *lines] if lines else []


def _md_mark(mark: Mark, notes: _Notes) -> str:
    note = f" {mark.note}" if mark.note else ""
    ref = notes.ref(mark.reason)
    return f"{mark.symbol}{note}{ref}"


def _md_header(report: Report) -> list[str]:
    counts = ", ".join(f"{n} {WORD[s]}" for s, n in sorted(report.counts.items()))
    return ["# oota compatibility matrix", "",
            f"Generated {report.generated_at} by oota {__version__} from {len(report.results)} "
            f"result files ({counts or 'none'}). ✓ passed, ✗ failed, skip: skipped (reason in "
            "the numbered notes), n/a here: the host lacks the hardware, –: not tested.", ""]


def _md_models(report: Report, notes: _Notes) -> list[str]:
    if not report.models:
        return ["## Models × vendors", "", "No model tests in these results.", ""]
    lines = ["## Models × vendors", "", "| model | " + " | ".join(map(md_text, report.vendors))
             + " |", "|---|" + "---|" * len(report.vendors)]
    for row in report.models:
        marks = [_md_mark(row.marks.get(v, Mark()), notes)
                 for v in report.vendors]
        lines.append(f"| {md_text(row.model)} | " + " | ".join(marks) + " |")
    return lines + notes.flush() + [""]


def _md_layers(report: Report, vendor: str, notes: _Notes) -> list[str]:
    lines = [f"## {md_text(vendor)}: cells × layers", "",
             "| cell | " + " | ".join(LAYERS) + " | overall | torch installed |",
             "|---|" + "---|" * (len(LAYERS) + 2)]
    for row in report.vendor_rows(vendor):
        marks = [_md_mark(row.layers[layer], notes) for layer in LAYERS]
        lines.append(f"| {md_code(row.id)} | " + " | ".join(marks)
                     + f" | **{SYMBOL.get(row.status, row.status)}** | "
                     + (md_code(row.torch.get("version", "?")) if row.torch else "–") + " |")
    return lines + notes.flush() + [""]


def _md_skip_debt(report: Report) -> list[str]:
    lines = ["## Skip debt", "", "| vendor | entries | oldest (days) | median age (days) | "
             f"expire within {EXPIRY_WINDOW_DAYS} days | expired | matched nothing |",
             "|---|---|---|---|---|---|---|"]
    for debt in report.skip_debt:
        lines.append(f"| {md_text(debt.vendor)} | {len(debt.entries)} | "
                     f"{_days(debt.oldest_days)} | {_days(debt.median_days)} | "
                     f"{debt.expiring_soon} | {debt.expired} | {len(debt.unmatched)} |")
    return lines + [""]


def _days(value: float | None) -> str:
    return "–" if value is None else f"{value:g}"


def _md_changes(comparison: Comparison) -> list[str]:
    lines = [f"## Changes since {md_code(comparison.previous)}", "",
             md_text(comparison.headline()) + ".", ""]
    for cell in comparison.cells:
        was = f" (was {md_code(cell.previous_id)})" if cell.previous_id != cell.id else ""
        lines.append(f"- {md_code(cell.id)}{was}: {WORD[cell.status_before]} → "
                     f"**{WORD[cell.status_after]}**")
        lines += [f"  - {md_text(s)}" for s in cell.sentences()]
        lines += [f"  - changed: {md_text(a.phrase())}" for a in cell.axes]
        lines += [f"  - test added: {md_code(t.id)} ({WORD[t.after or '']})"
                  for t in cell.added_tests]
        lines += [f"  - test removed: {md_code(t.id)}" for t in cell.removed_tests]
    lines += [f"- cell added: {md_code(c)}" for c in comparison.added_cells]
    lines += [f"- cell removed: {md_code(c)}" for c in comparison.removed_cells]
    lines += [f"- warning: {md_text(p)}" for p in comparison.problems]
    return lines + [""]


def _fit(blocks: list[list[str]], limit: int) -> str:
    """Join blocks, cutting at a line boundary with a note when the text would exceed limit."""
    total = sum(len(b) for b in blocks)
    out: list[str] = []
    size = 0
    for line in (line for block in blocks for line in block):
        cost = len(line.encode()) + 1
        if size + cost > limit - 400:
            out += ["", f"**Truncated:** {len(out)} of {total} lines shown to keep this file "
                        f"under {limit} bytes; the whole report is in results.json and "
                        "index.html beside it."]
            break
        out.append(line)
        size += cost
    return "\n".join(out) + "\n"


def to_markdown(report: Report, *, limit: int = MARKDOWN_LIMIT) -> str:
    notes = _Notes()
    blocks = [_md_header(report)]
    if report.comparison is not None:
        blocks.append(_md_changes(report.comparison))
    blocks.append(_md_models(report, notes))
    blocks += [_md_layers(report, v, notes) for v in report.vendors]
    blocks.append(_md_skip_debt(report))
    if report.problems:
        blocks.append(["## Result files that could not be read", "",
                       *[f"- {md_text(p)}" for p in report.problems], ""])
    return _fit(blocks, limit)


# -- HTML -------------------------------------------------------------------------------------

def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def href(path: str) -> str:
    return esc(quote(path, safe="/._-~"))


_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;
background:#fff}main{max-width:1200px;margin:0 auto;padding:1.5rem 2rem 3rem}
h1{font-size:1.6rem;margin:.2rem 0}h2{font-size:1.25rem;margin:2rem 0 .6rem;
border-bottom:1px solid #d0d7de;padding-bottom:.3rem}h3{font-size:1.05rem;margin:1.2rem 0 .4rem}
.meta{color:#57606a;margin:.3rem 0}nav a{margin-right:1rem}a{color:#0969da}
table{border-collapse:collapse;margin:.4rem 0 1rem;font-size:14px}
td,th{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}td.s{text-align:center;white-space:nowrap;min-width:4.5rem}
.passed{background:#dafbe1;color:#116329}.failed,.error{background:#ffebe9;color:#a40e26}
.skipped{background:#fff8c5;color:#7d4e00}.unsupported-here{background:#eaeef2;color:#57606a}
.none{color:#8c959f}[title]:not([title=""]){cursor:help}
td.s[title]:not([title=""]) .sym{text-decoration:underline dotted}
.legend span{display:inline-block;padding:.1rem .5rem;margin-right:.4rem;border-radius:4px}
code{font:13px ui-monospace,SFMono-Regular,Menlo,monospace}small{color:#57606a}
pre{white-space:pre-wrap;margin:0;font:12px ui-monospace,monospace;max-width:60rem}
.note{color:#57606a;font-size:.85em}ul.changes li{margin:.2rem 0}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dl.kv dt{color:#57606a}
dl.kv dd{margin:0;overflow-wrap:anywhere}.badge{padding:.1rem .5rem;border-radius:4px}
h1 code{font-size:inherit}
"""


def _page(title: str, body: list[str]) -> str:
    return "\n".join(["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
                      '<meta name="viewport" content="width=device-width,initial-scale=1">',
                      f"<title>{esc(title)}</title><style>{_CSS}</style></head>",
                      "<body><main>", *body, "</main></body></html>", ""])


def _td(mark: Mark) -> str:
    cls = mark.status or "none"
    note = f" <small>{esc(mark.note)}</small>" if mark.note else ""
    return (f'<td class="s {esc(cls)}" title="{esc(mark.reason)}">'
            f'<span class="sym">{esc(mark.symbol)}</span>{note}</td>')


def _legend() -> str:
    items = [("passed", "✓ passed"), ("failed", "✗ failed"), ("skipped", "skip: skipped"),
             ("unsupported-here", "n/a here: no such hardware on the host"),
             ("none", "–: not tested")]
    return ('<p class="legend">' + "".join(f'<span class="{c}">{esc(t)}</span>' for c, t in items)
            + " <small>Hover a mark for the reason.</small></p>")


def _html_models(report: Report) -> list[str]:
    parts = ['<section id="models"><h2>Models × vendors</h2>']
    if not report.models:
        return parts + ["<p>No model tests in these results.</p></section>"]
    parts.append('<table class="matrix"><thead><tr><th>model</th>'
                 + "".join(f"<th>{esc(v)}</th>" for v in report.vendors) + "</tr></thead><tbody>")
    for row in report.models:
        parts.append(f"<tr><th>{esc(row.model)}</th>"
                     + "".join(_td(row.marks.get(v, Mark())) for v in report.vendors) + "</tr>")
    return parts + ["</tbody></table></section>"]


def _file_links(row: CellRow, results_rel: str) -> str:
    return " ".join(f'<a href="{href(f"{results_rel}/{row.id}/{name}")}">{esc(name)}</a>'
                    for name in row.files)


def _html_layers(report: Report, results_rel: str) -> list[str]:
    parts = ['<section id="cells"><h2>Cells × layers</h2>']
    for vendor in report.vendors:
        parts.append(f'<h3 id="vendor-{esc(vendor)}">{esc(vendor)}</h3><table class="layers">'
                     "<thead><tr><th>cell</th>" + "".join(f"<th>{esc(x)}</th>" for x in LAYERS)
                     + "<th>overall</th><th>torch installed</th><th>files</th></tr></thead><tbody>")
        for row in report.vendor_rows(vendor):
            parts.append(f'<tr><td><a class="cell" href="{href(f"cells/{row.id}.html")}">'
                         f"<code>{esc(row.id)}</code></a><br><small>{esc(row.coords_text)}"
                         "</small></td>" + "".join(_td(row.layers[x]) for x in LAYERS)
                         + _td(Mark(status=row.status, reason=row.message))
                         + f"<td><code>{esc(row.torch.get('version', '–'))}</code></td>"
                         f"<td>{_file_links(row, results_rel)}</td></tr>")
        parts.append("</tbody></table>")
    return parts + ["</section>"]


def _html_skip_debt(report: Report) -> list[str]:
    parts = ['<section id="skip-debt"><h2>Skip debt</h2><table><thead><tr><th>vendor</th>'
             "<th>entries</th><th>oldest (days)</th><th>median age (days)</th>"
             f"<th>expire within {EXPIRY_WINDOW_DAYS} days</th><th>expired</th>"
             "<th>matched nothing</th></tr></thead><tbody>"]
    for debt in report.skip_debt:
        undated = f" <small>({debt.undated} undated)</small>" if debt.undated else ""
        parts.append(f"<tr><td>{esc(debt.vendor)}</td><td>{len(debt.entries)}</td>"
                     f"<td>{_days(debt.oldest_days)}{undated}</td>"
                     f"<td>{_days(debt.median_days)}</td><td>{debt.expiring_soon}</td>"
                     f'<td class="{"failed" if debt.expired else ""}">{debt.expired}</td>'
                     f'<td title="{esc(", ".join(debt.unmatched))}">{len(debt.unmatched)}</td>'
                     "</tr>")
    parts.append("</tbody></table>")
    entries = [(d.vendor, e) for d in report.skip_debt for e in d.entries]
    if entries:
        parts.append("<details><summary>Every skip entry</summary><table><thead><tr>"
                     "<th>vendor</th><th>id</th><th>reason</th><th>owner</th><th>added</th>"
                     "<th>expires</th><th>matched</th></tr></thead><tbody>")
        parts += [f"<tr><td>{esc(v)}</td><td><code>{esc(e.id)}</code></td>"
                  f"<td>{esc(e.reason)}</td><td>{esc(e.owner)}</td><td>{esc(e.added or '–')}"
                  f'</td><td class="{"failed" if e.expired else ""}">{esc(e.expires)}</td>'
                  f"<td>{e.matched}</td></tr>" for v, e in entries]
        parts.append("</tbody></table></details>")
    return parts + ["</section>"]


def _html_changes(comparison: Comparison) -> list[str]:
    parts = ['<section id="changes"><h2>Changes since <code>'
             f"{esc(comparison.previous)}</code></h2><p>{esc(comparison.headline())}.</p>"
             '<ul class="changes">']
    for cell in comparison.cells:
        was = f" <small>(was <code>{esc(cell.previous_id)}</code>)</small>" \
            if cell.previous_id != cell.id else ""
        items = [f"<li>{esc(s)}</li>" for s in cell.sentences()]
        items += [f'<li class="note">changed: {esc(a.phrase())}</li>' for a in cell.axes]
        items += [f"<li>test added: <code>{esc(t.id)}</code> ({esc(WORD[t.after or ''])})</li>"
                  for t in cell.added_tests]
        items += [f"<li>test removed: <code>{esc(t.id)}</code></li>" for t in cell.removed_tests]
        parts.append(f'<li><a href="{href(f"cells/{cell.id}.html")}"><code>{esc(cell.id)}'
                     f"</code></a>{was}: {esc(WORD[cell.status_before])} → "
                     f'<span class="badge {esc(cell.status_after)}">'
                     f"{esc(WORD[cell.status_after])}</span><ul>{''.join(items)}</ul></li>")
    parts += [f"<li>cell added: <code>{esc(c)}</code></li>" for c in comparison.added_cells]
    parts += [f"<li>cell removed: <code>{esc(c)}</code></li>" for c in comparison.removed_cells]
    parts += [f'<li class="note">warning: {esc(p)}</li>' for p in comparison.problems]
    return parts + ["</ul></section>"]


def to_html(report: Report, results_rel: str = "../results") -> str:
    """index.html; ``results_rel`` is the results folder relative to the report folder."""
    counts = ", ".join(f"{n} {WORD[s]}" for s, n in sorted(report.counts.items()))
    toc = [("models", "Models × vendors"), ("cells", "Cells × layers"),
           ("skip-debt", "Skip debt")]
    if report.comparison is not None:
        toc.insert(0, ("changes", "Changes"))
    body = ["<header><h1>oota compatibility matrix</h1>",
            f'<p class="meta">Generated {esc(report.generated_at)} by oota {esc(__version__)} '
            f"from {len(report.results)} result files ({esc(counts or 'none')}). "
            '<a href="matrix.md">matrix.md</a> · <a href="results.json">results.json</a></p>',
            _legend(), "<nav>" + "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in toc)
            + "</nav></header>"]
    if report.comparison is not None:
        body += _html_changes(report.comparison)
    body += _html_models(report) + _html_layers(report, results_rel) + _html_skip_debt(report)
    if report.problems:
        body.append('<section id="problems"><h2>Result files that could not be read</h2><ul>'
                    + "".join(f"<li>{esc(p)}</li>" for p in report.problems) + "</ul></section>")
    return _page("oota compatibility matrix", body)


# -- per-cell pages ---------------------------------------------------------------------------

def _kv(pairs: Iterable[tuple[str, Any]]) -> str:
    def show(value: Any) -> str:
        if isinstance(value, (dict, list)):
            return f"<code>{esc(json.dumps(value, sort_keys=True))}</code>"
        return esc("–" if value is None or value == "" else value)
    return '<dl class="kv">' + "".join(f"<dt>{esc(k)}</dt><dd>{show(v)}</dd>"
                                       for k, v in pairs) + "</dl>"


def human_bytes(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "–"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _num(value: Any, fmt: str, unit: str = "") -> str:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return format(value, fmt) + unit if ok else "–"


def _cell_tests(row: CellRow) -> list[str]:
    order = {layer: i for i, layer in enumerate(LAYERS)}
    tests = sorted(row.tests, key=lambda t: (order.get(t.layer, len(LAYERS)), t.layer, t.id))
    parts = ['<h2 id="tests">Tests</h2><table><thead><tr><th>layer</th><th>test</th>'
             "<th>status</th><th>duration</th><th>message</th></tr></thead><tbody>"]
    parts += [f"<tr><td>{esc(t.layer)}</td><td><code>{esc(t.id)}</code></td>"
              + _td(Mark(status=t.status)) + f"<td>{t.duration_s:.3f} s</td>"
              f"<td><pre>{esc(t.message)}</pre></td></tr>" for t in tests]
    return parts + ["</tbody></table>"]


def _cell_models(row: CellRow) -> list[str]:
    models = [t for t in row.tests if t.model is not None]
    if not models:
        return []
    parts = ['<h2 id="models">Models</h2><table><thead><tr><th>model</th><th>dtype</th>'
             "<th>status</th><th>time</th><th>peak memory</th><th>max abs diff</th></tr>"
             "</thead><tbody>"]
    parts += [f"<tr><td>{esc(t.model)}</td><td>{esc(t.data.get('dtype', '–'))}</td>"
              + _td(Mark(status=t.status, reason=t.message))
              + f"<td>{_num(t.data.get('seconds'), '.3f', ' s')}</td>"
              f"<td>{human_bytes(t.data.get('peak_bytes'))}</td>"
              f"<td>{_num(t.data.get('max_abs_diff'), '.3g')}</td></tr>" for t in models]
    return parts + ["</tbody></table>"]


def _cell_install(row: CellRow) -> list[str]:
    torch = row.torch
    parts = ['<h2 id="installed">Installed</h2>',
             _kv([("torch", torch.get("version")), ("CUDA", torch.get("cuda")),
                  ("HIP", torch.get("hip")), ("source", torch.get("source")),
                  ("sha256", torch.get("sha256"))])]
    if row.packages:
        parts.append(f"<details><summary>{len(row.packages)} installed packages</summary>"
                     "<table><thead><tr><th>package</th><th>version</th><th>source</th>"
                     "</tr></thead><tbody>")
        parts += [f"<tr><td>{esc(name)}</td><td>{esc(info.get('version'))}</td>"
                  f"<td><small>{esc(info.get('source'))}</small></td></tr>"
                  for name, info in sorted(row.packages.items()) if isinstance(info, dict)]
        parts.append("</tbody></table></details>")
    return parts


def _cell_stages(row: CellRow, results_rel: str) -> list[str]:
    parts = ['<h2 id="stages">Stages</h2><table><thead><tr><th>stage</th><th>status</th>'
             "<th>duration</th><th>message</th><th>log</th></tr></thead><tbody>"]
    for name, stage in row.stages.items():
        log = stage.get("log")
        link = (f'<a href="{href(f"{results_rel}/{row.id}/{log}")}">{esc(log)}</a>'
                if log and log in row.files else esc(log or "–"))
        parts.append(f"<tr><td>{esc(name)}</td>" + _td(Mark(status=stage["status"]))
                     + f"<td>{float(stage['duration_s']):.1f} s</td>"
                     f"<td><pre>{esc(stage.get('message', ''))}</pre></td><td>{link}</td></tr>")
    return parts + ["</tbody></table>"]


def _cell_skips(row: CellRow) -> list[str]:
    if not row.skips:
        return []
    parts = ['<h2 id="skips">Skip list applied</h2><table><thead><tr><th>id</th><th>reason</th>'
             "<th>owner</th><th>added</th><th>expires</th><th>matched</th></tr></thead><tbody>"]
    parts += [f"<tr><td><code>{esc(e.get('id'))}</code></td><td>{esc(e.get('reason'))}</td>"
              f"<td>{esc(e.get('owner'))}</td><td>{esc(e.get('added', '–'))}</td>"
              f"<td>{esc(e.get('expires'))}</td><td>{esc(e.get('matched', '–'))}</td></tr>"
              for e in row.skips]
    return parts + ["</tbody></table>"]


def cell_page(row: CellRow, results_rel: str) -> str:
    """reports/cells/<id>.html; ``results_rel`` is the results folder relative to cells/."""
    image = row.image
    status = WORD.get(row.status, row.status)
    body = ['<p><a href="../index.html">← compatibility matrix</a></p>',
            f"<h1><code>{esc(row.id)}</code></h1>",
            f"<p>{esc(row.vendor)}: {esc(row.coords_text)}</p>",
            f'<p class="meta"><span class="badge {esc(row.status)}">{esc(status)}</span> '
            f"{esc(row.message)} · {esc(row.started_at)} – {esc(row.finished_at)}</p>",
            f"<p>Files: {_file_links(row, results_rel) or 'none beside the result'}</p>",
            '<h2 id="coordinates">Coordinates</h2>',
            _kv([("vendor", row.vendor), *row.coordinates.items()]),
            '<h2 id="image">Image</h2>',
            _kv([("tag", image.get("tag")), ("digest", image.get("digest")),
                 ("id", image.get("id")), ("base", image.get("base"))])]
    body += _cell_install(row) + _cell_stages(row, results_rel) + _cell_models(row)
    body += _cell_tests(row) + _cell_skips(row)
    body += ['<h2 id="host">Host</h2>', _kv(sorted(row.host.items()))]
    return _page(f"{row.id} — oota", body)


# -- writing ----------------------------------------------------------------------------------

def _relative(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()


def _write_cell_pages(report: Report, out_dir: Path, results_dir: Path) -> None:
    cells_dir = out_dir / "cells"
    rel = _relative(results_dir, cells_dir) if report.rows else ""
    for row in report.rows:
        write_atomic(cells_dir / f"{row.id}.html", cell_page(row, rel))
    current = {f"{row.id}.html" for row in report.rows}
    for stale in cells_dir.glob("*.html") if cells_dir.is_dir() else ():
        if stale.name not in current:  # a cell that is gone from results/
            stale.unlink()


def write_report(results_dir: Path, out_dir: Path, previous_dir: Path | None = None) -> Report:
    report = collect(results_dir, previous_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rel = _relative(results_dir, out_dir)
    write_atomic(out_dir / "matrix.md", to_markdown(report))
    write_atomic(out_dir / "index.html", to_html(report, rel))
    write_json(out_dir / "results.json", to_json(report, rel))
    if report.comparison is not None:
        write_json(out_dir / "compare.json", report.comparison.to_json())
    else:  # a comparison from an earlier `report --compare` no longer describes these results
        (out_dir / "compare.json").unlink(missing_ok=True)
    _write_cell_pages(report, out_dir, results_dir)
    return report
