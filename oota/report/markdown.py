"""The Markdown writer: ``reports/matrix.md`` (for a README or a PR comment, capped at 1 MiB),
rendered from ``templates/matrix.md.j2``.

Reasons go into numbered footnotes shared by the whole document; which mark gets which number
is decided here (:func:`markdown_view`), the template only lays the tables out. Every text
taken from a result file passes through :func:`md_text` or :func:`md_code` (the template's
``md`` and ``code`` filters), which make it inert: one line, no HTML, no link or emphasis.
"""

from __future__ import annotations

from dataclasses import dataclass

from oota import __version__
from oota.report.counts import in_tests_by_vendor
from oota.report.coverage import LEGEND, ROWS_SHOWN as COVERAGE_ROWS_SHOWN
from oota.report.data import Report
from oota.report.parity import ROWS_SHOWN as PARITY_ROWS_SHOWN
from oota.report.rows import COLUMNS, SYMBOL, WORD, CellGroup, CellRow, Mark
from oota.report.skips import EXPIRY_WINDOW_DAYS
from oota.report.templating import markdown_environment
from oota.report.text import md_cell_code, md_text
from oota.results.software import TorchInfo

MARKDOWN_LIMIT = 1024 * 1024
# Failures of the ops layer listed per vendor; the cell pages list every one.
OPS_FAILURES_SHOWN = 20


# -- the view: marks with their footnote numbers ----------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class Footnote:
    number: int
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Line:
    """One table row: its label and its marks as Markdown (symbol, note, footnote number)."""

    label: str
    marks: tuple[str, ...]
    overall: str = ""
    torch: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Table:
    """A table's rows and the footnotes it introduced (printed right below it)."""

    title: str
    lines: tuple[Line, ...]
    notes: tuple[Footnote, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class MarkdownView:
    models: Table
    vendors: tuple[Table, ...]


class _Notes:
    """Numbered footnotes shared by the whole document; each table lists the ones it added."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.pending: list[Footnote] = []

    def mark(self, mark: Mark) -> str:
        note = f" {mark.note}" if mark.note else ""
        return f"{mark.symbol}{note}{self._ref(mark.reason)}"

    def _ref(self, text: str) -> str:
        if not text:
            return ""
        if text not in self.numbers:
            self.numbers[text] = len(self.numbers) + 1
            self.pending.append(Footnote(number=self.numbers[text], text=text))
        return f" [{self.numbers[text]}]"

    def flush(self) -> tuple[Footnote, ...]:
        notes, self.pending = tuple(self.pending), []
        return notes


def markdown_view(report: Report) -> MarkdownView:
    """The tables of matrix.md, footnotes numbered in reading order."""
    notes = _Notes()
    models = tuple(Line(label=md_text(row.model),
                        marks=tuple(notes.mark(row.marks.get(v, Mark())) for v in report.vendors))
                   for row in report.models)
    model_table = Table(title="Models × vendors", lines=models, notes=notes.flush())
    vendors = []
    for vendor in report.vendors:
        lines = tuple(line for group in report.vendor_groups(vendor)
                      for line in _group_lines(group, notes))
        vendors.append(Table(title=vendor, lines=lines, notes=notes.flush()))
    return MarkdownView(models=model_table, vendors=tuple(vendors))


def _torch(row: CellRow) -> str:
    if row.torch == TorchInfo():
        return "–"
    nightly = f" ({md_text(row.torch.nightly)})" if row.torch.nightly else ""
    return md_cell_code(row.torch.version or "?") + nightly


def _group_lines(group: CellGroup, notes: _Notes) -> list[Line]:
    """A cell's line; for a cell from several hosts, the worst of them (whether they agree
    beside its id), then a line per copy."""
    first = group.first
    if not group.several:
        return [Line(label=md_cell_code(first.id), marks=tuple(notes.mark(first.layers[c])
                                                          for c in COLUMNS),
                     overall=SYMBOL.get(first.status, first.status), torch=_torch(first))]
    head = Line(label=f"{md_cell_code(group.id)} ({md_text(group.agreement_text)})",
                marks=tuple(notes.mark(group.layers[c]) for c in COLUMNS),
                overall=SYMBOL.get(group.status, group.status), torch="")
    return [head, *(Line(label=f"↳ {md_text(row.origin)}",
                         marks=tuple(notes.mark(row.layers[c]) for c in COLUMNS),
                         overall=SYMBOL.get(row.status, row.status), torch=_torch(row))
                    for row in group.copies)]


# -- writing ----------------------------------------------------------------------------------

def _fit(text: str, limit: int) -> str:
    """``text``, cut at a line boundary with a note when it would exceed ``limit`` bytes."""
    lines = text.rstrip("\n").split("\n")
    out: list[str] = []
    size = 0
    for line in lines:
        cost = len(line.encode()) + 1
        if size + cost > limit - 400:
            out += ["", f"**Truncated:** {len(out)} of {len(lines)} lines shown to keep this "
                        f"file under {limit} bytes; the whole report is in results.json and "
                        "index.html beside it."]
            break
        out.append(line)
        size += cost
    return "\n".join(out) + "\n"


def to_markdown(report: Report, *, limit: int = MARKDOWN_LIMIT) -> str:
    template = markdown_environment().get_template("matrix.md.j2")
    text = template.render(report=report, view=markdown_view(report), version=__version__,
                           columns=COLUMNS, word=WORD, window=EXPIRY_WINDOW_DAYS,
                           ops_shown=OPS_FAILURES_SHOWN, ops_tests=in_tests_by_vendor(report),
                           coverage_legend=LEGEND, coverage_shown=COVERAGE_ROWS_SHOWN,
                           parity_shown=PARITY_ROWS_SHOWN)
    return _fit(text, limit)
