"""Where and how the supply-chain artifacts of an image lie in its registry: cosign's tag scheme.

For an image ``R/ns/cpu@sha256:<hex>`` three OCI image manifests are pushed to the same
repository, each with one layer, under tags derived from the digest:

* ``sha256-<hex>.sig``: the simple-signing payload (layer type
  ``application/vnd.dev.cosign.simplesigning.v1+json``), its signature in the layer annotation
  ``dev.cosignproject.cosign/signature``;
* ``sha256-<hex>.att``: the provenance, an in-toto statement in a DSSE envelope (layer type
  ``application/vnd.dsse.envelope.v1+json``, annotation ``predicateType``);
* ``sha256-<hex>.sbom``: the CycloneDX JSON SBOM (layer type ``application/vnd.cyclonedx+json``),
  as ``cosign attach sbom`` stores it; its digest is also in the signed provenance.

The tag scheme, not OCI referrers, because every registry serves tags (Debian's docker-registry
2.8 has no referrers API) and cosign, skopeo and crane all read it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
SIGNATURE_LAYER = "application/vnd.dev.cosign.simplesigning.v1+json"
DSSE_LAYER = "application/vnd.dsse.envelope.v1+json"
SBOM_LAYER = "application/vnd.cyclonedx+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
PREDICATE_ANNOTATION = "predicateType"


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def artifact_tag(image_digest: str, kind: str) -> str:
    """cosign's tag for the ``kind`` ('sig', 'att', 'sbom') artifact of an image digest."""
    return f"{image_digest.replace(':', '-', 1)}.{kind}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Layer:
    media_type: str
    data: bytes
    annotations: dict[str, str] = field(default_factory=dict)

    def descriptor(self) -> dict[str, object]:
        described: dict[str, object] = {"mediaType": self.media_type,
                                        "digest": digest_of(self.data), "size": len(self.data)}
        return described | ({"annotations": self.annotations} if self.annotations else {})


@dataclass(frozen=True, kw_only=True, slots=True)
class Artifact:
    """One artifact manifest and its blobs, ready to push."""

    layer: Layer

    @property
    def config(self) -> bytes:
        # cosign's config: an empty image whose one "layer" is the artifact (diff id = digest).
        return json.dumps({"architecture": "", "os": "", "config": {},
                           "created": "0001-01-01T00:00:00Z",
                           "rootfs": {"type": "layers", "diff_ids": [digest_of(self.layer.data)]}},
                          separators=(",", ":")).encode()

    def manifest(self) -> bytes:
        return json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": digest_of(self.config),
                       "size": len(self.config)},
            "layers": [self.layer.descriptor()]}, separators=(",", ":")).encode()


def signature_artifact(payload: bytes, signature: str) -> Artifact:
    return Artifact(layer=Layer(media_type=SIGNATURE_LAYER, data=payload,
                                annotations={SIGNATURE_ANNOTATION: signature}))


def attestation_artifact(envelope: bytes, predicate_type: str) -> Artifact:
    return Artifact(layer=Layer(media_type=DSSE_LAYER, data=envelope,
                                annotations={SIGNATURE_ANNOTATION: "",
                                             PREDICATE_ANNOTATION: predicate_type}))


def sbom_artifact(sbom: bytes) -> Artifact:
    return Artifact(layer=Layer(media_type=SBOM_LAYER, data=sbom))


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerRef:
    """A layer as an artifact manifest names it (its blob is fetched separately)."""

    media_type: str
    digest: str
    annotations: dict[str, str] = field(default_factory=dict)


def layers_of(manifest: bytes) -> tuple[LayerRef, ...]:
    """The layers an artifact manifest names; ValueError when it is not an image manifest."""
    doc = json.loads(manifest)
    layers = doc.get("layers") if isinstance(doc, dict) else None
    if not isinstance(layers, list):
        raise ValueError("not an image manifest (no layers)")
    found = []
    for layer in layers:
        if not isinstance(layer, dict) or not isinstance(layer.get("digest"), str):
            raise ValueError("a layer without a digest")
        notes = layer.get("annotations") or {}
        found.append(LayerRef(media_type=str(layer.get("mediaType", "")),
                              digest=layer["digest"],
                              annotations={str(k): str(v) for k, v in notes.items()}))
    return tuple(found)
