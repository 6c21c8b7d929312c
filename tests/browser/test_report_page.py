"""The report as a user sees it: reports/index.html opened from the file system in a real
headless Chromium (Debian's ``chromium``), its DOM dumped and a screenshot taken.

No JavaScript, no network: the page must render from file:// with nothing but its own bytes.
"""

from __future__ import annotations

import re
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from oota.report.write import write_report
from tests.unit.test_report import model_test, refresh, sample_results, write_results

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"{CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium)")


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                         env={"HOME": str(profile), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, f"{argv} exited {run.returncode}:\n{run.stderr[-2000:]}"
    return run


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of raw RGB(A) bytes) of an 8-bit non-interlaced PNG: zlib plus
    the five PNG row filters, enough for Chromium's screenshots without an image library."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, bytearray(), None
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and interlace == 0 and color in (2, 6), header
    bpp = 3 if color == 2 else 4
    raw, stride, rows = zlib.decompress(bytes(idat)), width * bpp, []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        _unfilter(kind, line, prev, bpp)
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def _unfilter(kind: int, line: bytearray, prev: bytearray, bpp: int) -> None:
    if kind == 0:
        return
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up = prev[i]
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
        else:
            corner = prev[i - bpp] if i >= bpp else 0
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
            line[i] = (line[i] + pred) & 0xFF


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.tables = 0
        self.titles: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tables += tag == "table"
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])
        if attrs.get("title"):
            self.titles.append(attrs["title"])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    previous = sample_results()
    current = sample_results()
    current[0]["tests"][3] = model_test("gemma", "failed", "AssertionError: logits differ")
    current[0]["installed"]["packages"]["numpy"]["version"] = "2.4.0"
    refresh(current[0])
    old = write_results(root / "previous", previous)
    write_report(write_results(root / "results", current), root / "reports", old)
    return root


def test_index_renders_in_chromium(site, tmp_path):
    index = site / "reports" / "index.html"
    dom = chromium(tmp_path / "profile", "--dump-dom", index.as_uri()).stdout
    parsed = _Anchors()
    parsed.feed(dom)
    assert parsed.tables >= 5  # changes aside: models, 4 vendors' layers, skip debt
    for cell in (p.name for p in (site / "results").iterdir()):
        assert cell in dom, cell
    assert "no torchvision wheel for this cell" in parsed.titles
    assert "gemma on cpu broke when numpy went from 2.3.1 to 2.4.0" in dom
    cell_links = [h for h in parsed.hrefs if re.fullmatch(r"cells/[a-z0-9._-]+\.html", h)]
    assert len(cell_links) >= 5
    for link in cell_links + [h for h in parsed.hrefs if h.startswith("../results/")]:
        assert not urlsplit(link).scheme
        assert (index.parent / unquote(link)).is_file(), link


def test_cell_page_renders_and_links_its_logs(site, tmp_path):
    page = site / "reports" / "cells" / "cpu-torch2.13.0-py3.11-debian12.html"
    dom = chromium(tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    parsed = _Anchors()
    parsed.feed(dom)
    logs = [h for h in parsed.hrefs if h.endswith((".log", ".json", ".xml"))]
    assert {Path(h).name for h in logs} == {"build.log", "verify.log", "result.json",
                                            "junit.xml"}
    for link in logs + ["../index.html"]:
        assert (page.parent / unquote(link)).is_file(), link


def test_screenshot_is_not_blank(site, tmp_path):
    shot = tmp_path / "index.png"
    chromium(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,900",
             (site / "reports" / "index.html").as_uri())
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 900)
    bpp = len(rows[0]) // width
    pixels = [row[i:i + 3] for row in rows[::4] for i in range(0, len(row), bpp * 4)]
    colours = set(pixels)
    inked = sum(p != b"\xff\xff\xff" for p in pixels) / len(pixels)
    assert len(colours) > 20, f"only {len(colours)} distinct colours: a blank page?"
    assert inked > 0.02, f"only {inked:.1%} of the page is not white"
