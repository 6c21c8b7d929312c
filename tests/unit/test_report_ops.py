"""The ops layer in the report: per vendor 'ops: N of M operator×dtype pairs pass' with its
failures (matrix.md, results.json), a section on each cell page, and operator changes seen by
``--compare`` as test changes. Results are synthetic, as verify/test_ops.py writes them."""

from __future__ import annotations

import json
from typing import Any

from oota.report.compare import compare
from oota.report.markdown import OPS_FAILURES_SHOWN, to_markdown
from oota.report.rows import COLUMNS
from oota.report.text import md_text
from oota.report.write import write_report
from tests.reports import build_report
from tests.unit.test_report import NOW, case, make_result, typed, write_results

MISMATCH = ("sample 2 (Tensor[3, 4] float16): output on refdev differs from the CPU: max abs "
            "diff 0.25, max rel diff 0.5 (atol 0.001, rtol 0.001)")


def op_test(op: str, dtype: str, status: str = "passed", message: str = "",
            tried: bool = True, name: str = "test_op_matches_cpu") -> dict[str, Any]:
    """An ops-layer test; pairs skipped before running (budget, dtype, skip list) have no data."""
    data = {"op": op, "dtype": dtype, "tried": True, "samples": 4, "ran": 4} if tried else None
    return case(f"test_ops.py::{name}[{op}-{dtype}]", "ops", status, message, data)


def reference(*tests: dict[str, Any], torch: str = "2.13.0") -> dict[str, Any]:
    return make_result("reference", torch=torch, tests=[
        case("test_install.py::test_imports", "install"),
        case("test_ops.py::test_must_pass_names_are_operators", "ops"), *tests])


OPS = [op_test("add", "float32"), op_test("add", "float16", "failed", MISMATCH),
       op_test("matmul", "float32"),
       op_test("cumsum", "float32", "skipped", "cumsum (float32) is not implemented on refdev: "
               "NotImplementedError: no kernel"),
       op_test("sort", "float32", "skipped", "time budget of 180 s spent (OOTA_OPS_BUDGET_S)",
               tried=False),
       op_test("sort", "int64", "skipped", "the OpInfo of sort does not support int64 on the "
               "CPU", tried=False)]


def test_a_vendor_line_counts_pairs_tried_and_lists_failures():
    report = build_report(typed([reference(*OPS), make_result("cpu", tests=[
        op_test("add", "float32", name="test_op_runs")])]), [], generated_at=NOW)
    ops = {s.label: s for s in report.ops}
    assert ops["reference"].text == (
        "ops: 2 of 4 operator×dtype pairs pass, 1 failed, 1 not implemented on the device "
        "(not compared: 1 dtype the OpInfo lacks on the CPU, 1 time budget spent)")
    assert [(f.test, f.message) for f in ops["reference"].failures] == [("add-float16", MISMATCH)]
    assert ops["cpu"].text == "ops: 1 of 1 operator×dtype pairs pass (not compared: none)"
    text = to_markdown(report)
    assert "## Operators: PyTorch's OpInfo tests on each device" in text
    assert f"- reference: {md_text(ops['reference'].text)}. Counted in tests" in text
    # then how the pairs make up the layer's tests (test_counts.py)
    assert f"  - `add-float16`: {md_text(MISMATCH)}\n" in text
    assert f"- cpu: {md_text(ops['cpu'].text)}. Counted in tests" in text
    assert f"| cell | {' | '.join(COLUMNS)} | overall |" in text  # a column per layer


def test_a_vendor_with_several_cells_names_the_cell_of_each_failure():
    report = build_report(typed([reference(*OPS), reference(*OPS, torch="2.14.0")]), [],
                          generated_at=NOW)
    (ops,) = report.ops
    assert ops.text == ("ops: 4 of 8 operator×dtype pairs pass, 2 failed, 2 not implemented on "
                        "the device (not compared: 2 dtype the "
                        "OpInfo lacks on the CPU, 2 time budget spent; 2 cells)")
    assert "  - `add-float16` (`reference-torch2.14.0-py3.11-debian12`): " in to_markdown(report)


def test_no_ops_section_without_ops_results():
    report = build_report(typed([make_result("cpu", tests=[
        case("test_install.py::test_imports", "install")])]), [], generated_at=NOW)
    assert report.ops == ()
    assert "## Operators" not in to_markdown(report)


def test_a_long_failure_list_is_cut_in_markdown_only():
    failing = [op_test(f"op{i}", "float32", "failed", f"boom {i}") for i in range(25)]
    report = build_report(typed([reference(*failing)]), [], generated_at=NOW)
    text = to_markdown(report)
    section = text[text.index("## Operators"):]
    assert section.count("boom ") == OPS_FAILURES_SHOWN
    assert "and 22 more (see the operators' list)" in text  # the layers table's note
    assert f"  - and {25 - OPS_FAILURES_SHOWN} more failures (each cell's page lists them all)" \
        in text
    assert len(report.ops[0].failures) == 25


