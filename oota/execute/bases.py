"""Base images: use a local one, pull one, or build one from the distribution's archive.

A lab with its own registry mirror (``--registry-mirror vault.habana.ai=registry.lab:5000``)
gets each base image from there, tagged with its upstream name, so the generated Dockerfiles
stay the same everywhere. Air-gapped hosts (and this project's CI) may have no registry at
all: when the pull fails and the OS entry of matrix.yaml declares a ``bootstrap``, the base is
built once with debootstrap from the Debian archive, imported, and tagged ``oota/base:<os>``
with labels saying how it was made; later builds reuse it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from oota.config.matrix import DEFAULT_PLATFORM, OsSpec
from oota.engine.base import Engine
from oota.errors import EnvironmentFault, EnvironmentProblem, InputError, StepFailed
from oota.execute.faults import unreachable
from oota.plan import Cell

log = logging.getLogger("oota.bases")


@dataclass(frozen=True, kw_only=True, slots=True)
class Base:
    ref: str       # what FROM uses (the BASE_IMAGE build argument)
    how: str       # local | pulled | bootstrapped | bootstrapped-earlier
    note: str = ""


def bootstrap_tag(spec: OsSpec, platform: str | None = None) -> str:
    """``oota/base:debian12``; for another platform than the Engine's own,
    ``oota/base:debian12-arm64``."""
    return f"oota/base:{spec.key}" + (f"-{_arch(platform)}" if platform else "")


def foreign_platform(cell: Cell, engine: Engine) -> str | None:
    """The cell's platform when it is not the Engine's own (linux/arm64 on an x86_64 host),
    else None: a base for it is made apart, under emulation."""
    if cell.platform == DEFAULT_PLATFORM:
        return None
    return None if engine.facts().get("arch") == cell.machine else cell.platform


def _arch(platform: str) -> str:
    return platform.split("/", 1)[1]


def _bootstrap_labels(spec: OsSpec, platform: str | None = None) -> dict[str, str]:
    assert spec.bootstrap is not None
    return {"oota.base.os": spec.key, "oota.base.tool": spec.bootstrap.tool,
            "oota.base.suite": spec.bootstrap.suite, "oota.base.mirror": spec.bootstrap.mirror,
            "oota.base.replaces": spec.image,
            **({"oota.base.platform": platform} if platform else {})}


def split_registry(ref: str) -> tuple[str, str]:
    """(registry, path:tag) of an image reference, with Docker Hub's implicit parts spelled out:
    ``debian:bookworm-slim`` is ``("docker.io", "library/debian:bookworm-slim")``."""
    first, _, rest = ref.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "docker.io", ref if rest else f"library/{ref}"


def parse_mirrors(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``REGISTRY=MIRROR`` pairs (``vault.habana.ai=registry.lab:5000``) as a mapping."""
    mirrors = {}
    for item in items:
        registry, sep, mirror = (part.strip() for part in item.partition("="))
        # An image reference has no scheme and no spaces: `docker pull https://...` fails late.
        if (not sep or not registry or not mirror or "/" in registry
                or any(c.isspace() for c in registry + mirror) or "://" in mirror):
            raise InputError(f"--registry-mirror {item!r}: write it as REGISTRY=MIRROR, e.g. "
                             "vault.habana.ai=registry.example.com/habana (no https://)")
        mirrors[registry] = mirror.rstrip("/")
    return mirrors


def mirrored(ref: str, mirrors: dict[str, str]) -> str | None:
    """Where ``ref`` lives on a mirror of its registry, or None when none is configured."""
    registry, path = split_registry(ref)
    mirror = mirrors.get(registry)
    return f"{mirror}/{path}" if mirror else None


def _pull(engine: Engine, image: str, mirrors: dict[str, str],
          platform: str | None = None) -> tuple[Base | None, str]:
    """Pull ``image`` from its mirror (then tag it with its own name, so every Dockerfile keeps
    naming the upstream image) or from its registry; (base, '') or (None, why not)."""
    mirror = mirrored(image, mirrors)
    mirror_why = ""
    if mirror:
        why = engine.pull(mirror, platform) if platform else engine.pull(mirror)
        if why is None:
            engine.tag(mirror, image)
            return Base(ref=image, how="pulled", note=f"from the mirror {mirror}"), ""
        mirror_why = f"the mirror's {mirror}: {why}; "
    why = engine.pull(image, platform) if platform else engine.pull(image)
    return (Base(ref=image, how="pulled"), "") if why is None else (None, mirror_why + why)


