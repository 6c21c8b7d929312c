"""Both places a result comes from use the one builder: ``verify --here`` (records the
interpreter it ran, not invoke's own) and an image's run (records an interrupt with the stage it
reached). The suite and Docker are faked at their boundary (subprocess, the stage bodies)."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from oota.config.matrix import Matrix, load_matrix
from oota.console import Console
from oota.execute import inplace
from oota.execute.build import BuildOptions, CellRun
from oota.execute.hosts import HostCheck
from oota.plan import plan
from oota.results.model import Host
from oota.results.store import load

REPO = Path(__file__).resolve().parents[2]
OTHER_PYTHON = "/opt/other/bin/python3.12"
SUITE_TESTS = {"duration_s": 2.5, "tests": [
    {"id": "test_install.py::test_imports", "layer": "install", "status": "passed",
     "duration_s": 0.5},
    {"id": "test_device.py::test_matmul", "layer": "device", "status": "skipped",
     "duration_s": 0.1, "message": "unsupported-here: no GPU; no device"}]}


def _no_base(cell):
    raise AssertionError(f"{cell.id}: no base image is needed here")


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REPO / "matrix.yaml")


def fake_suite(calls: list[Sequence[str]], tests: dict[str, Any] | None) -> Any:
    """subprocess.run for oota-verify: writes what the suite writes into --out."""
    def run(argv: Sequence[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        out = Path(argv[argv.index("--out") + 1])
        if tests is not None:
            (out / "tests.json").write_text(json.dumps(tests))
            (out / "installed.json").write_text(json.dumps(
                {"torch": {"version": "2.13.0+cpu"}, "packages": {}}))
        return subprocess.CompletedProcess(argv, 0)
    return run


def verify_here(matrix: Matrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                tests: dict[str, Any] | None = SUITE_TESTS) -> tuple[Any, list[Sequence[str]]]:
    cell = plan(matrix, ["cpu"])[0]
    manifest = {"id": cell.id, **cell.coordinates()}
    calls: list[Sequence[str]] = []
    monkeypatch.setattr(inplace, "check_suite_runs", lambda python: None)
    monkeypatch.setattr(inplace, "manifest_here", lambda m, v, python: (
        manifest, f"{cell.id}-here", "sha256:" + "5" * 64))
    monkeypatch.setattr(inplace, "check_vendor", lambda vendor, facts: HostCheck(
        vendor="cpu", reasons=("no such device",), facts={"needs": "nothing"}))
    monkeypatch.setattr(subprocess, "run", fake_suite(calls, tests))  # the suite's run
    result = inplace.verify_here(matrix, "cpu", tmp_path, python=OTHER_PYTHON)
    return result, calls


def test_verify_here_records_the_interpreter_it_ran(matrix: Matrix, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    result, calls = verify_here(matrix, tmp_path, monkeypatch)
    assert calls[0][0] == OTHER_PYTHON
    assert result.host.facts["python"] == OTHER_PYTHON
    saved = load(tmp_path / result.cell.id / "result.json")
    assert saved == result
    assert saved.cell.id.endswith("-here") and saved.cell.fingerprint.endswith("5" * 64)
    assert [(t.id, t.status) for t in saved.tests] == [
        ("test_install.py::test_imports", "passed"),
        ("test_device.py::test_matmul", "unsupported-here")]
    assert saved.status == "unsupported-here"
    assert saved.host.vendor_check is not None
    assert saved.host.vendor_check.reasons == ("no such device",)
    assert saved.installed is not None and saved.installed.torch.version == "2.13.0+cpu"


def test_verify_here_without_suite_output_is_a_failed_stage(
        matrix: Matrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, _ = verify_here(matrix, tmp_path, monkeypatch, tests=None)
    assert result.status == "failed"
    assert result.message == "verify: the verify suite wrote no results"


def test_an_interrupted_verify_is_recorded_with_its_stage(
        matrix: Matrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cell = plan(matrix, ["cpu"])[0]
    options = BuildOptions(results_dir=tmp_path, run_id="run1")
    run = CellRun(matrix, cell, object(), Console(io.StringIO(), live=False),  # type: ignore[arg-type]
                  options, _no_base, Host(facts={"arch": "x86_64"}))

    def stopped() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "_verify", stopped)
    with pytest.raises(KeyboardInterrupt):
        run.run(build=False)
    saved = load(tmp_path / cell.id / "result.json")
    assert saved.status == "interrupted"
    assert list(saved.stages) == ["verify"]
    assert saved.stages["verify"].status == "interrupted"
    assert saved.message == "verify: interrupted by SIGINT during verify"
    assert saved.run_id == "run1" and saved.image is not None
    assert saved.image.tag == options.tag_for(cell)
    junit = (tmp_path / cell.id / "junit.xml").read_text()
    assert 'type="interrupted"' in junit
