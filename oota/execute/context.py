"""A cell's build context: its files laid out for BuildKit, the secrets a build gets beside them
(pip configuration, CA bundle, netrc), and the source stamp of its inputs (revision and time)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from oota import reproducible
from oota.execute.sources import PipSources, fill_wheelhouse
from oota.net import find_ca_bundle, netrc_for, without_credentials_text

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
