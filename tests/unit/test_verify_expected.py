"""Expected failures of the skip list (verify/oota_expected.py, ``kind: xfail``): the test
runs; failing, it is a skip that says it failed as expected; passing, the run names the entry
to remove, and a strict entry fails the run. Real pytest processes over a fake layer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LAYER = '''
import pytest

LAYER = "ops"


@pytest.mark.parametrize("pair", ["tanh-float32", "abs-float32"])
def test_op_matches_cpu(pair):
    assert pair == "abs-float32", "tanh differs from the CPU in 3 of 8 elements"
'''
ENTRY = {"reason": "tanh's last ulp", "owner": "team-npu", "expires": "2099-12-31",
         "issue": "https://github.com/pytorch/pytorch/issues/12345", "kind": "xfail"}
TANH = {**ENTRY, "id": "*[[]tanh-float32]"}


def run_suite(folder: Path, skips: list[dict[str, Any]]
              ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    (folder / "test_fake_ops.py").write_text(LAYER)
    (folder / "cell.json").write_text(json.dumps({"skips": skips}))
    out = folder / "out"
    out.mkdir()
    env = {"PYTHONPATH": str(REPO / "verify"), "OOTA_VERIFY_OUT": str(out),
           "OOTA_CELL_FILE": str(folder / "cell.json"), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "oota_suite", "-p",
                          "no:cacheprovider", "-c", str(REPO / "verify" / "pytest.ini"),
                          "--rootdir", str(folder), str(folder)],
                         capture_output=True, text=True, check=False, env=env, cwd=folder)
    return run, json.loads((out / "tests.json").read_text())


def status_of(data: dict[str, Any], pair: str) -> tuple[str, str]:
    test = next(t for t in data["tests"] if t["id"].endswith(f"[{pair}]"))
    return test["status"], test["message"]


def test_an_expected_failure_that_fails_is_a_skip_saying_so(tmp_path: Path) -> None:
    run, data = run_suite(tmp_path, [TANH])
    assert run.returncode == 0, run.stdout + run.stderr
    status, message = status_of(data, "tanh-float32")
    assert status == "skipped"
    assert message == ("skip list: expected failure: tanh's last ulp (owner team-npu, expires "
                       "2099-12-31, issue https://github.com/pytorch/pytorch/issues/12345); it "
                       "failed: AssertionError: tanh differs from the CPU in 3 of 8 elements")
    assert data["skips"]["unexpected_pass"] == [] and data["skips"]["unmatched"] == []
    assert "retries" not in data or not data["retries"]  # a known failure is not retried


@pytest.mark.parametrize(("strict", "status", "code"), [(False, "passed", 0),
                                                        (True, "failed", 1)])
def test_an_expected_failure_that_passes_names_the_entry_to_remove(
        tmp_path: Path, strict: bool, status: str, code: int) -> None:
    entry = {**ENTRY, "id": "*[[]abs-float32]", **({"strict": True} if strict else {})}
    run, data = run_suite(tmp_path, [TANH, entry])
    assert run.returncode == code, run.stdout + run.stderr
    got, message = status_of(data, "abs-float32")
    assert got == status
    assert message.startswith("unexpected pass: remove the entry '*[[]abs-float32]' from the "
                              "vendor's skips.yaml")
    assert data["skips"]["unexpected_pass"] == ["*[[]abs-float32]"]
    assert data["retries"] in ({}, None) or not data["retries"].get("retried")
