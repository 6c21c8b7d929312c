"""--registry-mirror against a real registry: Debian's docker-registry (distribution 2.8),
started by the test on loopback, serves a vendor base image under its mirror path; oota pulls
it from there and tags it with the upstream name the generated Dockerfiles use."""

from __future__ import annotations

import uuid

import pytest

from oota.config.matrix import load_matrix
from oota.execute.bases import ensure_base

from .conftest import REPO


@pytest.fixture(scope="module")
def mirror(registry):
    return registry


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
