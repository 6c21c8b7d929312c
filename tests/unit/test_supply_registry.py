"""Publish's artifacts and pull's checks against a real registry (Debian's docker-registry on
loopback, with htpasswd auth and TLS from a test CA), with a fake engine: no Docker needed.
A stand-in image manifest plays the pushed image; the checks only ever see its digest."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import Endpoint, RegistryAuth, RunOutcome, RunRequest
from oota.errors import EXIT_REFUSED, EnvironmentProblem, InputError
from oota.execute.attach import Signer
from oota.execute.publish import publish_cells
from oota.execute.pull import Refused, comparison, pull_and_verify
from oota.execute.verify import EXPECTED_IN_IMAGE
from oota.plan import plan
from oota.render import context_files, fingerprint, render_cell
from oota.results.assemble import assemble, cell_ref, now
from oota.results.model import Host, Image, Sealed, Stage, TestOutcome
from oota.results.store import load, save
from oota.supply import cosign, signing
from oota.supply.registry import Reference, RegistryClient, RegistryError, docker_config_auth
from oota.supply.runflags import LABEL as RUN_FLAGS
from tests import forkcli, registry_server

INVENTORY = {"os": {"id": "debian", "version_id": "12"}, "debs": [["libc6", "2.36", "amd64"]],
             "python": [{"name": "torch", "version": "2.13.0+cpu", "record_sha256": "1" * 64,
                         "wheel_sha256": "2" * 64}]}
VERIFY_OUTPUT = """cpu-torch2.13.0-py3.11-debian12: 40 passed

Compared with its verification by oota 0.1.0 on 2026-11-23T10:00:00Z (a host without the \
hardware; status passed): every one of the 40 tests ended the same way.
oota-verify: 40 passed
"""

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not registry_server.available(),
                                reason="docker-registry is not installed")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    started = registry_server.start(tmp_path_factory.mktemp("registry"), secure=True)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> signing.KeyFiles:
    return signing.generate(tmp_path_factory.mktemp("keys"), b"pw")


def _auth() -> RegistryAuth:
    return RegistryAuth(username=registry_server.USER, password=registry_server.PASSWORD)


def _client(server) -> RegistryClient:
    return RegistryClient(server.host, auth=_auth(), ca=server.ca)


def _stand_in_image(client: RegistryClient, repository: str, tag: str, seed: bytes) -> str:
    """An image manifest under ``tag`` (its one layer is ``seed``); its digest."""
    return client.push_artifact(repository, tag, cosign.Artifact(
        layer=cosign.Layer(media_type="application/vnd.oci.image.layer.v1.tar", data=seed)))


class FakeEngine:
    """The engine door as publish and pull use it: the image is the stand-in in the registry."""

    endpoint = Endpoint(name="fake", url="tcp://fake.lab:2375")

    def __init__(self, server, labels: dict[str, str], verify_exit: int = 0) -> None:
        self.server, self.labels, self.verify_exit = server, labels, verify_exit
        self.runs: list[RunRequest] = []
        self.pulled: list[tuple[str, str]] = []
        self.carried: dict[str, str] = {}   # the image's /opt/oota/expected.json

    def read_file(self, image: str, path: str, *, run_id: str = "") -> bytes:
        assert path == EXPECTED_IN_IMAGE
        return json.dumps(self.carried).encode()

    def image_labels(self, ref: str) -> dict[str, str] | None:
        return self.labels

    def image_id(self, ref: str) -> str | None:
        return "sha256:sealed"

    def image_digest(self, ref: str) -> str:
        return "sha256:" + "6" * 64

    def push(self, image: str, ref: str, auth: RegistryAuth | None) -> str:
        parsed = Reference.parse(ref)
        return _stand_in_image(_client(self.server), parsed.repository, parsed.tag,
                               f"image of {ref}".encode())

    def pull_digest(self, repository: str, digest: str, auth: RegistryAuth | None) -> str:
        self.pulled.append((repository, digest))
        return "sha256:pulled"

    def run(self, request: RunRequest) -> RunOutcome:
        self.runs.append(request)
        if request.command[0] == "python":  # the inventory probe
            assert request.collect_to is not None
            request.collect_to.mkdir(parents=True, exist_ok=True)
            (request.collect_to / "inventory.json").write_text(json.dumps(INVENTORY))
            return RunOutcome(exit_code=0, timed_out=False, output_tail="")
        assert request.log_path is not None
        request.log_path.parent.mkdir(parents=True, exist_ok=True)
        request.log_path.write_text(VERIFY_OUTPUT)
        return RunOutcome(exit_code=self.verify_exit, timed_out=False, output_tail="")


def _published(project, server, keys, tmp_path, *, key: bool = True):
    """Publish the project's first CPU cell with the fake engine; (result, engine, repo ref)."""
    matrix = load_matrix(project.matrix)
    cell = plan(matrix, ["cpu"])[0]
    current = fingerprint(context_files(matrix, render_cell(matrix, cell)))
    tests = (TestOutcome(id="t::a", layer="install", status="passed", duration_s=0.1),)
    results = tmp_path / "results"
    save(results / cell.id, assemble(
        cell=cell_ref(cell.coordinates(), id=cell.id, fingerprint=current),
        stages={"verify": Stage(status="passed", duration_s=1.0)}, tests=tests,
        host=Host(facts={}), started_at=now(), run_id="r1",
        image=Image(tag=f"oota/cpu:{cell.id}", id="sha256:sealed",
                    sealed=Sealed(id="sha256:sealed"))))
    engine = FakeEngine(server, {"oota.fingerprint": current, "oota.verified": "passed",
                                 RUN_FLAGS: '{"ipc":"host"}',
                                 "org.opencontainers.image.revision": "abc123",
                                 "org.opencontainers.image.base.name": "oota/base:debian12"})
    signer = Signer(key=signing.load_private(keys.private, b"pw") if key else None,
                    auth=_auth(), ca=server.ca)
    shown = io.StringIO()
    [outcome] = publish_cells(matrix, [cell], engine, Console(shown, live=False),
                              results_dir=results, registry=server.host,
                              namespace=f"lab-{uuid.uuid4().hex[:8]}",
                              local_namespace="oota", auth=_auth(), signer=signer)
    assert outcome.status == "pushed", outcome.reason
    result = load(results / cell.id / "result.json")
    engine.carried = {"cell": cell.id, "status": "passed", "verified_at": result.finished_at}
    return result, engine, outcome, shown.getvalue()


