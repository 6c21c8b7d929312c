"""Results signed by the host that made them, with the lab's key (``invoke keygen``).

``invoke build --key oota.key`` (and ``verify``) writes ``result.sig`` beside each result: an
ECDSA P-256 signature over the exact bytes of ``result.json``, with the key's id. ``invoke
report --merge ... --key oota.pub`` checks each result it merges: one whose signature does not
check with any key given (another key, or the file changed after it was signed) is refused like
a forged result, naming the file; one without a signature is merged and listed as unsigned, so
a release manager sees which results vouch for themselves and which only came in a folder.

A result rewritten without a key loses its old signature (:func:`oota.results.store.save`
removes it), so a signature always belongs to the result beside it.

The ops layer's recording beside a result (``cases.pt``, the evidence ``oota judge`` judges
again) is signed the same way when the result is: ``cases.pt.sig`` holds the signature of its
exact bytes, and ``oota judge --key oota.pub`` refuses a recording whose signature does not
check and names the unsigned ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from oota.files import RESULT_LIMIT, SMALL_LIMIT, read_bytes, write_json
from oota.results.model import Result
from oota.results.store import RESULT_FILE, SIGNATURE_FILE, result_bytes
from oota.supply import signing

SCHEME = "oota.result-signature/v1"
RECORDING_SCHEME = "oota.recording-signature/v1"
RECORDING_LIMIT = 512 << 20  # the judge reads recordings up to this size (verify/oota_schema.py)


def key_id(key: ec.EllipticCurvePublicKey) -> str:
    """A short name of a public key: sha256 of its SubjectPublicKeyInfo, 16 hex digits."""
    der = key.public_bytes(serialization.Encoding.DER,
                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()[:16]


def sign_folder(folder: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    """Sign ``folder/result.json`` as it is on disk; the signature file's path."""
    return _sign(folder, read_bytes(folder / RESULT_FILE, RESULT_LIMIT), key)


def sign_result(folder: Path, result: Result, key: ec.EllipticCurvePrivateKey) -> Path:
    """Sign ``result``, which a run has just written into ``folder``, from memory: the bytes
    :func:`~oota.results.store.save` wrote, not read back."""
    return _sign(folder, result_bytes(result), key)


def _sign(folder: Path, data: bytes, key: ec.EllipticCurvePrivateKey) -> Path:
    path = folder / SIGNATURE_FILE
    write_json(path, {"scheme": SCHEME, "file": RESULT_FILE,
                      "sha256": hashlib.sha256(data).hexdigest(),
                      "keyid": key_id(key.public_key()), "signature": signing.sign(key, data)})
    return path


def recording_signature(recording: Path) -> Path:
    """Where a recording's signature lies: ``cases.pt.sig`` beside ``cases.pt``."""
    return recording.with_name(recording.name + ".sig")


def sign_recording(recording: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    """Sign the recording's exact bytes; the signature file's path."""
    data = read_bytes(recording, RECORDING_LIMIT)
    path = recording_signature(recording)
    write_json(path, {"scheme": RECORDING_SCHEME, "file": recording.name,
                      "sha256": hashlib.sha256(data).hexdigest(),
                      "keyid": key_id(key.public_key()), "signature": signing.sign(key, data)})
    return path


def check_recording(recording: Path, keys: Sequence[ec.EllipticCurvePublicKey]) -> str:
    """How the recording is signed, in words ('' when unsigned); a ValueError saying why when
    its signature does not check with any of ``keys``."""
    sig_file = recording_signature(recording)
    if not sig_file.exists():
        return ""
    try:
        doc = json.loads(read_bytes(sig_file, SMALL_LIMIT))
        signature, scheme, keyid = doc["signature"], doc["scheme"], str(doc.get("keyid"))
        data = read_bytes(recording, RECORDING_LIMIT)
    except (OSError, ValueError, LookupError, TypeError, RecursionError):
        raise ValueError(f"{sig_file}: unreadable; re-sign the recording or remove it") from None
    if scheme != RECORDING_SCHEME or not isinstance(signature, str):
        raise ValueError(f"{sig_file}: not an oota recording signature")
    if not any(signing.verify(key, data, signature) for key in keys):
        raise ValueError(f"{recording}: its signature ({sig_file.name}, key {keyid[:16]}) does "
                         "not check with --key: signed by another key, or changed after it "
                         "was signed")
    return f"signed by key {keyid[:16]}"


@dataclass(slots=True)
class Checker:
    """Checks the signature beside each result file it is given (``keys`` empty: none is
    checked, only whether there is one), and remembers what it found for the summary."""

    keys: Sequence[ec.EllipticCurvePublicKey] = ()
    signed: list[str] = field(default_factory=list)     # by one of the keys
    unsigned: list[str] = field(default_factory=list)   # no result.sig
    unchecked: list[str] = field(default_factory=list)  # signed, but no key to check with

    seen: dict[str, str] = field(default_factory=dict)   # a file reached twice counts once

    def __call__(self, result_file: Path) -> str:
        """Why ``result_file`` is refused ('' when it is not)."""
        key = str(result_file.resolve())
        if key not in self.seen:
            self.seen[key] = self._judge(result_file)
        return self.seen[key]

    def _judge(self, result_file: Path) -> str:
        sig_file = result_file.parent / SIGNATURE_FILE
        if not sig_file.exists():
            self.unsigned.append(str(result_file))
            return ""
        if not self.keys:
            self.unchecked.append(str(result_file))
            return ""
        why = self._problem(result_file, sig_file)
        if not why:
            self.signed.append(str(result_file))
        return why

    def _problem(self, result_file: Path, sig_file: Path) -> str:
        try:
            doc = json.loads(read_bytes(sig_file, SMALL_LIMIT))
            signature, scheme = doc["signature"], doc["scheme"]
            data = read_bytes(result_file, RESULT_LIMIT)
        except (OSError, ValueError, LookupError, TypeError, RecursionError):
            return f"its {SIGNATURE_FILE} is unreadable; refused (re-sign it, or remove it)"
        if scheme != SCHEME or not isinstance(signature, str):
            return f"its {SIGNATURE_FILE} is not an oota result signature; refused"
        if not any(signing.verify(key, data, signature) for key in self.keys):
            return (f"its signature ({SIGNATURE_FILE}, key {str(doc.get('keyid'))[:16]}) does not "
                    "check with --key: signed by another key, or changed after it was signed; "
                    "refused")
        return ""

    def summary(self) -> list[str]:
        """Lines for the report task: what was signed, and which results are not."""
        lines = []
        if self.keys:
            lines.append(f"signatures: {len(self.signed)} result(s) signed by --key, "
                         f"{len(self.unsigned)} unsigned")
        elif self.unchecked:
            lines.append(f"signatures: {len(self.unchecked)} result(s) carry one, not checked "
                         "(give --key oota.pub to check them)")
        lines += [f"  unsigned: {path}" for path in self.unsigned]
        return lines