def test_the_layers_own_failure_is_listed_by_test_id():
    broken = case("test_ops.py::test_op_matches_cpu[op_db]", "ops", "failed",
                  "Failed: cannot import PyTorch's OpInfo database: ModuleNotFoundError: numpy")
    (ops,) = build_report(typed([reference(broken)]), [], generated_at=NOW).ops
    assert ops.text == "ops: 0 of 1 operator×dtype pairs pass, 1 failed (not compared: none)"
    assert [(f.test, f.message) for f in ops.failures] == [
        ("test_ops.py::test_op_matches_cpu[op_db]",
         "cannot import PyTorch's OpInfo database: ModuleNotFoundError: numpy")]


def test_cell_page_and_json_carry_the_ops_summary(tmp_path):
    out = tmp_path / "reports"
    write_report(write_results(tmp_path / "results", [reference(*OPS)]), out)
    page = (out / "cells" / "reference-torch2.13.0-py3.11-debian12.html").read_text()
    assert "Operators (PyTorch's OpInfo tests)" in page
    assert "ops: 2 of 4 operator×dtype pairs pass, 1 failed, 1 not implemented on the device " \
           "(not compared: 1 dtype the OpInfo lacks " \
           "on the CPU, 1 time budget spent)" in page
    assert "<code>add-float16</code>" in page and "max abs diff 0.25" in page
    data = json.loads((out / "results.json").read_text())
    assert data["ops"] == [{"label": "reference", "layer": "ops", "cells": 1, "passed": 2,
                            "tried": 4,
                            "not_run": 2, "not_compared": {
                                "dtype the OpInfo lacks on the CPU": 1, "time budget spent": 1},
                            "not_passed": {"failed": 1, "not implemented on the device": 1},
                            "failures": [{
                                "cell": "reference-torch2.13.0-py3.11-debian12",
                                "test": "add-float16", "message": MISMATCH, "built_on": ""}]}]


def test_compare_sees_an_operator_that_broke_as_a_test_change():
    before = reference(*OPS)
    after = reference(*[op_test("matmul", "float32", "failed", MISMATCH) if t["id"].endswith(
        "[matmul-float32]") else t for t in OPS])
    (cell,) = compare(typed([before]), typed([after])).cells
    assert [t.id for t in cell.newly_failing] == [
        "test_ops.py::test_op_matches_cpu[matmul-float32]"]


FOLDED = case("test_ops.py::test_op_matches_cpu[unrun-by-budget]", "ops", "skipped",
              "time budget of 0 s spent (OOTA_OPS_BUDGET_S): 2891 operator×dtype pairs of 640 "
              "operators not run", {"unrun_pairs": 2891, "unrun_operators": 640})


def test_the_pairs_folded_into_one_test_count_each_as_not_run():
    folded = [t for t in OPS if "time budget" not in t.get("message", "")] + [FOLDED]
    (ops,) = build_report(typed([reference(*folded)]), [], generated_at=NOW).ops
    assert ops.text == ("ops: 2 of 4 operator×dtype pairs pass, 1 failed, 1 not implemented on "
                        "the device (not compared: 2891 time budget "
                        "spent, 1 dtype the OpInfo lacks on the CPU)")
    assert ops.not_run == 2892


def test_compare_takes_pairs_a_fold_hides_for_no_added_or_removed_tests():
    """A run of an image from before the fold (one skipped test per unrun pair) against one
    that folds them: no test added or removed, only what changed; a pair failing now that the
    earlier run's budget left unrun is still listed."""
    budget = "time budget of 0 s spent (OOTA_OPS_BUDGET_S)"
    before = reference(*OPS, op_test("sub", "float32", "skipped", budget, tried=False),
                       op_test("div", "float32", "skipped", budget, tried=False))
    unrun = ("[sort-float32]", "[sub-float32]", "[div-float32]", "[matmul-float32]")
    after = reference(*[t for t in OPS if not t["id"].endswith(unrun)], FOLDED)
    same = compare(typed([before]), typed([after]))
    assert same.cells == () and same.unchanged == 1
    after = reference(*[t for t in OPS if not t["id"].endswith(unrun)], FOLDED,
                      op_test("div", "float32", "failed", MISMATCH))
    (cell,) = compare(typed([reference(*OPS, FOLDED)]), typed([after])).cells
    assert [(t.id, t.after) for t in cell.added_tests] == [
        ("test_ops.py::test_op_matches_cpu[div-float32]", "failed")]
    assert cell.removed_tests == ()


