"""SIGINT and SIGTERM end a run alike, and what a killed run left is found by the next one
(oota/execute/interrupts.py, oota/execute/leftovers.py), with a fake engine: no Docker."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from invoke import Exit

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import RUN_LABEL, BuildRequest, Endpoint, RunOutcome, RunRequest
from oota.execute.build import BuildOptions
from oota.execute.interrupts import Interrupted, deferred, signal_name, signals_as_interrupts
from oota.execute.leftovers import (
    UNOWNED_AFTER_S,
    Owner,
    Removed,
    context_root,
    marker_path,
    owned_run,
    process_start,
    sweep,
    waiting,
)
from oota.exits import errors_to_exit
from oota.files import write_json
from oota.plan import plan
from oota.results.store import validation_errors
from tests.runs import build_cells


class FakeEngine:
    """An engine whose verify container 'runs' until ``on_run`` says otherwise; it records
    what was asked of it and holds containers per run label, as Docker would."""

    endpoint = Endpoint()
    local = True

    def __init__(self, on_run=None):
        self.on_run = on_run
        self.runs: list[RunRequest] = []
        self.cleanups: list[tuple[str, bool]] = []
        self.containers: dict[str, int] = {}   # run id -> containers alive

    def facts(self) -> dict[str, str]:
        return {"docker_server": "fake", "arch": "x86_64"}

    def alive(self) -> bool:
        return True

    def abort(self) -> None:
        pass

    def image_labels(self, ref: str) -> dict[str, str] | None:
        return {"oota.fingerprint": "sha256:old"}

    def image_id(self, ref: str) -> str | None:
        return "sha256:image"

    def image_digest(self, ref: str) -> str:
        return "sha256:image"

    def build_output(self, ref: str) -> str | None:
        return "sha256:image"

    def image_layers(self, ref: str) -> tuple:
        return ()

    def run(self, request: RunRequest) -> RunOutcome:
        self.runs.append(request)
        run_id = request.labels[RUN_LABEL]
        self.containers[run_id] = self.containers.get(run_id, 0) + 1
        if self.on_run:
            self.on_run()
        raise AssertionError("the fake container only ever gets interrupted")

    def cleanup(self, run_id: str, *, images: bool) -> int:
        self.cleanups.append((run_id, images))
        return 0 if images else self.containers.pop(run_id, 0)

    def build(self, request: BuildRequest, on_step) -> str:  # pragma: no cover - not built
        raise AssertionError(f"no build expected: {request.tag} {on_step}")

    def seal(self, image: str, files: dict[str, bytes], labels: dict[str, str], *,
             run_id: str = "") -> str:  # pragma: no cover - nothing is sealed
        raise AssertionError("no seal expected")


def _sigterm_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler raises before this ends


# -- the signal handlers -----------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_both_signals_raise_the_same_interruption_naming_the_signal(sig):
    with pytest.raises(KeyboardInterrupt) as info, signals_as_interrupts():
        os.kill(os.getpid(), sig)
        time.sleep(5)
    assert isinstance(info.value, Interrupted)
    assert signal_name(info.value) == sig.name


def test_the_previous_handlers_come_back():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with signals_as_interrupts():
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_a_plain_ctrl_c_is_sigint():
    assert signal_name(KeyboardInterrupt()) == "SIGINT"


def test_a_deferred_block_finishes_then_the_signal_is_raised():
    done = []
    with pytest.raises(Interrupted, match="SIGTERM"), signals_as_interrupts():
        with deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            done.append("the whole block ran")
    assert done == ["the whole block ran"]


def test_a_signal_during_a_failing_deferred_block_leaves_the_failure_standing():
    with pytest.raises(RuntimeError, match="clean-up broke"), signals_as_interrupts():
        with deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            raise RuntimeError("clean-up broke")
    with deferred():  # nothing pending is left over for the next block
        pass


def test_the_task_layer_turns_sigterm_into_exit_130(tmp_path):
    def long_task():
        _sigterm_self()

    with pytest.raises(Exit) as info:
        errors_to_exit(long_task, tmp_path / "last-error.log")()
    assert info.value.code == 130
    assert "interrupted (SIGTERM)" in str(info.value.message)


# -- an interrupted run ------------------------------------------------------------------------

def _run_interrupted(project, tmp_path, engine) -> tuple[list[str], Path, BuildOptions, str]:
    matrix = load_matrix(project.matrix)
    cells = plan(matrix, ["cpu"])
    assert len(cells) == 2
    options = BuildOptions(results_dir=tmp_path / "results", run_id="r-sigterm")
    console = io.StringIO()
    with pytest.raises(Interrupted), signals_as_interrupts():
        build_cells(matrix, cells, engine, Console(console, live=False), options, build=False)
    return [c.id for c in cells], project.root / ".oota-cache", options, console.getvalue()


def test_sigterm_during_verify_is_recorded_and_cleaned_up(project, tmp_path):
    engine = FakeEngine(on_run=_sigterm_self)
    ids, cache, options, shown = _run_interrupted(project, tmp_path, engine)
    result = json.loads((options.results_dir / ids[0] / "result.json").read_text())
    assert result["status"] == "interrupted"
    verify = result["stages"]["verify"]
    assert verify["status"] == "interrupted"
    assert verify["message"] == "interrupted by SIGTERM during verify"
    assert validation_errors(result) == []
    assert f"{ids[0]}: interrupted by SIGTERM during verify" in shown
    # the running container is removed, and the run cleans up after itself
    assert ("r-sigterm", False) in engine.cleanups and engine.containers == {}
    assert not context_root(cache, "r-sigterm").exists()
    assert not list((cache / "runs").glob("r-sigterm*"))


def test_no_later_cell_starts_after_an_interruption(project, tmp_path):
    engine = FakeEngine(on_run=_sigterm_self)
    ids, _, options, _ = _run_interrupted(project, tmp_path, engine)
    assert len(engine.runs) == 1
    assert not (options.results_dir / ids[1]).exists()


def test_a_second_signal_does_not_cut_the_result_short(project, tmp_path):
    def twice():
        os.kill(os.getpid(), signal.SIGTERM)

    class Impatient(FakeEngine):
        def cleanup(self, run_id: str, *, images: bool) -> int:
            os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C while the run cleans up
            return super().cleanup(run_id, images=images)

    engine = Impatient(on_run=lambda: (twice(), time.sleep(5)))
    ids, cache, options, _ = _run_interrupted(project, tmp_path, engine)
    assert json.loads((options.results_dir / ids[0] / "result.json").read_text())["status"] \
        == "interrupted"
    assert not list((cache / "runs").glob("r-sigterm*"))


# -- leftovers of killed runs ------------------------------------------------------------------

def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _marker(cache: Path, run_id: str, **owner) -> Path:
    fields = {"run_id": run_id, "host": socket.gethostname(), "pid": os.getpid(),
              "pid_started": process_start(os.getpid()), **owner}
    write_json(marker_path(cache, run_id), fields)
    context = context_root(cache, run_id) / "cpu-x-abc"
    context.mkdir(parents=True)
    (context / "pip.conf").write_text("[global]\n")
    return context


def test_what_a_killed_run_left_is_removed_and_reported(tmp_path):
    cache = tmp_path / ".oota-cache"
    _marker(cache, "deadrun", pid=_dead_pid())
    engine = FakeEngine()
    engine.containers["deadrun"] = 1
    shown = io.StringIO()
    with owned_run(engine, cache, "newrun", Console(shown, live=False)) as contexts:
        assert contexts == context_root(cache, "newrun")
        assert marker_path(cache, "newrun", "local").exists()
    assert "removed 1 container and 1 context folder left by run deadrun on host local " \
        "(killed?)" in shown.getvalue()
    assert ("deadrun", False) in engine.cleanups and ("deadrun", True) in engine.cleanups
    assert not context_root(cache, "deadrun").exists()
    assert not marker_path(cache, "deadrun").exists()
    assert not marker_path(cache, "newrun", "local").exists()


@pytest.mark.parametrize("owner", [
    {},                                    # this very process: alive
    {"host": "another-host.example"},      # cannot be told from here: never touched
], ids=["live", "other-host"])
def test_what_a_live_run_owns_is_never_touched(tmp_path, owner):
    cache = tmp_path / ".oota-cache"
    context = _marker(cache, "liverun", **owner)
    engine = FakeEngine()
    assert sweep(engine, cache) == []
    assert engine.cleanups == [] and context.is_dir() and marker_path(cache, "liverun").exists()


def test_a_reused_pid_is_not_the_owner(tmp_path):
    cache = tmp_path / ".oota-cache"
    _marker(cache, "oldrun", pid_started="1")  # our pid, but a process that started long ago
    if not process_start(os.getpid()):
        pytest.skip("no /proc here: a reused pid cannot be told")
    assert sweep(FakeEngine(), cache) == [Removed(run_id="oldrun", folders=1, engine="local")]


def test_unowned_context_folders_go_only_when_old(tmp_path):
    contexts = tmp_path / ".oota-cache" / "contexts"
    old, new = contexts / "cpu-x-old", contexts / "cpu-x-new"
    old.mkdir(parents=True)
    new.mkdir()
    stale = time.time() - UNOWNED_AFTER_S - 60
    os.utime(old, (stale, stale))
    assert sweep(FakeEngine(), tmp_path / ".oota-cache") == [Removed(run_id="cpu-x-old",
                                                                     folders=1)]
    assert not old.exists() and new.is_dir()


def test_a_file_that_is_no_marker_is_left_alone(tmp_path):
    cache = tmp_path / ".oota-cache"
    (cache / "runs").mkdir(parents=True)
    (cache / "runs" / "notes.json").write_text("{not json")
    assert sweep(FakeEngine(), cache) == []
    assert (cache / "runs" / "notes.json").exists()


@pytest.mark.parametrize(("removed", "text"), [
    (Removed(run_id="a", containers=2), "removed 2 containers left by run a (killed?)"),
    (Removed(run_id="a", containers=1, images=1, folders=2),
     "removed 1 container, 1 image and 2 context folders left by run a (killed?)"),
    (Removed(run_id="a"), "removed its marker left by run a (killed?)"),
], ids=["containers", "all", "nothing"])
def test_the_report_of_what_was_removed(removed, text):
    assert removed.text() == text


class Named(FakeEngine):
    """An engine with an identity, which can stop answering (a killed daemon)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.endpoint = Endpoint(name=name, url=f"tcp://127.0.0.1:{2300 + len(name)}")
        self.answers = True

    def facts(self) -> dict[str, str]:
        return {"engine_id": f"id-{self.endpoint.name}"}

    def alive(self) -> bool:
        return self.answers


