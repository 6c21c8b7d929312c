"""The HTML writer: ``reports/index.html`` and ``reports/cells/<cell-id>.html``, rendered from
``templates/*.html.j2`` with autoescape on, so every text from a result file is escaped.

Static pages with no external asset and no script, linked relatively so they work from
``file://`` and from any static host.
"""

from __future__ import annotations

from collections.abc import Sequence

from oota import __version__
from oota.report import parity
from oota.report.counts import in_tests_by_vendor, layer_table, ops_in_tests
from oota.report.coverage import LEGEND as COVERAGE_LEGEND
from oota.report.data import Report
from oota.report.imageview import image_view
from oota.report.markdown import OPS_FAILURES_SHOWN
from oota.report.rows import COLUMNS, WORD, CellGroup, CellRow, Links, Mark
from oota.report.served import served_view
from oota.report.skips import EXPIRY_WINDOW_DAYS
from oota.report.smokeenv import smoke_environments
from oota.report.templating import html_environment
from oota.vocab import MaybeStatus

LEGEND = (("passed", "✓ passed"), ("failed", "✗ failed"), ("error", "⚠ error"),
          ("skipped", "skip: skipped"),
          ("unsupported-here", "n/a here: no such hardware on the host"),
          ("cpu-fallback", "on CPU: the backend ran it on the CPU (its fallback), not the device"),
          ("not-claimed", "not claimed: a capability the vendor does not claim, not tested"),
          ("interrupted", "stopped: interrupted by a signal before it finished"),
          ("none", "–: not tested"))

# How a parity class is marked in the operators table: a pair only the reference passes is
# the vendor's gap.
PARITY_CSS = {parity.BOTH: "passed", parity.REFERENCE: "failed", parity.VENDOR: "cpu-fallback",
              parity.NEITHER: "none"}


def _mark(status: MaybeStatus, reason: str = "") -> Mark:
    return Mark(status=status, reason=reason)


def _links(where: str | Links) -> Links:
    return where if isinstance(where, Links) else Links(results_rel=where)


def to_html(report: Report, results_rel: str | Links = "../results", *,
            hud: bool = False, scorecards: Sequence[str] = ()) -> str:
    """index.html; ``results_rel`` is the results folder relative to the report folder (or
    each cell folder's place, for a merged report); ``hud``: link hud.html beside it;
    ``scorecards``: the vendors with a scorecard/<vendor>.html to link."""
    return html_environment().get_template("index.html.j2").render(
        title="oota compatibility matrix", report=report, links=_links(results_rel),
        version=__version__, columns=COLUMNS, word=WORD, legend=LEGEND,
        window=EXPIRY_WINDOW_DAYS, no_mark=Mark(), hud=hud, ops_tests=in_tests_by_vendor(report),
        scorecards=scorecards, parity_classes=parity.CLASSES, parity_symbol=parity.SYMBOL,
        parity_words=parity.WORDS_OF, parity_css=PARITY_CSS,
        ops_shown=OPS_FAILURES_SHOWN, coverage_legend=COVERAGE_LEGEND)


def cell_page(cell: CellGroup | CellRow, results_rel: str | Links) -> str:
    """cells/<id>.html: the cell and every copy of it; ``results_rel`` as for :func:`to_html`,
    relative to cells/."""
    group = cell if isinstance(cell, CellGroup) else CellGroup(
        id=cell.id, vendor=cell.vendor, status=cell.status, copies=(cell,), layers=cell.layers)
    return html_environment().get_template("cell.html.j2").render(
        title=f"{group.id} — oota", group=group, links=_links(results_rel), word=WORD,
        mark=_mark, image_view=image_view, layer_table=layer_table, ops_in_tests=ops_in_tests,
        served_view=served_view, smoke_environments=smoke_environments)
