"""The compile layer without torch: ``verify.compile`` in vendor.yaml and cell.json, the
layer's plan and arithmetic (verify/oota_compile.py: claims, not-claimed reasons, speedup and
spread, graph-break counts), and its figures where a user reads them (the cell page,
results.json). Results are synthetic, as verify/test_compile.py writes them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from oota.config.compilespec import CompileSpec
from oota.config.vendors import load_vendor
from oota.report.write import write_report
from oota.vocab import COMPILE_LAYER, DEVICE_LAYERS, LAYERS, METRICS_LAYERS, WORKLOAD_LAYER
from tests.reports import build_report
from tests.unit.test_report import NOW, case, make_result, typed, write_results
from tests.unit.test_vendor_schema import REPO, SHIPPED, copy_vendor, problems_of

sys.path.insert(0, str(REPO / "verify"))
import oota_compile  # noqa: E402

CELLS = {name: REPO / "images" / name / f"{name}-torch2.13.0-py3.11-debian12" / "cell.json"
         for name in ("cpu", "reference")}


def test_the_layer_uses_the_device_and_keeps_figures() -> None:
    assert LAYERS.index(COMPILE_LAYER) == LAYERS.index(WORKLOAD_LAYER) + 1
    assert COMPILE_LAYER in DEVICE_LAYERS and COMPILE_LAYER in METRICS_LAYERS


@pytest.mark.parametrize(("name", "backends", "compiler"), [
    ("cpu", ("inductor",), True), ("reference", ("refdev",), False), ("cuda", ("inductor",), True),
    ("rocm", ("inductor",), True), ("xpu", ("inductor",), True), ("xla", ("openxla",), False),
    ("ascend", (), False), ("gaudi", ("hpu_backend",), False)])
def test_every_vendor_declares_its_backends(name: str, backends: tuple[str, ...],
                                            compiler: bool) -> None:
    spec = load_vendor(SHIPPED[name], REPO).verify.torch_compile
    assert spec is not None and (spec.backends, spec.compiler) == (backends, compiler)
    # What a vendor leaves out says why: no claim is silently absent.
    if not backends:
        assert spec.not_claimed


def test_cell_json_carries_every_setting() -> None:
    cpu = json.loads(CELLS["cpu"].read_text())["verify"]["compile"]
    assert cpu == {"backends": ["inductor"], "modes": ["default", "max-autotune"],
                   "models": ["llama"], "export": True, "aot_inductor": True, "compiler": True,
                   "not_claimed": {"reduce-overhead": "CUDA graphs replay a captured launch "
                                                     "sequence; the CPU has no graphs"},
                   "timed_runs": 10}
    reference = json.loads(CELLS["reference"].read_text())["verify"]["compile"]
    assert reference["backends"] == ["refdev"] and not reference["aot_inductor"]
    assert "inductor" in reference["not_claimed"]


def test_models_default_to_the_first_of_the_models_layer(tmp_path: Path) -> None:
    folder = copy_vendor(tmp_path, "reference", ("    models: [llama]\n    export: true\n",
                                                 "    export: true\n"))
    spec = load_vendor(folder, tmp_path).verify
    assert spec.torch_compile is not None
    assert spec.torch_compile.to_json(spec.models)["models"] == [spec.models[0]]


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("    backends: [refdev]\n", "    backends: refdev\n", "backends"),
    ("    modes: [default]\n", "    modes: [fast]\n", "modes"),
], ids=["backends-not-a-list", "unknown-mode"])
def test_a_bad_compile_section_is_a_located_problem(tmp_path: Path, old: str, new: str,
                                                    expected: str) -> None:
    folder = copy_vendor(tmp_path, "reference", (old, new))
    found = problems_of(folder, tmp_path)
    assert any(f"verify.compile.{expected}" in p for p in found), found


# -- the layer's plan and arithmetic ---------------------------------------------------------

def claims(**data: Any) -> oota_compile.Claims:
    return oota_compile.Claims.from_spec({"compile": data})


def test_no_backend_is_one_not_claimed_entry_with_the_vendors_reasons() -> None:
    assert oota_compile.Claims.from_spec({}).unclaimed(declared=False) == [
        ("torch.compile", "the vendor claims no torch.compile backend (verify.compile in "
                          "vendor.yaml)")]
    (entry,) = claims(backends=[], not_claimed={"npu": "an object"}).unclaimed(declared=True)
    assert entry[1].endswith("(verify.compile in vendor.yaml): npu: an object")


def test_modes_and_features_say_why_they_are_not_claimed() -> None:
    found = claims(backends=["refdev"], modes=["default"],
                   not_claimed={"inductor": "no code generator", "max-autotune": "Inductor's"})
    assert found.unclaimed(declared=True) == [("inductor", "no code generator")]
    assert not found.claims("max-autotune") and found.why_not("max-autotune") == "Inductor's"
    assert found.why_not("export") == ("the vendor does not claim it (verify.compile in "
                                       "vendor.yaml: export)")
    assert found.claims("default") and not found.claims("aot_inductor")


def test_half_dtypes_are_the_vendors_own() -> None:
    assert oota_compile.dtypes(["float32", "bfloat16", "int64"]) == ["float32", "bfloat16"]
    assert oota_compile.dtypes(["float32", "float64", "float16", "bfloat16"]) == [
        "float32", "float16", "bfloat16"]


def test_speedup_is_the_ratio_of_medians_with_each_runs_spread() -> None:
    timed = oota_compile.speedup([0.02, 0.01, 0.03], [0.005, 0.004, 0.006])
    assert timed["speedup"] == pytest.approx(4.0)  # 0.02 / 0.005
    assert timed["eager_spread"] == pytest.approx(1.0)  # (0.03 - 0.01) / 0.02
    assert timed["compiled_spread"] == pytest.approx(0.4)
    assert oota_compile.speedup([0.01], [0.0])["speedup"] is None  # no time, no figure


def test_graph_breaks_count_and_name_their_reasons_on_one_line() -> None:
    found = oota_compile.graph_breaks({"Call to `graph_break()`\n  Explanation: user": 2,
                                       "x" * 300: 1})
    assert found["graph_breaks"] == 3
    assert found["break_reasons"][0] == "Call to `graph_break()` Explanation: user"
    assert len(found["break_reasons"][1]) == 200


def test_a_compile_error_shows_its_first_lines() -> None:
    error = RuntimeError("backend failed\nline 2\nline 3\nline 4\nline 5")
    assert oota_compile.first_lines(error) == (
        "RuntimeError: backend failed\nline 2\nline 3\nline 4 ...")


# -- the figures in the report ---------------------------------------------------------------

def compiled_test(model: str, status: str = "passed", message: str = "",
                  **figures: Any) -> dict[str, Any]:
    data = {"model": model, "dtype": "float32", "backend": "refdev", "graphs": 1,
            "graph_breaks": 0, "break_reasons": [], "compile_s": 1.84, "first_step_s": 1.85,
            "eager_median_s": 0.0072, "compiled_median_s": 0.0089, "speedup": 0.81,
            "eager_spread": 0.06, "compiled_spread": 1.18, "timed_runs": 10, **figures}
    return case(f"test_compile.py::test_compiled_model[refdev-{model}]", "compile",
                status, message, data)


def results() -> list[dict[str, Any]]:
    op = case("test_compile.py::test_compiled_op[refdev-mul-float32]", "compile", "failed",
              "mul (float32) compiled by refdev: output 0 on refdev: error against the float64 "
              "reference 1", {"op": "mul", "dtype": "float32", "graphs": 1})
    return [make_result("reference", tests=[
        case("test_device.py::test_device_visible", "device"), compiled_test("llama"),
        compiled_test("resnet", "failed", "resnet (float32) compiled by refdev against the "
                      "CPU's eager step: logits ...", speedup=None, compile_s=None), op])]


def test_rows_are_one_per_compiled_model() -> None:
    (row,) = build_report(typed(results()), [], generated_at=NOW).rows
    llama, resnet = row.compiled()
    assert (llama.model, llama.backend, llama.graphs, llama.speedup) == ("llama", "refdev", 1,
                                                                         0.81)
    assert resnet.status == "failed" and resnet.speedup is None and resnet.compile_s is None


def test_cell_page_and_results_json_show_the_compile_figures(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    write_report(write_results(tmp_path / "results", results()), out)
    page = (out / "cells" / "reference-torch2.13.0-py3.11-debian12.html").read_text()
    assert "Compiled models (torch.compile)" in page
    assert "<td>llama</td><td>refdev</td>" in page and "0.81×" in page and "1.84 s" in page
    (cell,) = json.loads((out / "results.json").read_text())["cells"]
    assert [c["model"] for c in cell["compile"]] == ["llama", "resnet"]
    assert cell["compile"][0]["compile_s"] == 1.84 and cell["compile"][1]["speedup"] is None
    assert cell["layers"]["compile"]["status"] == "failed"


def test_compile_spec_defaults() -> None:
    spec = CompileSpec(backends=("inductor",))
    assert spec.to_json(("gemma", "llama"))["models"] == ["gemma"]
    assert spec.to_json(())["modes"] == ["default"]
