"""Hash-pinned locks: ``locks/<vendor>/<cell-id>.txt``, one per cell, made by pip-compile.

A lock is resolved where the cell is built: pip-compile (pip-tools, the host's version) runs
inside a container of the cell's own ``builder`` stage image, so its Python, glibc and
platform markers are the cell's, with the same package sources a build gets (the pip.conf and
CA bundle a build receives as secrets, the host's wheelhouse mounted at ``/wheelhouse``).
A wheel from the wheelhouse (torch ``2.13.0+cpu``) is recorded with the sha256 of that file.

The lock's input is the vendor's ``requirements`` + ``test_requirements`` formatted for the
cell. Its first lines record a hash of those inputs (plus the cell's Python and OS), so
:func:`lock_status` can say ``fresh``, ``stale`` (the inputs changed) or ``missing``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import tempfile
import uuid
from dataclasses import dataclass
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Literal

from oota.console import Console
from oota.engine import RUN_LABEL, Engine, RunRequest
from oota.errors import StepFailed
from oota.matrix import Matrix
from oota.plan import Cell
from oota.sources import fill_wheelhouse, find_ca_bundle, resolve_sources

LOCKS_DIR = "locks"
INPUTS_LINE = "# oota-lock-inputs: "
# The stage pip-compile runs in: it has the cell's Python, OS and venv. (A stage holding only
# those, without the installs, would keep a stale lock out of re-locking; see the report.)
BUILDER_TARGET = "builder"
Status = Literal["fresh", "stale", "missing"]
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


def cell_requirements(cell: Cell) -> tuple[str, ...]:
    """The cell's pip requirements (install then test), formatted as the Dockerfile has them."""
    v = cell.vendor
    items = [cell.format(r, "requirements") for r in v.requirements]
    items += [cell.format(r, "test_requirements") for r in v.test_requirements]
    return tuple(dict.fromkeys(items))


def inputs_digest(cell: Cell) -> str:
    """What a lock depends on: the requirements, the Python and the OS of the cell."""
    data = {"requirements": list(cell_requirements(cell)), "python": str(cell.python),
            "os": cell.os.key, "base": cell.base_image}
    return "sha256:" + hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def lock_path(matrix: Matrix, cell: Cell) -> Path:
    return matrix.root / LOCKS_DIR / cell.vendor.name / f"{cell.id}.txt"


def recorded_digest(path: Path) -> str | None:
    if not path.is_file():
        return None
    for line in path.read_text(encoding="utf-8").splitlines()[:10]:
        if line.startswith(INPUTS_LINE):
            return line[len(INPUTS_LINE):].strip()
    return None


def lock_status(matrix: Matrix, cell: Cell) -> Status:
    path = lock_path(matrix, cell)
    if not path.is_file():
        return "missing"
    return "fresh" if recorded_digest(path) == inputs_digest(cell) else "stale"


def header(cell: Cell) -> str:
    return "\n".join([
        f"# oota lock for cell {cell.id}: CPython {cell.python} on {cell.os.key} "
        f"({cell.base_image}), resolved inside the cell's builder stage.",
        f"{INPUTS_LINE}{inputs_digest(cell)}",
        "# inputs: " + "; ".join(cell_requirements(cell)),
        f"# regenerate: invoke lock --vendor={cell.vendor.name} --cell={cell.id}",
        "#",
    ]) + "\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class LockOptions:
    run_id: str = dataclasses.field(default_factory=lambda: f"lock-{uuid.uuid4().hex[:10]}")
    ca_bundle: str | None = None
    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    use_host_pip_config: bool = True
    timeout_s: int = 1200
    work: Path | None = None      # scratch folder (default: <root>/.oota-cache/locks)
    registry_mirrors: tuple[tuple[str, str], ...] = ()   # see BuildOptions


@dataclass(frozen=True, kw_only=True, slots=True)
class LockOutcome:
    cell: str
    path: Path
    status: str                    # "written" | "unchanged" | "failed"
    message: str = ""


def build_builder(matrix: Matrix, cell: Cell, engine: Engine, console: Console,
                  options: LockOptions) -> str:
    """Build the cell's ``builder`` stage (BuildKit cache makes this seconds after a build)
    and return its tag; labelled with the run id so the caller's clean-up removes it."""
    from oota.bases import ensure_base
    from oota.build import BuildOptions, CellRun

    work = _work(matrix, options)
    base = ensure_base(engine, cell.base_image, cell.os, matrix.root / ".oota-cache",
                       dict(options.registry_mirrors))
    build_options = BuildOptions(results_dir=work / "results", ca_bundle=options.ca_bundle,
                                 index_url=options.index_url, find_links=options.find_links,
                                 use_host_pip_config=options.use_host_pip_config,
                                 run_id=options.run_id)
    run = CellRun(matrix, cell, engine, console, build_options, {cell.base_image: base}, {})
    sources = _sources(cell, options)
    tag = f"oota-lock/{cell.vendor.name}:{cell.id}-builder-{options.run_id}"
    with tempfile.TemporaryDirectory(prefix=f"{cell.id}-", dir=work) as tmp:
        request = run._request(Path(tmp), sources, base)
        request = dataclasses.replace(request, target=BUILDER_TARGET, tag=tag,
                                      log_path=work / f"{cell.id}.builder.log")
        engine.build(request, lambda _event: None)
    return tag


def _work(matrix: Matrix, options: LockOptions) -> Path:
    work = options.work or matrix.root / ".oota-cache" / "locks"
    work.mkdir(parents=True, exist_ok=True)
    return work


