"""invoke publish and invoke pull against real registries (Debian's docker-registry on
loopback): the verified CPU cell is pushed and its digest recorded, a cell without a verified
image is refused; published with the lab's key to a registry with htpasswd auth and TLS from a
test CA, it is pulled back, checked and re-verified in a second Engine (``--host``, a dockerd
of tests/engines.py standing in for a lab's hardware host); an image pushed under its tag and a
corrupted signature are refused; no key, password or registry credential reaches a
layer, a label, a log or a result."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import docker.errors
import pytest

from oota.api import flags
from oota.api.runs import keygen
from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import RUN_LABEL
from oota.execute.attach import Signer
from oota.execute.publish import publish_cells
from oota.execute.pull import Refused, pull_and_verify
from oota.plan import plan, select
from oota.results.store import load
from oota.supply import cosign, signing
from oota.supply.registry import Reference, RegistryClient
from oota.supply.runflags import LABEL as RUN_FLAGS
from oota.supply.sbom import torch_entry
from tests import image_scan, registry_server
from tests.engines import ExtraEngine

from .conftest import DEFAULT_CELL, NAMESPACE, REPO

SIGNING_PASSWORD = f"signing-password-{uuid.uuid4().hex}"


@dataclass
class Verified:
    results: Path
    namespace: str  # where the image is tagged locally: <namespace>/cpu:<cell>, the run's


@pytest.fixture(scope="module")
def verified(built, tmp_path_factory) -> Verified:
    """The session's verified CPU cell (``built``), its result folder copied: publishing writes
    the pushed digests into result.json, and the other tests read the session's as it was.
    Nothing is built or verified again (test sessions that run at once on one Engine keep their
    images apart with OOTA_TEST_NAMESPACE)."""
    assert built.results[0]["status"] == "passed", built.results[0].get("message")
    results = tmp_path_factory.mktemp("publish-results")
    shutil.copytree(built.results_dir / DEFAULT_CELL, results / DEFAULT_CELL)
    return Verified(results=results, namespace=built.options.namespace)


def test_the_verified_image_is_pushed_and_an_unverified_cell_refused(verified, secure_registry,
                                                                    engine, docker_client):
    """Pushed to the registry the signed publication below uses too (under a namespace of its
    own): that push finds the layers there and mounts them instead of sending 1.5 GB again."""
    matrix = load_matrix(REPO / "matrix.yaml")
    cpu = plan(matrix, ["cpu"])
    [default] = select(matrix, cpu, ids=[DEFAULT_CELL])
    other = next(c for c in cpu if c.id != DEFAULT_CELL)
    namespace = f"oota-test-{uuid.uuid4().hex[:8]}"
    auth = flags.registry_auth(str(secure_registry.auth_file))
    pushed, refused = publish_cells(matrix, [default, other], engine, Console(),
                                    results_dir=verified.results, registry=secure_registry.host,
                                    namespace=namespace, local_namespace=verified.namespace,
                                    auth=auth)
    try:
        assert pushed.status == "pushed", pushed.reason
        assert pushed.ref == f"{secure_registry.host}/{namespace}/cpu:{DEFAULT_CELL}"
        client = RegistryClient(secure_registry.host, auth=auth, ca=secure_registry.ca)
        assert client.resolve(f"{namespace}/cpu", DEFAULT_CELL) == pushed.digest
        recorded = load(verified.results / DEFAULT_CELL / "result.json").image.published
        assert [(p.ref, p.digest) for p in recorded] == [(pushed.ref, pushed.digest)]
        assert json.loads((verified.results / DEFAULT_CELL / "result.json").read_text())[
            "status"] \
            == "passed"
        assert refused.status == "refused"
        assert refused.reason.startswith(("no image", "stale", "never verified"))
    finally:
        _untag(docker_client, pushed.ref)


def _untag(docker_client, ref: str) -> None:
    """Remove every local reference into ``ref``'s repository (the pushed tag, and the digest
    references a push or a pull by digest leaves), so no image is kept alive by one."""
    repository = ref.rsplit(":", 1)[0]
    for image in docker_client.images.list():
        for name in (image.attrs.get("RepoTags") or []) + (image.attrs.get("RepoDigests") or []):
            if name.startswith((f"{repository}:", f"{repository}@")):
                try:
                    docker_client.images.remove(name)
                except Exception:  # noqa: BLE001 - already gone with another reference
                    pass


def _publish_signed(verified, secure_registry, engine, tmp_path, monkeypatch, shown):
    """The default CPU cell published to the secure registry under a namespace of its own,
    signed with a new key pair: (what was pushed, the key pair, the registry credentials)."""
    matrix = load_matrix(REPO / "matrix.yaml")
    [default] = select(matrix, plan(matrix, ["cpu"]), ids=[DEFAULT_CELL])
    monkeypatch.setenv(signing.PASSWORD_ENV, SIGNING_PASSWORD)
    keys = keygen(str(tmp_path / "keys"))
    auth = flags.registry_auth(str(secure_registry.auth_file))
    signer = Signer(key=signing.load_private(keys.private, SIGNING_PASSWORD.encode()),
                    auth=auth, ca=secure_registry.ca)
    [pushed] = publish_cells(matrix, [default], engine, Console(shown, live=False),
                             results_dir=verified.results, registry=secure_registry.host,
                             namespace=f"oota-test-{uuid.uuid4().hex[:8]}",
                             local_namespace=verified.namespace, auth=auth, signer=signer,
                             run_id=f"publish-{uuid.uuid4().hex[:8]}")
    return pushed, keys, auth


def test_signed_publish_then_pull_and_reverify_elsewhere_and_tampering_refused(
        verified, secure_registry, engine, docker_client, second_engine, tmp_path, monkeypatch,
        capsys):
    """Published signed; `oota pull REF --key PUB --host tcp://...` as a user runs it: the
    image is checked in the registry, pulled by digest into the second Engine (not this one)
    and re-verified there (three layers: ``--layer``); then another image pushed under the
    signed tag and a corrupted signature are refused; no secret anywhere. One publication and
    one re-verification serve all of it (a pull into this Engine runs the same code with
    another endpoint)."""
    shown = io.StringIO()
    pushed, keys, auth = _publish_signed(verified, secure_registry, engine, tmp_path,
                                         monkeypatch, shown)
    pinned = f"{pushed.ref.rsplit(':', 1)[0]}@{pushed.digest}"
    try:
        assert pushed.status == "pushed" and pushed.signed, pushed.reason
        _check_artifacts(secure_registry, pushed.ref, pushed.digest, verified.results)
        local = f"{verified.namespace}/cpu:{DEFAULT_CELL}"
        assert engine.image_labels(local)[RUN_FLAGS] == "{}"
        _untag(docker_client, pushed.ref)  # this Engine no longer knows the published image
        since = int(time.time()) - 1
        ran = subprocess.run(
            [sys.executable, "-m", "oota", "-r", str(REPO), "pull", pushed.ref,
             "--key", str(keys.public), "--registry-auth", str(secure_registry.auth_file),
             "--registry-ca", str(secure_registry.ca), "--host", second_engine.url,
             "--layer", "install,compat,device", "--workdir", str(tmp_path / "pull")],
            env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
            cwd=tmp_path, timeout=1800)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert f"image:       {pushed.ref} -> {pushed.digest}" in ran.stdout
        assert f"engine:      {second_engine.url}" in ran.stdout
        assert "signature:   verified with the given key" in ran.stdout
        # Three layers re-verified (a whole re-verification that keeps its seal is
        # test_fleet.py's --reverify): each test ended as in the verification the image
        # carries, the rest said not run.
        assert "Compared with its verification" in ran.stdout
        assert "tests ended the same way" in ran.stdout, ran.stdout
        assert "of its tests did not run this time" in ran.stdout, ran.stdout
        second_engine.docker("image", "inspect", pinned)  # raises unless it is there
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(pinned)
        until = int(time.time()) + 1
        assert _pull_runs(second_engine.docker("events", "--since", str(since), "--until",
                                               str(until), "--format", "{{json .}}").stdout), \
            "the second Engine ran no verify container"
        assert not _pull_runs("\n".join(json.dumps(e) for e in docker_client.events(
            since=since, until=until, decode=True))), "the verify container ran on this Engine"

        public = signing.load_public(keys.public)
        _refusals(engine, secure_registry, local, pushed.ref, pushed.digest, auth, public,
                  tmp_path)
        logs = [p.read_text(errors="replace") for p in (tmp_path / "pull").rglob("*")
                if p.is_file() and p.suffix in (".log", ".json", ".xml")]
        assert logs, "the pull wrote no log"
        _no_secrets_anywhere(docker_client, local, keys.private, [
            SIGNING_PASSWORD, registry_server.PASSWORD], [
            shown.getvalue(), capsys.readouterr().out, ran.stdout, ran.stderr,
            (verified.results / DEFAULT_CELL / "result.json").read_text(), *logs])
    finally:
        _untag(docker_client, pushed.ref)


def _check_artifacts(server, ref: str, digest: str, results: Path) -> None:
    [published] = [p for p in load(results / DEFAULT_CELL / "result.json").image.published
                   if p.ref == ref]
    assert published.signature and published.sbom and published.provenance
    parsed = Reference.parse(ref)
    client = RegistryClient(parsed.registry, auth=flags.registry_auth(str(server.auth_file)),
                            ca=server.ca)
    [layer] = cosign.layers_of(client.manifest(parsed.repository,
                                               cosign.artifact_tag(digest, "sbom")))
    torch = torch_entry(client.blob(parsed.repository, layer.digest))
    assert torch is not None and str(torch["version"]).startswith("2.13.0"), torch
    assert len(torch["hashes"][0]["content"]) == 64  # type: ignore[index]


def _refusals(engine, server, local: str, ref: str, digest: str, auth, public,
              tmp_path) -> None:
    parsed = Reference.parse(ref)
    # Another image pushed under the signed tag: nothing vouches for it.
    base = engine.image_labels(local)["org.opencontainers.image.base.name"]
    engine.push(base, ref, auth)
    with pytest.raises(Refused, match="unsigned") as info:
        pull_and_verify(engine, ref, key=public, auth=auth, ca=server.ca, workdir=tmp_path)
    assert info.value.exit_code == 5
    # The signature itself corrupted: the signed image, by digest, is refused as well.
    client = RegistryClient(parsed.registry, auth=auth, ca=server.ca)
    tag = cosign.artifact_tag(digest, "sig")
    [layer] = cosign.layers_of(client.manifest(parsed.repository, tag))
    raw = base64.b64decode(layer.annotations[cosign.SIGNATURE_ANNOTATION])
    corrupted = base64.b64encode(raw[:-2] + bytes([raw[-2] ^ 0x55, raw[-1]])).decode()
    client.push_artifact(parsed.repository, tag, cosign.signature_artifact(
        client.blob(parsed.repository, layer.digest), corrupted))
    with pytest.raises(Refused, match="bad signature"):
        pull_and_verify(engine, f"{parsed.name}@{digest}", key=public, auth=auth,
                        ca=server.ca, workdir=tmp_path)


def _no_secrets_anywhere(docker_client, ref: str, private_key: Path, passwords: list[str],
                         texts: list[str]) -> None:
    """Neither the private key (a line of its PEM body) nor a password is in a layer of the
    image, its config and labels (tests/image_scan.py), or the given output, results and
    logs."""
    pem_line = private_key.read_text().splitlines()[2]
    markers = [m.encode() for m in (pem_line, *passwords)]
    assert image_scan.holding(ref, markers) == [], "a secret is in the image"
    labels = json.dumps(docker_client.images.get(ref).labels)
    for text in [labels, *texts]:
        assert not any(m.decode() in text for m in markers)


@pytest.fixture(scope="module")
def second_engine(extra_engines) -> ExtraEngine:
    """A dockerd of its own on loopback TCP (the session's e1: test_fleet.py may have built its
    cells there, but it has never seen this image), standing in for a lab's hardware host. Like
    every dockerd it treats 127.0.0.0/8 registries as insecure (TLS without verification), so it
    pulls from the test registry with no CA installed; the credentials come with each pull."""
    return extra_engines(1)


def _pull_runs(events: str) -> list[dict]:
    """The container starts among ``events`` (JSON lines) of a pull's verify run."""
    found = (json.loads(line) for line in events.splitlines() if line.strip())
    return [e for e in found if e.get("Type") == "container" and e.get("Action") == "start"
            and e.get("Actor", {}).get("Attributes", {}).get(RUN_LABEL, "").startswith("pull-")]


def test_a_push_to_a_dead_registry_leaves_no_tag(built, engine, docker_client):
    """Nothing listens on port 9: the push fails at once, and the image is not left tagged as
    if it were in that registry (a few seconds)."""
    ref = f"127.0.0.1:9/{NAMESPACE}/cpu:{DEFAULT_CELL}"
    with pytest.raises(Exception, match="push of 127.0.0.1:9/"):
        engine.push(built.tag, ref, None)
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(ref)
    assert docker_client.images.get(built.tag)  # the image itself is untouched
