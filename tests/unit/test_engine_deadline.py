"""Every request of a Docker Engine has a deadline for its whole answer: an endpoint that
drips a byte every 0.3 s (on loopback, tests/misbehaving.py) ends in exit 3's error naming
the Engine, at the first request or a later one, instead of a wait without end. And the
environment's docker context is the SDK's as it is the CLI's: honoured, or refused with why."""

from __future__ import annotations

import gc
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from oota.engine import connect as reach, docker as door
from oota.engine.base import Endpoint
from oota.engine.cli import cli_flags, environment_context
from oota.engine.deadline import NoAnswer
from oota.errors import EnvironmentProblem
from tests.misbehaving import misbehaving


def test_an_endpoint_that_drips_ends_at_the_deadline_naming_it(monkeypatch) -> None:
    monkeypatch.setattr(reach, "CONNECT_TIMEOUT_S", 2)
    with misbehaving("drip") as where:
        started = time.monotonic()
        with pytest.raises(NoAnswer) as caught:
            door.DockerEngine(Endpoint(name="gpu-a", url=f"tcp://{where}"))
        took = time.monotonic() - started
    assert caught.value.exit_code == 3
    assert str(caught.value).startswith(
        f"the Docker Engine at tcp://{where} (host gpu-a) gave no complete answer to "
        "GET /version within 2 s")
    assert took < 20  # 2 s, and a busy machine's start of the SDK


def test_a_later_request_that_drips_ends_at_its_deadline(monkeypatch) -> None:
    monkeypatch.setattr(reach, "REQUEST_TIMEOUT_S", 2)
    with misbehaving("engine") as where:
        engine = door.DockerEngine(Endpoint(name=f"tcp://{where}", url=f"tcp://{where}"))
        started = time.monotonic()
        with pytest.raises(NoAnswer, match=f"the Docker Engine at tcp://{where} gave no "
                           "complete answer to GET /info within 2 s"):
            engine.facts()
        assert time.monotonic() - started < 20
        assert engine.alive()  # a new connection: the Engine still answers its ping


def test_the_environment_engine_that_drips_is_named_by_docker_host(monkeypatch) -> None:
    monkeypatch.setattr(reach, "CONNECT_TIMEOUT_S", 1)
    with misbehaving("drip") as where:
        monkeypatch.setenv("DOCKER_HOST", f"tcp://{where}")
        with pytest.raises(NoAnswer, match=rf"at tcp://{where} \(DOCKER_HOST\) gave no "):
            door.DockerEngine()


@pytest.mark.parametrize(("env", "found"), [
    ({}, ("", "")),
    ({"DOCKER_CONTEXT": "lab"}, ("lab", "DOCKER_CONTEXT")),
    ({"DOCKER_CONTEXT": "default"}, ("", "")),
    ({"DOCKER_CONTEXT": "lab", "DOCKER_HOST": "tcp://h:2375"}, ("", "")),  # DOCKER_HOST wins
], ids=["none", "named", "default", "docker-host-wins"])
def test_the_context_the_cli_would_use(tmp_path: Path, env: dict[str, str],
                                       found: tuple[str, str]) -> None:
    assert environment_context({"DOCKER_CONFIG": str(tmp_path), **env}) == found


def test_the_current_context_of_config_json_counts(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"currentContext": "lab"}))
    assert environment_context({"DOCKER_CONFIG": str(tmp_path)}) == (
        "lab", f"currentContext of {tmp_path / 'config.json'}")


def test_a_docker_context_that_does_not_exist_is_refused_with_the_reason(
        tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("DOCKER_CONTEXT", "nope")
    with pytest.raises(EnvironmentProblem, match="DOCKER_CONTEXT names the docker context "
                       "'nope', which does not exist .*; unset DOCKER_CONTEXT or create"):
        cli_flags(Endpoint())


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker CLI on PATH")
def test_a_docker_context_is_the_sdk_endpoint_and_the_cli_flag(tmp_path: Path,
                                                                monkeypatch) -> None:
    subprocess.run(["docker", "context", "create", "lab", "--docker",
                    "host=tcp://127.0.0.1:9"], check=True, capture_output=True,
                   env={"DOCKER_CONFIG": str(tmp_path), "PATH": "/usr/bin:/bin"})
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("DOCKER_CONTEXT", "lab")
    assert cli_flags(Endpoint()) == (("--context", "lab"), "tcp://127.0.0.1:9", None)


@pytest.mark.parametrize(("call", "what"), [
    (lambda engine: engine.pull("lab.example/oota/cpu:x"), "the pull of lab.example/oota/cpu:x"),
    (lambda engine: engine.pull_digest("lab.example/oota/cpu", "sha256:" + "a" * 64, None),
     "the pull of lab.example/oota/cpu@sha256:"),
], ids=["pull", "pull-by-digest"])
def test_a_streamed_answer_that_drips_ends_at_its_deadline(monkeypatch, call, what) -> None:
    """Headers at once, then a pull's progress that never ends (a blank chunk every 0.3 s):
    the body, not only the headers, has a deadline."""
    monkeypatch.setattr(door, "STREAM_TIMEOUT_S", 2)
    with misbehaving("engine-stream") as where:
        engine = door.DockerEngine(Endpoint(name="gpu-a", url=f"tcp://{where}"))
        started = time.monotonic()
        with pytest.raises(NoAnswer, match=f"the Docker Engine at tcp://{where} \\(host gpu-a\\) "
                           f"gave no complete answer to {what}.* within 2 s"):
            call(engine)
        assert time.monotonic() - started < 20


FAKE_SSH = """#!{python}
# ssh HOST 'docker system dial-stdio', as the Docker SDK runs it for an ssh:// Engine: here a
# pipe to a server on loopback (FAKE_SSH_TO), whatever host it is given.
import os, socket, sys, threading
peer = socket.create_connection(("127.0.0.1", int(os.environ["FAKE_SSH_TO"].rsplit(":", 1)[1])))
def up():
    while data := os.read(0, 65536):
        peer.sendall(data)
threading.Thread(target=up, daemon=True).start()
while data := peer.recv(65536):
    os.write(1, data)
"""


def test_an_ssh_engine_that_drips_ends_at_the_deadline_naming_it(tmp_path: Path,
                                                                monkeypatch) -> None:
    """An ssh:// Engine's answers come through an ssh process's pipe, which no socket timeout
    reaches: the deadline kills that process (here a stand-in for ssh on PATH)."""
    pytest.importorskip("paramiko", reason="the Docker SDK's ssh:// support (docker[ssh])")
    import sys
    (tmp_path / "ssh").write_text(FAKE_SSH.format(python=sys.executable))
    (tmp_path / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    monkeypatch.setattr(reach, "CONNECT_TIMEOUT_S", 2)
    with misbehaving("drip") as where:
        monkeypatch.setenv("FAKE_SSH_TO", where)
        started = time.monotonic()
        with pytest.raises(NoAnswer, match="the Docker Engine at ssh://oota@gpu-b.lab "
                           r"\(host gpu-b\) gave no complete answer to GET /version within 2 s"):
            door.DockerEngine(Endpoint(name="gpu-b", url="ssh://oota@gpu-b.lab"))
        assert time.monotonic() - started < 30
    gc.collect()  # a pipe or socket left open of the ssh process would be reported here
