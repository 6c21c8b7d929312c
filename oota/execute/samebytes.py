"""Does a verification follow an image to this Engine? Only when this Engine holds the very
bytes that were verified: the same build output (its image id, which the same inputs give on
any Engine, :mod:`oota.reproducible`). When a build of the same cell from the same inputs is
not the same image, this says which layer differs, and, when the Engine that verified the
other one is part of the run and still holds it, which files of that layer differ and how.
Also what makes two hosts the same kind (:func:`host_identity`) and two verifications say the
same (:func:`same_verification`), for a verification that is kept rather than run again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from oota.engine.base import Engine
from oota.reproducible import differences
from oota.results.jsonfields import JSONObject
from oota.results.model import Host, Result
from oota.vocab import budget_blind, unrun_by_id

log = logging.getLogger("oota.samebytes")

# Engine identity -> that Engine, when this run reaches it (None otherwise).
Elsewhere = Callable[[str], Engine | None]


@dataclass(frozen=True, kw_only=True, slots=True)
class Bytes:
    """Whether the image here is the one ``previous`` verified, and, when not, why (a line for
    the console) and what differs (for the verify stage's detail)."""

    same: bool
    why: str = ""
    detail: JSONObject = field(default_factory=dict)


def compare(engine: Engine, tag: str, previous: Result, elsewhere: Elsewhere) -> Bytes:
    """``tag`` on ``engine`` against the image ``previous`` verified. Results older than
    build output ids are judged as before: the very sealed image, on its own Engine."""
    image = previous.image
    if image is None or image.sealed is None or image.sealed.id is None:
        return Bytes(same=False)
    here = engine.build_output(tag)
    if not image.id:
        return Bytes(same=image.sealed.id == engine.image_id(tag))
    if here == image.id:
        return Bytes(same=True)
    if here is None:
        return Bytes(same=False)
    return _differs(engine, tag, previous, here, elsewhere)


def _differs(engine: Engine, tag: str, previous: Result, here: str,
             elsewhere: Elsewhere) -> Bytes:
    """Which layer of ``tag`` is not the one ``previous`` verified, and its files."""
    assert previous.image is not None and previous.image.id is not None
    there_layers = previous.image.layers
    try:
        here_layers = engine.image_layers(tag)
    except Exception as exc:  # noqa: BLE001 - the answer stays 'not the same image'
        log.debug("layers of %s: %s", tag, exc)
        here_layers = ()
    where = previous.host.place()
    detail: JSONObject = {"verified_image": previous.image.id, "image": here,
                          "verified_on": where}
    index = next((i for i, (a, b) in enumerate(zip(there_layers, here_layers, strict=False))
                  if a.id != b.id), None)
    if index is None:
        same_layers = len(there_layers) == len(here_layers) and bool(there_layers)
        what = ("the same layers, another configuration" if same_layers
                else "no record of its layers to compare")
        detail["layer"] = what
        return Bytes(same=False, detail=detail, why=f"not the image verified on {where} "
                     f"({previous.image.id[:19]} there, {here[:19]} here): {what}")
    step = here_layers[index].step or there_layers[index].step
    detail |= {"layer": index + 1, "layers": len(here_layers), "step": step}
    files = _files(engine, tag, previous, index, elsewhere)
    if files:
        detail["files"] = list(files)
    text = (f"not the image verified on {where} ({previous.image.id[:19]} there, "
            f"{here[:19]} here): layer {index + 1} of {len(here_layers)} differs"
            + (f" ({step[:80]})" if step else ""))
    text += ("; files: " + "; ".join(files[:8])) if files else (
        f"; its files cannot be compared: {where} is not part of this run or no longer "
        "holds that image")
    return Bytes(same=False, detail=detail, why=text)


def _files(engine: Engine, tag: str, previous: Result, index: int,
           elsewhere: Elsewhere) -> list[str]:
    """The differing files of layer ``index``, when the verifying Engine is reachable."""
    assert previous.image is not None and previous.image.id is not None
    other = elsewhere(previous.host.text("engine_id") or "")
    if other is None or other.build_output(previous.image.id) is None:
        return []
    try:
        there = other.layer_entries(previous.image.id, previous.image.layers[index].id)
        here = engine.layer_entries(tag, engine.image_layers(tag)[index].id)
    except Exception as exc:  # noqa: BLE001 - a diagnosis, never a failure of the cell
        log.debug("layer files: %s", exc)
        return []
    return differences(here, there)


def same_verification(sealed: Mapping[str, object], fresh: Mapping[str, object]) -> bool:
    """Do two expected-results documents (the one an image carries, this run's) say the same,
    apart from when and which run? Tests the ops layer's time budget left unrun in either are
    left out (which operators a budget reaches depends on the host's speed), and so are the
    counts they change."""
    unrun = budget_blind(unrun_by_id(_tests(sealed)), unrun_by_id(_tests(fresh)))

    def kept(doc: Mapping[str, object]) -> dict[str, object]:
        body = {k: v for k, v in doc.items()
                if k not in ("verified_at", "run_id", "summary", "tests")}
        return {**body, "tests": [t for t in _tests(doc) if t.get("id") not in unrun]}

    return kept(sealed) == kept(fresh)


def _tests(doc: Mapping[str, object]) -> list[Mapping[str, object]]:
    tests = doc.get("tests")
    return [t for t in tests if isinstance(t, dict)] if isinstance(tests, list) else []


def host_identity(host: Host) -> JSONObject:
    """What makes two hosts the same kind for a verification: their Docker, kernel,
    architecture and runtimes, and what the vendor check found (hardware, driver, reasons).
    Not which Engine: a verification follows the image's bytes to any Engine of the same
    kind (the vendor check's ``checked_on``, the host it ran on, is left out likewise)."""
    keys = ("docker_server", "kernel", "arch", "os", "runtimes")
    check = host.vendor_check.to_json() if host.vendor_check else None
    if check is not None:
        check = {k: v for k, v in check.items() if k != "checked_on"}
    return {**{key: host.text(key) for key in keys}, "vendor_check": check}
