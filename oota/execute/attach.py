"""After an image is pushed: make its SBOM (a container of the image lists what it holds, through
the engine door) and its provenance, sign both image and provenance with the lab's key when one
is given, and push the three artifacts beside the image (cosign's tag scheme,
:mod:`oota.supply.cosign`).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from oota.config.matrix import Matrix
from oota.engine.base import RUN_LABEL, Engine, RegistryAuth, RunRequest
from oota.errors import StepFailed
from oota.files import RESULT_LIMIT, read_text
from oota.lockfile import lock_path, pins
from oota.plan import Cell
from oota.results.model import Result
from oota.supply import cosign, signing
from oota.supply.provenance import (
    PREDICATE_TYPE,
    Dependency,
    ProvenanceFacts,
    Verification,
    statement,
)
from oota.supply.registry import Reference, RegistryClient
from oota.supply.sbom import PROBE, Inventory, InventoryError, build_sbom, with_lock

PROBE_OUT = "/tmp/oota-inventory"


@dataclass(frozen=True, kw_only=True, slots=True)
class Signer:
    """What publishing attaches with: the lab's key (None: unsigned), the registry's
    credentials and the CA that its TLS certificate chains to (None: the system's)."""

    key: ec.EllipticCurvePrivateKey | None
    auth: RegistryAuth | None = None
    ca: Path | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Attached:
    """The artifacts' references, ``REPO:TAG@DIGEST`` ('' for the signature when unsigned)."""

    sbom: str
    provenance: str
    signature: str


def inventory(engine: Engine, image: str, run_id: str) -> Inventory:
    """What ``image`` holds (OS packages, Python distributions), from a run of the probe in it."""
    with tempfile.TemporaryDirectory(prefix="oota-inventory-") as tmp:
        outcome = engine.run(RunRequest(
            image=image, command=["python", "-c", PROBE.read_text(encoding="utf-8"), PROBE_OUT],
            labels={RUN_LABEL: run_id} if run_id else {}, collect=PROBE_OUT,
            collect_to=Path(tmp), timeout_s=300))
        found = Path(tmp) / "inventory.json"
        if outcome.exit_code != 0 or not found.is_file():
            raise StepFailed(f"listing the packages of {image} failed (exit {outcome.exit_code})",
                             log_tail=outcome.output_tail)
        try:
            return Inventory.from_json(json.loads(read_text(found, RESULT_LIMIT)))
        except (OSError, ValueError, RecursionError, InventoryError) as exc:
            raise StepFailed(f"the package list of {image} is unreadable: {exc}") from None


def facts(engine: Engine, local: str, ref: Reference, digest: str, cell: Cell, result: Result,
          found: Inventory, *, matrix_file: Path, sbom_digest: str) -> ProvenanceFacts:
    """The provenance of the pushed image, from its labels, its result and its inventory."""
    labels = engine.image_labels(local) or {}
    base = labels.get("org.opencontainers.image.base.name", "")
    dependencies = [Dependency(name="base-image", uri=base, sha256=_image_sha(engine, base))]
    torch = found.find("torch")
    if torch:
        dependencies.append(Dependency(name="torch", uri=f"pkg:pypi/torch@{torch.version}",
                                       sha256=torch.sha256, version=torch.version))
    return ProvenanceFacts(
        image=ref.name, digest=digest, cell=cell.id, vendor=cell.vendor.name,
        fingerprint=labels.get("oota.fingerprint", result.cell.fingerprint),
        revision=labels.get("org.opencontainers.image.revision", ""),
        inputs=input_digests(matrix_file, cell.vendor.folder), dependencies=tuple(dependencies),
        verification=Verification(status=result.status, counts=dict(result.summary),
                                  at=sealed_at(result), run_id=sealed_run(result)),
        run_id=result.run_id or "", started=result.started_at, finished=result.finished_at,
        byproducts=(Dependency(name="sbom", uri=cosign.artifact_tag(digest, "sbom"),
                               sha256=sbom_digest.removeprefix("sha256:")),))


def sealed_at(result: Result) -> str:
    """When the verification the image carries was made: its seal's time (a run that reused
    or kept it did not make it), else the result's own end."""
    sealed = result.image.sealed if result.image else None
    return sealed.at if sealed is not None and sealed.at else result.finished_at


def sealed_run(result: Result) -> str:
    """The run that made the verification the image carries, paired with :func:`sealed_at`
    ('' for a seal an older oota recorded without it: no run is then vouched for)."""
    sealed = result.image.sealed if result.image else None
    return (sealed.run_id or "") if sealed is not None and sealed.at else ""


def _image_sha(engine: Engine, ref: str) -> str:
    if not ref:
        return ""
    if "@sha256:" in ref:
        return ref.rsplit("@sha256:", 1)[1]
    try:
        return engine.image_digest(ref).removeprefix("sha256:")
    except Exception:  # noqa: BLE001 - the base may be gone locally; the ref stays recorded
        return ""


def input_digests(matrix_file: Path, vendor_folder: Path) -> dict[str, str]:
    """sha256 of the matrix file and of the vendor folder (every file's path and content)."""
    folder = hashlib.sha256()
    for path in sorted(p for p in vendor_folder.rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts):
        folder.update(path.relative_to(vendor_folder).as_posix().encode() + b"\0")
        folder.update(hashlib.sha256(path.read_bytes()).digest())
    return {matrix_file.name: hashlib.sha256(matrix_file.read_bytes()).hexdigest(),
            f"vendors/{vendor_folder.name}": folder.hexdigest()}


def attach(engine: Engine, local: str, ref: Reference, digest: str, cell: Cell, result: Result,
           signer: Signer, *, matrix: Matrix, run_id: str = "") -> Attached:
    """SBOM, provenance and (with a key) signature of ``ref@digest``, pushed beside it."""
    lock = lock_path(matrix, cell)
    found = inventory(engine, local, run_id)
    if lock.is_file():
        found = with_lock(found, pins(lock.read_text(encoding="utf-8")))
    sbom = build_sbom(found, image=ref.name, digest=digest)
    provenance = statement(facts(engine, local, ref, digest, cell, result, found,
                                 matrix_file=matrix.file, sbom_digest=cosign.digest_of(sbom)))
    client = RegistryClient(ref.registry, auth=signer.auth, ca=signer.ca)

    def push(kind: str, artifact: cosign.Artifact) -> str:
        tag = cosign.artifact_tag(digest, kind)
        return f"{ref.name}:{tag}@{client.push_artifact(ref.repository, tag, artifact)}"

    attached = Attached(
        sbom=push("sbom", cosign.sbom_artifact(sbom)),
        provenance=push("att", cosign.attestation_artifact(
            signing.envelope(provenance, signer.key), PREDICATE_TYPE)),
        signature="")
    if signer.key is None:
        return attached
    payload = signing.signature_payload(ref.name, digest, {"oota.cell": cell.id})
    artifact = cosign.signature_artifact(payload, signing.sign(signer.key, payload))
    return Attached(sbom=attached.sbom, provenance=attached.provenance,
                    signature=push("sig", artifact))
