"""reports/ as a user meets it on a static web host: copied there alone (no results folder
beside it), served over HTTP, and read in a 1,400-pixel browser window.

Every link of every page must answer from the copy, never leaving it; and no table, code
block or list may run past the right edge of the window, with every <details> opened.
Chromium runs a small measuring page from the same server: it loads each report page in a
1,400-pixel frame and writes what sticks out into its own DOM, which --dump-dom returns.
"""

from __future__ import annotations

import functools
import re
import shutil
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest

from oota.report.write import write_report
from tests.browser.test_report_page import CHROMIUM, _Anchors, chromium
from tests.unit.test_getstarted import results as start_results
from tests.unit.test_report import case, refresh, sample_results, write_results

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"{CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium)")

WINDOW = 1400
LONG_ID = ("test_ops.py::test_op_runs[nn.functional.scaled_dot_product_attention.with_mask_"
           "and_causal_flag_set_to_an_unusually_long_name-bfloat16]")
LONG_URL = ("https://files.pythonhosted.org/packages/5e/b1/9530d6bee606979d54501adcc767d958a38"
            "929827f11a524b0d93429d2ad/annotated_doc-0.0.7-py3-none-any.whl")
MEASURE = """<!doctype html><html><body style="margin:0">
<iframe id="f" src="{page}" style="width:{width}px;height:900px;border:0"></iframe>
<script>
document.getElementById("f").onload = function () {{
  var d = this.contentDocument, edge = d.documentElement.clientWidth, out = [];
  d.querySelectorAll("details").forEach(function (e) {{ e.open = true; }});
  if (d.documentElement.scrollWidth > edge) out.push("page " + d.documentElement.scrollWidth);
  d.querySelectorAll("table, pre, dl, p, ul").forEach(function (e) {{
    var right = e.getBoundingClientRect().right;
    if (right > edge) out.push(e.tagName + " " + Math.round(right) + " " +
                               e.textContent.trim().slice(0, 60));
  }});
  document.body.setAttribute("data-overflow", out.join(" | ") || "none");
}};
</script></body></html>
"""


def _long_texts(result: dict[str, Any]) -> dict[str, Any]:
    """What makes tables wide in real runs: long test ids, messages, package sources."""
    result["tests"].append(case(LONG_ID, "ops", "failed", "sample 2: max abs diff " + "9" * 80))
    result["installed"]["packages"]["annotated-doc"] = {
        "version": "0.0.7", "source": LONG_URL, "sha256": "ab" * 32, "requested": True}
    return refresh(result)


@dataclass(frozen=True)
class Site:
    url: str      # http://127.0.0.1:PORT/
    folder: Path  # what it serves: the copy of reports/


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The report written next to its results, then copied alone and served over HTTP."""
    root = tmp_path_factory.mktemp("static")
    data = [_long_texts(r) if i == 0 else r for i, r in enumerate(sample_results())]
    data += [r for r in start_results() if r["cell"]["vendor"] in ("rocm", "cpu")
             and r["cell"]["id"] not in {d["cell"]["id"] for d in data}]
    write_report(write_results(root / "results", data), root / "reports")
    host = tmp_path_factory.mktemp("host") / "www"
    shutil.copytree(root / "reports", host)
    shutil.rmtree(root)  # nothing of the results is left to link to
    handler = functools.partial(_Quiet, directory=str(host))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Site(url=f"http://127.0.0.1:{server.server_address[1]}/", folder=host)
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _pages(base: str) -> list[str]:
    """Every HTML page reachable from index.html."""
    seen, queue = [], ["index.html"]
    while queue:
        page = queue.pop()
        if page in seen:
            continue
        seen.append(page)
        for link in _links(base, page):
            target = urljoin(base + page, link)[len(base):].split("#")[0]
            if target.endswith(".html"):
                queue.append(target)
    return seen


def _links(base: str, page: str) -> list[str]:
    with urllib.request.urlopen(base + page, timeout=10) as response:
        parsed = _Anchors()
        parsed.feed(response.read().decode("utf-8"))
    return [h for h in parsed.hrefs if not urlsplit(h).scheme and not h.startswith("#")]


def test_every_link_answers_from_the_copy_alone(site: Site) -> None:
    pages = _pages(site.url)
    assert {"index.html", "start/cpu.html"} <= set(pages)
    assert any(p.startswith("cells/") for p in pages)
    checked = 0
    for page in pages:
        for link in _links(site.url, page):
            url = urljoin(site.url + page, link).split("#")[0]
            assert url.startswith(site.url), f"{page}: {link} leaves the report"
            with urllib.request.urlopen(url, timeout=10) as response:
                assert response.status == 200, f"{page}: {link}"
            checked += 1
    assert checked > 30


@pytest.mark.parametrize("page", [
    "index.html", "cells/cpu-torch2.13.0-py3.11-debian12.html", "start/cpu.html",
    "start/rocm.html"])
def test_the_page_fits_a_1400_pixel_window(site: Site, page: str, tmp_path: Path) -> None:
    measure = f"measure-{re.sub(r'[^a-z0-9]', '-', page)}.html"
    (site.folder / measure).write_text(MEASURE.format(page=page, width=WINDOW))
    dom = chromium(tmp_path / "profile", f"--window-size={WINDOW + 100},1000", "--dump-dom",
                   site.url + measure).stdout
    found = re.search(r'data-overflow="([^"]*)"', dom)
    assert found, "the measuring page did not run"
    assert found.group(1) == "none", found.group(1)
