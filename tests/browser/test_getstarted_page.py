"""A get-started page as a user sees it: reports/start/rocm.html opened from the file system in
headless Chromium, and the text of one cell's block read back from its DOM."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from oota.report.write import write_report
from tests.browser.test_report_page import CHROMIUM, chromium
from tests.unit.test_getstarted import results
from tests.unit.test_report import write_results

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"{CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium)")

CELL = "rocm-torch2.13.0-7.1-py3.11-debian12"


class _Block(HTMLParser):
    """The text of the section whose id is ``cell``, one entry per text node, and the page's
    links."""

    def __init__(self, cell: str) -> None:
        super().__init__()
        self.cell, self.depth, self.text, self.links = cell, 0, [], []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a":
            self.links.append(a.get("href"))
        if self.depth:
            self.depth += tag == "section"
        elif tag == "section" and a.get("id") == self.cell:
            self.depth = 1

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag == "section":
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth and data.strip():
            self.text.append(data.strip())


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("start")
    write_report(write_results(root / "results", results()), root / "reports")
    return root / "reports"


def test_a_cell_block_as_chromium_shows_it(site: Path, tmp_path: Path) -> None:
    page = site / "start" / "rocm.html"
    dom = chromium(tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    block = _Block(CELL)
    block.feed(dom)
    assert block.text == [
        CELL, "torch", "2.13.0+rocm7.1", "Python", "3.11", "OS", "debian12", "toolkit",
        "rocm 7.1", "verified", "passed", "2026-11-21T11:05:00+00:00",
        "Pull", "not published:",
        f"./oota.sh publish --vendor rocm --cell {CELL} --registry REGISTRY",
        "Run",
        "docker run --rm -it --init --ipc host --device /dev/kfd --device /dev/dri "
        "--group-add video "
        f"-e 'HSA_NOTE=two words' -v '/opt/rocm data:/data:ro' oota/rocm:{CELL}",
        "Install with pip", "In an environment of Python 3.11 on Linux x86_64:",
        'pip install "torch==2.13.0+rocm7.1" --extra-index-url '
        "https://download.pytorch.org/whl/rocm7.1",
        "The versions the verified image holds (the cell has no lock, so no hashes). Nothing "
        "of oota's test suite is installed.",
        "The verified build installed torch from", "file:///wheelhouse/torch.whl", "."]
    assert "<script" not in dom
    assert "../index.html" in block.links and (page.parent / "../index.html").is_file()
