"""What a result keeps about how its cell's image was made, beyond the build itself: the log
and package sources of the build that made the image (kept by image id, so a run that finds
the image up to date still shows them), and the cell's requirements told apart (the vendor's
stack, which the get-started page installs, and the in-image suite's own packages).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from oota.config.matrix import Matrix
from oota.engine.base import SEALED_FROM_LABEL
from oota.files import write_atomic
from oota.lockfile import closure, lock_path, lock_status
from oota.net import redact
from oota.plan import Cell
from oota.render import Rendered
from oota.results.assemble import now
from oota.results.jsonfields import JSONObject
from oota.results.model import BaseImage
from oota.results.software import LockedPin, Requirements, Sources

NOT_KEPT = ("not kept on this host: the image was built elsewhere, or before oota kept build "
            "logs; --rebuild makes a new one")


@dataclass(frozen=True, kw_only=True, slots=True)
class Restored:
    """What a reused image's build left: the stage's detail (which run built it, or why its
    log is not here) and the package sources that build used."""

    detail: JSONObject
    sources: Sources | None = None
    base: BaseImage | None = None


@dataclass(frozen=True, slots=True)
class BuildRecords:
    """The logs and package sources of the builds that made a cell's images, kept by image id
    in ``.oota-cache/builds/<cell-id>/`` (the newest few per cell): a run that finds its image
    up to date shows the log of the build that made it (results/<cell>/build.log: see
    docs/guides/results.md)."""

    root: Path
    cell: str
    keep_last: int = 4

    @property
    def folder(self) -> Path:
        return self.root / ".oota-cache" / "builds" / self.cell

    @staticmethod
    def _name(image_id: str) -> str:
        return image_id.removeprefix("sha256:")[:64]

    def keep(self, image_id: str, log: Path, *, run_id: str, sources: Sources | None,
             base: BaseImage | None = None) -> None:
        """Keep the build of ``image_id``: its log, sources and base, and the run that built it."""
        if not image_id or not log.is_file():
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        name = self._name(image_id)
        shutil.copyfile(log, self.folder / f"{name}.log")
        record = {"run_id": run_id, "built_at": now(),
                  "sources": sources.to_json() if sources else None,
                  "base": base.to_json() if base else None}
        write_atomic(self.folder / f"{name}.json", json.dumps(record, indent=2) + "\n")
        by_age = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in by_age[:-self.keep_last]:
            old.unlink(missing_ok=True)
            old.with_suffix(".log").unlink(missing_ok=True)

    def reused(self, labels: dict[str, str], image_id: str | None, dest: Path) -> Restored:
        """For an up-to-date image (its ``labels``, its id): the build that made it, restored
        into ``dest``. Its base is the one that build recorded, else the image's label's, so
        a comparison with an earlier run does not see the base vanish when it is reused."""
        label = labels.get("org.opencontainers.image.base.name", "")
        record = self.restore(labels.get(SEALED_FROM_LABEL) or image_id or "", dest)
        if NOT_KEPT in record.detail.values() and image_id and labels.get(SEALED_FROM_LABEL):
            # An older oota kept a rebuild's log under the sealing's id.
            older = self.restore(image_id, dest)
            record = record if NOT_KEPT in older.detail.values() else older
        return replace(record, detail={"base": label, **record.detail},
                       base=record.base or BaseImage(ref=label, how="reused",
                                                     note="image up to date"))

    def restore(self, image_id: str, dest: Path) -> Restored:
        """The build of ``image_id``: its log copied to ``dest``/build.log, its record."""
        name = self._name(image_id) if image_id else "-"
        try:
            record = json.loads((self.folder / f"{name}.json").read_text(encoding="utf-8"))
            shutil.copyfile(self.folder / f"{name}.log", dest / "build.log")
        except (OSError, ValueError):
            record = None
        if not isinstance(record, dict):
            return Restored(detail={"image": image_id, "build_log": NOT_KEPT})
        sources, base = record.get("sources"), record.get("base")
        return Restored(
            detail={"image": image_id, "built_by": str(record.get("run_id")),
                    "built_at": str(record.get("built_at"))},
            sources=Sources.from_json(sources) if isinstance(sources, dict) else None,
            base=BaseImage.from_json(base, "base") if isinstance(base, dict) else None)


def requirements_of(matrix: Matrix, cell: Cell, rendered: Rendered) -> Requirements:
    """The cell's requirements told apart (the vendor's stack, the suite's own), where the
    vendor's stack comes from, and the lock's pins of that stack: what the get-started page
    gives a user, without the suite's packages."""
    vendor = rendered.vendor_requirements
    test = rendered.requirements[len(vendor):]
    index = redact(cell.index_url)
    locked: tuple[LockedPin, ...] = ()
    if lock_status(matrix, cell) == "fresh":
        text = lock_path(matrix, cell).read_text(encoding="utf-8")
        locked = tuple(LockedPin(name=e.name, version=e.version, hashes=e.hashes)
                       for e in closure(text, vendor))
    # A channel's cell installs from the channel's index alone; a release cell's vendor index
    # is searched beside PyPI (vendor.yaml index_url), as the build and the lock use it.
    return Requirements(vendor=vendor, test=test, locked=locked,
                        index_url=index if cell.channel is not None else "",
                        extra_index_url=index if cell.channel is None else "")
