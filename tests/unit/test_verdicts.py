"""The verdict lattice (docs/design/verdicts.md): for each status of each layer, what the cell
becomes, and no pass without positive evidence that the device ran. Every combination of
layer statuses is checked against the page's table; the cases a user meets (a GPU the host has
and its container cannot see, a container given no device access, an older result stamped
passed without a device pass) are checked as results oota reads and reports."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from oota.results.assemble import overall_status
from oota.results.model import Result, Stage, TestOutcome
from oota.results.store import load
from oota.vocab import DEVICE_LAYERS, STATUS_ORDER, run_status
from tests.unit.test_report import case, make_result, refresh

VISIBLE = "test_device.py::test_device_visible"
# The layers a cell's run holds, those that use the device among them.
LAYERS = ("install", "compat", "device", "ops", "models")


def page_table(statuses: dict[str, str]) -> str:
    """The cell's status as docs/design/verdicts.md's table says it, row by row (its own
    reading of the page, independent of oota.vocab's code)."""
    present = set(statuses.values())
    for bad in ("interrupted", "error", "failed", "unsupported-here"):
        if bad in present:
            return bad
    facing = [s for layer, s in statuses.items() if layer in DEVICE_LAYERS]
    unproven = ("cpu-fallback", "not-claimed", "skipped")  # nothing ran on the device
    if "passed" in present:
        if not facing or "passed" in facing:
            return "passed"
        return next(s for s in unproven if s in facing)
    return next((s for s in unproven if s in present), "error")


COMBINATIONS = list(itertools.product(STATUS_ORDER, repeat=len(LAYERS)))


def test_every_combination_of_layer_statuses_is_the_pages_table():
    """8 statuses over 5 layers: 32,768 runs, each judged as the page's table says."""
    wrong = []
    for combination in COMBINATIONS:
        statuses = dict(zip(LAYERS, combination, strict=True))
        tests = [TestOutcome(id=f"t_{layer}", layer=layer, status=status,
                             duration_s=0.0)
                 for layer, status in statuses.items()]
        got = overall_status(tests, {})
        if got != page_table(statuses):
            wrong.append((statuses, got))
    assert len(COMBINATIONS) == 32768 and not wrong, wrong[:5]


def test_no_combination_passes_without_a_passed_device_layer():
    for combination in COMBINATIONS:
        statuses = dict(zip(LAYERS, combination, strict=True))
        if run_status(statuses.items()) == "passed":
            assert any(statuses[layer] == "passed" for layer in LAYERS if layer in DEVICE_LAYERS)


@pytest.mark.parametrize(("layers", "expected"), [
    # The host has the GPU, its container cannot see it: the visibility test fails, the rest
    # of the device-facing tests skip naming it.
    ({"install": "passed", "compat": "passed", "device": ["failed", "skipped"],
      "ops": ["skipped"], "models": ["skipped"]}, "failed"),
    # The host gave the container no access to the device: the host's fault.
    ({"install": "passed", "compat": "passed", "device": ["error", "skipped"],
      "ops": ["skipped"], "models": ["skipped"]}, "error"),
    # What an older suite wrote for the same host: every device-facing test a plain skip.
    ({"install": "passed", "compat": "passed", "device": ["skipped"], "ops": ["skipped"],
      "models": ["skipped"]}, "skipped"),
    # The host lacks the hardware: verified to install level, never passed.
    ({"install": "passed", "compat": "passed", "device": ["unsupported-here"],
      "ops": ["unsupported-here"]}, "unsupported-here"),
    # Every operator ran on the backend's CPU fallback, the device layer skipped by its list.
    ({"install": "passed", "device": ["skipped"], "ops": ["cpu-fallback", "skipped"]},
     "cpu-fallback"),
    # The device ran: one pass among skips is the evidence.
    ({"install": "passed", "device": ["passed", "skipped"], "ops": ["cpu-fallback"]}, "passed"),
    # A run that asked for no device layer is judged on what it asked for.
    ({"install": "passed", "compat": "passed"}, "passed"),
    # A run that holds nothing is an error, never a pass.
    ({}, "error"),
], ids=["gpu-present-not-visible", "no-device-access", "older-suite-all-skipped",
        "no-hardware-here", "all-on-cpu-fallback", "device-ran", "no-device-layer-asked",
        "nothing"])
def test_the_cases_a_user_meets(layers: dict[str, Any], expected: str):
    tests = [TestOutcome(id=f"{layer}_{i}", layer=layer, status=status,
                         duration_s=0.0)
             for layer, value in layers.items()
             for i, status in enumerate([value] if isinstance(value, str) else value)]
    assert overall_status(tests, {}) == expected


def test_a_stage_that_broke_outranks_tests_that_passed():
    tests = [TestOutcome(id="d", layer="device", status="passed", duration_s=0.0)]
    broke = Stage(status="error", duration_s=0.0, message="Engine lost")
    assert overall_status(tests, {"verify": broke}) == "error"


def invisible_gpu(status: str) -> dict[str, Any]:
    """A CUDA cell as the suite reports a host whose GPU its container cannot use."""
    message = ("no cuda device visible here (torch.cuda.is_available() is False). The host has "
               "the hardware (the host check found it), but ...")
    skip = f"no cuda device visible here; {VISIBLE} fails the cell for it"
    return refresh(make_result("cuda", toolkit="cuda", toolkit_version="13.0", tests=[
        case("test_install.py::test_imports", "install"),
        case("test_compat.py::test_torch_version", "compat"),
        case(VISIBLE, "device", status, message, {"visible": False}),
        case("test_device.py::test_device_count", "device", "skipped", skip),
        case("test_ops.py::test_op_matches_cpu[add-float32]", "ops", "skipped", skip),
        case("test_models.py::test_forward[llama-float32]", "models", "skipped", skip)]))


@pytest.mark.parametrize("status", ["failed", "error"])
def test_a_gpu_the_container_cannot_see_is_never_a_pass(tmp_path: Path, status: str):
    result = invisible_gpu(status)
    assert result["status"] == status
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    assert load(path).status == status


def test_an_older_pass_without_a_device_pass_reads_as_skipped(tmp_path: Path):
    """A result an older oota stamped 'passed' with every device-facing test skipped (the suite
    did so before test_device_visible) loads as what it is: skipped, and says why."""
    result = invisible_gpu("failed")
    result["tests"] = [t for t in result["tests"] if t["id"] != VISIBLE]
    result["summary"] = {"passed": 2, "skipped": 3}
    result["status"] = "passed"
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    loaded = load(path)
    assert loaded.status == "skipped"
    assert loaded.message.startswith("stamped 'passed' by oota ")
    assert loaded.message.endswith("none of its tests of a layer that uses the device passed")
    assert Result.from_json(result).status == "passed"  # the file itself is left as written
