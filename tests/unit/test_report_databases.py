"""The modules and optimizers layers in the report: per vendor 'modules: N of M module×dtype
pairs pass' with their failures (index.html, matrix.md, results.json), a section on each cell
page, a column each in the cells × layers table. Results are synthetic, as
verify/test_modules.py and test_optimizers.py write them."""

from __future__ import annotations

import json
from typing import Any

from oota.report.markdown import to_markdown
from oota.report.rows import COLUMNS
from oota.report.text import md_text
from oota.report.write import write_report
from tests.reports import build_report
from tests.unit.test_report import NOW, case, make_result, typed, write_results

TANH = ("nn.Tanh (float32): sample 0 (default), train: gradient of args[0] on refdev: error "
        "against the float64 reference 1, 8.73e+06x the CPU's own 1.15e-07")
SKIPPED_GROUP = ("SGD (forloop, float32), configuration 'default': all 3 parameters of "
                 "param_groups[1] (scale, second.weight, second.bias) kept their initial values "
                 "on refdev after 7 steps, while the CPU's steps moved them: the step skipped "
                 "them")
MODULES = "test_modules.py::test_module_matches_cpu"
OPTIMIZERS = "test_optimizers.py::test_optimizer_matches_cpu"


def module(name: str, dtype: str, status: str = "passed", message: str = "",
           ran_on: str = "device") -> dict[str, Any]:
    return case(f"{MODULES}[{name}-{dtype}]", "modules", status, message,
                {"module": name, "dtype": dtype, "samples": 3, "ran": 3, "ran_on": ran_on})


def reference(*tests: dict[str, Any]) -> dict[str, Any]:
    return make_result("reference", tests=[
        case("test_device.py::test_device_visible", "device"),
        case("test_modules.py::test_must_run_names_are_modules", "modules"),
        case("test_optimizers.py::test_must_run_names_are_optimizers", "optimizers"), *tests])


TESTS = [module("nn.Linear", "float32"), module("nn.Linear", "float64", ran_on="cpu"),
         module("nn.Tanh", "float32", "failed", TANH),
         module("nn.GRU", "float32", "skipped", "nn.GRU (float32) is not implemented on refdev: "
                "sample 0 (default): NotImplementedError: no kernel"),
         case(f"{MODULES}[unrun-by-budget]", "modules", "skipped",
              "time budget of 0 s spent (OOTA_MODULES_BUDGET_S): 200 module×dtype pairs of 100 "
              "modules not run", {"unrun_pairs": 200, "unrun_modules": 100}),
         case(f"{OPTIMIZERS}[SGD-forloop-float32]", "optimizers", "failed", SKIPPED_GROUP),
         case(f"{OPTIMIZERS}[SGD-foreach-float32]", "optimizers"),
         case(f"{OPTIMIZERS}[SGD-fused-float32]", "optimizers", "skipped",
              "PyTorch's OptimizerInfo of SGD declares its fused implementation on cpu, cuda, "
              "xpu, mps, not on refdev"),
         case("test_optimizers.py::test_optimizer_state_dict_moves[SGD-float32]", "optimizers")]


def test_each_vendor_line_counts_the_layers_entries_and_lists_their_failures():
    report = build_report(typed([reference(*TESTS)]), [], generated_at=NOW)
    modules, optimizers = report.databases
    assert modules.text == ("modules: 2 of 204 module×dtype pairs pass, 1 of them through the "
                            "backend's CPU fallback for some operators, 1 failed (not run: 200 "
                            "time budget spent, 1 not implemented on the device)")
    assert [(f.test, f.message) for f in modules.failures] == [("nn.Tanh-float32", TANH)]
    assert optimizers.text == ("optimizers: 2 of 4 optimizer tests pass, 1 failed (not run: 1 "
                               "fused not declared for the device)")
    text = to_markdown(report)
    assert ("## Modules, optimizers and distributed: PyTorch's ModuleInfo and OptimizerInfo "
            "tests") in text
    assert f"- reference: {md_text(modules.text)}." in text
    assert f"  - `SGD-forloop-float32`: {md_text(SKIPPED_GROUP)}" in text
    assert f"| cell | {' | '.join(COLUMNS)} | overall |" in text  # a column per layer


def test_the_pages_and_results_json_show_both_layers(tmp_path):
    results = write_results(tmp_path / "results", [reference(*TESTS), make_result("cpu", tests=[
        case("test_modules.py::test_module_runs[nn.Linear-float32]", "modules")])])
    write_report(results, tmp_path / "reports")
    data = json.loads((tmp_path / "reports" / "results.json").read_text())
    by_label = {(d["layer"], d["label"]): d for d in data["databases"]}
    assert by_label[("modules", "cpu")]["passed"] == 1
    assert by_label[("modules", "reference")]["total"] == 204
    assert by_label[("modules", "reference")]["fell_back"] == 1
    assert by_label[("optimizers", "reference")]["failures"][0]["test"] == "SGD-forloop-float32"
    (cell,) = [c for c in data["cells"] if c["vendor"] == "reference"]
    assert cell["layers"]["modules"]["status"] == cell["layers"]["optimizers"]["status"] == \
        "failed"
    index = (tmp_path / "reports" / "index.html").read_text()
    assert '<a href="#databases">Modules, optimizers and distributed</a>' in index
    assert "reference: optimizers: 2 of 4 optimizer tests pass, 1 failed" in index
    page = next((tmp_path / "reports" / "cells").glob("reference-*.html")).read_text()
    assert ("Modules, optimizers and distributed (PyTorch's ModuleInfo and OptimizerInfo tests, "
            "torch.distributed's collectives)</h2>") in page
    assert "<tr><td><code>nn.Tanh-float32</code></td>" in page
