"""Nothing runs away: every file oota reads is a regular file of bounded size, and every network
answer has a deadline for the whole of it and a size limit (oota/files.py, oota/httpio.py).
The servers here are threads on 127.0.0.1 that misbehave on purpose: one that never answers,
one that drips a byte now and then, one that answers without end."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from oota.engine import credentials
from oota.errors import EnvironmentProblem
from oota.files import NotARegularFile, TooLarge, read_bytes
from oota.supply.registry import RegistryClient, docker_config_auth
from tests.misbehaving import misbehaving


# -- files -------------------------------------------------------------------------------------
def test_a_regular_file_within_the_limit_is_read(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 100)
    assert read_bytes(tmp_path / "f", 100) == b"x" * 100


def test_a_file_past_the_limit_is_refused_naming_the_limit(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * (2 << 20) + b"y")
    with pytest.raises(TooLarge) as info:
        read_bytes(tmp_path / "f", 2 << 20)
    assert info.value.strerror == "larger than 2 MiB, the most oota reads of such a file"
    assert info.value.filename == str(tmp_path / "f")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_device_is_refused_without_reading_it(device):
    with pytest.raises(NotARegularFile, match=r"not a regular file \(a character device\)"):
        read_bytes(Path(device), 1 << 30)


def test_a_fifo_is_refused_at_once(tmp_path):
    """Opening a FIFO for reading waits for a writer; oota must not wait at all."""
    os.mkfifo(tmp_path / "fifo")
    started = time.monotonic()
    with pytest.raises(NotARegularFile, match=r"a FIFO"):
        read_bytes(tmp_path / "fifo", 100)
    assert time.monotonic() - started < 2


def test_a_folder_is_a_folder(tmp_path):
    with pytest.raises(IsADirectoryError):
        read_bytes(tmp_path, 100)


# -- network -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["silent", "drip"])
def test_a_stalled_registry_fails_within_the_deadline(kind):
    with misbehaving(kind) as host:
        client = RegistryClient(host, auth=None, timeout_s=1)
        started = time.monotonic()
        with pytest.raises(EnvironmentProblem) as info:
            client.resolve("oota/cpu", "latest")
    assert time.monotonic() - started < 10
    assert f"registry {host}" in str(info.value) and info.value.exit_code == 3


def test_a_registry_answering_without_end_is_cut_at_the_limit():
    with misbehaving("flood") as host:
        client = RegistryClient(host, auth=None, timeout_s=20)
        with pytest.raises(EnvironmentProblem, match=r"the answer of http://127\.0\.0\.1:\d+/v2/"
                                                     r"oota/cpu/manifests/latest is larger than "
                                                     r"16 MiB; not read further"):
            client.resolve("oota/cpu", "latest")


def test_a_credential_helper_that_hangs_is_stopped(tmp_path, monkeypatch):
    helper = tmp_path / "bin" / "docker-credential-oota-hangs"
    helper.parent.mkdir()
    helper.write_text("#!/bin/sh\nsleep 60\n")
    helper.chmod(0o755)
    (tmp_path / "config.json").write_text(json.dumps({"credsStore": "oota-hangs"}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.setenv("PATH", f"{helper.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(credentials, "HELPER_TIMEOUT_S", 1)
    started = time.monotonic()
    with pytest.raises(EnvironmentProblem, match="docker-credential-oota-hangs .* no answer "
                                                 "within 1 s"):
        docker_config_auth("registry.lab:5000")
    assert time.monotonic() - started < 10
