"""Device coverage in the report: a pair the backend ran on the CPU (its fallback) is shown as
'ran on the CPU', counted apart from passes in every total (the ops line, the layer table,
the cell page), and the operators × vendors table says per operator where each vendor
computed it. Results are synthetic, as verify/test_ops.py writes them."""

from __future__ import annotations

import json
from typing import Any

from oota.report.coverage import CPU, DEVICE, FAILED, UNKNOWN
from oota.report.htmlpages import to_html
from oota.report.markdown import to_markdown
from oota.report.write import write_report
from oota.results.assemble import suite_test
from oota.vocab import CPU_PREFIX
from tests.reports import build_report
from tests.unit.test_report import NOW, case, make_result, typed, write_results

FELL_BACK = (CPU_PREFIX + "2 of 2 samples called the CPU fallback (aten::nonzero): their "
             "results are the CPU's own and say nothing about the device")


def pair(op: str, dtype: str, status: str = "passed", message: str = "", ran_on: str = "device",
         **data: Any) -> dict[str, Any]:
    return case(f"test_ops.py::test_op_matches_cpu[{op}-{dtype}]", "ops", status, message,
                {"op": op, "dtype": dtype, "tried": True, "ran_on": ran_on, **data})


XLA = [pair("add", "float32"), pair("add", "int64"),
       pair("nonzero", "float32", "cpu-fallback", FELL_BACK.removeprefix(CPU_PREFIX), "cpu",
            fallback_ops=["nonzero"]),
       pair("softmax", "float32", "failed", "sample 0: RuntimeError: Value out of range"),
       case("test_ops.py::test_op_matches_cpu[sort-float32]", "ops", "skipped",
            "time budget of 180 s spent (OOTA_OPS_BUDGET_S)")]
CUDA = [pair("add", "float32", ran_on="unknown"), pair("nonzero", "float32", ran_on="unknown")]


def report():
    cpu = make_result("cpu", tests=[pair("add", "float32", compared=False)])
    return build_report(typed([make_result("xla", tests=XLA), make_result("cuda", tests=CUDA),
                               cpu]), [], generated_at=NOW)


def test_a_fallback_is_not_a_pass_in_the_ops_line():
    ops = {s.label: s for s in report().ops}
    assert ops["xla"].text == ("ops: 2 of 4 operator×dtype pairs pass, 1 failed, 1 ran on the "
                               "CPU (not compared: 1 time budget spent)")
    assert ops["xla"].passed == 2


def test_the_table_says_where_each_operator_ran_per_vendor():
    table = report().coverage
    assert table is not None
    assert [v.vendor for v in table.vendors] == ["cuda", "xla"]  # the CPU compares nothing
    rows = {op: entries for op, entries in table.rows}
    cuda, xla = rows["add"]
    assert xla is not None and dict(xla.counts) == {DEVICE: 2} and xla.text == "2✓"
    assert cuda is not None and dict(cuda.counts) == {UNKNOWN: 1}
    assert rows["nonzero"][1] is not None and dict(rows["nonzero"][1].counts) == {CPU: 1}
    assert rows["softmax"][1] is not None and rows["softmax"][1].get(FAILED) == 1
    assert rows["softmax"][0] is None  # cuda did not run it
    assert dict(table.vendors[1].totals) == {DEVICE: 2, CPU: 1, FAILED: 1}
    assert table.vendors[1].declared and not table.vendors[0].declared
    assert table.vendors[0].text == ("cuda: 2 passed, where it ran not declared (the vendor "
                                     "declares no way to tell its device's runs from a CPU "
                                     "fallback)")
    assert [op for op, _ in table.notable()] == ["nonzero", "softmax"]
    assert "sort" not in rows  # skipped before it ran: no data, no operator


def test_markdown_and_html_show_the_totals_and_the_table():
    data = report()
    text = to_markdown(data)
    assert "### Coverage: operators × vendors" in text
    assert "- xla: 2 ran on the device and passed, 1 ran on the CPU, 1 failed" in text
    assert "| operator | cuda | xla |" in text
    assert "| `nonzero` | 1✓? | 1cpu |" in text
    assert "| `add` |" not in text  # it ran on the device everywhere: index.html lists it
    page = to_html(data)
    assert '<h3 id="coverage">Coverage: operators × vendors</h3>' in page
    assert '<td class="cpu-fallback">1cpu</td>' in page and '<td class="passed">2✓</td>' in page


def test_the_cell_page_counts_it_in_its_own_column(tmp_path):
    out = tmp_path / "reports"
    write_report(write_results(tmp_path / "results", [make_result("xla", tests=XLA)]), out)
    page = (out / "cells" / "xla-torch2.13.0-py3.11-debian12.html").read_text()
    assert "<th>passed</th><th>ran on CPU</th><th>skipped</th>" in page
    assert "1 ran on the CPU" in page
    data = json.loads((out / "results.json").read_text())
    assert data["coverage"]["operators"]["nonzero"] == {"xla": {CPU: 1}}


def test_the_suites_skip_becomes_ran_on_the_cpu():
    """The suite (pytest) skips a pair that fell back with CPU_PREFIX; the host gives it its
    own status, as it does the host check's unsupported-here skips."""
    outcome = suite_test(pair("nonzero", "float32", "skipped", FELL_BACK, "cpu"), "tests[0]")
    assert outcome.status == "cpu-fallback"
    assert outcome.message == FELL_BACK.removeprefix(CPU_PREFIX)
