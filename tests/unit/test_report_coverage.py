"""Device coverage in the report: a pair the backend ran on the CPU (its fallback) is shown as
'ran on the CPU', counted apart from passes in every total (the ops line, the layer table,
the cell page), and the operators × vendors table says per operator where each vendor
computed it, and per vendor how its device served its operators (PyTorch's dispatcher and
its counters: own kernel, fell back, missing). Results are synthetic, in the shape
verify/test_ops.py writes them; CUDA's are from before the suite recorded the dispatcher's
view."""

from __future__ import annotations

import json
from typing import Any

from oota.report.coverage import CPU, DEVICE, FAILED, MISSING, UNKNOWN
from oota.report.htmlpages import to_html
from oota.report.markdown import to_markdown
from oota.report.served import FALLBACK, KERNEL, served_view
from oota.report.write import write_report
from oota.results.assemble import suite_test
from oota.vocab import CPU_PREFIX
from tests.reports import build_report
from tests.unit.test_report import NOW, case, make_result, typed, write_results

FELL_BACK = (CPU_PREFIX + "2 of 2 samples called the CPU fallback (aten::nonzero; the "
             "dispatcher sends aten::nonzero to XLA's boxed fallback): their results are the "
             "CPU's own and say nothing about the device")


def pair(op: str, dtype: str, status: str = "passed", message: str = "", ran_on: str = "device",
         **data: Any) -> dict[str, Any]:
    return case(f"test_ops.py::test_op_matches_cpu[{op}-{dtype}]", "ops", status, message,
                {"op": op, "dtype": dtype, "tried": True, "ran_on": ran_on, **data})


def served(key: str, how: str, **dispatch: list[str]) -> dict[str, Any]:
    """The dispatcher's view of a pair, as verify/oota_hooks.py's Coverage records it."""
    return {"dispatch_key": key, "boxed_fallback": key == "XLA", "served": how,
            "dispatch_from": "calls", "dispatch": dispatch}


XLA = [pair("add", "float32", **served("XLA", "kernel", kernel=["add.Tensor"])),
       pair("add", "int64", **served("XLA", "kernel", kernel=["add.Tensor"])),
       pair("nonzero", "float32", "cpu-fallback", FELL_BACK.removeprefix(CPU_PREFIX), "cpu",
            fallback_ops=["nonzero"], **served("XLA", "fallback", fallback=["nonzero"])),
       pair("softmax", "float32", "failed", "sample 0: RuntimeError: Value out of range",
            "unknown", **served("XLA", "kernel", kernel=["_softmax"])),
       pair("histc", "float32", "skipped", "histc (float32) is not implemented on xla: "
            "NotImplementedError: aten::histc (1 of 2 samples ran)", "unknown",
            **served("XLA", "missing", kernel=["view"], missing=["histc"])),
       case("test_ops.py::test_op_matches_cpu[sort-float32]", "ops", "skipped",
            "time budget of 180 s spent (OOTA_OPS_BUDGET_S)")]
CUDA = [pair("add", "float32", ran_on="unknown"), pair("nonzero", "float32", ran_on="unknown")]
CPU_VENDOR = [case("test_ops.py::test_op_runs[add-float32]", "ops", "passed", "ran 8 samples",
                   {"op": "add", "dtype": "float32", "tried": True, "compared": False,
                    "ran_on": "device", **served("CPU", "kernel", kernel=["add.Tensor"])})]


def report():
    return build_report(typed([make_result("xla", tests=XLA), make_result("cuda", tests=CUDA),
                               make_result("cpu", tests=CPU_VENDOR)]), [], generated_at=NOW)


def test_a_fallback_is_not_a_pass_in_the_ops_line():
    ops = {s.label: s for s in report().ops}
    assert ops["xla"].text == ("ops: 2 of 5 operator×dtype pairs pass, 1 failed, 1 not "
                               "implemented on the device, 1 ran on the CPU (not compared: 1 "
                               "time budget spent)")
    assert ops["xla"].passed == 2


def test_the_table_says_where_each_operator_ran_per_vendor():
    table = report().coverage
    assert table is not None
    assert [v.vendor for v in table.vendors] == ["cpu", "cuda", "xla"]
    rows = {op: entries for op, entries in table.rows}
    cpu, cuda, xla = rows["add"]
    assert xla is not None and dict(xla.counts) == {DEVICE: 2} and xla.text == "2✓"
    assert cuda is not None and dict(cuda.counts) == {UNKNOWN: 1}
    assert cpu is not None and dict(cpu.counts) == {DEVICE: 1}  # the CPU is its own device
    assert rows["nonzero"][2] is not None and dict(rows["nonzero"][2].counts) == {CPU: 1}
    assert rows["softmax"][2] is not None and rows["softmax"][2].get(FAILED) == 1
    assert rows["histc"][2] is not None and rows["histc"][2].text == "1∅"
    assert rows["histc"][2].get(MISSING) == 1
    assert rows["softmax"][1] is None  # cuda did not run it
    assert dict(table.vendors[2].totals) == {DEVICE: 2, CPU: 1, MISSING: 1, FAILED: 1}
    assert table.vendors[2].declared and not table.vendors[1].declared
    assert table.vendors[1].text == ("cuda: 2 passed, where it ran not known (nothing in its "
                                     "results tells its device's runs from a CPU fallback)")
    assert [op for op, _ in table.notable()] == ["histc", "nonzero", "softmax"]
    assert "sort" not in rows  # skipped before it ran: no data, no operator


