"""Sealing: a verification put into the image it verified (``/opt/oota/expected.json`` and
the labels ``oota.verified``, ``oota.verified-at``), so that ``oota-verify`` on a user's host
compares its own run with it. A seal that already holds the same verification is kept, since
resealing would make a new image id for the same software and the same results; a failure to
seal is noted on the image, never a failed cell (the verification itself stands).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace

from oota.console import Console
from oota.engine.base import SEALED_FROM_LABEL, Engine
from oota.errors import OotaError
from oota.execute.samebytes import same_verification
from oota.execute.verify import EXPECTED_IN_IMAGE, ExpectedResults
from oota.results.model import Image, Sealed

log = logging.getLogger("oota.build")


@dataclass(frozen=True, kw_only=True, slots=True)
class Sealer:
    """Who seals what: the cell (for messages), the image's tag and this run's id (the label
    of the scratch containers it makes)."""

    cell: str
    tag: str
    run_id: str


def seal(engine: Engine, console: Console, image: Image, expected: ExpectedResults,
         sealer: Sealer, *, verification_run: str, exact: bool) -> Image:
    """``image`` sealed with ``expected`` (made by run ``verification_run``). ``exact``: a
    verification taken from another Engine, sealed exactly as there (its seal, and so the
    image id, is then the same); a new one keeps an equivalent older seal."""
    kept = sealed_already(engine, console, expected, sealer, exact=exact)
    if kept is not None:
        return replace(image, sealed=kept)
    try:
        image_id = engine.seal(
            sealer.tag, {EXPECTED_IN_IMAGE: expected.to_bytes()},
            {"oota.verified": expected.status, "oota.verified-at": expected.verified_at},
            run_id=sealer.run_id)
    except Exception as exc:  # noqa: BLE001 - the verification itself stands
        console.warn(f"{sealer.cell}: could not put the results into the image: {exc}")
        error = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
        return replace(image, sealed=Sealed(error=error))
    return replace(image, sealed=Sealed(id=image_id, file=EXPECTED_IN_IMAGE,
                                        at=expected.verified_at, run_id=verification_run))


def sealed_already(engine: Engine, console: Console, expected: ExpectedResults, sealer: Sealer,
                   *, exact: bool = False) -> Sealed | None:
    """The image's seal, when it already holds this verification (the same outcome of every
    test on the same kind of host; only the time and the run differ). ``exact``: only a seal
    of these very bytes."""
    labels = engine.image_labels(sealer.tag) or {}
    image_id = engine.image_id(sealer.tag)
    if SEALED_FROM_LABEL not in labels or image_id is None:
        return None
    try:
        carried = engine.read_file(sealer.tag, EXPECTED_IN_IMAGE, run_id=sealer.run_id)
        sealed = json.loads(carried)
    except (OSError, ValueError, OotaError) as exc:
        log.debug("no usable seal in %s: %s", sealer.tag, exc)
        return None
    if not isinstance(sealed, dict) or not same_verification(sealed, expected.document) \
            or (exact and carried != expected.to_bytes()) \
            or carried != replace(expected, document=sealed).to_bytes():
        return None  # another verification, or a seal of an older, non-canonical form
    console.info(f"{sealer.cell}: the image's results ({EXPECTED_IN_IMAGE}, "
                 f"{sealed.get('verified_at')}) match this verification; kept")
    return Sealed(id=image_id, file=EXPECTED_IN_IMAGE, at=str(sealed.get("verified_at")),
                  run_id=str(sealed.get("run_id") or "") or None)