def ensure_base(engine: Engine, image: str, spec: OsSpec, workdir: Path,
                mirrors: dict[str, str] | None = None, platform: str | None = None) -> Base:
    """Make ``image`` available and say which reference to build FROM. ``mirrors`` maps a
    registry to the one to pull from instead (``--registry-mirror``). The OS entry's
    bootstrap stands in only for the OS's own image, never for a vendor's base image.
    ``platform`` (linux/arm64) asks for another platform than the Engine's own: a local image
    of that name may be the Engine's own platform's, so it is pulled for the platform, and
    the OS's bootstrap makes a base of its own (``oota/base:debian12-arm64``)."""
    if platform is None and engine.image_labels(image) is not None:
        return Base(ref=image, how="local")
    pulled, why = _pull(engine, image, mirrors or {}, platform)
    if pulled is not None:
        return pulled
    if spec.bootstrap is None or image != spec.image:
        where = f"os.{spec.key} in matrix.yaml declares no bootstrap" if image == spec.image \
            else "it is the vendor's base image, which oota cannot bootstrap"
        message = (f"base image {image} is not available ({why}) and {where}; pull it or "
                   "`docker load` it on this host, or name your registry mirror with "
                   f"--registry-mirror {split_registry(image)[0]}=MIRROR")
        if unreachable(why):
            raise EnvironmentFault(message, short=f"base image {image} could not be pulled: "
                                   f"its registry {split_registry(image)[0]} did not answer")
        raise StepFailed(message)
    tag = bootstrap_tag(spec, platform)
    wanted = _bootstrap_labels(spec, platform)
    with _one_bootstrap_at_a_time(tag, workdir):
        labels = engine.image_labels(tag)
        if labels is not None and all(labels.get(k) == v for k, v in wanted.items()):
            return Base(ref=tag, how="bootstrapped-earlier", note=f"pull failed: {why}")
        if platform:
            _debootstrap_and_import(engine, spec, tag, workdir, platform)
        else:
            _debootstrap_and_import(engine, spec, tag, workdir)
    return Base(ref=tag, how="bootstrapped", note=f"pull failed: {why}")


# QEMU's user-mode emulators as Debian's qemu-user-static registers them with binfmt_misc.
_BINFMT = {"arm64": "qemu-aarch64", "amd64": "qemu-x86_64"}


def _check_emulation(platform: str, tag: str) -> None:
    """A base for another architecture runs its second stage, and every build step after it,
    under QEMU: it must be registered with the kernel (binfmt_misc), or each step fails."""
    entry = Path("/proc/sys/fs/binfmt_misc") / _BINFMT.get(_arch(platform), "")
    if not entry.is_file() or "enabled" not in entry.read_text(encoding="utf-8"):
        raise EnvironmentProblem(
            f"building {tag} for {platform} on this host needs QEMU registered with binfmt "
            f"({entry} is missing): apt-get install qemu-user-static binfmt-support, then "
            "mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc if it is not mounted")


@contextmanager
def _one_bootstrap_at_a_time(tag: str, workdir: Path) -> Iterator[None]:
    """Held while ``tag`` is looked for and bootstrapped: two oota runs on one host that need
    the same base (two vendors' builds at once, two test sessions) wait for the first one's
    instead of each bootstrapping it and moving the tag under the other's build. The lock file
    is the host's (/run/lock, where root keeps them; bootstrapping needs root), else in
    ``workdir``."""
    folder = Path("/run/lock")
    if not os.access(folder, os.W_OK):
        folder = workdir
        folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"oota-bootstrap-{re.sub(r'[^A-Za-z0-9_.-]', '_', tag)}.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _debootstrap_and_import(engine: Engine, spec: OsSpec, tag: str, workdir: Path,
                            platform: str | None = None) -> None:
    assert spec.bootstrap is not None
    tool = shutil.which("debootstrap")
    if tool is None:
        raise EnvironmentProblem("debootstrap is needed to build the base image "
                                 f"{tag} (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise EnvironmentProblem(f"debootstrap must run as root to build {tag}")
    if platform:
        _check_emulation(platform, tag)
    workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"rootfs-{spec.key}-", dir=workdir) as tmp:
        rootfs = Path(tmp) / "rootfs"
        arch = [f"--arch={_arch(platform)}"] if platform else []
        argv = [tool, "--variant=minbase", *arch, spec.bootstrap.suite, str(rootfs),
                spec.bootstrap.mirror]
        log.debug("run: %s", " ".join(argv))
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise StepFailed(f"debootstrap {spec.bootstrap.suite} failed", command=argv,
                             returncode=proc.returncode, log_tail=tail)
        labels = _bootstrap_labels(spec, platform)
        if platform:
            engine.import_rootfs(rootfs, tag, labels, platform)
        else:
            engine.import_rootfs(rootfs, tag, labels)
