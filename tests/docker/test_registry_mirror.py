"""--registry-mirror against a real registry: Debian's docker-registry (distribution 2.8),
started by the test on loopback, serves a vendor base image under its mirror path; oota pulls
it from there and tags it with the upstream name the generated Dockerfiles use."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
import uuid

import pytest

from oota.config.matrix import load_matrix
from oota.execute.bases import ensure_base

from .conftest import REPO

REGISTRY = shutil.which("docker-registry") or "/usr/bin/docker-registry"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """A plain-HTTP registry on 127.0.0.1 (the Engine trusts loopback registries)."""
    if not shutil.which(REGISTRY):
        pytest.skip("docker-registry is not installed (scripts/ensure-env.sh installs it)")
    folder = tmp_path_factory.mktemp("registry")
    port = _free_port()
    (folder / "config.yml").write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {folder / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen([REGISTRY, "serve", str(folder / "config.yml")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail(f"docker-registry did not answer on 127.0.0.1:{port} within 30 s")
            time.sleep(0.3)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=30)


def test_vendor_base_comes_from_the_labs_mirror(built, mirror, engine, docker_client, tmp_path):
    matrix = load_matrix(REPO / "matrix.yaml")
    os_spec = matrix.os["ubuntu24.04"]
    # A small stand-in for Intel's installer image: the bootstrapped Debian base, pushed to the
    # mirror under the path vault.habana.ai would serve it from.
    source = docker_client.images.get(built.results[0]["image"]["base"]["ref"])
    path = f"gaudi-docker/oota-test-{uuid.uuid4().hex[:8]}/pytorch-installer:latest"
    upstream, on_mirror = f"vault.habana.ai/{path}", f"{mirror}/{path}"
    source.tag(on_mirror.rsplit(":", 1)[0], tag="latest")
    try:
        for line in docker_client.images.push(on_mirror.rsplit(":", 1)[0], tag="latest",
                                              stream=True, decode=True):
            assert "error" not in line, line
        docker_client.images.remove(on_mirror)
        base = ensure_base(engine, upstream, os_spec, tmp_path, {"vault.habana.ai": mirror})
        assert (base.ref, base.how) == (upstream, "pulled")
        assert base.note == f"from the mirror {on_mirror}"
        assert docker_client.images.get(upstream).id == source.id
    finally:
        for ref in (upstream, on_mirror):
            try:
                docker_client.images.remove(ref)
            except Exception:  # noqa: BLE001 - already gone
                pass
