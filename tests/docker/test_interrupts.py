"""Signals sent to `invoke build` and `invoke verify` while they work, as a user (or CI) sends
them: what result.json says, which containers and context folders are left, and what the next
run does about a SIGKILLed one.

The tests run the real command line on the repository's default CPU cell, in a copy of the
project (its ``.oota-cache``, ``history.db`` and ``reports/`` are the copy's, never the
checkout's), with the session's image under the name the command line uses
(``oota/cpu:<cell>``); a developer's own image under that name is put aside first and put back
after. That an interrupted verify of a rebuild keeps
the sealed image is in test_reproducible.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from oota.engine.base import RUN_LABEL

from .conftest import DEFAULT_CELL, NAMESPACE, REPO, copy_project

TAG = f"oota/cpu:{DEFAULT_CELL}"
ASIDE = f"{NAMESPACE}/aside:{DEFAULT_CELL}"
STARTED: list[str] = []   # the run ids of the commands the tests started


@dataclass
class Stopped:
    proc: subprocess.Popen[str]
    output: str
    results: Path

    @property
    def result(self) -> dict:
        return json.loads((self.results / DEFAULT_CELL / "result.json").read_text())


@dataclass
class Project:
    """A copy of the project the command line runs in (its working directory and matrix)."""
    root: Path

    @property
    def cache(self) -> Path:
        return self.root / ".oota-cache"

    def invoke(self, *args: str) -> subprocess.Popen[str]:
        """``invoke <args>`` on this copy's matrix, with the checkout's tasks and package."""
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        argv = [sys.executable, "-m", "invoke", "-r", str(REPO), *args,
                "--matrix", str(self.root / "matrix.yaml")]
        return subprocess.Popen(argv, cwd=self.root, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def markers(self) -> set[Path]:
        return set((self.cache / "runs").glob("*.json"))

    def own_run(self, pid: int, before: set[Path]) -> str | None:
        """The run id of the command ``pid``, from the marker it writes for the Engine it
        uses (``.oota-cache/runs/<run-id>@<engine>.json``)."""
        for marker in self.markers() - before:
            try:
                data = json.loads(marker.read_text())
                if data["pid"] == pid:
                    return str(data["run_id"])
            except (OSError, ValueError, KeyError):
                continue
        return None

    def markers_of(self, run_id: str) -> list[Path]:
        runs = self.cache / "runs"
        return list(runs.glob(f"{run_id}@*.json")) + [
            p for p in [runs / f"{run_id}.json"] if p.exists()]

    def context_of(self, run_id: str) -> list[Path]:
        folder = self.cache / "contexts" / run_id
        return [p for p in folder.iterdir() if (p / "context").is_dir()] \
            if folder.is_dir() else []


def _wait_for(what: str, check: Callable[[], object], timeout_s: float = 300) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"waited {timeout_s:.0f}s for {what}")


def _verify_container(client: docker.DockerClient, run_id: str) -> object:
    return client.containers.list(filters={"label": [f"{RUN_LABEL}={run_id}",
                                                     f"oota.cell={DEFAULT_CELL}"],
                                           "status": "running"})


def _run_until(project: Project, args: list[str], results: Path, client, during: str,
               sig: signal.Signals) -> tuple[Stopped, str]:
    """Start `invoke <args>`, send ``sig`` once it is in ``during`` (verify: its container
    runs; build: its context folder exists), and wait for it to end. Returns the run id."""
    before = project.markers()
    proc = project.invoke(*args, "--cell", DEFAULT_CELL, "--results", str(results))
    run_id = _wait_for("the run's marker", lambda: project.own_run(proc.pid, before))
    assert isinstance(run_id, str)
    STARTED.append(run_id)
    if during == "verify":
        _wait_for("the verify container", lambda: _verify_container(client, run_id))
    else:
        _wait_for("the build context", lambda: project.context_of(run_id))
    proc.send_signal(sig)
    output, _ = proc.communicate(timeout=120)
    return Stopped(proc=proc, output=output, results=results), run_id


def _left_by(client, run_id: str) -> list[object]:
    return client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run_id}"})


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Project:
    root = tmp_path_factory.mktemp("interrupts")
    copy_project(root)
    return Project(root)


@pytest.fixture(scope="module")
def cli_image(built, engine, docker_client) -> Iterator[str]:
    """The session's verified (sealed) default-cell image, under the name the command line
    uses; its id. Images a killed build may still have made are removed after."""
    aside = engine.image_id(TAG)
    if aside:
        docker_client.images.get(aside).tag(*ASIDE.split(":"))
    before = {image.id for image in docker_client.images.list(all=True)}
    docker_client.images.get(built.tag).tag(*TAG.split(":"))
    try:
        yield str(engine.image_id(TAG))
    finally:
        for run_id in STARTED:  # what a failed test may have left
            engine.cleanup(run_id, images=False)
        docker_client.images.remove(TAG)  # the name only: the session's tag still holds it
        if aside:  # the developer's image gets its name back before its spare name goes
            docker_client.images.get(aside).tag(*TAG.split(":"))
            docker_client.images.remove(ASIDE)
        for image in docker_client.images.list(filters={"label": f"oota.cell={DEFAULT_CELL}",
                                                         "dangling": True}):
            if image.id not in before:
                docker_client.images.remove(image.id)


def _assert_interrupted(project: Project, stopped: Stopped, run_id: str, stage: str,
                        client) -> None:
    assert stopped.proc.returncode == 130, stopped.output
    assert "interrupted (SIGTERM)" in stopped.output
    result = stopped.result
    assert result["run_id"] == run_id and result["status"] == "interrupted"
    assert result["stages"][stage]["status"] == "interrupted"
    assert result["stages"][stage]["message"] == f"interrupted by SIGTERM during {stage}"
    assert _left_by(client, run_id) == []
    assert not (project.cache / "contexts" / run_id).exists()
    assert project.markers_of(run_id) == []


def test_sigterm_during_verify(project, cli_image, engine, docker_client, tmp_path):
    stopped, run_id = _run_until(project, ["verify"], tmp_path, docker_client, "verify",
                                 signal.SIGTERM)
    _assert_interrupted(project, stopped, run_id, "verify", docker_client)
    assert engine.image_id(TAG) == cli_image   # still the sealed image


def test_sigterm_during_build(project, cli_image, engine, docker_client, tmp_path):
    stopped, run_id = _run_until(project, ["build", "--rebuild", "--no-verify"], tmp_path,
                                 docker_client, "build", signal.SIGTERM)
    _assert_interrupted(project, stopped, run_id, "build", docker_client)
    assert "verify" not in stopped.result["stages"]
    assert not _processes_naming(f"contexts/{run_id}/")   # the docker build CLI was stopped
    assert engine.image_id(TAG) == cli_image


def _processes_naming(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text in (proc / "cmdline").read_text(errors="replace"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize(("args", "during", "left"), [
    (["build", "--rebuild", "--no-verify"], "build", "1 context folder"),
    (["verify"], "verify", "1 container"),
], ids=["during-build", "during-verify"])
def test_the_run_after_a_sigkill_removes_what_it_left(project, cli_image, engine,
                                                      docker_client, tmp_path, args, during,
                                                      left):
    killed, run_id = _run_until(project, args, tmp_path / "killed", docker_client, during,
                                signal.SIGKILL)
    assert killed.proc.returncode == -signal.SIGKILL
    if during == "build":
        assert project.context_of(run_id)
        # the orphaned `docker build` still reads the context; let it end (it tags nothing)
        _wait_for("the orphaned build", lambda: not _processes_naming(f"contexts/{run_id}/"))
    else:
        assert _left_by(docker_client, run_id)

    proc = project.invoke("build", "--no-verify", "--cell", DEFAULT_CELL, "--results",
                   str(tmp_path / "next"))
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output
    # A container is named with the Engine it was on; a context folder is this machine's.
    said = f"removed {left} left by run {run_id}"
    assert any(said in line and line.rstrip().endswith("(killed?)")
               for line in output.splitlines()), output
    assert _left_by(docker_client, run_id) == []
    assert not (project.cache / "contexts" / run_id).exists()
    assert project.markers_of(run_id) == []
    assert engine.image_id(TAG) == cli_image
