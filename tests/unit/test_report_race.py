"""Two reports into one --out at once: the second waits for the first (a lock beside the
folder), and the report left is whole; the folders a writer finds beside the report are only
removed when their writer is gone. Real processes, as two CI jobs or a user and a cron job
would start them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oota.files import Busy
from oota.report import write
from tests.conftest import REPO
from tests.unit.test_report import make_result, sample_results, write_results


def oota_report(results: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "oota", "report", "--results", str(results),
                             "--out", str(out), "--no-history", "--replace"], cwd=REPO,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def whole(out: Path) -> None:
    data = json.loads((out / "results.json").read_text())
    pages = sorted(p.stem for p in (out / "cells").glob("*.html"))
    assert pages == sorted(c["id"] for c in data["cells"])
    assert (out / "index.html").is_file() and (out / "matrix.md").is_file()
    assert not [p.name for p in out.parent.iterdir() if ".new-" in p.name or ".old-" in p.name]


def many_cells(count: int) -> list[dict]:
    """``count`` cells: enough pages that two reports written at once overlap."""
    return [make_result("cpu", python=f"3.{n}") for n in range(10, 10 + count)]


@pytest.mark.parametrize("round_", range(2))
def test_two_reports_into_one_folder_at_once_leave_it_whole(tmp_path, round_):
    results = write_results(tmp_path / "results", many_cells(150), logs=False)
    out = tmp_path / "reports"
    first = oota_report(results, out)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".reports.new-*")) and first.poll() is None:
        assert time.monotonic() < deadline, "the first report never started writing"
        time.sleep(0.01)
    second = oota_report(results, out)  # while the first one writes its pages
    for proc in (first, second):
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    whole(out)


HOLD = """
import sys, time
from pathlib import Path
from oota.files import exclusive
with exclusive(Path(sys.argv[1]), "the report", 5):
    Path(sys.argv[2]).mkdir()
    print("holding", flush=True)
    time.sleep(float(sys.argv[3]))
"""


def test_a_live_writers_folder_is_not_taken_for_leftovers(tmp_path, monkeypatch):
    results = write_results(tmp_path / "results", sample_results())
    out = tmp_path / "reports"
    live = tmp_path / ".reports.new-live"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / ".reports.lock"),
                               str(live), "30"], cwd=REPO, text=True, stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        monkeypatch.setattr(write, "LOCK_WAIT_S", 1)
        with pytest.raises(Busy, match=rf"the report {out} is being written by another oota "
                           rf"\(pid {holder.pid}\); waited 1 s"):
            write.write_report(results, out)
        assert live.is_dir()  # its writer lives: not removed
    finally:
        holder.kill()
        holder.communicate()
    started = time.monotonic()
    write.write_report(results, out)  # its writer is gone: the folder is a leftover
    assert time.monotonic() - started < 30
    assert not live.exists()
    whole(out)
