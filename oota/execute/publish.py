"""Publish: only verified images reach a registry.

``invoke publish --vendor V --registry R`` pushes each selected cell's image as
``R/<namespace>/<vendor>:<cell-id>`` when, and only when, all of this holds:

* the image exists and was built from today's inputs (its fingerprint label is the cell's
  fingerprint now: matrix, vendor folder, templates, verify/ and lock unchanged);
* the cell's last result (``results/<cell>/result.json``) is of those inputs and its
  verification ``passed``, or is ``unsupported-here`` (the host lacked the hardware; every test it
  could run passed, and the image's label ``oota.verified`` says so);
* that verification is sealed in the image (a whole run, ``/opt/oota/expected.json``), and the
  image is still the one it sealed (no build took the tag since).

With several Engines (``--hosts hosts.yaml``, or ``--host ENDPOINT`` for one other), each
cell's image is pushed from the Engine that holds the image its result verified: the Engine
that verified it (by its identity, ``host.engine_id``) first. A cell verified on an Engine the
command does not reach is refused saying which one.

Any other cell is refused with its reason; nothing is pushed for it. A pushed image's registry
digest is added to its result (``image.published``), so the report can show
``docker pull REF@DIGEST``. Credentials are the engine's (``docker login``) or
``--registry-auth``'s, and reach no log and no result.

Beside each pushed image go its SBOM, its provenance and, with ``--key``, its signature, under
cosign's tags (``REPO:sha256-<hex>.sbom``, ``.att``, ``.sig``; see :mod:`oota.supply.cosign`),
so ``cosign verify --key oota.pub`` and ``invoke pull --key oota.pub`` check it. Without a key
the image is published unsigned, and the output says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from oota.config.matrix import Matrix
from oota.console import Console
from oota.engine.base import Engine, RegistryAuth
from oota.errors import OotaError
from oota.execute.attach import Attached, Signer, attach
from oota.plan import Cell
from oota.project import command_name
from oota.render import cell_fingerprint
from oota.results.assemble import now
from oota.results.jsonfields import ResultFormatError
from oota.results.model import Published, Result
from oota.results.signed import sign_result
from oota.results.store import SIGNATURE_FILE, load, save
from oota.supply.registry import Reference

PUBLISHABLE = ("passed", "unsupported-here")


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    cell: str
    status: Literal["pushed", "refused", "failed"]
    ref: str = ""
    digest: str = ""
    reason: str = ""
    signed: bool = False
    engine: str = ""   # the Engine it was pushed from (or tried), by its name
    # The result was signed, publishing rewrote it and no --key signed it again.
    unsigned_result: bool = False


def refusal(result: Result | None, labels: dict[str, str] | None, image_id: str | None,
            current: str, *, elsewhere: str = "") -> str:
    """Why a cell's image may not be published ('' when it may); ``current`` is the cell's
    fingerprint from today's inputs; ``elsewhere`` names the Engine that verified it when the
    command does not reach that Engine (then the image here, whatever it is, is not it)."""
    sealed = result.image.sealed if result and result.image else None
    if elsewhere and result is not None and result.cell.fingerprint == current \
            and result.status in PUBLISHABLE and sealed is not None and sealed.id != image_id:
        return (f"verified on {elsewhere}, which this command does not reach: give the "
                "hosts file (--hosts hosts.yaml) or that Engine (--host ENDPOINT)")
    if labels is None or image_id is None:
        return f"no image: build and verify it first (`{command_name()} build`)"
    if labels.get("oota.fingerprint") != current:
        return ("stale: the image was built from other inputs than today's (matrix, vendor "
                "folder, templates, verify/ or lock changed); build and verify it again")
    if result is None:
        return (f"never verified: no result.json for it (`{command_name()} verify` or "
                f"`{command_name()} build`)")
    if result.cell.fingerprint != current:
        return "stale: its last verification was of other inputs; verify it again"
    if result.status not in PUBLISHABLE:
        return f"its last verification {result.status}" + (
            f": {result.message}" if result.message else "")
    if sealed is None or sealed.id is None or "oota.verified" not in labels:
        return ("unsealed: the image does not carry its verification (only a run of every "
                f"layer is sealed); `{command_name()} verify` it")
    if sealed.id != image_id:
        return "the image changed since its verification (a build took the tag); verify it again"
    return ""


def target(registry: str, namespace: str, cell: Cell) -> str:
    return f"{registry}/{namespace}/{cell.vendor.name}:{cell.id}"


def publish_cells(matrix: Matrix, cells: list[Cell], engine: Engine, console: Console, *,
                  results_dir: Path, registry: str, namespace: str, local_namespace: str,
                  auth: RegistryAuth | None, signer: Signer | None = None,
                  run_id: str = "", others: Sequence[Engine] = ()) -> list[Outcome]:
    """Push every selected cell that may be published; refuse the others, saying why.
    ``signer`` None pushes the image alone (no SBOM, provenance or signature). ``others``
    are more Engines of the lab (``--hosts``): each cell's image is pushed from the Engine
    that holds the image its result verified, the Engine that verified it first."""
    engines = Fleet((engine, *others))
    outcomes = []
    for cell in cells:
        outcome = _publish_one(matrix, cell, engines, results_dir, registry, namespace,
                               local_namespace, auth, signer, run_id)
        kind = {"pushed": "ok", "refused": "skip", "failed": "fail"}[outcome.status]
        text = f"{cell.id}: {outcome.status}"
        text += (f" {outcome.ref}@{outcome.digest}" if outcome.status == "pushed"
                 else f": {outcome.reason}")
        text += f" (from {outcome.engine})" if outcome.engine and len(engines.engines) > 1 \
            else ""
        if outcome.status == "pushed" and signer is not None:
            text += " (signed)" if outcome.signed else " (UNSIGNED: no --key given)"
        if outcome.unsigned_result:
            text += (f"; its result.json records the push and is no longer signed "
                     f"({SIGNATURE_FILE} removed: publish with --key to sign it again)")
        console.line(kind, text)
        outcomes.append(outcome)
    return outcomes


class Fleet:
    """The Engines a publish reaches, each asked for its identity once."""

    def __init__(self, engines: Sequence[Engine]) -> None:
        self.engines = engines
        self._ids: dict[int, str] = {}

    def identity(self, engine: Engine) -> str:
        if id(engine) not in self._ids:
            try:
                self._ids[id(engine)] = str(engine.facts().get("engine_id") or "")
            except Exception:  # noqa: BLE001 - an Engine without an identity is still usable
                self._ids[id(engine)] = ""
        return self._ids[id(engine)]

    def holding(self, result: Result | None, local: str) -> tuple[Engine, str]:
        """The Engine to publish ``result``'s cell from: the one holding the very image it
        verified and sealed (the verifying Engine first), else the first; and, when no
        Engine reached holds it and the verifying Engine is not among them, that Engine's
        name and endpoint, for the refusal."""
        if result is None:
            return self.engines[0], ""
        wanted = result.host.text("engine_id") or ""
        ordered = sorted(self.engines, key=lambda e: not wanted or self.identity(e) != wanted)
        sealed = result.image.sealed.id if result.image and result.image.sealed else None
        for engine in ordered:
            if sealed and engine.image_id(local) == sealed:
                return engine, ""
        reached = wanted and any(self.identity(e) == wanted for e in self.engines)
        where = result.host.text("endpoint") or ""
        elsewhere = "" if reached or not wanted else \
            f"host {result.host.place()}" + (f" ({where})" if where else "")
        return ordered[0], elsewhere


def _publish_one(matrix: Matrix, cell: Cell, engines: Fleet, results_dir: Path,
                 registry: str, namespace: str, local_namespace: str,
                 auth: RegistryAuth | None, signer: Signer | None, run_id: str) -> Outcome:
    local = f"{local_namespace}/{cell.vendor.name}:{cell.id}"
    folder = results_dir / cell.id
    try:
        result: Result | None = load(folder / "result.json")
    except ResultFormatError as exc:
        if (folder / "result.json").exists():
            return Outcome(cell=cell.id, status="refused",
                           reason=f"{folder / 'result.json'}: {exc}")
        result = None
    current = cell_fingerprint(matrix, cell)
    engine, elsewhere = engines.holding(result, local)
    why = refusal(result, engine.image_labels(local), engine.image_id(local), current,
                  elsewhere=elsewhere)
    if why:
        return Outcome(cell=cell.id, status="refused", reason=why)
    assert result is not None and result.image is not None
    ref = target(registry, namespace, cell)
    name = engine.endpoint.name
    try:
        digest = engine.push(local, ref, auth)
    except OotaError as exc:
        return Outcome(cell=cell.id, status="failed", ref=ref, reason=str(exc), engine=name)
    attached = Attached(sbom="", provenance="", signature="")
    if signer is not None:
        try:
            attached = attach(engine, local, Reference.parse(ref), digest, cell, result, signer,
                              matrix=matrix, run_id=run_id)
        except OotaError as exc:
            return Outcome(cell=cell.id, status="failed", ref=ref, digest=digest, engine=name,
                           reason=f"pushed, but its SBOM, provenance or signature failed: {exc}")
    published = tuple(p for p in result.image.published if p.ref != ref)
    record = Published(ref=ref, digest=digest, at=now(), signature=attached.signature,
                       sbom=attached.sbom, provenance=attached.provenance)
    was_signed = (folder / SIGNATURE_FILE).is_file()
    updated = replace(result, image=replace(result.image, published=(*published, record)))
    save(folder, updated)  # a signature of the result it replaces is removed with it
    key = signer.key if signer is not None else None
    if key is not None:
        sign_result(folder, updated, key)  # the lab's key signs what publishing rewrote
    return Outcome(cell=cell.id, status="pushed", ref=ref, digest=digest,
                   signed=bool(attached.signature), engine=name,
                   unsigned_result=was_signed and key is None)
