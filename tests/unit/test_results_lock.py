"""One run writes into a results folder at a time: a second build, verify or publish into the
same --results is exit 3 naming the first one's pid (it would mix its logs, results and
signatures with the first's), and what the holder of the lock finds half-written in the cell
folders is a killed writer's, removed; a live writer's is not. Real processes, as a cron job
and a user would start them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from oota.files import Busy
from oota.results import store
from tests import forkcli
from tests.conftest import REPO

HOLD = """
import sys, time
from pathlib import Path
from oota.results.store import writing
with writing(Path(sys.argv[1])):
    print("holding", flush=True)
    time.sleep(60)
"""
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def engine_answers() -> bool:
    """A run takes its hold once its Engine answered: the CLI's case needs one."""
    try:
        from oota.engine.docker import DockerEngine
        DockerEngine()
    except Exception:  # noqa: BLE001 - any failure to reach it is "no"
        return False
    return True


@contextmanager
def holder(results: Path) -> Iterator[subprocess.Popen[str]]:
    """Another oota run holding ``results`` (killed with SIGKILL at the end)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(results)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, env=ENV)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "holding\n"
        yield proc
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()


@pytest.mark.skipif(not engine_answers(), reason="no Docker Engine answers here: a run "
                    "holds its results folder once its Engine answered")
def test_a_second_run_into_the_folder_is_told_who_writes_it(tmp_path: Path) -> None:
    results = tmp_path / "results"
    flags = ["--results", str(results), "--no-history"]
    runs = {"build": ["build", "--vendor", "cpu", *flags],
            "verify": ["verify", "--vendor", "cpu", *flags],
            "publish": ["publish", "--vendor", "cpu", "--registry", "127.0.0.1:9",
                        "--results", str(results)]}
    with holder(results) as first:
        procs = {name: subprocess.Popen([sys.executable, "-m", "oota", *argv], cwd=REPO,
                                        text=True, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, env=ENV)
                 for name, argv in runs.items()}
        outs = {name: proc.communicate(timeout=120) for name, proc in procs.items()}
    for name, proc in procs.items():
        assert proc.returncode == 3, (name, outs[name])
        assert (f"the results folder {results} is being written by another oota (pid "
                f"{first.pid}); waited {store.LOCK_WAIT_S} s") in outs[name][1], outs[name]
    assert not (results / "cpu").exists() and not list(results.glob("*/result.json"))


def test_bad_input_takes_no_hold_and_writes_nothing(tmp_path: Path) -> None:
    with holder(tmp_path / "results"):
        proc = forkcli.run([sys.executable, "-m", "oota", "build", "--vendor", "nope",
                            "--results", str(tmp_path / "results"), "--no-history"],
                           cwd=REPO, text=True, capture_output=True, env=ENV, timeout=120)
    assert proc.returncode == 2 and "nope" in proc.stderr and "being written" not in proc.stderr


def test_a_killed_writers_half_written_files_go_and_a_live_writers_stay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "results"
    cell = results / "cpu-debian12-py3.11-torch2.13"
    cell.mkdir(parents=True)
    (cell / "result.json").write_text("{}\n")
    half = [cell / ".result.json.k3x_9ab2", cell / ".junit.xml.0a1b2c3d"]
    mine = [cell / ".notes.txt.abcdefgh", cell / ".result.json"]   # not oota's temporary files
    monkeypatch.setattr(store, "LOCK_WAIT_S", 0.5)
    with holder(results) as live:
        for path in (*half, *mine):   # the live writer's, as it writes them
            path.write_text("half")
        with pytest.raises(Busy, match=rf"\(pid {live.pid}\); waited 0.5 s"):
            with store.writing(results):
                pass
        assert all(p.exists() for p in half)  # their writer may still be writing them
    with store.writing(results):   # the writer was killed: its files are leftovers
        assert not any(p.exists() for p in half)
    assert all(p.exists() for p in mine) and (cell / "result.json").read_text() == "{}\n"


def test_the_lock_is_one_for_the_folder_however_it_is_named(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "linked").symlink_to("results")
    monkeypatch.setattr(store, "LOCK_WAIT_S", 0.2)
    monkeypatch.chdir(tmp_path)
    with holder(tmp_path / "results"):
        for name in ("linked", "./results", str(tmp_path / "linked")):
            with pytest.raises(Busy):
                with store.writing(Path(name)):
                    pass
