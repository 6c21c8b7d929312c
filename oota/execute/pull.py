"""``invoke pull REF --key oota.pub``: check an image in its registry before anything of it runs,
then pull it by digest and re-verify it on an Engine (this host's, or ``--host``'s).

1. REF's tag is resolved to the digest it names now.
2. The signature (``REPO:sha256-<hex>.sig``) must verify with the key and vouch for exactly that
   digest. Refused otherwise (:class:`Refused`, exit 5), each with its reason: unsigned (which
   is also what a tag moved to another image looks like: the new image has no signature), a
   signature of another image (a signature copied onto a re-tagged image), a bad signature.
3. The provenance (``.att``: a DSSE envelope, signed by the same key) must check out and be
   about that digest; refused otherwise. The SBOM (``.sbom``) must be the very document the
   provenance names by its digest: an SBOM replaced by another (one that hides a package, say)
   is refused like any other tampering.
4. The image is pulled as ``REPO@DIGEST`` (never by tag: the tag could move in between) into
   the given Engine (the checks above talk to the registry only), and ``oota-verify`` runs in
   it there with the device flags of its ``oota.run-flags`` label; its output compares the run
   with the verification the image carries (``/opt/oota/expected.json``).

Without ``--key`` nothing can vouch for the image: the signature is not checked (said so), the
provenance's subject still is.
"""

from __future__ import annotations

import dataclasses
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from oota.engine.base import RUN_LABEL, Engine, RegistryAuth
from oota.errors import EXIT_REFUSED, OotaError
from oota.execute.verify import forwarded_env
from oota.supply import cosign, signing
from oota.supply.provenance import Checked, StatementProblem, check
from oota.supply.registry import NotFound, Reference, RegistryClient
from oota.supply.runflags import LABEL as RUN_FLAGS, RunFlagsError, from_label

RESULTS_IN_CONTAINER = "/tmp/oota-results"
COMPARISON_HEAD = "Compared with its verification"


class Refused(OotaError):
    """The image did not pass the checks made before running it; the message says why."""

    exit_code = EXIT_REFUSED


@dataclass(frozen=True, kw_only=True, slots=True)
class Pulled:
    ref: str
    digest: str
    engine: str            # where the image was pulled and re-verified (Endpoint.where())
    signature: str         # what the signature check found, for the user
    provenance: Checked
    sbom: str              # what the SBOM check found, for the user
    exit_code: int
    counts: str            # oota-verify's counts line
    comparison: str        # how the run compares with the image's own verification
    log: Path


def check_signature(client: RegistryClient, ref: Reference, digest: str,
                    key: ec.EllipticCurvePublicKey) -> str:
    """'' when a signature in the registry verifies with ``key`` and names ``digest``;
    Refused with the reason otherwise."""
    tag = cosign.artifact_tag(digest, "sig")
    try:
        layers = cosign.layers_of(client.manifest(ref.repository, tag))
    except NotFound:
        raise Refused(f"{ref}: unsigned: {ref.name}:{tag} does not exist, so no signature "
                      f"vouches for {digest} (published without --key, or the tag now names "
                      "another image than the one signed)") from None
    except ValueError as exc:
        raise Refused(f"{ref}: the signature artifact {tag} is unreadable ({exc})") from None
    problems = []
    for layer in (x for x in layers if x.media_type == cosign.SIGNATURE_LAYER):
        payload = client.blob(ref.repository, layer.digest)
        if not signing.verify(key, payload, layer.annotations.get(cosign.SIGNATURE_ANNOTATION, "")):
            problems.append("bad signature: it does not verify with the given key (a different "
                            "key signed it, or the signature or its payload was altered)")
            continue
        try:
            signed = signing.signed_digest(payload)
        except signing.SignatureProblem as exc:
            problems.append(str(exc))
            continue
        if signed != digest:
            problems.append(f"the signature is of another image ({signed}), not of {digest}: "
                            "the image was re-tagged or tampered with")
            continue
        return ""
    raise Refused(f"{ref}: refused: " + (problems[0] if problems else
                                         f"{tag} holds no simple-signing layer"))


def check_provenance(client: RegistryClient, ref: Reference, digest: str,
                     key: ec.EllipticCurvePublicKey | None) -> Checked:
    tag = cosign.artifact_tag(digest, "att")
    try:
        layers = cosign.layers_of(client.manifest(ref.repository, tag))
    except NotFound:
        raise Refused(f"{ref}: no provenance ({ref.name}:{tag} does not exist)") from None
    except ValueError as exc:
        raise Refused(f"{ref}: the provenance artifact {tag} is unreadable ({exc})") from None
    envelope = next((x for x in layers if x.media_type == cosign.DSSE_LAYER), None)
    if envelope is None:
        raise Refused(f"{ref}: {tag} holds no DSSE envelope")
    try:
        document = signing.open_envelope(client.blob(ref.repository, envelope.digest), key)
        return check(document, digest)
    except (signing.SignatureProblem, StatementProblem) as exc:
        raise Refused(f"{ref}: refused: {exc}") from None


