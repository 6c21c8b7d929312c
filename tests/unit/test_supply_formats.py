"""The supply-chain formats, without Docker or a registry: the signing key, cosign's
simple-signing payload, the DSSE envelope, the in-toto/SLSA statement, the CycloneDX SBOM
(validated against the schema the cyclonedx library ships), the run-flags label, the artifact
manifests, and the Published record in the result and on the cell page."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import jsonschema
import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from oota.engine.base import DeviceAccess, Mount, RunRequest
from oota.errors import InputError
from oota.report.write import write_report
from oota.results.model import Image, Published
from oota.results.store import validation_errors
from oota.supply import cosign, signing
from oota.supply.provenance import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    Dependency,
    ProvenanceFacts,
    StatementProblem,
    Verification,
    check,
    statement,
)
from oota.supply.runflags import from_label, to_label
from oota.supply.sbom import HASH_OF_PROPERTY, Inventory, build_sbom, torch_entry, with_lock
from tests.unit.test_report import sample_results, write_results

REPO = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
INVENTORY = {
    "os": {"id": "debian", "version_id": "12"},
    "debs": [["libc6", "2.36-9+deb12u9", "amd64"], ["python3.11", "3.11.2-6", "amd64"]],
    "python": [
        {"name": "torch", "version": "2.13.0+cpu", "record_sha256": "1" * 64,
         "wheel_sha256": "2" * 64},
        {"name": "numpy", "version": "2.3.4", "record_sha256": "3" * 64, "wheel_sha256": ""},
    ],
}


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> signing.KeyFiles:
    return signing.generate(tmp_path_factory.mktemp("key"), None)


# -- keys ------------------------------------------------------------------------------------
def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites(tmp_path):
    files = signing.generate(tmp_path, b"correct horse")
    assert stat.S_IMODE(files.private.stat().st_mode) == 0o600
    assert b"ENCRYPTED PRIVATE KEY" in files.private.read_bytes()
    assert files.public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert signing.load_private(files.private, b"correct horse").curve.name == "secp256r1"
    with pytest.raises(InputError, match="encrypted; set OOTA_SIGNING_PASSWORD"):
        signing.load_private(files.private, None)
    with pytest.raises(InputError, match="not its password"):
        signing.load_private(files.private, b"wrong")
    with pytest.raises(InputError, match="exists"):
        signing.generate(tmp_path, None)


def test_keygen_task_uses_the_password_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(signing.PASSWORD_ENV, "from-env")
    assert signing.password_from_env() == b"from-env"
    monkeypatch.delenv(signing.PASSWORD_ENV)
    assert signing.password_from_env() is None


def test_a_public_key_is_not_a_signing_key(key):
    with pytest.raises(InputError, match="not a PEM private key"):
        signing.load_private(key.public, None)
    with pytest.raises(InputError, match="not a PEM public key"):
        signing.load_public(key.private)


# -- the signature ---------------------------------------------------------------------------
def test_simple_signing_payload_has_cosigns_layout():
    payload = json.loads(signing.signature_payload("r:5000/oota/cpu", DIGEST, {"a": "b"}))
    assert payload == {"critical": {"identity": {"docker-reference": "r:5000/oota/cpu"},
                                    "image": {"docker-manifest-digest": DIGEST},
                                    "type": "cosign container image signature"},
                       "optional": {"a": "b"}}
    assert signing.signed_digest(signing.signature_payload("r/x", DIGEST, {})) == DIGEST
    with pytest.raises(signing.SignatureProblem, match="not a cosign simple-signing"):
        signing.signed_digest(b'{"critical": {}}')


def test_signing_round_trip_and_tampering(key):
    private, public = signing.load_private(key.private, None), signing.load_public(key.public)
    payload = signing.signature_payload("r/x", DIGEST, {})
    signature = signing.sign(private, payload)
    assert signing.verify(public, payload, signature)
    assert not signing.verify(public, signing.signature_payload("r/x", OTHER, {}), signature)
    corrupted = base64.b64encode(bytes(b ^ 1 for b in base64.b64decode(signature))).decode()
    assert not signing.verify(public, payload, corrupted)
    assert not signing.verify(public, payload, "not base64!")
    stranger = signing.generate(key.private.parent / "other", None)
    assert not signing.verify(signing.load_public(stranger.public), payload, signature)


def test_dsse_envelope_round_trip_and_tampering(key):
    private, public = signing.load_private(key.private, None), signing.load_public(key.public)
    envelope = signing.envelope(b'{"_type": "x"}', private)
    doc = json.loads(envelope)
    assert doc["payloadType"] == "application/vnd.in-toto+json"
    assert base64.b64decode(doc["payload"]) == b'{"_type": "x"}'
    assert signing.open_envelope(envelope, public) == b'{"_type": "x"}'
    doc["payload"] = base64.b64encode(b'{"_type": "y"}').decode()
    with pytest.raises(signing.SignatureProblem, match="does not match the key"):
        signing.open_envelope(json.dumps(doc).encode(), public)
    with pytest.raises(signing.SignatureProblem, match="unsigned"):
        signing.open_envelope(signing.envelope(b"{}", None), public)
    assert signing.open_envelope(signing.envelope(b"{}", None), None) == b"{}"
    assert signing.pae("t", b"ab") == b"DSSEv1 1 t 2 ab"


# -- provenance ------------------------------------------------------------------------------
def _facts() -> ProvenanceFacts:
    return ProvenanceFacts(
        image="r:5000/oota/cpu", digest=DIGEST, cell="cpu-torch2.13.0-py3.11-debian12",
        vendor="cpu", fingerprint="sha256:" + "9" * 64, revision="abc123",
        inputs={"matrix.yaml": "4" * 64, "vendors/cpu": "5" * 64},
        dependencies=(Dependency(name="base-image", uri="oota/base:debian12", sha256="6" * 64),
                      Dependency(name="torch", uri="pkg:pypi/torch@2.13.0", sha256="2" * 64,
                                 version="2.13.0")),
        verification=Verification(status="passed", counts={"passed": 40, "skipped": 2},
                                  at="2026-11-23T10:00:00Z"),
        run_id="r1", started="2026-11-23T09:00:00Z", finished="2026-11-23T10:00:00Z")


def test_the_statement_is_an_in_toto_v1_statement_of_slsa_provenance_v1():
    doc = json.loads(statement(_facts()))
    assert doc["_type"] == STATEMENT_TYPE == "https://in-toto.io/Statement/v1"
    assert doc["predicateType"] == PREDICATE_TYPE == "https://slsa.dev/provenance/v1"
    assert doc["subject"] == [{"name": "r:5000/oota/cpu", "digest": {"sha256": "ab" * 32}}]
    definition, run = doc["predicate"]["buildDefinition"], doc["predicate"]["runDetails"]
    assert set(definition) == {"buildType", "externalParameters", "internalParameters",
                               "resolvedDependencies"}
    assert definition["externalParameters"]["cell"] == "cpu-torch2.13.0-py3.11-debian12"
    assert definition["externalParameters"]["inputs"]["vendors/cpu"] == {"sha256": "5" * 64}
    assert definition["externalParameters"]["source"] == {"revision": "abc123"}
    assert definition["internalParameters"]["fingerprint"] == "sha256:" + "9" * 64
    assert [d["name"] for d in definition["resolvedDependencies"]] == ["base-image", "torch"]
    assert run["builder"]["id"].startswith("https://")
    [verified] = [b for b in run["byproducts"] if b["name"] == "verification"]
    assert verified["annotations"] == {"status": "passed", "counts": {"passed": 40, "skipped": 2},
                                       "at": "2026-11-23T10:00:00Z"}
    checked = check(statement(_facts()), DIGEST)
    assert (checked.cell, checked.revision) == ("cpu-torch2.13.0-py3.11-debian12", "abc123")
    assert checked.verification == "passed at 2026-11-23T10:00:00Z"


def test_a_statement_about_another_image_is_refused():
    with pytest.raises(StatementProblem, match="about another image"):
        check(statement(_facts()), OTHER)
    with pytest.raises(StatementProblem, match="not an in-toto statement"):
        check(b"[]", DIGEST)


# -- SBOM ------------------------------------------------------------------------------------
def test_the_sbom_is_valid_cyclonedx_1_6_and_lists_torch_with_version_and_hash():
    sbom = build_sbom(Inventory.from_json(INVENTORY), image="r:5000/oota/cpu", digest=DIGEST)
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(sbom.decode()) is None
    doc = json.loads(sbom)
    assert (doc["bomFormat"], doc["specVersion"]) == ("CycloneDX", "1.6")
    assert doc["metadata"]["component"]["type"] == "container"
    torch = torch_entry(sbom)
    assert torch is not None and torch["version"] == "2.13.0+cpu"
    assert torch["hashes"] == [{"alg": "SHA-256", "content": "2" * 64}]
    assert {"name": HASH_OF_PROPERTY, "value": "wheel"} in torch["properties"]
    numpy = next(c for c in doc["components"] if c["name"] == "numpy")
    assert {"name": HASH_OF_PROPERTY, "value": "RECORD"} in numpy["properties"]
    purls = {c["purl"] for c in doc["components"]}
    assert "pkg:deb/debian/libc6@2.36-9%2Bdeb12u9?arch=amd64&distro=debian-12" in purls


def test_a_broken_inventory_is_an_error():
    with pytest.raises(ValueError, match="inventory"):
        Inventory.from_json({"debs": [["only-a-name"]]})


# -- run flags -------------------------------------------------------------------------------
def test_run_flags_round_trip_through_the_label():
    request = RunRequest(image="i", command=[], env={"HABANA_VISIBLE_DEVICES": "all"},
                         mounts=(Mount(source=Path("/opt/x"), target="/x"),),
                         device=DeviceAccess(devices=("/dev/kfd", "/dev/dri"), ipc="host",
                                             group_add=("video",), runtime="habana"))
    label = to_label(request)
    back = from_label("img@sha", label, ["oota-verify"])
    assert (back.device, back.env, back.mounts) == (request.device, request.env, request.mounts)
    assert back.command == ["oota-verify"] and back.image == "img@sha"
    cpu = to_label(RunRequest(image="i", command=[]))
    assert cpu == "{}" and from_label("i", cpu, []).device is None
    with pytest.raises(ValueError, match="oota.run-flags of i is unreadable"):
        from_label("i", "[1]", [])


# -- artifacts -------------------------------------------------------------------------------
def test_artifact_manifests_follow_cosigns_tag_scheme_and_layout():
    assert cosign.artifact_tag(DIGEST, "sig") == f"sha256-{'ab' * 32}.sig"
    artifact = cosign.signature_artifact(b"payload", "c2ln")
    manifest = json.loads(artifact.manifest())
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert manifest["config"]["digest"] == cosign.digest_of(artifact.config)
    [layer] = manifest["layers"]
    assert layer == {"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                     "digest": cosign.digest_of(b"payload"), "size": 7,
                     "annotations": {"dev.cosignproject.cosign/signature": "c2ln"}}
    [read] = cosign.layers_of(artifact.manifest())
    assert read.annotations["dev.cosignproject.cosign/signature"] == "c2ln"
    att = json.loads(cosign.attestation_artifact(b"{}", PREDICATE_TYPE).manifest())
    assert att["layers"][0]["annotations"]["predicateType"] == PREDICATE_TYPE
    with pytest.raises(ValueError):
        cosign.layers_of(b"{}")


# -- the record ------------------------------------------------------------------------------
def test_published_artifacts_are_in_the_result_and_its_schema():
    tag = "r:5000/oota/cpu:sha256-" + "ab" * 32
    published = Published(ref="r:5000/oota/cpu:c", digest=DIGEST, at="t",
                          signature=f"{tag}.sig@{OTHER}", sbom=f"{tag}.sbom@{OTHER}",
                          provenance=f"{tag}.att@{OTHER}")
    image = Image(tag="oota/cpu:c", published=(published,))
    assert Image.from_json(image.to_json()) == image
    schema = json.loads((REPO / "schema" / "result-v1.json").read_text())
    item = schema["properties"]["image"]["properties"]["published"]["items"]
    jsonschema.validate(published.to_json(), item)
    unsigned = Published(ref="r/x:c", digest=DIGEST, at="t")
    assert "signature" not in unsigned.to_json()
    jsonschema.validate(unsigned.to_json(), item)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**published.to_json(), "key": "x"}, item)


def test_no_private_key_material_in_the_public_file(key):
    assert b"PRIVATE" not in key.public.read_bytes()
    assert os.access(key.private, os.R_OK)


def test_the_cell_page_shows_the_signature_sbom_and_provenance(tmp_path):
    results = sample_results()
    first = results[0]
    repo, cell = "registry.lab:5000/oota/cpu", first["cell"]["id"]
    tag = f"{repo}:sha256-{'ab' * 32}"
    first["image"]["published"] = [{"ref": f"{repo}:{cell}", "digest": DIGEST, "at": "t",
                                    "signature": f"{tag}.sig@{OTHER}",
                                    "sbom": f"{tag}.sbom@{OTHER}",
                                    "provenance": f"{tag}.att@{OTHER}"}]
    assert validation_errors(first) == []
    out = tmp_path / "reports"
    write_report(write_results(tmp_path / "results", results), out)
    page = (out / "cells" / f"{cell}.html").read_text(encoding="utf-8")
    for shown in (f"docker pull {repo}:{cell}@{DIGEST}", f"{tag}.sig@{OTHER}",
                  f"{tag}.sbom@{OTHER}", f"{tag}.att@{OTHER}",
                  f"./oota.sh pull {repo}:{cell} --key oota.pub",
                  f"cosign verify --key oota.pub --insecure-ignore-tlog {repo}@{DIGEST}"):
        assert shown in page, shown


def test_a_wheel_hash_the_lock_pins_replaces_the_record_hash():
    inventory = Inventory.from_json({**INVENTORY, "python": [
        {"name": "torch", "version": "2.13.0+cpu", "record_sha256": "1" * 64,
         "wheel_sha256": ""},
        {"name": "Typing_Extensions", "version": "4.15.0", "record_sha256": "3" * 64,
         "wheel_sha256": ""}]})
    locked = {"torch": ("2.13.0+cpu", frozenset({"7" * 64})),
              "typing-extensions": ("4.15.0", frozenset({"8" * 64, "9" * 64}))}
    torch, typing = with_lock(inventory, locked).python
    assert (torch.sha256, torch.sha256_of) == ("7" * 64, "wheel (lock)")
    assert (typing.sha256, typing.sha256_of) == ("3" * 64, "RECORD")  # which wheel: unknown
    other = with_lock(inventory, {"torch": ("2.12.0", frozenset({"7" * 64}))}).python[0]
    assert other.sha256_of == "RECORD"
