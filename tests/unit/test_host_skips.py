"""A test skipped for what this host is (its CPU, its cores, this environment's local wheel
folders) is listed at the end of the run, so CI shows what a machine did not check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_skips_for_the_host_are_listed_at_the_end(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(
        "import pytest\n"
        "from tests.conftest import skip_for_host\n\n"
        "def test_needs_wheels():\n"
        "    skip_for_host('the local wheel folders', 'no torch wheel in /opt/wheels')\n\n"
        "def test_skipped_by_choice():\n"
        "    pytest.skip('opt-in: -m something')\n\n"
        "def test_runs():\n"
        "    assert True\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-q", "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path / "test_probe.py")],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    head = "skipped for what this host is (CPU, cores, local wheels)"
    assert head in proc.stdout
    listed = proc.stdout.split(head, 1)[1]
    assert ("test_probe.py::test_needs_wheels: the local wheel folders: no torch wheel in "
            "/opt/wheels") in listed
    assert "test_skipped_by_choice" not in listed