def test_not_compared_pairs_are_counted_by_why():
    """The H100 run's '(487 not run)' read like a budget cut; it was dtypes the OpInfo lacks
    and PyTorch's own skips. Each reason is counted apart."""
    why = [("cauchy", "PyTorch's test_compare_cpu skips this comparison: output is "
                      "non-deterministic"),
           ("empty_like", "PyTorch's test_compare_cpu skips this comparison: output is "
                          "non-deterministic"),
           ("linalg.lu", "PyTorch's test_compare_cpu expects this comparison to fail"),
           ("histc", "the OpInfo of histc does not declare float16 for cuda"),
           ("bitwise_not", "the OpInfo of bitwise_not does not support float16 on the CPU"),
           ("add", "skip list: slow here (owner lab, expires 2027-01-01)")]
    tests = [op_test(op, "float16", "skipped", message, tried=False) for op, message in why]
    (ops,) = build_report(typed([reference(op_test("mul", "float16"), *tests)]), [],
                          generated_at=NOW).ops
    assert ops.not_compared == (("skipped by PyTorch's own test", 2),
                                ("dtype the OpInfo lacks on the CPU", 1),
                                ("dtype the OpInfo lacks on the device", 1),
                                ("expected to fail by PyTorch's own test", 1),
                                ("on the vendor's skip list", 1))


def test_a_failure_built_on_another_failing_operator_says_so():
    """REFDEV_WRONG_OP=tanh breaks tanh, and tanhshrink, which calls it: the report says
    tanhshrink fails through tanh (from the aten operators its failing sample called)."""
    def failing(op: str, aten: str, calls: list[str]) -> dict[str, Any]:
        test = op_test(op, "float32", "failed", f"{op} (float32): sample 0: wrong")
        test["data"] |= {"aten": aten, "calls": calls}
        return test

    tests = [failing("tanh", "tanh", ["tanh"]),
             failing("nn.functional.tanhshrink", "nn.functional.tanhshrink", ["tanh", "sub"])]
    (ops,) = build_report(typed([reference(*tests)]), [], generated_at=NOW).ops
    assert [(f.test, f.built_on) for f in ops.failures] == [
        ("tanh-float32", ""), ("nn.functional.tanhshrink-float32", "tanh")]
    assert ops.failures[1].text.startswith("fails through tanh, which fails too: ")


def test_the_sentence_accounts_for_every_pair_it_counts_naming_each_reason():
    """2893 of 2918 pass: the 25 others are named (they ran, and every sample was refused by
    the CPU), so the counts add up without reading verify.log."""
    refused = [op_test(f"op{n}", "float64", "skipped", f"every one of the 3 samples of op{n} "
                       "(float64) raised on the CPU too: RuntimeError: x") for n in range(25)]
    passing = [op_test(f"ok{n}", "float32") for n in range(3)]
    (ops,) = build_report(typed([reference(*passing, *refused)]), [], generated_at=NOW).ops
    assert ops.text == ("ops: 3 of 28 operator×dtype pairs pass, 25 every sample refused by "
                        "the CPU (not compared: none)")
    assert ops.passed + sum(n for _, n in ops.not_passed) == ops.tried


def autograd_test(check: str, op: str, dtype: str, status: str = "passed",
                  message: str = "") -> dict[str, Any]:
    """An autograd-layer test, as verify/test_autograd.py writes it."""
    name = {"gradients": "test_grad_matches_cpu", "noncontiguous": "test_noncontiguous",
            "out": "test_out"}[check]
    return case(f"test_autograd.py::{name}[{op}-{dtype}]", "autograd", status, message,
                {"check": check, "op": op, "dtype": dtype, "tried": True})


WRONG_GRADIENT = ("tanh (float32): sample 0 (Tensor[20, 20] float32): the gradient of input on "
                  "refdev differs from the CPU: max abs diff 1")


def test_the_autograd_layer_is_counted_in_pairs_beside_the_ops_layer(tmp_path):
    tests = [*OPS, autograd_test("gradients", "tanh", "float32", "failed", WRONG_GRADIENT),
             autograd_test("gradients", "add", "float32"),
             autograd_test("noncontiguous", "add", "float32", "cpu-fallback", "2 of 2 samples "
                           "called the CPU fallback (aten::add.out): ..."),
             case("test_autograd.py::test_out[unrun-by-budget]", "autograd", "skipped",
                  "time budget of 0 s spent (OOTA_AUTOGRAD_BUDGET_S): 9 operator×dtype pairs "
                  "of 9 operators not run", {"unrun_pairs": 9, "unrun_operators": 9})]
    report = build_report(typed([reference(*tests)]), [], generated_at=NOW)
    (autograd,) = report.autograd
    assert autograd.text == (
        "autograd: 1 of 3 operator×dtype×check pairs pass, 1 failed, 1 ran on the CPU (not "
        "compared: 9 time budget spent)")
    assert [(f.test, f.message) for f in autograd.failures] == [
        ("gradients tanh-float32", WRONG_GRADIENT)]
    text = to_markdown(report)
    assert f"- reference: {md_text(autograd.text)}.\n" in text
    assert f"  - `gradients tanh-float32`: {md_text(WRONG_GRADIENT)}\n" in text
    out = tmp_path / "report"
    write_report(write_results(tmp_path / "results", [reference(*tests)]), out)
    data = json.loads((out / "results.json").read_text())
    assert data["autograd"][0]["layer"] == "autograd" and data["autograd"][0]["passed"] == 1
    (page,) = (out / "cells").glob("reference-*.html")
    assert "Autograd (PyTorch's gradient, non-contiguous and out= checks)" in page.read_text()
