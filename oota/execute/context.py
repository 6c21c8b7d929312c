"""A cell's build context: its files laid out for BuildKit, the secrets a build gets beside them
(pip configuration, CA bundle, netrc), the source stamp of its inputs (revision and time), and
what a cell's image is made from, worked out once (:class:`CellInputs`)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from oota import __version__, reproducible
from oota.config.matrix import DEFAULT_PLATFORM, Matrix
from oota.engine.base import BuildRequest
from oota.execute.bases import Base
from oota.execute.sources import PipSources, fill_wheelhouse
from oota.execute.verify import device_request
from oota.lockfile import lock_path
from oota.net import find_ca_bundle, netrc_for, without_credentials_text
from oota.plan import Cell
from oota.render import VOCAB_FILE, Rendered, context_files, fingerprint, render_cell
from oota.supply import runflags

VENDOR_DATA = "vendor/vendor.yaml"   # the vendor's data file, as the build context names it


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceStamp:
    """Where an image's inputs come from, for its OCI labels: the last commit that changed
    them (with ``-dirty`` when they have uncommitted changes) and that commit's time, never the
    clock's, so that a rebuild of unchanged inputs makes the same image. ``SOURCE_DATE_EPOCH``
    (the reproducible-builds convention) overrides the time; without git and without it, the
    image has no creation time."""

    revision: str = ""
    created: str = ""
    epoch: int | None = None   # ``created`` in seconds

    def labels(self) -> dict[str, str]:
        stamped = {"org.opencontainers.image.revision": self.revision}
        if self.created:
            stamped["org.opencontainers.image.created"] = self.created
        return stamped


def source_stamp(root: Path, inputs: list[Path]) -> SourceStamp:
    """The :class:`SourceStamp` of ``inputs`` (files or folders) in the git checkout ``root``;
    inputs outside ``root`` are not git's to date."""
    specs = [p.relative_to(root).as_posix() for p in inputs if p.is_relative_to(root)]
    last = _git(root, ["log", "-1", "--format=%H %ct", "--", *specs]).split()
    revision, epoch = (last[0], last[1]) if len(last) == 2 else ("", "")
    if revision and _git(root, ["status", "--porcelain", "--", *specs]):
        revision += "-dirty"
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip() or epoch
    created = ""
    if epoch.isdigit() and len(epoch) < 12:  # beyond the year 5000: not a time a stamp holds
        created = dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc).isoformat()
    return SourceStamp(revision=revision, created=created,
                       epoch=int(epoch) if epoch.isdigit() else None)


def _git(root: Path, args: list[str]) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def stage_context(tmp: Path, files: dict[str, Path | bytes], sources: PipSources,
                  ca_bundle: str | None, *, netrc_urls: list[str] | None = None
                  ) -> tuple[Path, dict[str, Path]]:
    """Lay out a cell's build context in ``tmp/context`` and the files a build gets as BuildKit
    secrets (the pip configuration, the CA bundle, the credentials of ``netrc_urls`` as a
    netrc file), which never enter a layer."""
    context = tmp / "context"
    for name, source in files.items():
        target = context / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name == VENDOR_DATA:  # its index_url may carry credentials: pip gets them as secrets
            text = source.decode() if isinstance(source, bytes) else source.read_text("utf-8")
            target.write_text(without_credentials_text(text), encoding="utf-8")
        elif isinstance(source, bytes):
            target.write_bytes(source)
        else:
            shutil.copy2(source, target)
        # A COPY keeps a file's time: the checkout's would differ from one host to the next.
        os.utime(target, (reproducible.LAYER_EPOCH, reproducible.LAYER_EPOCH))
    (context / "vendor" / "verify").mkdir(parents=True, exist_ok=True)
    wheels = fill_wheelhouse(context / "wheelhouse", sources.wheel_dirs)
    pipconf = tmp / "pip.conf"
    pipconf.write_text(sources.pip_conf(with_wheelhouse=bool(wheels)))
    os.chmod(pipconf, 0o600)
    secrets = {"pipconf": pipconf}
    netrc = netrc_for(netrc_urls or [])
    if netrc:
        secrets["netrc"] = tmp / "netrc"
        secrets["netrc"].write_text(netrc)
        os.chmod(secrets["netrc"], 0o600)
    ca = find_ca_bundle(ca_bundle)
    if ca:
        secrets["ca"] = ca
    return context, secrets


@dataclass(frozen=True, kw_only=True, slots=True)
class CellInputs:
    """What a cell's image is made from, worked out once: the rendered cell, its build
    context's files, their fingerprint, and the tag the image gets."""

    rendered: Rendered
    files: dict[str, bytes | Path]
    fingerprint: str
    tag: str


def cell_inputs(matrix: Matrix, cell: Cell, tag: str) -> CellInputs:
    rendered = render_cell(matrix, cell)
    files = context_files(matrix, rendered)
    return CellInputs(rendered=rendered, files=files, fingerprint=fingerprint(files),
                      tag=tag)


def build_request(matrix: Matrix, cell: Cell, inputs: CellInputs, tmp: Path,
                  sources: PipSources, base: Base, *, ca_bundle: str | None,
                  extra_labels: tuple[tuple[str, str], ...], log_path: Path,
                  timeout_s: int) -> BuildRequest:
    """The BuildKit request of a cell's image: its context laid out in ``tmp``, its secrets,
    and labels that say what it was made from."""
    channel = [cell.index_url] if cell.channel is not None else []
    context, secrets = stage_context(tmp, inputs.files, sources, ca_bundle, netrc_urls=channel)
    # Nothing here may change between two builds of the same inputs (no clock, no run id;
    # the run id is in the result): a fully cached rebuild then makes the same image.
    stamp = source_stamp(matrix.root, input_paths(matrix, cell))
    labels = {
        "oota.fingerprint": inputs.fingerprint,
        "oota.version": __version__,
        **stamp.labels(),
        "org.opencontainers.image.version": cell.id,
        "org.opencontainers.image.vendor": "oota",
        "org.opencontainers.image.source": "https://github.com/oota/oota",
        "org.opencontainers.image.base.name": base.ref,
        # How to run its suite on a device, for `invoke pull` on a host without our data.
        runflags.LABEL: runflags.to_label(device_request(cell.vendor, inputs.tag, [])),
        **dict(extra_labels),
    }
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    return BuildRequest(context=context, tag=inputs.tag, labels=labels, secrets=secrets,
                        build_args={"BASE_IMAGE": base.ref, **(
                            {"SOURCE_DATE_EPOCH": epoch} if epoch.isdigit() else {})},
                        log_path=log_path, timeout_s=timeout_s,
                        epoch=stamp.epoch or reproducible.epoch(os.environ),
                        platform=None if cell.platform == DEFAULT_PLATFORM else cell.platform)


def input_paths(matrix: Matrix, cell: Cell) -> list[Path]:
    """The files and folders a cell's image is made from (its fingerprint's sources, and the
    templates and matrix its Dockerfile is rendered from)."""
    return [matrix.file, matrix.templates_dir, cell.vendor.folder, matrix.verify_dir,
            lock_path(matrix, cell), VOCAB_FILE]
