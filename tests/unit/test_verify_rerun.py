"""Flaky told from broken (verify/oota_rerun.py): the suite's recorder runs each failed test
once more in a fresh process; passed there is 'flaky', never 'passed', with both attempts in
its data; after a crash, a device that fails its health probe makes the later failures the
device's (error). Real pytest processes over small fake layers, no torch needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# Fails in the first process that runs it, passes in the next: a counter file beside it.
FAKE_LAYER = '''
from pathlib import Path

import pytest

LAYER = "ops"
COUNT = Path(__file__).with_name("runs.count")


@pytest.mark.parametrize("pair", ["add-float32", "tanh-float32", "mul-float32"])
def test_op_matches_cpu(pair):
    if pair == "tanh-float32":
        runs = int(COUNT.read_text()) if COUNT.exists() else 0
        COUNT.write_text(str(runs + 1))
        assert runs > 0, "tanh differs from the CPU in 3 of 8 elements"
    if pair == "mul-float32" and Path(__file__).with_name("broken").exists():
        pytest.fail("mul differs from the CPU in every element", pytrace=False)
'''

CRASH_LAYER = '''
import pytest

LAYER = "ops"


@pytest.mark.parametrize("pair", ["abs-float32", "add-float32", "mul-float32"])
def test_op_matches_cpu(pair):
    if pair == "abs-float32":
        pytest.fail("the worker judging abs-float32 (killed by SIGSEGV) before it had a result",
                    pytrace=False)
    if pair == "mul-float32":
        pytest.fail("mul differs from the CPU in every element", pytrace=False)
'''


def run_suite(folder: Path, layer: str, cell: dict[str, Any] | None = None,
              **env: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    (folder / "test_fake_ops.py").write_text(layer)
    (folder / "cell.json").write_text(json.dumps(cell or {}))
    out = folder / "out"
    out.mkdir(exist_ok=True)
    environ = {"PYTHONPATH": str(REPO / "verify"), "OOTA_VERIFY_OUT": str(out),
               "OOTA_CELL_FILE": str(folder / "cell.json"), "PATH": "/usr/bin:/bin", **env}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "oota_suite", "-p",
                          "no:cacheprovider", "-c", str(REPO / "verify" / "pytest.ini"),
                          "--rootdir", str(folder), str(folder)],
                         capture_output=True, text=True, check=False, env=environ, cwd=folder)
    return run, json.loads((out / "tests.json").read_text())


def by_pair(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["id"].split("[")[1].rstrip("]"): t for t in data["tests"]}


def test_a_test_that_passes_on_its_retry_is_flaky_and_the_run_passes(tmp_path: Path) -> None:
    run, data = run_suite(tmp_path, FAKE_LAYER)
    assert run.returncode == 0, run.stdout + run.stderr
    tanh = by_pair(data)["tanh-float32"]
    assert tanh["status"] == "flaky"
    assert tanh["message"].startswith("failed, then passed when run again in a fresh process; "
                                      "the failure: AssertionError: tanh differs")
    first, second = tanh["data"]["attempts"]
    assert (first["status"], second["status"]) == ("failed", "passed")
    assert (tmp_path / "runs.count").read_text() == "2"  # two processes ran it, once each
    assert data["counts"] == {"passed": 2, "flaky": 1}
    assert data["retries"]["flaky"] == ["test_fake_ops.py::test_op_matches_cpu[tanh-float32]"]
    assert ("oota: 1 failed tests run again in a fresh process: 1 passed there, flaky "
            "(test_fake_ops.py::test_op_matches_cpu[tanh-float32])") in run.stdout


def test_a_test_that_fails_again_stays_failed_with_both_attempts(tmp_path: Path) -> None:
    (tmp_path / "broken").write_text("")
    run, data = run_suite(tmp_path, FAKE_LAYER)
    assert run.returncode == 1
    mul = by_pair(data)["mul-float32"]
    assert mul["status"] == "failed"
    assert [a["status"] for a in mul["data"]["attempts"]] == ["failed", "failed"]
    assert mul["data"]["attempts"][1]["message"] == ("Failed: mul differs from the CPU in "
                                                     "every element")
    assert by_pair(data)["tanh-float32"]["status"] == "flaky"


def test_the_retries_are_capped_and_the_cap_is_said(tmp_path: Path) -> None:
    (tmp_path / "broken").write_text("")
    run, data = run_suite(tmp_path, FAKE_LAYER, OOTA_RERUN_LIMIT="1")
    assert by_pair(data)["tanh-float32"]["status"] == "flaky"  # the first failure is retried
    assert "attempts" not in (by_pair(data)["mul-float32"].get("data") or {})
    assert data["retries"]["not_retried"] == 1
    assert "; 1 not retried (OOTA_RERUN_LIMIT)" in run.stdout
    _, data = run_suite(tmp_path, FAKE_LAYER, OOTA_RERUN_LIMIT="0")
    assert data["retries"] == {} and by_pair(data)["mul-float32"]["status"] == "failed"


def test_after_a_crash_a_device_failing_its_probe_makes_later_failures_errors(
        tmp_path: Path) -> None:
    """The backend the probe opens does not import: the device is not healthy, so the failure
    after the crash is the device's state (error), and the run says so."""
    run, data = run_suite(tmp_path, CRASH_LAYER, {"device": "refdev",
                                                  "smoke_imports": ["no_such_backend_here"]})
    assert run.returncode == 1
    health = data["retries"]["health"]
    assert health["after"] == "test_fake_ops.py::test_op_matches_cpu[abs-float32]"
    assert health["healthy"] is False and health["detail"].startswith("exit 1: ")
    crashed, later = by_pair(data)["abs-float32"], by_pair(data)["mul-float32"]
    assert crashed["status"] == "failed"  # the crash itself stays the stack's
    assert later["status"] == "error"
    assert later["message"].startswith("the device failed its health probe after the crash in "
                                       "test_fake_ops.py::test_op_matches_cpu[abs-float32]")
    assert "1 later failures are the device's state (error)" in run.stdout
