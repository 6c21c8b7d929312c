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
   the given Engine (the checks above talk to the registry only). What it says of itself (its
   labels: cell, fingerprint, verification; the verification it carries,
   ``/opt/oota/expected.json``: cell, outcome, time, run) must be what its provenance says;
   refused otherwise (labels that lie: claiming another cell, or a verification it does not
   carry).
5. ``oota-verify`` runs in it there with the device flags of its ``oota.run-flags`` label; its
   output compares the run with the verification the image carries.

Without ``--key`` nothing can vouch for the image: the signature is not checked (said so), the
provenance's subject still is.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from oota.engine.base import RUN_LABEL, Engine, RegistryAuth
from oota.errors import EXIT_REFUSED, OotaError
from oota.execute.verify import EXPECTED_IN_IMAGE, forwarded_env
from oota.supply import cosign, signing
from oota.supply.provenance import Checked, StatementProblem, check
from oota.supply.registry import NotFound, Reference, RegistryClient
from oota.supply.runflags import LABEL as RUN_FLAGS, RunFlagsError, from_label
from oota.vocab import BAD

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
                    auth: RegistryAuth | None, ca: Path | None, workdir: Path,
                    layers: tuple[str, ...] = ()) -> Pulled:
    """Check ``reference`` in its registry, pull it by digest, and run its suite (``layers``
    only, where given: the comparison with the verification the image carries then says how
    many of its tests did not run)."""
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
    check_claims(engine, str(ref), image, provenance)
    return _verify(engine, str(ref), image, digest, (signature, sbom), provenance,
                   workdir / digest.removeprefix("sha256:")[:16], layers)


# What a sealed image says of itself, each held to its provenance's field: its labels (as
# oota's build and seal set them), and the verification it carries (expected.json's keys).
_CLAIMS = (("label org.opencontainers.image.version", "cell"), ("label oota.fingerprint",
           "fingerprint"), ("label oota.verified", "status"), ("label oota.verified-at", "at"),
           ("carried cell", "cell"), ("carried status", "status"), ("carried verified_at", "at"),
           ("carried run_id", "run_id"))


def claims_problems(labels: dict[str, str], carried: dict[str, object] | None,
                    provenance: Checked) -> list[str]:
    """Where the image's ``labels`` or the verification it ``carried`` (None: it carries none)
    say something else of it than its ``provenance`` (checked against its digest, and signed
    where a key was given), or than each other; a field the provenance does not name (an older
    oota's) is held to the image's other claim of it. An outcome is held to the provenance's
    only as good or bad: the provenance has the result's, whose stages count too."""
    claims: dict[str, list[tuple[str, object]]] = {}
    for source, field in _CLAIMS:
        where, _, key = source.partition(" ")
        found = labels.get(key) if where == "label" else (carried or {}).get(key)
        if found is not None:
            shown = f"its label {key}" if where == "label" else \
                f"the verification it carries ({key})"
            claims.setdefault(field, []).append((shown, found))
    problems = []
    for field, said in claims.items():
        vouched = getattr(provenance, field)
        for shown, value in said:
            if vouched and not _agrees(field, value, vouched):
                problems.append(f"{shown} says {value!r}, its provenance {vouched!r}")
        if len({str(v) for _, v in said}) > 1:
            problems.append(" and ".join(f"{shown} says {value!r}" for shown, value in said))
    if carried is None and (provenance.status or "oota.verified" in labels):
        problems.append(f"it carries no verification ({EXPECTED_IN_IMAGE}), though its "
                        f"{'provenance' if provenance.status else 'label oota.verified'} says "
                        "it was verified")
    return problems


def _agrees(field: str, value: object, vouched: str) -> bool:
    if field == "status":
        return (value in BAD) == (vouched in BAD)
    return value == vouched


def check_claims(engine: Engine, ref: str, image: str, provenance: Checked) -> None:
    """Refused (exit 5) when the pulled ``image`` says something else of itself than its
    provenance (:func:`claims_problems`); nothing of it has run yet."""
    try:
        carried: dict[str, object] | None = json.loads(engine.read_file(
            image, EXPECTED_IN_IMAGE, run_id=f"pull-{uuid.uuid4().hex[:10]}"))
    except FileNotFoundError:
        carried = None
    except (ValueError, RecursionError, OotaError) as exc:
        raise Refused(f"{ref}: refused: the verification it carries ({EXPECTED_IN_IMAGE}) is "
                      f"unreadable: {str(exc)[:200]}") from None
    if carried is not None and not isinstance(carried, dict):
        raise Refused(f"{ref}: refused: the verification it carries ({EXPECTED_IN_IMAGE}) is "
                      "not an object")
    problems = claims_problems(engine.image_labels(image) or {}, carried, provenance)
    if problems:
        raise Refused(f"{ref}: refused: the image says something else of itself than its "
                      "provenance: " + "; ".join(problems))


def _verify(engine: Engine, ref: str, image: str, digest: str, checks: tuple[str, str],
            provenance: Checked, folder: Path, layers: tuple[str, ...] = ()) -> Pulled:
    """Run the image's suite (``layers`` of it, where given) on ``engine`` with the device
    flags of its label."""
    labels = engine.image_labels(image) or {}
    command = ["oota-verify", "--out", RESULTS_IN_CONTAINER,
               *(["--layer", ",".join(layers)] if layers else [])]
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

