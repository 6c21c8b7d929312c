"""What a CUDA cell verified on a host without a GPU must show (tests/docker/test_cuda_cell.py
on a real build, opt-in: -m cuda; tests/unit/test_cuda_cell_recording.py on the recording of
one, in every run): built, verified to install level, never called passed; the smoke layer's
checks that need no GPU pass, and only its device run is unsupported here."""

from __future__ import annotations

from typing import Any


def check_install_level(result: dict[str, Any]) -> None:
    assert result["stages"]["build"]["status"] == "passed", result.get("message")
    assert result["installed"]["torch"]["cuda"] == "13.2"
    by_layer: dict[str, set[str]] = {}
    for test in result["tests"]:
        by_layer.setdefault(test["layer"], set()).add(test["status"])
    assert by_layer["install"] <= {"passed", "skipped"}
    assert "failed" not in {s for states in by_layer.values() for s in states}, [
        t["id"] for t in result["tests"] if t["status"] == "failed"]
    # No GPU here: the device tests are unsupported-here with the host check's reason.
    assert by_layer["device"] == {"unsupported-here"}
    assert result["status"] == "unsupported-here"
    check = result["host"]["vendor_check"]
    assert check["supported"] is False and check["reasons"]


def check_smoke_without_gpu(result: dict[str, Any]) -> None:
    """torch 2.15's CUDA build imports and its first CUDA call fails clearly ("Found no NVIDIA
    driver"), a pass in a minimal OS (no libcuda in the container); PyTorch's smoke checks pass
    with numpy 2.x and 1.x; torchvision is the release paired with torch; cuDNN, NCCL and the
    CUDA runtime agree with their pip packages; the C++ extension built against this torch
    loads, and only its device run is unsupported here."""
    smoke = {t["id"].split("::")[1]: t for t in result["tests"] if t["layer"] == "smoke"}
    no_hardware = smoke["test_full_stack_without_hardware"]
    assert no_hardware["status"] == "passed", no_hardware
    assert no_hardware["data"]["raised"] == "RuntimeError"
    assert no_hardware["data"]["message"].startswith("Found no NVIDIA driver on your system")
    assert no_hardware["data"]["environment"] == "minimal-os"
    for name in ("test_release_smoke_checks[numpy2]", "test_release_smoke_checks[numpy1]",
                 "test_companions_are_the_cells_pairing", "test_cuda_libraries_agree_with_torch",
                 "test_cpp_extension_loads_and_runs"):
        assert smoke[name]["status"] == "passed", smoke[name]
    assert smoke["test_companions_are_the_cells_pairing"]["data"]["installed"] == {
        "torchvision": "0.29.2"}
    seen = smoke["test_cuda_libraries_agree_with_torch"]["data"]["seen"]
    assert seen["cuda"] == "13.2" and seen["cudnn"] == seen["cudnn_compiled"] and seen["nccl"]
    assert smoke["test_cpp_extension_runs_on_the_device"]["status"] == "unsupported-here"
