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