def check_sbom(client: RegistryClient, ref: Reference, digest: str, named: str) -> str:
    """What the SBOM check found, for the user, when the SBOM beside the image is the one the
    provenance names (``named``: its digest); Refused with the reason otherwise."""
    if not named:
        return "NOT checked: the provenance names no SBOM (published by an older oota)"
    tag = cosign.artifact_tag(digest, "sbom")
    try:
        layers = cosign.layers_of(client.manifest(ref.repository, tag))
    except NotFound:
        raise Refused(f"{ref}: no SBOM ({ref.name}:{tag} does not exist), although the "
                      f"provenance names one ({named[:19]}…)") from None
    except ValueError as exc:
        raise Refused(f"{ref}: the SBOM artifact {tag} is unreadable ({exc})") from None
    found = [x.digest for x in layers if x.media_type == cosign.SBOM_LAYER]
    if named not in found:
        raise Refused(f"{ref}: refused: the SBOM {ref.name}:{tag} "
                      f"({(found or ['no CycloneDX layer'])[0][:19]}…) is not the one the "
                      f"signed provenance names ({named[:19]}…): it was replaced or tampered "
                      "with")
    client.blob(ref.repository, named)   # the registry must serve exactly those bytes
    return f"the one the provenance names ({named[:19]}…)"


def pull_and_verify(engine: Engine, reference: str, *, key: ec.EllipticCurvePublicKey | None,
                    auth: RegistryAuth | None, ca: Path | None, workdir: Path) -> Pulled:
    """Check ``reference`` in its registry, pull it by digest, and run its suite."""
    ref = Reference.parse(reference)
    client = RegistryClient(ref.registry, auth=auth, ca=ca)
    digest = ref.digest or client.resolve(ref.repository, ref.tag)
    signature = "NOT checked: no --key given"
    if key is not None:
        check_signature(client, ref, digest, key)
        signature = "verified with the given key"
    provenance = check_provenance(client, ref, digest, key)
    sbom = check_sbom(client, ref, digest, provenance.sbom)
    image = engine.pull_digest(ref.name, digest, auth)
    return _verify(engine, str(ref), image, digest, (signature, sbom), provenance,
                   workdir / digest.removeprefix("sha256:")[:16])


def _verify(engine: Engine, ref: str, image: str, digest: str, checks: tuple[str, str],
            provenance: Checked, folder: Path) -> Pulled:
    """Run the image's suite on ``engine`` with the device flags of its label."""
    labels = engine.image_labels(image) or {}
    command = ["oota-verify", "--out", RESULTS_IN_CONTAINER]
    try:
        request = from_label(image, labels.get(RUN_FLAGS, "{}"), command)
    except RunFlagsError as exc:
        raise Refused(f"{ref}: {exc}") from None
    log = folder / "verify.log"
    log.unlink(missing_ok=True)
    run_id = f"pull-{uuid.uuid4().hex[:10]}"
    outcome = engine.run(dataclasses.replace(
        request, env={**request.env, **forwarded_env()}, labels={RUN_LABEL: run_id},
        collect=RESULTS_IN_CONTAINER, collect_to=folder / "results", log_path=log,
        timeout_s=3600))
    text = _tail(log) if log.exists() else outcome.output_tail
    return Pulled(ref=ref, digest=digest, engine=engine.endpoint.where(), signature=checks[0],
                  provenance=provenance, sbom=checks[1], exit_code=outcome.exit_code,
                  counts=_counts(text),
                  comparison=comparison(text), log=log)


# The end of the run's log holds its counts and comparison; an image may print without end.
LOG_TAIL = 4 << 20


def _tail(log: Path) -> str:
    """The last :data:`LOG_TAIL` bytes of the verify run's log."""
    with log.open("rb") as fh:
        fh.seek(max(0, fh.seek(0, os.SEEK_END) - LOG_TAIL))
        return fh.read().decode("utf-8", errors="replace")


def comparison(output: str) -> str:
    """The comparison paragraph of oota-verify's output ('' when it printed none)."""
    head, found, rest = output.partition(COMPARISON_HEAD)
    if not found:
        return ""
    return (found + rest).split("\n\n", 1)[0].split("\noota-verify:", 1)[0].strip()


# oota-verify's counts line, wherever it starts: pytest's last progress line may have no
# newline before it ("PASSED [100%]oota-verify: 58 passed, ...").
_COUNTS = re.compile(r"oota-verify: (\d+ [^\n]*)")


def _counts(output: str) -> str:
    found = _COUNTS.findall(output)
    return found[-1].strip() if found else ""