def test_publish_attaches_signature_sbom_and_provenance(project, server, keys, tmp_path):
    result, engine, outcome, shown = _published(project, server, keys, tmp_path)
    [published] = result.image.published
    assert outcome.signed and "(signed)" in shown
    tag = f"{outcome.ref.rsplit(':', 1)[0]}:{cosign.artifact_tag(outcome.digest, '')}"
    assert published.signature.startswith(f"{tag}sig@sha256:")
    assert published.sbom.startswith(f"{tag}sbom@sha256:")
    assert published.provenance.startswith(f"{tag}att@sha256:")
    client, repository = _client(server), Reference.parse(outcome.ref).repository
    sbom_layer = cosign.layers_of(client.manifest(
        repository, cosign.artifact_tag(outcome.digest, "sbom")))[0]
    sbom = json.loads(client.blob(repository, sbom_layer.digest))
    torch = next(c for c in sbom["components"] if c["name"] == "torch")
    assert torch["hashes"][0]["content"] == "2" * 64
    probe = engine.runs[0]
    assert probe.command[:2] == ["python", "-c"] and probe.collect
    # The registry password went to the registry only.
    results_text = json.dumps(result.to_json())
    assert registry_server.PASSWORD not in results_text + shown


def test_pull_checks_then_pulls_by_digest_and_runs_with_the_images_flags(project, server, keys,
                                                                          tmp_path):
    _, engine, outcome, _ = _published(project, server, keys, tmp_path)
    pulled = pull_and_verify(engine, outcome.ref, key=signing.load_public(keys.public),
                             auth=_auth(), ca=server.ca, workdir=tmp_path / "pull")
    assert pulled.digest == outcome.digest and pulled.engine == "tcp://fake.lab:2375"
    assert pulled.signature == "verified with the given key"
    assert pulled.provenance.verification.startswith("passed at ")
    assert pulled.sbom.startswith("the one the provenance names (sha256:")
    assert engine.pulled == [(Reference.parse(outcome.ref).name, outcome.digest)]
    verify = engine.runs[-1]
    assert verify.image == "sha256:pulled" and verify.command[0] == "oota-verify"
    assert verify.device is not None and verify.device.ipc == "host"
    assert pulled.counts == "40 passed"
    assert pulled.comparison.startswith("Compared with its verification by oota")
    assert pulled.comparison.endswith("ended the same way.")