def test_a_lost_engines_leftovers_wait_for_that_engine_and_go_when_it_answers(tmp_path):
    """The run's marker is per Engine: e1's clean-up does not discharge e2's, and a run that
    reaches only e1 leaves e2's duty alone (listed), until a run reaches e2 again."""
    cache = tmp_path / ".oota-cache"
    e1, e2 = Named("e1"), Named("e2")
    shown = io.StringIO()
    console = Console(shown, live=False)
    with owned_run(e1, cache, "lost", console), owned_run(e2, cache, "lost", console):
        e1.containers["lost"] = e2.containers["lost"] = 1   # a verify container on each
        e2.answers = False                                  # e2's daemon is killed
    assert "could not remove the containers of run lost on host e2 (it does not answer); " \
           "the next run that reaches e2 will" in shown.getvalue()
    assert e1.containers == {} and e2.containers == {"lost": 1}
    assert not marker_path(cache, "lost", "id-e1").exists()
    owner = Owner.read(marker_path(cache, "lost", "id-e2"))
    assert owner is not None and (owner.engine, owner.engine_key) == ("e2", "id-e2")
    dead = _dead_pid()
    write_json(marker_path(cache, "lost", "id-e2"),
               {"run_id": "lost", "host": owner.host, "pid": dead, "pid_started": "",
                "engine_key": "id-e2", "engine": "e2"})   # the run has ended since

    assert waiting(cache, {"id-e1"}) == ["run lost on host e2"]
    assert sweep(e1, cache, "id-e1") == [] and marker_path(cache, "lost", "id-e2").exists()

    e2.answers = True   # restarted
    assert sweep(e2, cache, "id-e2") == [Removed(run_id="lost", containers=1, engine="e2")]
    assert e2.containers == {} and not marker_path(cache, "lost", "id-e2").exists()
    assert waiting(cache, {"id-e1"}) == []


def test_owner_round_trips_through_its_marker(tmp_path):
    owner = Owner.this_process("r1")
    write_json(tmp_path / "r1.json", {"run_id": owner.run_id, "host": owner.host,
                                      "pid": owner.pid, "pid_started": owner.pid_started})
    assert Owner.read(tmp_path / "r1.json") == owner and owner.alive()

