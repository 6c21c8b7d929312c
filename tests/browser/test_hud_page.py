"""The HUD as a user sees it: reports/hud.html opened from the file system in headless Chromium,
its DOM read back and a screenshot of its grid checked for layout facts (which colours are
where), not compared pixel by pixel."""

from __future__ import annotations

import datetime as dt
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from oota.history.location import locate
from oota.history.policy import policy_at
from oota.history.records import run_record
from oota.history.store import append, open_store, read_timeline
from oota.report.hud import HudInput
from oota.report.write import write_report
from tests.browser.test_report_page import CHROMIUM, chromium, png_pixels
from tests.conftest import REPO
from tests.history.helpers import typed
from tests.history.synthetic import result_at
from tests.unit.test_report import write_results

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"{CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium)")

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.timezone.utc)
BROKEN = "cpu-torch2.13.0-py3.11-debian12"
FLAKY = "cpu-torch2.13.0-py3.13-debian13"
GREEN, RED, ORANGE = (0xDA, 0xFB, 0xE1), (0xFF, 0xEB, 0xE9), (0xFF, 0xF1, 0xE5)


class _Grid(HTMLParser):
    """Each grid row's marks (css class, link) by cell id, and the blame lines."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[tuple[str, str | None]]] = {}
        self.row: str | None = None
        self.blame: list[str] = []
        self._in_blame = False
        self._mark: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "tr" and (a.get("id") or "").startswith("cell-"):
            self.row = str(a["id"]).removeprefix("cell-")
            self.rows[self.row] = []
        elif tag == "td" and "m" in classes and self.row:
            self.rows[self.row].append((classes[1], None))
        elif tag == "a" and self.row and self.rows[self.row]:
            css, _ = self.rows[self.row][-1]
            self.rows[self.row][-1] = (css, a.get("href"))
        self._in_blame = tag == "p" and "blame" in classes

    def handle_data(self, data: str) -> None:
        if self._in_blame and data.strip():
            self.blame.append(data.strip())
            self._in_blame = False


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hud")
    url = f"sqlite:///{root / 'history.db'}"
    store = open_store(locate(url, {}, root))
    for day in range(8):
        when = NOW - dt.timedelta(days=7 - day)
        broken = day >= 5
        append(store, run_record(typed(
            result_at(f"run-{day}", when, matmul="failed" if broken else "passed",
                      torch="2.13.1+cpu" if broken else "2.13.0+cpu", latency=1.0 + day / 50),
            result_at(f"run-{day}", when, python="3.13", os_key="debian13",
                      matmul="failed" if day == 3 else "passed")), "verify", None))
    current = write_results(root / "results", [
        result_at("run-7", NOW, matmul="failed", torch="2.13.1+cpu")])
    source = HudInput(timeline=read_timeline(store), policy=policy_at(REPO), now=NOW)
    write_report(current, root / "reports", hud_input=source)
    return root / "reports"


def test_the_grid_shows_a_mark_per_run_and_the_blame(site: Path, tmp_path: Path) -> None:
    page = site / "hud.html"
    dom = chromium(tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    grid = _Grid()
    grid.feed(dom)
    assert set(grid.rows) == {BROKEN, FLAKY}
    assert [css for css, _ in grid.rows[BROKEN]] == ["failed"] * 3 + ["passed"] * 5
    assert [css for css, _ in grid.rows[FLAKY]] == ["passed"] * 4 + ["flaky"] + ["passed"] * 3
    [(_, link)] = [m for m in grid.rows[BROKEN] if m[1]]
    assert link == f"cells/{BROKEN}.html" and (site / unquote(link)).is_file()
    assert grid.blame[0] == ("blame: first bad run run-5 (2026-11-18 12:00 UTC) after run-4 "
                             "passed (2026-11-17 12:00 UTC): torch 2.13.0+cpu -> 2.13.1+cpu")
    assert "<script" not in dom and 'href="#vendor-cpu"' in dom


def test_screenshot_of_the_grid(site: Path, tmp_path: Path) -> None:
    shot = tmp_path / "hud.png"
    chromium(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,900",
             (site / "hud.html").as_uri())
    width, height, rows = png_pixels(shot.read_bytes())
    bpp = len(rows[0]) // width

    def xs(row: bytes, colour: tuple[int, int, int]) -> list[int]:
        return [i // bpp for i in range(0, len(row), bpp) if tuple(row[i:i + 3]) == colour]

    both = [(y, xs(r, RED), xs(r, GREEN)) for y, r in enumerate(rows)
            if xs(r, RED) and xs(r, GREEN)]
    assert both, "no line of the screenshot shows failed and passed marks side by side"
    y, red, green = both[len(both) // 2]
    # Newest first: the broken cell's three failures are left of its passes, in the grid's
    # right part (the cell, failing-since and last-passed columns come first).
    assert max(red) < min(green) and min(red) > width // 3
    assert 3 * 14 <= len(red) <= 3 * 40, len(red)  # three marks, each 14-40 px wide
    assert any(xs(r, ORANGE) for r in rows), "the flaky mark is not on screen"
    assert height == 900
