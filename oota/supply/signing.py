"""The lab's signing key and the two signed formats a published image carries, both as cosign
writes them so that ``cosign verify --key oota.pub`` and ``cosign verify-attestation --key
oota.pub`` accept them:

* cosign's *simple signing* payload over the image digest (the ``.sig`` artifact), signed with
  ECDSA P-256 / SHA-256, the signature DER-encoded and base64'd;
* a DSSE envelope (``application/vnd.in-toto+json`` payload) around the provenance statement
  (the ``.att`` artifact), signed over DSSE's pre-authentication encoding.

The key is a PKCS#8 PEM file, encrypted with ``OOTA_SIGNING_PASSWORD`` when that is set (the
password comes from the environment only, never a flag, so it reaches no shell history or log).
No network service is needed to sign or verify.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from oota.errors import InputError
from oota.files import SMALL_LIMIT, read_bytes, write_atomic
from oota.project import command_name

PASSWORD_ENV = "OOTA_SIGNING_PASSWORD"
PrivateKey = ec.EllipticCurvePrivateKey
SIGNATURE_TYPE = "cosign container image signature"
DSSE_PAYLOAD_TYPE = "application/vnd.in-toto+json"


class SignatureProblem(ValueError):
    """A signed document that does not check out: the message is the reason a user sees."""


@dataclass(frozen=True, kw_only=True, slots=True)
class KeyFiles:
    private: Path
    public: Path


def password_from_env() -> bytes | None:
    value = os.environ.get(PASSWORD_ENV, "")
    return value.encode() if value else None


def generate(folder: Path, password: bytes | None) -> KeyFiles:
    """A new P-256 key pair as ``oota.key`` (PKCS#8, encrypted with ``password`` when given,
    mode 0600) and ``oota.pub``; an existing key is never overwritten."""
    files = KeyFiles(private=folder / "oota.key", public=folder / "oota.pub")
    for path in (files.private, files.public):
        if path.exists():
            raise InputError(f"{path} exists; remove it or choose another --out (a key is never "
                             "overwritten)")
    key = ec.generate_private_key(ec.SECP256R1())
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password) if password
        else serialization.NoEncryption())
    folder.mkdir(parents=True, exist_ok=True)
    # Not write_atomic: that makes files 0644 before it renames them; the key is created 0600
    # and exclusively, so it is never readable by others, not even for a moment.
    fd = os.open(files.private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM,
                                   serialization.PrivateFormat.PKCS8, encryption))
    write_atomic(files.public, public_pem(key.public_key()))
    return files


def public_pem(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def load_private(path: Path, password: bytes | None) -> ec.EllipticCurvePrivateKey:
    """The signing key of ``--key``; InputError (never the key's content) when it is not one."""
    try:
        data = read_bytes(path, SMALL_LIMIT)
    except OSError as exc:
        raise InputError(f"--key {path}: cannot read it ({exc.strerror})") from None
    try:
        key = serialization.load_pem_private_key(data, password=password)
    except TypeError:
        raise InputError(f"--key {path}: the key is encrypted; set {PASSWORD_ENV}") from None
    except ValueError:
        raise InputError(f"--key {path}: not a PEM private key, or {PASSWORD_ENV} is not its "
                         "password") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise InputError(f"--key {path}: expected an ECDSA P-256 key (`{command_name()} keygen` "
                         "makes one)")
    return key


def load_public(path: Path) -> ec.EllipticCurvePublicKey:
    try:
        key = serialization.load_pem_public_key(read_bytes(path, SMALL_LIMIT))
    except OSError as exc:
        raise InputError(f"--key {path}: cannot read it ({exc.strerror})") from None
    except ValueError:
        raise InputError(f"--key {path}: not a PEM public key") from None
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise InputError(f"--key {path}: expected an ECDSA public key (oota.pub)")
    return key


def sign(key: ec.EllipticCurvePrivateKey, data: bytes) -> str:
    """The base64 DER ECDSA-SHA256 signature of ``data`` (cosign's encoding)."""
    return base64.b64encode(key.sign(data, ec.ECDSA(hashes.SHA256()))).decode()


def verify(key: ec.EllipticCurvePublicKey, data: bytes, signature: str) -> bool:
    try:
        key.verify(base64.b64decode(signature, validate=True), data, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


# -- simple signing (the .sig artifact) ------------------------------------------------------
def signature_payload(repository: str, digest: str, optional: dict[str, str]) -> bytes:
    """What is signed for an image: its repository (cosign's docker-reference: the name
    without tag) and its manifest digest; ``optional`` carries annotations cosign shows."""
    return json.dumps({
        "critical": {"identity": {"docker-reference": repository},
                     "image": {"docker-manifest-digest": digest},
                     "type": SIGNATURE_TYPE},
        "optional": optional or None}, separators=(",", ":")).encode()


def signed_digest(payload: bytes) -> str:
    """The image digest a simple-signing payload vouches for (SignatureProblem when the payload
    is not one)."""
    try:
        critical = json.loads(payload)["critical"]
        kind, digest = critical["type"], critical["image"]["docker-manifest-digest"]
    except (ValueError, KeyError, TypeError):
        raise SignatureProblem("the signature's payload is not a cosign simple-signing "
                               "payload") from None
    if kind != SIGNATURE_TYPE or not isinstance(digest, str):
        raise SignatureProblem(f"the signature's payload has type {kind!r}, expected "
                               f"{SIGNATURE_TYPE!r}")
    return digest


# -- DSSE (the .att artifact) ----------------------------------------------------------------
def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what a DSSE signature is over."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def envelope(statement: bytes, key: ec.EllipticCurvePrivateKey | None) -> bytes:
    """A DSSE envelope of an in-toto statement, signed with ``key`` when one is given."""
    signatures = ([{"keyid": "", "sig": sign(key, pae(DSSE_PAYLOAD_TYPE, statement))}]
                  if key else [])
    return json.dumps({"payloadType": DSSE_PAYLOAD_TYPE,
                       "payload": base64.b64encode(statement).decode(),
                       "signatures": signatures}).encode()


def open_envelope(data: bytes, key: ec.EllipticCurvePublicKey | None) -> bytes:
    """The statement inside a DSSE envelope, after checking a signature by ``key`` (none
    checked without a key); SignatureProblem with the reason otherwise."""
    try:
        doc = json.loads(data)
        kind, payload = doc["payloadType"], base64.b64decode(doc["payload"], validate=True)
        signatures = [s["sig"] for s in doc.get("signatures") or []]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise SignatureProblem("the provenance is not a DSSE envelope") from None
    if kind != DSSE_PAYLOAD_TYPE:
        raise SignatureProblem(f"the provenance envelope holds {kind!r}, not an in-toto "
                               "statement")
    if key is not None:
        if not signatures:
            raise SignatureProblem("the provenance is unsigned")
        if not any(verify(key, pae(kind, payload), str(s)) for s in signatures):
            raise SignatureProblem("the provenance's signature does not match the key")
    return payload