def test_each_vendor_says_how_its_device_served_its_operators():
    """Own kernel, fell back, missing, per vendor, in operators; the CPU vendor is its own
    device; results without the dispatcher's view are counted as not known."""
    cpu, cuda, xla = report().coverage.vendors
    assert xla.view is not None and xla.view.text == (
        "XLA, with a boxed fallback: 2 operators on its own kernels, 1 fell back to the CPU, "
        "1 missing (no kernel for an operator a sample called)")
    assert xla.view.fell_back == (("nonzero", ("nonzero",)),)
    assert xla.view.missing == (("histc", ("histc",)),)
    assert cuda.view is not None and cuda.view.text == (
        "2 operators not placed (no sample ran on the device, or no dispatcher data)")
    assert cpu.own_device and cpu.text == (
        "cpu (the CPU is its own device: its pairs ran on its own kernels and compare nothing): "
        "1 ran on the device's own kernels and passed")
    assert cpu.view is not None and cpu.view.text == (
        "the CPU is its own device (dispatch key CPU): 1 operator on its own kernels; nothing "
        "it runs is a fallback, and nothing is compared")


def test_markdown_and_html_show_the_totals_and_the_table():
    data = report()
    text = to_markdown(data)
    assert "### Coverage: operators × vendors" in text
    assert ("- xla: 2 ran on the device's own kernels and passed, 1 ran on the CPU (fell back), "
            "1 missing: no kernel on the device, 1 failed; its operators, as PyTorch's "
            "dispatcher and the vendor's counters saw them: XLA, with a boxed fallback: 2 "
            "operators on its own kernels, 1 fell back to the CPU, 1 missing") in text
    assert "| operator | cpu | cuda | xla |" in text
    assert "| `nonzero` |  | 1✓? | 1cpu |" in text
    assert "| `histc` |  |  | 1∅ |" in text
    assert "| `add` |" not in text  # it ran on the device everywhere: index.html lists it
    page = to_html(data)
    assert '<h3 id="coverage">Coverage: operators × vendors</h3>' in page
    assert '<td class="cpu-fallback">1cpu</td>' in page and '<td class="passed">2✓</td>' in page
    assert ("Its operators, as PyTorch's dispatcher and the vendor's counters saw them: the CPU "
            "is its own device (dispatch key CPU)") in page


def test_the_cell_page_counts_it_in_its_own_column(tmp_path):
    out = tmp_path / "reports"
    write_report(write_results(tmp_path / "results", [make_result("xla", tests=XLA)]), out)
    page = (out / "cells" / "xla-torch2.13.0-py3.11-debian12.html").read_text()
    assert "<th>passed</th><th>ran on CPU</th><th>not claimed</th><th>skipped</th>" in page
    assert "1 ran on the CPU" in page
    data = json.loads((out / "results.json").read_text())
    assert data["coverage"]["operators"]["nonzero"] == {"xla": {CPU: 1}}
    # How the device served the cell's operators, and which aten operators fell back or
    # had no kernel, called by which operators' samples.
    assert ("Where the operators ran, as PyTorch's dispatcher and the vendor's counters saw "
            "them: XLA, with a boxed fallback: 2 operators on its own kernels, 1 fell back to "
            "the CPU, 1 missing") in page
    assert "<summary>1 aten operators fell back to the CPU</summary>" in page
    assert "<td><code>aten::nonzero</code></td><td><code>nonzero</code></td>" in page
    assert "<td><code>aten::histc</code></td><td><code>histc</code></td>" in page


def test_the_cell_pages_view_is_built_before_it_is_rendered():
    (row,) = [r for r in report().rows if r.vendor == "xla"]
    view = served_view(row.vendor, row.tests)
    assert view is not None and (view.key, view.boxed_fallback) == ("XLA", True)
    assert dict(view.operators) == {KERNEL: 2, FALLBACK: 1, MISSING: 1}
    assert view.to_json()["fell_back"] == {"nonzero": ["nonzero"]}
    assert served_view("cuda", [r for r in report().rows if r.vendor == "cuda"][0].tests
                       ).unknown == 2


def test_the_suites_skip_becomes_ran_on_the_cpu():
    """The suite (pytest) skips a pair that fell back with CPU_PREFIX; the host gives it its
    own status, as it does the host check's unsupported-here skips."""
    outcome = suite_test(pair("nonzero", "float32", "skipped", FELL_BACK, "cpu"), "tests[0]")
    assert outcome.status == "cpu-fallback"
    assert outcome.message == FELL_BACK.removeprefix(CPU_PREFIX)
