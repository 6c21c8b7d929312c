"""The tasks of the matrix itself, without an Engine: list the cells, generate their
Dockerfiles, lint them, check a release of torch, and lock the cells' packages."""

from __future__ import annotations

from pathlib import Path

from oota import github, lockfile
from oota.api.tables import MatrixRow, format_rows
from oota.config.matrix import Matrix, load_matrix
from oota.config.yamlsrc import did_you_mean
from oota.console import Console
from oota.errors import (
    InputError,
)
from oota.execute import lock as locks
from oota.execute.issueskips import KnownFailures, known_for
from oota.lint import lint_project
from oota.plan import Cell, plan, select
from oota.project import CACHE
from oota.releases.command import Outcome as ReleaseOutcome, run as run_release_check
from oota.releases.http import REQUEST_TIMEOUT
from oota.render import (
    Drift,
    cell_fingerprint,
    check,
    context_files,
    fingerprint,
    render_all,
    write_all,
)


def cells_for(matrix_path: str, vendors: list[str] | None, ids: list[str] | None = None,
              everything: bool = True) -> tuple[Matrix, list[Cell]]:
    matrix = load_matrix(matrix_path)
    cells = plan(matrix, vendors or None)
    return matrix, select(matrix, cells, ids=ids, everything=everything)


def matrix_rows(matrix_path: str, vendors: list[str] | None) -> list[MatrixRow]:
    matrix, cells = cells_for(matrix_path, vendors)
    defaults = {c.id for c in select(matrix, cells)}
    return [MatrixRow(id=rendered.cell.id, coordinates=rendered.cell.coordinates(),
                      base=rendered.cell.base_image, tag=rendered.cell.tag,
                      default=rendered.cell.id in defaults,
                      fingerprint=fingerprint(context_files(matrix, rendered)))
            for rendered in render_all(matrix, cells)]


def matrix_text(matrix_path: str, vendors: list[str] | None, fmt: str,
                everything: bool = False) -> str:
    """`invoke matrix`'s output (``fmt`` is one of :data:`MATRIX_FORMATS`). ``github``: the
    workflow's job matrix, one line, of the vendors' default cells (what ``invoke build``
    picks) or with ``everything`` of every cell; the table and JSON list every cell, with its
    ``default`` column, so ``everything`` is refused there."""
    if fmt == "github":
        matrix, cells = cells_for(matrix_path, vendors, everything=everything)
        return github.matrix_json([github.job_for(cell, cell_fingerprint(matrix, cell))
                                   for cell in cells])
    if everything:
        raise InputError(f"--all applies only with --format github; --format {fmt} lists "
                         "every cell already (its 'default' column marks the default ones)")
    return format_rows(matrix_rows(matrix_path, vendors), fmt)


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


def lint(matrix_path: str) -> list[str]:
    return lint_project(matrix_path)


def release_check(matrix_path: str, *, torch: str | None, index_url: str, fmt: str, update: bool,
                  vendors: list[str] | None, timeout: str | None) -> ReleaseOutcome:
    """``invoke release-check``: the formatted check and how many gaps it found."""
    return run_release_check(matrix_path, torch=torch, index_url=index_url, fmt=fmt,
                             update=update, vendors=vendors,
                             timeout=timeout or REQUEST_TIMEOUT)


def lock_status(matrix_path: str, vendors: list[str] | None
                ) -> list[tuple[str, lockfile.Status, Path]]:
    """``invoke lock --check``: every cell's lock status, no Docker needed."""
    matrix, cells = cells_for(matrix_path, vendors)
    return [(c.id, lockfile.lock_status(matrix, c), lockfile.lock_path(matrix, c))
            for c in cells]


def lock(matrix_path: str, vendors: list[str] | None, ids: list[str] | None, everything: bool,
         console: Console, options: locks.LockOptions) -> list[locks.LockOutcome]:
    matrix, cells = cells_for(matrix_path, vendors, ids, everything)
    return locks.lock_cells(matrix, cells, console, options)


def known_failures(matrix_path: str, vendor: str) -> KnownFailures:
    """``invoke known-failures``: the vendor's tracker read now (the cache where it cannot be),
    its entries as the next verification passes them on."""
    matrix = load_matrix(Path(matrix_path))
    if vendor not in matrix.vendors:
        hint = did_you_mean(vendor, sorted(matrix.vendors))
        raise InputError(f"--vendor {vendor}: not a vendor of {matrix_path} (vendors: "
                         f"{', '.join(sorted(matrix.vendors))})" + (f"; {hint}" if hint else ""))
    spec = matrix.vendors[vendor].vendor
    if spec.known_failures is None:
        raise InputError(f"vendors/{vendor}/vendor.yaml declares no tracker: add known_failures "
                         "(repo: owner/name, label: ...; docs/guides/vendor.md)")
    return known_for(spec, matrix.root / CACHE, fresh_s=0.0)
