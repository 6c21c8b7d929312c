"""The functions behind the invoke tasks: each takes parsed flags, does one job, returns data.

Nothing here prints results or exits; ``tasks.py`` formats the returned data and maps
exceptions (:mod:`oota.errors`) to exit codes.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from oota import lockfile
from oota.config.matrix import Matrix, load_matrix
from oota.console import Console
from oota.engine.docker import DockerEngine
from oota.errors import EXIT_FAILED, EXIT_OK, OotaError
from oota.execute import inplace
from oota.execute import lock as locks
from oota.execute.bases import parse_mirrors
from oota.execute.build import BuildOptions, build_cells
from oota.execute.hosts import check_vendor
from oota.lint import lint_project
from oota.plan import Cell, plan, select
from oota.releases.command import Outcome as ReleaseOutcome
from oota.releases.command import run as run_release_check
from oota.releases.http import REQUEST_TIMEOUT
from oota.render import Drift, check, context_files, fingerprint, render_all, write_all
from oota.report.data import Report
from oota.report.write import write_report
from oota.results.model import Result
from oota.vocab import BAD


def cells_for(matrix_path: str, vendors: list[str] | None, ids: list[str] | None = None,
              everything: bool = True) -> tuple[Matrix, list[Cell]]:
    matrix = load_matrix(matrix_path)
    cells = plan(matrix, vendors or None)
    return matrix, select(matrix, cells, ids=ids, everything=everything)


def matrix_rows(matrix_path: str, vendors: list[str] | None) -> list[dict[str, Any]]:
    matrix, cells = cells_for(matrix_path, vendors)
    defaults = {c.id for c in select(matrix, cells)}
    rows = []
    for rendered in render_all(matrix, cells):
        cell = rendered.cell
        rows.append({"id": cell.id, **cell.coordinates(), "base": cell.base_image,
                     "tag": cell.tag, "default": cell.id in defaults,
                     "fingerprint": fingerprint(context_files(matrix, rendered))})
    return rows


def format_rows(rows: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(rows, indent=2)
    headers = ("id", "vendor", "torch", "python", "toolkit_version", "os", "default")
    table = [[str(r.get(h) if r.get(h) is not None else "-") for h in headers] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h)
              for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in table]
    return "\n".join(out)


def generate(matrix_path: str, vendors: list[str] | None, *, check_only: bool
             ) -> tuple[list[Path], Drift | None]:
    matrix, cells = cells_for(matrix_path, vendors)
    rendered = render_all(matrix, cells)
    names = vendors or list(matrix.vendors) + _vendor_dirs_not_in(matrix)
    if check_only:
        return [], check(matrix, rendered, names)
    return write_all(rendered), None


def _vendor_dirs_not_in(matrix: Matrix) -> list[str]:
    """Generated folders under images/ of vendors the matrix no longer has (stale output)."""
    if not matrix.images_dir.is_dir():
        return []
    return [p.name for p in sorted(matrix.images_dir.iterdir())
            if p.is_dir() and p.name != "templates" and p.name not in matrix.vendors]


def build(matrix_path: str, vendors: list[str] | None, ids: list[str] | None, everything: bool,
          options: BuildOptions, console: Console, *, build_images: bool = True
          ) -> list[Result]:
    matrix, cells = cells_for(matrix_path, vendors, ids, everything)
    if not cells:
        console.warn("no cells selected")
        return []
    console.info(f"{len(cells)} cell(s): " + ", ".join(c.id for c in cells))
    engine = DockerEngine()
    logging.getLogger("oota").debug("engine ready")
    return build_cells(matrix, cells, engine, console, options, build=build_images)


def registry_mirrors(items: list[str] | None) -> tuple[tuple[str, str], ...]:
    """``--registry-mirror REGISTRY=MIRROR`` flags, validated (InputError, exit code 2)."""
    return tuple(parse_mirrors(items or []).items())


def exit_code_for(results: list[Result]) -> int:
    """0 when there are results and none failed, errored or was interrupted (oota.vocab.BAD)."""
    return EXIT_OK if results and not any(r.status in BAD for r in results) else EXIT_FAILED


def report(results_dir: str, out_dir: str, previous_dir: str | None = None) -> Report:
    return write_report(Path(results_dir), Path(out_dir),
                        Path(previous_dir) if previous_dir else None)


def hosts(matrix_path: str, vendors: list[str] | None) -> list[dict[str, Any]]:
    """Probe this host for every selected vendor's hardware; no image is built."""
    matrix = load_matrix(matrix_path)
    names = vendors or list(matrix.vendors)
    plan(matrix, names)  # validates the names
    try:
        docker_facts = DockerEngine().facts()
    except OotaError as exc:
        docker_facts = {"error": str(exc).splitlines()[0]}
    rows = []
    for name in names:
        check = check_vendor(matrix.vendors[name].vendor, docker_facts)
        rows.append({"vendor": name, "supported": check.supported, "driver": check.driver,
                     "reasons": list(check.reasons), "facts": check.facts})
    return rows


def verify_here(matrix_path: str, vendor: str, results_dir: str, layers: tuple[str, ...],
                python: str | None) -> Result:
    matrix = load_matrix(matrix_path)
    plan(matrix, [vendor])
    return inplace.verify_here(matrix, vendor, Path(results_dir), layers=layers, python=python or sys.executable)


def lint(matrix_path: str) -> list[str]:
    return lint_project(matrix_path)


def release_check(matrix_path: str, *, torch: str | None, index_url: str, fmt: str, update: bool,
                  vendors: list[str] | None, timeout: str | None) -> ReleaseOutcome:
    """``invoke release-check``: the formatted check and how many gaps it found."""
    return run_release_check(matrix_path, torch=torch, index_url=index_url, fmt=fmt,
                             update=update, vendors=vendors,
                             timeout=timeout or REQUEST_TIMEOUT)


def lock_status(matrix_path: str, vendors: list[str] | None) -> list[tuple[str, lockfile.Status, Path]]:
    """``invoke lock --check``: every cell's lock status, no Docker needed."""
    matrix, cells = cells_for(matrix_path, vendors)
    return [(c.id, lockfile.lock_status(matrix, c), lockfile.lock_path(matrix, c))
            for c in cells]


def lock(matrix_path: str, vendors: list[str] | None, ids: list[str] | None, everything: bool,
         console: Console, options: locks.LockOptions) -> list[locks.LockOutcome]:
    matrix, cells = cells_for(matrix_path, vendors, ids, everything)
    return locks.lock_cells(matrix, cells, console, options)
