"""Every Markdown output, rendered as GitHub renders it (cmark-gfm, through cmarkgfm), with
hostile text in every value a result or an index can set: each table row keeps its header's
cells (a ``|`` splits a GitHub row even inside a code span), no markup, image or script gets
through, and no web link is made of result text (GitHub links a bare URL or ``www.`` name).

Raw HTML is rendered (the unsafe option) so that any that got through shows here."""

from __future__ import annotations

import datetime as dt
from html.parser import HTMLParser
from typing import Any

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from packaging.version import Version

from oota.console import inert
from oota.history.policy import Policy
from oota.history.timeline import Outcome
from oota.releases.check import ReleaseCheck, Row
from oota.releases.claims import INDEX, Claim
from oota.releases.output import _markdown
from oota.releases.wheels import LINUX_X86_64
from oota.report import hud
from oota.report.markdown import to_markdown
from tests.history.synthetic import BASE, T0, timeline
from tests.reports import build_report
from tests.unit.test_report import (
    NOW,
    case,
    make_result,
    model_test,
    sample_results,
    typed,
)

EVIL = ("a|b `c|d` <img src=x onerror=alert(1)> <script>x</script> [l](javascript:x) "
        "**b** ~~s~~ https://evil.example/x www.evil.example \x1b[2J\u202e end")
ALLOWED = {"h1", "h2", "h3", "p", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th",
           "td", "code", "strong", "em", "a"}


class Page(HTMLParser):
    """The tags of a rendered page, its tables' rows (cells per row) and its links."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.tables: list[list[int]] = []
        self.links: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append(0)
        elif tag in ("td", "th"):
            self.tables[-1][-1] += 1
        elif tag == "a":
            self.links.append(dict(attrs).get("href") or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def rendered(markdown: str) -> Page:
    page = Page()
    page.feed(cmarkgfm.github_flavored_markdown_to_html(markdown,
                                                        options=Options.CMARK_OPT_UNSAFE))
    return page


def check(markdown: str) -> Page:
    page = rendered(markdown)
    assert page.tags <= ALLOWED, page.tags - ALLOWED
    for rows in page.tables:
        assert rows and all(n == rows[0] for n in rows), rows
    assert all(link.startswith("mailto:") for link in page.links), page.links
    assert "\x1b" not in markdown and "\u202e" not in markdown
    return page


def evil_results() -> list[dict[str, Any]]:
    evil = make_result("cpu", python="3.12", installed_torch="2.13.0+cpu|x", tests=[
        case("test_install.py::test_imports", "install"),
        case(f"test_device.py::test_matmul[{EVIL}]", "device", "failed", EVIL),
        model_test("llama", "skipped", EVIL, with_data=False)],
        host={"arch": "x86_64", "note": EVIL},
        skips={"entries": [{"id": "test_compat.py::x", "reason": EVIL, "owner": EVIL,
                            "expires": "2027-01-01", "matched": 0}],
               "expired": [], "unmatched": []})
    return [*sample_results(), evil]


def test_matrix_md_renders_whole() -> None:
    report = build_report(typed(evil_results()), [EVIL], generated_at=NOW)
    page = check(to_markdown(report))
    shown = "".join(page.text)
    assert "2.13.0+cpu|x" in shown  # the pipe is the cell's text, not a new cell
    assert "<img src=x onerror=alert(1)>" in shown and "https://evil.example/x" in shown
    assert inert(EVIL) in shown
    assert len(page.tables) >= 3


def test_the_digest_renders_whole() -> None:
    history = timeline({"cpu-a": "PFF", "cpu-b": "PFP", "cpu-c": "FFF"})
    evil = tuple(Outcome(run=o.run, status=o.status, message=EVIL, inputs=BASE,
                         failed_tests=(EVIL, "t|u"))
                 for o in history.cells[0].outcomes)
    cells = (type(history.cells[0])(cell=history.cells[0].cell, outcomes=evil),
             *history.cells[1:])
    source = hud.HudInput(timeline=type(history)(runs=history.runs, cells=cells,
                                                 metrics=()),
                          policy=Policy(file=None), now=T0 + dt.timedelta(days=6),
                          since=dt.timedelta(days=30))
    page = hud.build(source, {})
    text = hud.to_markdown(page.digest, page.regressions)
    assert "broke" in text
    check(text)


@pytest.mark.parametrize("detail", [EVIL, "torch==2.14.0.* | requires"], ids=["evil", "pipe"])
def test_release_checks_table_renders_whole(detail: str) -> None:
    gap = Row(vendor="cpu", torch=Version("2.15.0"), python=Version("3.11"),
              platforms=(LINUX_X86_64,), ok=False,
              claims=(Claim(text=detail, origin=INDEX, where="https://pypi.example/simple"),))
    found = ReleaseCheck(index="https://pypi.example/simple", current=Version("2.15.0"),
                         previous=None, detected=True, torch=(), rows=(gap,), notes=(EVIL,))
    page = check(_markdown(found))
    assert page.tables == [[7, 7]]
    assert inert(detail) in "".join(page.text)