def test_a_tag_moved_to_another_image_is_refused_as_unsigned(project, server, keys, tmp_path):
    _, engine, outcome, _ = _published(project, server, keys, tmp_path)
    ref = Reference.parse(outcome.ref)
    _stand_in_image(_client(server), ref.repository, ref.tag, b"someone else's image")
    with pytest.raises(Refused, match="unsigned: .* does not exist") as info:
        pull_and_verify(engine, outcome.ref, key=signing.load_public(keys.public),
                        auth=_auth(), ca=server.ca, workdir=tmp_path)
    assert info.value.exit_code == EXIT_REFUSED == 5
    assert engine.pulled == []  # nothing of it was pulled, let alone run


def test_a_signature_copied_onto_another_image_is_refused(project, server, keys, tmp_path):
    _, engine, outcome, _ = _published(project, server, keys, tmp_path)
    client, ref = _client(server), Reference.parse(outcome.ref)
    signed = client.manifest(ref.repository, cosign.artifact_tag(outcome.digest, "sig"))
    moved = _stand_in_image(client, ref.repository, ref.tag, b"a tampered image")
    client.push_manifest(ref.repository, cosign.artifact_tag(moved, "sig"), signed,
                         cosign.OCI_MANIFEST)
    with pytest.raises(Refused, match="signature is of another image .* re-tagged or tampered"):
        pull_and_verify(engine, outcome.ref, key=signing.load_public(keys.public),
                        auth=_auth(), ca=server.ca, workdir=tmp_path)


def test_a_corrupted_signature_or_another_key_is_refused(project, server, keys, tmp_path):
    _, engine, outcome, _ = _published(project, server, keys, tmp_path)
    client, ref = _client(server), Reference.parse(outcome.ref)
    stranger = signing.generate(tmp_path / "stranger", None)
    with pytest.raises(Refused, match="bad signature"):
        pull_and_verify(engine, outcome.ref, key=signing.load_public(stranger.public),
                        auth=_auth(), ca=server.ca, workdir=tmp_path)
    tag = cosign.artifact_tag(outcome.digest, "sig")
    [layer] = cosign.layers_of(client.manifest(ref.repository, tag))
    payload = client.blob(ref.repository, layer.digest)
    good = base64.b64decode(layer.annotations[cosign.SIGNATURE_ANNOTATION])
    corrupted = base64.b64encode(good[:-1] + bytes([good[-1] ^ 0xFF])).decode()
    client.push_artifact(ref.repository, tag, cosign.signature_artifact(payload, corrupted))
    with pytest.raises(Refused, match="bad signature"):
        pull_and_verify(engine, outcome.ref, key=signing.load_public(keys.public),
                        auth=_auth(), ca=server.ca, workdir=tmp_path)
    assert engine.pulled == []


def test_a_swapped_sbom_is_refused_before_anything_is_pulled(project, server, keys, tmp_path):
    """The signed provenance names the SBOM's digest: an SBOM replaced by one without torch
    (hiding a package from a scanner) is tampering, exit 5."""
    _, engine, outcome, _ = _published(project, server, keys, tmp_path)
    client, ref = _client(server), Reference.parse(outcome.ref)
    tag = cosign.artifact_tag(outcome.digest, "sbom")
    [layer] = cosign.layers_of(client.manifest(ref.repository, tag))
    sbom = json.loads(client.blob(ref.repository, layer.digest))
    sbom["components"] = [c for c in sbom["components"] if c["name"] != "torch"]
    client.push_artifact(ref.repository, tag, cosign.sbom_artifact(json.dumps(sbom).encode()))
    with pytest.raises(Refused, match=r"the SBOM .* is not the one the signed provenance names "
                                      r".* replaced or tampered with") as info:
        pull_and_verify(engine, outcome.ref, key=signing.load_public(keys.public),
                        auth=_auth(), ca=server.ca, workdir=tmp_path)
    assert info.value.exit_code == EXIT_REFUSED and engine.pulled == []


