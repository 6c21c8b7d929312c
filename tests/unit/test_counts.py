"""Every count of tests on the pages is verify.log's: one function counts them for both, and the
ops layer's pairs are reconciled with its tests."""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

from oota.report.counts import layer_table, ops_in_tests
from oota.report.markdown import to_markdown
from oota.report.write import write_report
from tests.reports import build_report
from tests.unit.test_report import NOW, case, typed, write_results
from tests.unit.test_report_ops import FOLDED, OPS, reference

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "verify"))
import oota_summary  # noqa: E402 - what prints verify.log's table inside every image


def _verify_log_rows(tests: list[dict]) -> dict[str, list[int]]:
    """verify.log's table: layer -> [passed, skipped, n/a here, failed]."""
    text = oota_summary.report({"id": "c"}, tests)
    rows = re.findall(r"^\| (\w+) \| \S+ \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", text, re.M)
    return {layer: [int(n) for n in counts] for layer, *counts in rows}


def test_the_cell_pages_table_is_verify_logs_table():
    """The same tests as the suite wrote them (verify.log) and as the result holds them (the
    host check's skips given their own status) count alike."""
    tests = [case("test_install.py::test_imports", "install"),
             case("test_device.py::test_matmul", "device", "unsupported-here", "no device"),
             case("test_device.py::test_copy", "device", "failed", "boom"),
             *OPS, FOLDED]
    result = reference(*tests)
    in_image = [dict(t, status="skipped", message="unsupported-here: no device")
                if t["status"] == "unsupported-here" else t for t in result["tests"]]
    [row] = build_report(typed([result]), [], generated_at=NOW).rows
    page = {c.layer: [c.counts[k] for k in ("passed", "skipped", "unsupported-here", "failed")]
            for c in layer_table([row])}
    assert page == _verify_log_rows(in_image)
    assert page["ops"] == [3, 4, 0, 1] and page["device"] == [0, 0, 1, 1]
    assert page["install"] == [2, 0, 0, 0]


def test_the_ops_pairs_add_up_to_its_tests(tmp_path):
    """2 of 4 pairs that ran pass, 2892 pairs unrun in 2 tests (one of them the budget's fold),
    1 check of the layer: 7 tests, 3 passed, as verify.log says."""
    folded = [t for t in OPS if "time budget" not in t.get("message", "")] + [FOLDED]
    result = reference(*folded)
    report = build_report(typed([result]), [], generated_at=NOW)
    sentence = ops_in_tests(list(report.rows))
    assert sentence == (
        "Counted in tests, as verify.log counts them: 7 (3 passed, 3 skipped, 1 failed); of "
        "these, 4 ran an operator×dtype pair (2 passed); 2 left 2892 pairs unrun; 1 checked "
        "the layer itself (its must-pass list).")
    assert _verify_log_rows(result["tests"])["ops"] == [3, 3, 0, 1]
    write_report(write_results(tmp_path / "results", [result]), tmp_path / "reports")
    pages = [tmp_path / "reports" / "index.html",
             tmp_path / "reports" / "cells" / f"{result['cell']['id']}.html"]
    for page in pages:  # the same words on the pages and in matrix.md
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
        assert sentence in " ".join(text.split()), page.name
    assert sentence in to_markdown(report)
