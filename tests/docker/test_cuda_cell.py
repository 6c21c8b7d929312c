"""A CUDA cell on a host without a GPU: built, verified to install level, never called passed."""

from __future__ import annotations


def test_cuda_cell_is_verified_to_install_level(cuda_built):
    (result,) = cuda_built.results
    assert result["stages"]["build"]["status"] == "passed", result.get("message")
    assert result["installed"]["torch"]["cuda"] == "13.2"
    by_layer = {}
    for test in result["tests"]:
        by_layer.setdefault(test["layer"], set()).add(test["status"])
    assert by_layer["install"] <= {"passed", "skipped"}
    assert "failed" not in {s for states in by_layer.values() for s in states}, result["tests"]
    # No GPU here: the device tests are unsupported-here with the host check's reason.
    assert by_layer["device"] == {"unsupported-here"}
    assert result["status"] == "unsupported-here"
    check = result["host"]["vendor_check"]
    assert check["supported"] is False and check["reasons"]


def test_the_cuda_cells_smoke_layer_without_a_gpu(cuda_built):
    """The CUDA cell's own verification on this GPU-less host holds the smoke layer: torch
    2.15's CUDA build imports and its first CUDA call fails clearly ("Found no NVIDIA driver"),
    a pass in a minimal OS (no libcuda in the container); PyTorch's smoke checks pass with
    numpy 2.x and 1.x; torchvision is the release paired with torch; cuDNN, NCCL and the CUDA
    runtime agree with their pip packages; the C++ extension built against this torch loads,
    and only its device run is unsupported here."""
    (result,) = cuda_built.results
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