def test_unsigned_publishing_is_said_and_refused_by_a_keyed_pull(project, server, keys,
                                                                tmp_path):
    result, engine, outcome, shown = _published(project, server, keys, tmp_path, key=False)
    assert not outcome.signed and "UNSIGNED" in shown
    assert result.image.published[0].signature == ""
    with pytest.raises(Refused, match="unsigned"):
        pull_and_verify(engine, outcome.ref, key=signing.load_public(keys.public),
                        auth=_auth(), ca=server.ca, workdir=tmp_path)
    # Without a key nothing vouches for it, and the output says so; the provenance still names
    # this very image.
    pulled = pull_and_verify(engine, outcome.ref, key=None, auth=_auth(), ca=server.ca,
                             workdir=tmp_path)
    assert pulled.signature.startswith("NOT checked")


def test_credentials_are_needed_and_never_shown(server):
    anonymous = RegistryClient(server.host, auth=None, ca=server.ca)
    with pytest.raises(RegistryError, match="wants credentials") as info:
        anonymous.resolve("lab/cpu", "latest")
    wrong = RegistryClient(server.host, auth=RegistryAuth(username="x", password="hunter2"),
                           ca=server.ca)
    with pytest.raises(RegistryError) as info:
        wrong.resolve("lab/cpu", "latest")
    assert "hunter2" not in str(info.value)


def test_an_untrusted_certificate_is_an_environment_problem(server):
    with pytest.raises(EnvironmentProblem, match="certificate is not trusted.*--registry-ca"):
        RegistryClient(server.host, auth=_auth(), ca=None).resolve("lab/cpu", "latest")


@pytest.mark.parametrize("text", ["cpu:latest", "https://r/x:y", "r:5000/UPPER:x", ""])
def test_bad_references_are_input_errors(text):
    with pytest.raises(InputError, match="REGISTRY/REPOSITORY"):
        Reference.parse(text)


def test_comparison_is_cut_from_the_verify_output():
    assert comparison(VERIFY_OUTPUT).endswith("ended the same way.")
    assert comparison("no comparison here") == ""


def test_docker_config_credentials_are_used(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"r:5000": {
        "auth": base64.b64encode(b"lab:pw").decode()}}}))
    assert docker_config_auth("r:5000", {"DOCKER_CONFIG": str(tmp_path)}) == \
        RegistryAuth(username="lab", password="pw")
    assert docker_config_auth("other", {"DOCKER_CONFIG": str(tmp_path)}) is None


def _oota(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return forkcli.run([sys.executable, "-m", "oota", "-r", str(REPO), *args],
                       env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                       text=True, cwd=cwd, timeout=120)


def test_keygen_and_pull_from_the_command_line(server, tmp_path):
    """`oota keygen` writes the pair; `oota pull` of an unsigned image is exit 5 with the
    reason, a bad reference exit 2."""
    made = _oota("keygen", "--out", str(tmp_path / "keys"), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "encrypted: no" in made.stdout and (tmp_path / "keys" / "oota.pub").is_file()
    again = _oota("keygen", "--out", str(tmp_path / "keys"), cwd=tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr
    bad = _oota("pull", "cpu:latest", cwd=tmp_path)
    assert bad.returncode == 2 and "REGISTRY/REPOSITORY" in bad.stderr
    _stand_in_image(_client(server), "cli/cpu", "c1", b"unsigned image")
    refused = _oota("pull", f"{server.host}/cli/cpu:c1", "--key",
                    str(tmp_path / "keys" / "oota.pub"), "--registry-auth",
                    str(server.auth_file), "--registry-ca", str(server.ca), cwd=tmp_path)
    if refused.returncode == 3 and "Docker" in refused.stderr:
        pytest.skip(f"no Docker Engine here: {refused.stderr.strip()}")
    assert refused.returncode == 5, refused.stderr
    assert "unsigned" in refused.stderr and registry_server.PASSWORD not in refused.stderr