def _sources(cell: Cell, options: LockOptions):
    return resolve_sources(vendor_index=cell.vendor.index_url, index_url=options.index_url,
                           find_links=options.find_links,
                           use_host_config=options.use_host_pip_config)


def mounts(cell: Cell, options: LockOptions, folder: Path) -> list[str]:
    """``docker create`` flags that give a container what a build gets: the pip.conf and CA
    bundle at /run/secrets (read-only) and the host's wheels at /wheelhouse."""
    sources = _sources(cell, options)
    wheels = fill_wheelhouse(folder / "wheelhouse", sources.wheel_dirs)
    pipconf = folder / "pip.conf"
    pipconf.write_text(sources.pip_conf(with_wheelhouse=bool(wheels)))
    os.chmod(pipconf, 0o600)
    flags = ["-v", f"{pipconf}:/run/secrets/pipconf:ro",
             "-v", f"{folder / 'wheelhouse'}:/wheelhouse:ro"]
    ca = find_ca_bundle(options.ca_bundle)
    if ca:
        flags += ["-v", f"{ca}:/run/secrets/ca:ro"]
    return flags


def compile_lock(engine: Engine, cell: Cell, builder: str, options: LockOptions,
                 folder: Path) -> str:
    """Run pip-compile in a container of ``builder``; return the lock text (with header)."""
    job = folder / "job"
    job.mkdir(parents=True, exist_ok=True)
    (job / "requirements.in").write_text("\n".join(cell_requirements(cell)) + "\n")
    flags = mounts(cell, options, folder) + [
        "-v", f"{job}:/lock",
        "-e", f"OOTA_PIP=pip=={dist_version('pip')}",
        "-e", f"OOTA_PIP_TOOLS=pip-tools=={dist_version('pip-tools')}",
        "-e", f"CUSTOM_COMPILE_COMMAND=invoke lock --vendor={cell.vendor.name} --cell={cell.id}"]
    outcome = engine.run(RunRequest(image=builder, command=["bash", "-c", _COMPILE], flags=flags,
                                    labels={RUN_LABEL: options.run_id},
                                    log_path=folder / "pip-compile.log",
                                    timeout_s=options.timeout_s))
    out = job / "out.txt"
    if outcome.exit_code != 0 or not out.is_file():
        why = "timed out" if outcome.timed_out else f"exited with {outcome.exit_code}"
        raise StepFailed(f"pip-compile for {cell.id} in {builder} {why}",
                         command=["bash", "-c", "<pip-compile>"], exit_code=outcome.exit_code,
                         log_tail=outcome.output_tail)
    return header(cell) + out.read_text(encoding="utf-8")


def write_lock(path: Path, text: str) -> bool:
    """Write atomically; False when the file already holds exactly ``text``."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return True


def lock_cell(matrix: Matrix, cell: Cell, engine: Engine, console: Console,
              options: LockOptions, *, dest: Path | None = None) -> LockOutcome:
    path = dest or lock_path(matrix, cell)
    try:
        builder = build_builder(matrix, cell, engine, console, options)
        with tempfile.TemporaryDirectory(prefix=f"{cell.id}-", dir=_work(matrix, options)) as tmp:
            text = compile_lock(engine, cell, builder, options, Path(tmp))
    except StepFailed as exc:
        if exc.log_tail:
            console.block(exc.log_tail)
        return LockOutcome(cell=cell.id, path=path, status="failed", message=str(exc))
    changed = write_lock(path, text)
    return LockOutcome(cell=cell.id, path=path, status="written" if changed else "unchanged")


def lock_cells(matrix_path: str, vendors: list[str] | None, ids: list[str] | None,
               everything: bool, console: Console, options: LockOptions) -> list[LockOutcome]:
    """``invoke lock``: a lock per selected cell; one cell's failure never stops the next."""
    from oota.api import cells_for
    from oota.engine import DockerEngine

    matrix, cells = cells_for(matrix_path, vendors, ids, everything)
    engine = DockerEngine()
    outcomes = []
    try:
        for cell in cells:
            with console.status(f"lock {cell.id}"):
                outcomes.append(lock_cell(matrix, cell, engine, console, options))
            last = outcomes[-1]
            console.line("ok" if last.status != "failed" else "fail",
                         f"{cell.id}: {last.status} {last.path.relative_to(matrix.root)}"
                         + (f": {last.message}" if last.message else ""))
    finally:
        engine.cleanup(options.run_id, images=True)
    return outcomes


def status_rows(matrix_path: str, vendors: list[str] | None) -> list[tuple[str, Status, Path]]:
    """``invoke lock --check``: every cell's lock status, no Docker needed."""
    from oota.api import cells_for

    matrix, cells = cells_for(matrix_path, vendors)
    return [(c.id, lock_status(matrix, c), lock_path(matrix, c)) for c in cells]


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def pins(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """name -> (version, sha256 hashes) of a pip-compile --generate-hashes file."""
    out: dict[str, tuple[str, frozenset[str]]] = {}
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        match = _PIN.match(line)
        if match:
            current = match.group(1).lower().replace("_", "-")
            out[current] = (match.group(2), frozenset())
        if current and "--hash=sha256:" in line:
            version, hashes = out[current]
            found = set(re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
            out[current] = (version, hashes | found)
        if line and not line.startswith("--hash") and not match and not line.startswith("#"):
            current = None
    return out
