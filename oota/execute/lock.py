"""The lock driver: resolves ``locks/<vendor>/<cell-id>.txt`` (format: :mod:`oota.lockfile`).

A lock is resolved where the cell is built: pip-compile (pip-tools, the host's version) runs
inside a container of the cell's own ``builder`` stage image, so its Python, glibc and
platform markers are the cell's, with the same package sources a build gets (the pip.conf and
CA bundle a build receives as secrets, the host's wheelhouse mounted at ``/wheelhouse``).
A wheel from the wheelhouse (torch ``2.13.0+cpu``) is recorded with the sha256 of that file.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Literal

from oota.config.matrix import Matrix
from oota.console import Console
from oota.engine.base import (
    IMAGE_RUN_LABEL,
    RUN_LABEL,
    BuildRequest,
    Engine,
    Mount,
    RunRequest,
)
from oota.engine.docker import DockerEngine
from oota.errors import StepFailed
from oota.execute.bases import ensure_base, foreign_platform
from oota.execute.context import stage_context
from oota.execute.interrupts import deferred
from oota.execute.leftovers import context_root, owned_run
from oota.execute.sources import PipSources, fill_wheelhouse, resolve_sources
from oota.lockfile import CHANNEL_NOT_LOCKED, cell_requirements, header, lock_path, write_lock
from oota.net import find_ca_bundle
from oota.plan import Cell
from oota.project import command_name
from oota.render import context_files, render_cell

# The stage pip-compile runs in: it has the cell's Python, OS and venv. (A stage holding only
# those, without the installs, would keep a stale lock out of re-locking; see the report.)
BUILDER_TARGET = "builder"
# Runs inside the builder container. Constant text: every input arrives as a file in /lock or
# an environment variable, never spliced into the script.
_COMPILE = r"""
set -euo pipefail
if [ -f /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi
if [ -f /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi
/opt/venv/bin/python -m venv /tmp/tools
/tmp/tools/bin/pip install --quiet "$OOTA_PIP" "$OOTA_PIP_TOOLS"
cd /lock
/tmp/tools/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
    --no-emit-index-url --no-emit-find-links --no-emit-trusted-host --no-reuse-hashes \
    --output-file /lock/out.txt /lock/requirements.in
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class LockOptions:
    run_id: str = dataclasses.field(default_factory=lambda: f"lock-{uuid.uuid4().hex[:10]}")
    ca_bundle: str | None = None
    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    use_host_pip_config: bool = True
    timeout_s: int = 1200
    work: Path | None = None      # scratch folder (default: the run's own, removed after it)
    registry_mirrors: tuple[tuple[str, str], ...] = ()   # see BuildOptions
    # Resolve every pin afresh; otherwise pip-compile keeps the pins of the existing lock that
    # still satisfy the requirements (a relock does not move because PyPI did).
    upgrade: bool = False


LockStatus = Literal["written", "unchanged", "failed", "unlocked"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LockOutcome:
    cell: str
    path: Path
    status: LockStatus
    message: str = ""


def build_builder(matrix: Matrix, cell: Cell, engine: Engine, options: LockOptions) -> str:
    """Build the cell's ``builder`` stage (BuildKit cache makes this seconds after a build)
    and return its tag; labelled with the run id so the caller's clean-up removes it."""
    work = _work(matrix, options)
    base = ensure_base(engine, cell.base_image, cell.os, matrix.root / ".oota-cache",
                       dict(options.registry_mirrors), platform=foreign_platform(cell, engine))
    files = context_files(matrix, render_cell(matrix, cell))
    tag = f"oota-lock/{cell.vendor.name}:{cell.id}-builder-{options.run_id}"
    with tempfile.TemporaryDirectory(prefix=f"{cell.id}-", dir=work) as tmp:
        context, secrets = stage_context(Path(tmp), files, _sources(cell, options),
                                         options.ca_bundle)
        engine.build(BuildRequest(context=context, tag=tag, target=BUILDER_TARGET,
                                  secrets=secrets, labels={IMAGE_RUN_LABEL: options.run_id},
                                  build_args={"BASE_IMAGE": base.ref},
                                  log_path=work / f"{cell.id}.builder.log",
                                  timeout_s=options.timeout_s), lambda _event: None)
    return tag


def _work(matrix: Matrix, options: LockOptions) -> Path:
    work = options.work or context_root(matrix.root / ".oota-cache", options.run_id)
    work.mkdir(parents=True, exist_ok=True)
    return work


def _sources(cell: Cell, options: LockOptions) -> PipSources:
    # The cell's index (the vendor's template filled in, e.g. .../whl/cu130), as a build has it.
    return resolve_sources(vendor_index=cell.index_url, index_url=options.index_url,
                           find_links=options.find_links,
                           use_host_config=options.use_host_pip_config)


def mounts(cell: Cell, options: LockOptions, folder: Path) -> tuple[Mount, ...]:
    """What a container needs to get what a build gets: the pip.conf and CA bundle at
    /run/secrets and the host's wheels at /wheelhouse, all read-only."""
    sources = _sources(cell, options)
    wheels = fill_wheelhouse(folder / "wheelhouse", sources.wheel_dirs)
    pipconf = folder / "pip.conf"
    pipconf.write_text(sources.pip_conf(with_wheelhouse=bool(wheels)))
    os.chmod(pipconf, 0o600)
    found = [Mount(source=pipconf, target="/run/secrets/pipconf"),
             Mount(source=folder / "wheelhouse", target="/wheelhouse")]
    ca = find_ca_bundle(options.ca_bundle)
    if ca:
        found.append(Mount(source=Path(ca), target="/run/secrets/ca"))
    return tuple(found)


def compile_lock(engine: Engine, cell: Cell, builder: str, options: LockOptions,
                 folder: Path, existing: Path | None = None) -> str:
    """Run pip-compile in a container of ``builder``; return the lock text (with header).
    ``existing`` (the current lock) is where pip-compile starts: its pins are kept where they
    still fit, unless ``options.upgrade``."""
    job = folder / "job"
    job.mkdir(parents=True, exist_ok=True)
    (job / "requirements.in").write_text("\n".join(cell_requirements(cell)) + "\n")
    if existing is not None and existing.is_file() and not options.upgrade:
        shutil.copyfile(existing, job / "out.txt")
    env = {"OOTA_PIP": f"pip=={dist_version('pip')}",
           "OOTA_PIP_TOOLS": f"pip-tools=={dist_version('pip-tools')}",
           "CUSTOM_COMPILE_COMMAND": f"{command_name(cell.vendor.folder.parents[1])} lock "
                                     f"--vendor={cell.vendor.name} --cell={cell.id}"}
    outcome = engine.run(RunRequest(image=builder, command=["bash", "-c", _COMPILE], env=env,
                                    mounts=mounts(cell, options, folder)
                                    + (Mount(source=job, target="/lock", read_only=False),),
                                    labels={RUN_LABEL: options.run_id},
                                    log_path=folder / "pip-compile.log",
                                    timeout_s=options.timeout_s))
    out = job / "out.txt"
    if outcome.exit_code != 0 or not out.is_file():
        why = "timed out" if outcome.timed_out else f"exited with {outcome.exit_code}"
        raise StepFailed(f"pip-compile for {cell.id} in {builder} {why}",
                         command=["bash", "-c", "<pip-compile>"], returncode=outcome.exit_code,
                         log_tail=outcome.output_tail)
    return header(cell) + out.read_text(encoding="utf-8")


def lock_cell(matrix: Matrix, cell: Cell, engine: Engine, console: Console,
              options: LockOptions, *, dest: Path | None = None) -> LockOutcome:
    path = dest or lock_path(matrix, cell)
    if cell.channel is not None:
        return LockOutcome(cell=cell.id, path=path, status="unlocked", message=CHANNEL_NOT_LOCKED)
    try:
        builder = build_builder(matrix, cell, engine, options)
        with tempfile.TemporaryDirectory(prefix=f"{cell.id}-", dir=_work(matrix, options)) as tmp:
            text = compile_lock(engine, cell, builder, options, Path(tmp),
                                existing=lock_path(matrix, cell))
    except StepFailed as exc:
        if exc.log_tail:
            console.block(exc.log_tail)
        return LockOutcome(cell=cell.id, path=path, status="failed", message=str(exc))
    changed = write_lock(path, text)
    return LockOutcome(cell=cell.id, path=path, status="written" if changed else "unchanged")


def lock_cells(matrix: Matrix, cells: list[Cell], console: Console,
               options: LockOptions) -> list[LockOutcome]:
    """``invoke lock``: a lock per selected cell; one cell's failure never stops the next.

    The run owns its builder images, containers and scratch folders (which hold the pip
    configuration) like a build does (:func:`oota.execute.leftovers.owned_run`): they are
    removed however it ends, and what a killed lock run left is removed by the next run."""
    engine = DockerEngine()
    outcomes = []
    with owned_run(engine, matrix.root / ".oota-cache", options.run_id, console) as scratch:
        if options.work is None:
            options = dataclasses.replace(options, work=scratch)
        try:
            for cell in cells:
                with console.status(f"lock {cell.id}"):
                    outcomes.append(lock_cell(matrix, cell, engine, console, options))
                last = outcomes[-1]
                console.line("ok" if last.status != "failed" else "fail",
                             f"{cell.id}: {last.status} {last.path.relative_to(matrix.root)}"
                             + (f": {last.message}" if last.message else ""))
        finally:
            with deferred():
                engine.cleanup(options.run_id, images=True)
    return outcomes
