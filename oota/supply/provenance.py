"""The provenance of a published image: an in-toto Statement v1 whose subject is the image
(name + manifest digest), with an SLSA provenance v1 predicate saying how oota made it and what
its verification found. Pure: :mod:`oota.execute.publish` gathers the facts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from oota import __version__

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILDER_ID = "https://github.com/oota/oota/invoke-build"
BUILD_TYPE = "https://github.com/oota/oota/build-and-verify/v1"


class StatementProblem(ValueError):
    pass


@dataclass(frozen=True, kw_only=True, slots=True)
class Verification:
    """The verification the image carries: its outcome, when and by which run it was made
    (the pair its ``/opt/oota/expected.json`` holds; '' from an older oota)."""

    status: str
    counts: Mapping[str, int]
    at: str
    run_id: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Dependency:
    """A resolved dependency: a name or URI and its sha256 (hex, without ``sha256:``)."""

    name: str
    uri: str = ""
    sha256: str = ""
    version: str = ""

    def to_json(self) -> dict[str, object]:
        described: dict[str, object] = {"name": self.name}
        if self.uri:
            described["uri"] = self.uri
        if self.sha256:
            described["digest"] = {"sha256": self.sha256}
        if self.version:
            described["annotations"] = {"version": self.version}
        return described


@dataclass(frozen=True, kw_only=True, slots=True)
class ProvenanceFacts:
    image: str            # repository, e.g. registry:5000/oota/cpu
    digest: str           # sha256:...
    cell: str
    vendor: str
    fingerprint: str
    revision: str         # git revision of the project's inputs ('' outside git)
    inputs: Mapping[str, str]  # input name (matrix.yaml, vendors/cpu) -> sha256 hex
    dependencies: tuple[Dependency, ...]
    verification: Verification
    run_id: str = ""
    started: str = ""
    finished: str = ""
    byproducts: tuple[Dependency, ...] = field(default_factory=tuple)


def statement(facts: ProvenanceFacts) -> bytes:
    """The in-toto statement as JSON bytes (what the DSSE envelope carries)."""
    predicate = {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {
                "cell": facts.cell, "vendor": facts.vendor,
                "inputs": {name: {"sha256": value} for name, value in sorted(facts.inputs.items())},
                "source": {"revision": facts.revision},
            },
            "internalParameters": {"fingerprint": facts.fingerprint},
            "resolvedDependencies": [d.to_json() for d in facts.dependencies],
        },
        "runDetails": {
            "builder": {"id": BUILDER_ID, "version": {"oota": __version__}},
            "metadata": {"invocationId": facts.run_id, "startedOn": facts.started,
                         "finishedOn": facts.finished},
            "byproducts": [
                {"name": "verification",
                 "annotations": {"status": facts.verification.status,
                                 "counts": dict(facts.verification.counts),
                                 "at": facts.verification.at,
                                 **({"run_id": facts.verification.run_id}
                                    if facts.verification.run_id else {})}},
                *(b.to_json() for b in facts.byproducts)],
        },
    }
    _drop_blank(predicate["runDetails"]["metadata"])  # type: ignore[index]
    return json.dumps({"_type": STATEMENT_TYPE,
                       "subject": [{"name": facts.image,
                                    "digest": {"sha256": facts.digest.removeprefix("sha256:")}}],
                       "predicateType": PREDICATE_TYPE, "predicate": predicate},
                      sort_keys=True).encode()


def _drop_blank(mapping: dict[str, object]) -> None:
    for key in [k for k, v in mapping.items() if v in ("", None)]:
        del mapping[key]


@dataclass(frozen=True, kw_only=True, slots=True)
class Checked:
    """What a user is told of a provenance that checked out."""

    fingerprint: str
    cell: str
    revision: str
    verification: str
    sbom: str = ""   # the SBOM's digest the statement names (sha256:...; '' when none)
    # The verification's parts, to hold the image's own claims to ('' where it names none).
    status: str = ""
    at: str = ""
    run_id: str = ""


def check(document: bytes, digest: str) -> Checked:
    """The statement read back and checked against the image digest pulled;
    StatementProblem with the reason when it is not about this image."""
    try:
        doc = json.loads(document)
        subjects = [s["digest"]["sha256"] for s in doc["subject"]]
        predicate = doc["predicate"]
        definition = predicate["buildDefinition"]
        byproducts = predicate["runDetails"].get("byproducts", [])
    except (ValueError, KeyError, TypeError):
        raise StatementProblem("the provenance is not an in-toto statement") from None
    if doc.get("_type") != STATEMENT_TYPE or doc.get("predicateType") != PREDICATE_TYPE:
        raise StatementProblem(f"the provenance is a {doc.get('_type')} of "
                               f"{doc.get('predicateType')}, not SLSA provenance v1")
    if digest.removeprefix("sha256:") not in subjects:
        raise StatementProblem(f"the provenance is about another image "
                               f"(sha256:{(subjects or ['?'])[0][:12]}…), not {digest[:19]}…")
    verified: dict[str, object] = next((b.get("annotations", {}) for b in byproducts
                     if isinstance(b, dict) and b.get("name") == "verification"), {})
    sbom = next((b.get("digest", {}).get("sha256", "") for b in byproducts
                 if isinstance(b, dict) and b.get("name") == "sbom"
                 and isinstance(b.get("digest"), dict)), "")
    return Checked(sbom=f"sha256:{sbom}" if sbom else "",
                   fingerprint=str(definition.get("internalParameters", {}).get("fingerprint")),
                   cell=str(definition.get("externalParameters", {}).get("cell")),
                   revision=str(definition.get("externalParameters", {})
                                .get("source", {}).get("revision", "")),
                   verification=f"{verified.get('status', '?')} at {verified.get('at', '?')}",
                   **{key: str(verified.get(key) or "") for key in ("status", "at", "run_id")})
