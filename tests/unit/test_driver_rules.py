"""Host driver checks by the vendors' published rules (vendors/<name>/vendor.yaml host.driver):
NVIDIA's minor-version compatibility is the floor per CUDA major, each release's own minimum
is shown beside it, and a 580 host runs the CUDA 13.2 cells with a note."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oota.config.vendorhost import DriverRule, DriverSpec
from oota.config.vendors import load_vendor
from oota.execute.hosts import check_vendor, driver_verdict

REPO = Path(__file__).resolve().parents[2]
CUDA = load_vendor(REPO / "vendors" / "cuda", REPO)


@pytest.mark.parametrize(("driver", "toolkit", "reason"), [
    ("580.65.06", "13.2", ""),
    ("595.58.03", "13.2", ""),
    ("579.99", "13.0", "NVIDIA driver 579.99 is older than 580, the minimum for CUDA 13.x (the "
                       "releases' own: 13.0: 580.65.06)"),
    ("570.124.06", "13.2", "NVIDIA driver 570.124.06 is older than 580, the minimum for CUDA "
                           "13.x"),
    ("525.60.13", "12.6", ""),
    ("520.61.05", "12.6", "NVIDIA driver 520.61.05 is older than 525, the minimum for CUDA 12.x"),
], ids=["580-runs-13.2", "595-runs-13.2", "below-13.x", "570-for-13.2", "525-runs-12.6",
        "below-12.x"])
def test_the_floor_is_the_cuda_majors_minimum(driver: str, toolkit: str, reason: str) -> None:
    verdict = driver_verdict(driver, toolkit, CUDA.host.driver, "CUDA")
    assert verdict.reason.startswith(reason) if reason else verdict.reason == ""


def test_a_580_host_runs_13_2_with_the_documented_limits_as_a_note() -> None:
    verdict = driver_verdict("580.95.05", "13.2", CUDA.host.driver, "CUDA")
    assert verdict.reason == ""
    assert verdict.note == (
        "NVIDIA driver 580.95.05 is below CUDA 13.2's own minimum (13.2: 595.45.04; 13.2.1: "
        "595.58.03) and runs it on the CUDA 13.x minimum 580: minor-version compatibility runs "
        "it with a limited feature set: PTX newer than the driver cannot be JIT-compiled, and "
        "APIs that need the newer driver return cudaErrorCallRequiresNewerDriver")
    assert verdict.facts["minimum"] == "580"
    assert verdict.facts["release_minimums"] == {"13.2": "595.45.04", "13.2.1": "595.58.03"}


def test_a_driver_at_the_releases_own_minimum_has_no_note() -> None:
    verdict = driver_verdict("595.58.03", "13.2", CUDA.host.driver, "CUDA")
    assert (verdict.reason, verdict.note) == ("", "")


def test_without_a_family_rule_the_releases_own_minimum_is_the_floor() -> None:
    """An older vendor.yaml's host.driver_min: each toolkit release's minimum, a floor."""
    spec = DriverSpec(rules=(DriverRule(toolkit="13.0", minimum="580.65.06"),))
    assert driver_verdict("580.65.06", "13.0", spec).reason == ""
    assert driver_verdict("575.51.03", "13.0", spec).reason == (
        "driver 575.51.03 is older than 580.65.06, the minimum for toolkit 13.0")
    assert driver_verdict("1.0", "12.6", spec).reason == ""   # no rule for 12.6


def test_a_vendor_without_a_published_table_says_why_nothing_is_checked() -> None:
    spec = DriverSpec(name="amdgpu driver", unverified="the table was not read")
    verdict = driver_verdict("6.8.5", "7.2", spec, "ROCm")
    assert verdict.reason == ""
    assert verdict.note == ("no published minimum amdgpu driver for ROCm 7.2 is checked: the "
                            "table was not read")


def test_a_simulated_580_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host check as a run makes it, with nvidia-smi answering like a 580 host."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\necho '580.95.05, NVIDIA H100 80GB HBM3'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    check = check_vendor(CUDA, docker_facts=None)
    assert check.supported and check.driver == "580.95.05"
    for toolkit in ("13.2", "13.0", "12.6"):
        assert check.for_cell(toolkit, CUDA).reason == "", toolkit
    assert "below CUDA 13.2's own minimum (13.2: 595.45.04" in check.for_cell("13.2", CUDA).note
    assert check.for_cell("13.0", CUDA).note == ""  # 580.95.05 >= 13.0's own 580.65.06


def test_hosts_says_per_cuda_version_what_a_580_host_runs(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`oota hosts` on a 580 host: a line per CUDA version of the matrix's cells."""
    from oota.api.runs import _toolkit_verdicts
    from oota.api.tables import format_hosts, host_row
    from oota.config.matrix import load_matrix

    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\necho '580.95.05, NVIDIA H100 80GB HBM3'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    matrix = load_matrix(REPO / "matrix.yaml")
    cuda = matrix.vendors["cuda"].vendor
    check = check_vendor(cuda, docker_facts=None)
    text = format_hosts([host_row("lab-a", "cuda", check, "",
                                  _toolkit_verdicts(matrix, cuda, check))], "table")
    lines = text.splitlines()
    assert lines[0].split() == ["lab-a", "cuda", "available", "(driver", "580.95.05)"]
    assert lines[1].strip() == "CUDA 12.6: the driver is enough"
    assert lines[3].strip().startswith("CUDA 13.2: NVIDIA driver 580.95.05 is below CUDA 13.2's "
                                       "own minimum (13.2: 595.45.04; 13.2.1: 595.58.03)")
