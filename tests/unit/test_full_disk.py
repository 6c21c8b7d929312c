"""A full disk (a small tmpfs) during the writes of results, a report and the history:
each ends in exit 3 naming what it was writing, and nothing half-written is left as complete
(an earlier report or history stays whole). Needs root to mount the tmpfs; skipped otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from oota.results.store import RESULT_FILE, save
from tests import forkcli
from tests.conftest import REPO
from tests.unit.test_report import make_result, sample_results, typed, write_results


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a tmpfs of 512 KiB (unmounted at the end)."""
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def oota(*args: str) -> subprocess.CompletedProcess[str]:
    return forkcli.run([sys.executable, "-m", "oota", *args], cwd=REPO, text=True,
                       capture_output=True, timeout=120, check=False,
                       env={**os.environ, "PYTHONPATH": str(REPO)})


def fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` but for about ``leave`` bytes."""
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    (disk / "filler").write_bytes(b"\0" * max(free - leave, 0))


def test_a_report_on_a_full_disk_is_exit_3_and_leaves_the_last_one_whole(small_disk, tmp_path):
    few = write_results(tmp_path / "few", [make_result("cpu")])
    first = oota("report", "--results", str(few), "--out", str(small_disk / "reports"),
                 "--no-history")
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in (small_disk / "reports").iterdir() if p.is_file()}
    fill(small_disk, 4096)
    many = write_results(tmp_path / "many", sample_results())
    second = oota("report", "--results", str(many), "--out", str(small_disk / "reports"),
                  "--no-history")
    assert second.returncode == 3, second.stderr
    assert "No space left on device" in second.stderr and str(small_disk) in second.stderr
    assert "internal error" not in second.stderr
    after = {p.name: p.read_bytes() for p in (small_disk / "reports").iterdir() if p.is_file()}
    assert after == before
    assert len(json.loads(after["results.json"])["cells"]) == 1


def test_a_result_on_a_full_disk_is_never_left_half_written(small_disk):
    folder = small_disk / "results" / "cpu-cell"
    [result] = typed([make_result("cpu")])
    save(folder, result)
    kept = (folder / RESULT_FILE).read_bytes()
    fill(small_disk, 0)
    with pytest.raises(OSError) as caught:
        save(folder, result)
    assert caught.value.filename and str(small_disk) in caught.value.filename
    assert (folder / RESULT_FILE).read_bytes() == kept  # the earlier one, whole
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary left


def test_the_history_on_a_full_disk_keeps_its_runs(small_disk, tmp_path):
    url = f"sqlite:///{small_disk / 'h.db'}"
    one = write_results(tmp_path / "one", [make_result("cpu")])
    assert oota("history", "import", "--dir", str(one), "--history", url).returncode == 0
    fill(small_disk, 0)
    many = write_results(tmp_path / "many", sample_results())
    for result in many.glob("*/result.json"):
        data = json.loads(result.read_text())
        data["run_id"] = "run-many"
        result.write_text(json.dumps(data))
    full = oota("history", "import", "--dir", str(many), "--history", url)
    assert full.returncode == 3, full.stderr
    assert "database or disk is full" in full.stderr and "internal error" not in full.stderr
    (small_disk / "filler").unlink()
    query = oota("history", "query", "--history", url, "--format", "json")
    assert query.returncode == 0, query.stderr
