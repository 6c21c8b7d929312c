"""``invoke pull --host ENDPOINT``: the Engine to pull into and re-verify on, written as a host
of hosts.yaml writes its endpoint or context (the same schema patterns); a malformed one is
exit 2, one that does not answer exit 3, each as one line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oota.api import flags
from oota.engine import connect, docker as docker_engine
from oota.engine.base import Endpoint
from oota.errors import EnvironmentProblem, InputError
from tests import forkcli
from tests.engines import free_port
from tests.misbehaving import misbehaving

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text, endpoint", [
    (None, Endpoint()),
    ("unix:///run/docker.sock", Endpoint(name="unix:///run/docker.sock",
                                         url="unix:///run/docker.sock")),
    ("tcp://gpu-a.lab:2375", Endpoint(name="tcp://gpu-a.lab:2375", url="tcp://gpu-a.lab:2375")),
    ("ssh://oota@gpu-b.lab", Endpoint(name="ssh://oota@gpu-b.lab", url="ssh://oota@gpu-b.lab")),
    ("gpu-a", Endpoint(name="gpu-a", context="gpu-a")),
], ids=["default", "unix", "tcp", "ssh", "context"])
def test_host_is_written_as_hosts_yaml_writes_an_engine(text, endpoint):
    assert flags.engine_endpoint(text) == endpoint


@pytest.mark.parametrize("text", ["tcp://gpu-a.lab", "http://gpu-a.lab:2375", "gpu a",
                                  "ssh://oota:hunter2@gpu-b.lab", ""],
                         ids=["no-port", "http", "space", "password", "empty"])
def test_a_malformed_host_is_bad_input(text):
    with pytest.raises(InputError, match="--host .*give a Docker endpoint as hosts.yaml") as info:
        flags.engine_endpoint(text)
    assert "hunter2" not in str(info.value)


def _pull(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return forkcli.run([sys.executable, "-m", "oota", "-r", str(REPO), "pull", *args],
                       env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                       text=True, cwd=cwd, timeout=120)


def test_the_command_line_says_which_host_is_wrong_or_silent(tmp_path):
    bad = _pull("127.0.0.1:5000/oota/cpu:c1", "--host", "tcp://gpu-a.lab", cwd=tmp_path)
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.strip().splitlines() == [
        "error: --host 'tcp://gpu-a.lab': give a Docker endpoint as hosts.yaml writes it "
        "(unix:///var/run/docker.sock, tcp://HOST:PORT, ssh:// then USER@HOST[:PORT]) or a "
        "docker context name (`docker context ls`)"]
    silent = f"tcp://127.0.0.1:{free_port()}"
    down = _pull("127.0.0.1:5000/oota/cpu:c1", "--host", silent, cwd=tmp_path)
    assert down.returncode == 3, down.stderr
    [line] = down.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot reach a Docker Engine at {silent} (")


def test_an_engine_that_takes_the_connection_and_never_answers_is_given_up(monkeypatch):
    """A hung daemon (or an ssh:// host that stalls) accepts the connection and says nothing:
    the SDK's first request used to wait its 600 s request timeout; connecting has its own
    (the socket's timeout and the request's deadline end it at once: either names it)."""
    monkeypatch.setattr(connect, "CONNECT_TIMEOUT_S", 1)
    with misbehaving("silent", silent_s=30) as host:
        started = time.monotonic()
        with pytest.raises(EnvironmentProblem, match=f"(cannot reach a Docker Engine at|^the "
                           f"Docker Engine at) tcp://{host}"):
            docker_engine.DockerEngine(Endpoint(name=f"tcp://{host}", url=f"tcp://{host}"))
        assert time.monotonic() - started < 10
