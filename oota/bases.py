"""Base images: use a local one, pull one, or build one from the distribution's archive.

Users behind a registry mirror pull ``debian:bookworm-slim`` like anyone else; air-gapped
hosts (and this project's CI) cannot. When the pull fails and the OS entry of matrix.yaml
declares a ``bootstrap``, the base is built once with debootstrap from the Debian archive,
imported, and tagged ``oota/base:<os>`` with labels saying how it was made; later builds
reuse it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from oota.engine import Engine
from oota.errors import EnvironmentProblem, StepFailed
from oota.matrix import OsSpec

log = logging.getLogger("oota.bases")


@dataclass(frozen=True, kw_only=True, slots=True)
class Base:
    ref: str       # what FROM uses (the BASE_IMAGE build argument)
    how: str       # local | pulled | bootstrapped | bootstrapped-earlier
    note: str = ""


def bootstrap_tag(spec: OsSpec) -> str:
    return f"oota/base:{spec.key}"


def _bootstrap_labels(spec: OsSpec) -> dict[str, str]:
    assert spec.bootstrap is not None
    return {"oota.base.os": spec.key, "oota.base.tool": spec.bootstrap.tool,
            "oota.base.suite": spec.bootstrap.suite, "oota.base.mirror": spec.bootstrap.mirror,
            "oota.base.replaces": spec.image}


def ensure_base(engine: Engine, image: str, spec: OsSpec, workdir: Path) -> Base:
    """Make ``image`` available and say which reference to build FROM. The OS entry's
    bootstrap stands in only for the OS's own image, never for a vendor's base image."""
    if engine.image_labels(image) is not None:
        return Base(ref=image, how="local")
    why = engine.pull(image)
    if why is None:
        return Base(ref=image, how="pulled")
    if spec.bootstrap is None or image != spec.image:
        where = f"os.{spec.key} in matrix.yaml declares no bootstrap" if image == spec.image \
            else "it is the vendor's base image, which oota cannot bootstrap"
        raise StepFailed(f"base image {image} is not available ({why}) and {where}; pull it "
                         "or `docker load` it on this host")
    tag = bootstrap_tag(spec)
    wanted = _bootstrap_labels(spec)
    labels = engine.image_labels(tag)
    if labels is not None and all(labels.get(k) == v for k, v in wanted.items()):
        return Base(ref=tag, how="bootstrapped-earlier", note=f"pull failed: {why}")
    _debootstrap_and_import(engine, spec, tag, workdir)
    return Base(ref=tag, how="bootstrapped", note=f"pull failed: {why}")


def _debootstrap_and_import(engine: Engine, spec: OsSpec, tag: str, workdir: Path) -> None:
    assert spec.bootstrap is not None
    tool = shutil.which("debootstrap")
    if tool is None:
        raise EnvironmentProblem("debootstrap is needed to build the base image "
                                 f"{tag} (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise EnvironmentProblem(f"debootstrap must run as root to build {tag}")
    workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"rootfs-{spec.key}-", dir=workdir) as tmp:
        rootfs = Path(tmp) / "rootfs"
        argv = [tool, "--variant=minbase", spec.bootstrap.suite, str(rootfs),
                spec.bootstrap.mirror]
        log.debug("run: %s", " ".join(argv))
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise StepFailed(f"debootstrap {spec.bootstrap.suite} failed", command=argv,
                             exit_code=proc.returncode, log_tail=tail)
        engine.import_rootfs(rootfs, tag, _bootstrap_labels(spec))
