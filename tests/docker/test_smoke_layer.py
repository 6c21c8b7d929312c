"""The smoke layer (verify/test_smoke.py) run for real in the session's CPU image.

Nothing new is built: the passing run is the session's own verification of the image that
conftest.py built (``built``); the others start a container of it and run ``oota-verify --layer
smoke`` there, as a user would, with cell.json or the builder's record of the C++ extension
replaced (about 5 s each). The same layer on the CUDA image's unsupported-here verification:
test_cuda_cell.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oota.engine.base import RUN_LABEL
from oota.results.assemble import overall_status, suite_test

from .test_layers import CELL_IN_IMAGE, _read_file, by_id, run_verify

SMOKE = "test_smoke.py::"


@pytest.fixture(scope="module")
def image(built) -> str:
    assert built.results[0]["stages"]["build"]["status"] == "passed", built.results[0]
    return built.tag


@pytest.fixture(scope="module")
def cell_json(image, docker_client, run_id) -> dict:
    container = docker_client.containers.create(image, command=["true"],
                                                labels={RUN_LABEL: run_id})
    try:
        return json.loads(_read_file(container, CELL_IN_IMAGE))
    finally:
        container.remove(force=True)


def _with_cell(tmp_path: Path, cell: dict) -> dict:
    """run_verify's keywords that make the suite read ``cell`` instead of the image's own."""
    override = tmp_path / "cell.json"
    override.write_text(json.dumps(cell))
    override.chmod(0o644)
    return {"volumes": {str(override): {"bind": "/tmp/oota-cell.json", "mode": "ro"}},
            "environment": {"OOTA_CELL_FILE": "/tmp/oota-cell.json"}}


def test_the_smoke_layer_passes_in_the_sessions_verification(built):
    """The session's own verification of the CPU cell (every layer) holds the smoke layer:
    PyTorch's smoke checks with the image's numpy 2.x and the build's numpy 1.26.4, and the C++
    extension the builder compiled against this torch, run on the CPU device. Read from its
    result: no container of its own."""
    tests = {t["id"]: t for t in built.results[0]["tests"] if t["layer"] == "smoke"}
    numpy2, numpy1 = (tests[f"{SMOKE}test_release_smoke_checks[{v}]"] for v in ("numpy2", "numpy1"))
    assert numpy2["status"] == numpy1["status"] == "passed", (numpy2, numpy1)
    assert numpy2["data"]["numpy"].startswith("2.") and numpy1["data"]["numpy"] == "1.26.4"
    assert numpy1["data"]["numpy_file"] == "/opt/oota/numpy1/numpy/__init__.py"
    assert numpy2["data"]["device"] == "cpu" and "numpy_through_device" in numpy2["data"]["checked"]
    assert {numpy2["data"]["environment"], numpy1["data"]["environment"]} == {"hardware"}
    for name in ("test_cpp_extension_loads_and_runs", "test_cpp_extension_runs_on_the_device"):
        assert tests[SMOKE + name]["status"] == "passed", tests[SMOKE + name]
    built_with = tests[SMOKE + "test_cpp_extension_loads_and_runs"]["data"]
    assert built_with["torch"] == "2.13.0+cpu" and built_with["operators"] == [
        "oota_smoke::scaled_add"]
    assert tests[SMOKE + "test_full_stack_without_hardware"]["message"] == (
        "not applicable: the CPU vendor's device is the host's own CPU")
    assert tests[SMOKE + "test_cuda_libraries_agree_with_torch"]["message"].startswith(
        "torch 2.13.0+cpu is no CUDA build")


def test_the_full_stack_without_the_hardware_is_a_pass(image, docker_client, run_id, cell_json,
                                                       tmp_path):
    """The CPU image told its device is CUDA, on a host the host check found no GPU on: torch
    imports, torch.cuda.is_available() is False and the first CUDA call raises "Torch not
    compiled with CUDA enabled", a clear error: the test passes, in a minimal OS (no libcuda),
    while the device tests are unsupported here and so is the cell."""
    cell = {**cell_json, "device": "cuda", "driver_libraries": ["libcuda.so*"]}
    kwargs = _with_cell(tmp_path, cell)
    kwargs["environment"]["OOTA_UNSUPPORTED_HERE"] = "no NVIDIA GPU (nvidia-smi not found)"
    code, data, log = run_verify(docker_client, image, run_id, "--layer", "smoke", **kwargs)
    assert code == 0, log[-3000:]
    assert data["layers"] == ["smoke"]
    tests = by_id(data)
    # A run of the smoke layer alone brings the device layer's evidence along.
    assert tests["test_device.py::test_device_visible"]["status"] == "skipped"
    assert tests["test_device.py::test_device_visible"]["message"].startswith("unsupported-here")
    no_hardware = tests[SMOKE + "test_full_stack_without_hardware"]
    assert no_hardware["status"] == "passed", no_hardware
    record = no_hardware["data"]
    assert (record["raised"], record["message"]) == (
        "AssertionError", "Torch not compiled with CUDA enabled")
    assert record["is_available"] is False and record["environment"] == "minimal-os"
    assert tests[SMOKE + "test_release_smoke_checks[numpy1]"]["data"]["device"] is None
    assert tests[SMOKE + "test_cpp_extension_loads_and_runs"]["status"] == "passed"
    assert tests[SMOKE + "test_cpp_extension_runs_on_the_device"]["message"].startswith(
        "unsupported-here: no NVIDIA GPU")
    outcomes = [suite_test(t, f"tests[{i}]") for i, t in enumerate(data["tests"])]
    assert overall_status(outcomes, {}) == "unsupported-here"


def _build_record(image, docker_client, run_id) -> dict:
    container = docker_client.containers.create(image, command=["true"],
                                                labels={RUN_LABEL: run_id})
    try:
        return json.loads(_read_file(container, "/opt/oota/smoke-ext/build.json"))
    finally:
        container.remove(force=True)


def _forged(tmp_path: Path, record: dict) -> dict:
    forged = tmp_path / "build.json"
    forged.write_text(json.dumps(record))
    forged.chmod(0o644)
    return {str(forged): {"bind": "/opt/oota/smoke-ext/build.json", "mode": "ro"}}


def test_versions_that_disagree_fail_their_tests(image, docker_client, run_id, cell_json,
                                                 tmp_path):
    """cell.json pairs transformers 5.0.0 (standing in for a companion; the image holds 5.23.0)
    and the builder's record says the extension was built against torch 2.12.0: exactly the
    companion test and the two extension tests fail, each naming what disagrees."""
    kwargs = _with_cell(tmp_path, {**cell_json, "companions": {"transformers": "5.0.0"}})
    record = _build_record(image, docker_client, run_id)
    kwargs["volumes"] |= _forged(tmp_path, {**record, "torch": "2.12.0+cpu"})
    code, data, log = run_verify(docker_client, image, run_id, "--layer", "smoke", **kwargs)
    assert code == 1, log[-3000:]
    failed = {t["id"]: t["message"] for t in data["tests"] if t["status"] == "failed"}
    assert failed.pop(SMOKE + "test_companions_are_the_cells_pairing").startswith(
        "AssertionError: transformers 5.23.0 is installed; the cell pairs 5.0.0 with its torch "
        "(vendors/companions.yaml or the vendor's companions)")
    assert set(failed) == {SMOKE + "test_cpp_extension_loads_and_runs",
                           SMOKE + "test_cpp_extension_runs_on_the_device"}, failed
    assert all(m.startswith(f"Failed: the C++ extension was built against torch 2.12.0+cpu "
                            f"({record['git_version']}); this image runs 2.13.0+cpu")
               for m in failed.values()), failed


def test_an_extension_that_did_not_build_fails_its_tests(image, docker_client, run_id, tmp_path):
    """The builder's record says the compiler failed (as a vendor claiming cpp_extension whose
    torch ships broken headers would): both extension tests fail with the compiler's message,
    nothing else in the layer does; the image itself was built."""
    record = _build_record(image, docker_client, run_id)
    error = "oota_smoke_ops.cpp:10:10: fatal error: torch/library.h: No such file or directory"
    volumes = _forged(tmp_path, {**record, "status": "failed", "traceback": error,
                                 "error": "RuntimeError: Error building extension "
                                          "'oota_smoke_ops'"})
    code, data, log = run_verify(docker_client, image, run_id, "--layer", "smoke",
                                 volumes=volumes)
    assert code == 1, log[-3000:]
    failed = {t["id"]: t["message"] for t in data["tests"] if t["status"] == "failed"}
    assert set(failed) == {SMOKE + "test_cpp_extension_loads_and_runs",
                           SMOKE + "test_cpp_extension_runs_on_the_device"}, failed
    for message in failed.values():
        assert message.startswith("Failed: the C++ extension did not build against torch "
                                  "2.13.0+cpu (torch.utils.cpp_extension.load, c++ (Debian")
        assert error in message
