"""A crash of the suite's process fails the test it was in, and the suite goes on
(verify/oota_journal.py, oota-verify): torch_xla 2.9.0 segfaulted in nn.CrossEntropyLoss in the
modules layer, and the whole verification ended with no result. oota-verify, copied beside a
fake layer as in an image, runs real pytest processes; no torch needed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# One test kills its process with SIGSEGV, as a vendor kernel does; one fails before it, the
# others pass. The crashing test crashes in every process that runs it (its retry too).
FAKE_LAYER = '''
import os
import signal

import pytest

LAYER = "modules"


@pytest.mark.parametrize("module", ["nn.ReLU", "nn.BatchNorm2d", "nn.CrossEntropyLoss",
                                    "nn.GELU", "nn.Linear"])
def test_module_matches_cpu(module):
    if module == "nn.BatchNorm2d":
        pytest.fail("running_var differs from the CPU", pytrace=False)
    if module == os.environ.get("CRASH_IN", "nn.CrossEntropyLoss"):
        os.kill(os.getpid(), signal.SIGSEGV)
'''


def suite_beside(folder: Path, layer: str = FAKE_LAYER) -> Path:
    """The suite's files as an image holds them (no test of the real layers), a fake layer."""
    here = folder / "verify"
    here.mkdir()
    for source in (REPO / "verify").iterdir():
        if source.is_file() and not source.name.startswith("test_"):
            shutil.copy(source, here / source.name)
    shutil.copy(REPO / "oota" / "vocab.py", here / "oota_vocab.py")
    (here / "test_fake_modules.py").write_text(layer)
    (folder / "cell.json").write_text("{}")
    return here


def verify(folder: Path, layer: str = FAKE_LAYER,
           **env: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    here = suite_beside(folder, layer)
    out = folder / "out"
    environ = {"PATH": "/usr/bin:/bin", "OOTA_CELL_FILE": str(folder / "cell.json"),
               "OOTA_VENDOR_VERIFY": str(folder / "none"), **env}
    run = subprocess.run([sys.executable, str(here / "oota-verify"), "--out", str(out), "-q"],
                         capture_output=True, text=True, check=False, env=environ, cwd=folder)
    return run, json.loads((out / "tests.json").read_text())


def by_module(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["id"].split("[")[1].rstrip("]"): t for t in data["tests"]}


def test_a_crash_fails_its_test_and_the_tests_after_it_still_run(tmp_path: Path) -> None:
    run, data = verify(tmp_path)
    assert run.returncode == 1, run.stderr
    tests = by_module(data)
    assert list(tests) == ["nn.ReLU", "nn.BatchNorm2d", "nn.CrossEntropyLoss", "nn.GELU",
                           "nn.Linear"]
    crashed = tests["nn.CrossEntropyLoss"]
    assert crashed["status"] == "failed" and crashed["layer"] == "modules"
    assert crashed["message"].startswith("the suite's process was killed by SIGSEGV in this "
                                         "test; the suite went on with the tests after it")
    assert "test_fake_modules.py" in crashed["message"]  # the crash's stack names the test
    # Retried in a fresh process like any failure: it crashed there too, so it stays failed.
    assert [a["status"] for a in crashed["data"]["attempts"]] == ["failed", "not run"]
    assert tests["nn.BatchNorm2d"]["status"] == "failed"  # the failure before the crash stays
    assert {tests[m]["status"] for m in ("nn.ReLU", "nn.GELU", "nn.Linear")} == {"passed"}
    assert data["counts"] == {"passed": 3, "failed": 2}
    assert ("oota-verify: the suite's process was killed by SIGSEGV in test_fake_modules.py::"
            "test_module_matches_cpu[nn.CrossEntropyLoss]: that test failed") in run.stderr
    assert "Fatal Python error: Segmentation fault" in run.stderr  # the stack, in the log


def test_a_crash_in_the_last_test_still_gives_the_whole_run(tmp_path: Path) -> None:
    run, data = verify(tmp_path, CRASH_IN="nn.Linear")
    assert run.returncode == 1, run.stderr
    tests = by_module(data)
    assert len(tests) == 5 and tests["nn.Linear"]["status"] == "failed"
    assert "killed by SIGSEGV" in tests["nn.Linear"]["message"]
    assert data["counts"] == {"passed": 3, "failed": 2}


def test_without_a_crash_nothing_changes(tmp_path: Path) -> None:
    run, data = verify(tmp_path, CRASH_IN="none")
    assert run.returncode == 1  # nn.BatchNorm2d fails
    assert data["counts"] == {"passed": 4, "failed": 1}
    assert "killed by" not in run.stderr


def test_installed_json_reads_torchs_version_without_importing_torch(tmp_path: Path) -> None:
    """oota-verify records torch's version strings from torch/version.py: its own process never
    imports torch (the suite's child did; an import is about 2 s of each verification). A torch
    whose import would fail still shows what is installed; no torch at all is an error."""
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("raise RuntimeError('torch was imported')\n")
    (site / "torch" / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.13.0+cpu'\ndebug = False\n"
        "cuda: Optional[str] = None\ngit_version = 'cf30153c'\nhip: Optional[str] = None\n")
    for name in ("with", "without"):
        (tmp_path / name).mkdir()
    run, _ = verify(tmp_path / "with", CRASH_IN="none", PYTHONPATH=str(site))
    installed = json.loads((tmp_path / "with" / "out" / "installed.json").read_text())
    assert installed["torch"] == {"version": "2.13.0+cpu", "cuda": None, "hip": None,
                                  "git_version": "cf30153c"}, run.stderr[-2000:]
    run, _ = verify(tmp_path / "without", CRASH_IN="none")
    installed = json.loads((tmp_path / "without" / "out" / "installed.json").read_text())
    assert installed["torch"] == {"error": "ModuleNotFoundError: No module named 'torch'"}


# The suite's processes see the OpenMP wait policy oota-verify gives them.
POLICY_LAYER = '''
import os
from pathlib import Path

LAYER = "modules"


def test_module_matches_cpu():
    out = Path(os.environ["OOTA_VERIFY_OUT"])
    (out / "policy.txt").write_text(os.environ.get("OMP_WAIT_POLICY", "unset"))
'''


def test_the_suites_openmp_threads_sleep_unless_its_caller_chose(tmp_path: Path) -> None:
    for given, seen in ((None, "PASSIVE"), ("ACTIVE", "ACTIVE")):
        folder = tmp_path / str(given)
        folder.mkdir()
        run, _ = verify(folder, POLICY_LAYER, **({"OMP_WAIT_POLICY": given} if given else {}))
        assert run.returncode == 0, run.stderr
        assert (folder / "out" / "policy.txt").read_text() == seen
