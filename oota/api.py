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
from urllib.parse import urlsplit

from oota import github, lockfile
from oota.config.matrix import Matrix, load_matrix
from oota.config.yamlsrc import did_you_mean
from oota.console import Console
from oota.engine.docker import DockerEngine
from oota.errors import EXIT_FAILED, EXIT_OK, InputError, OotaError
from oota.execute import inplace
from oota.execute import lock as locks
from oota.execute.bases import parse_mirrors
from oota.execute.build import BuildOptions, build_cells
from oota.execute.hosts import check_vendor
from oota.lint import lint_project
from oota.net import find_ca_bundle, redact
from oota.plan import Cell, plan, select
from oota.releases.command import Outcome as ReleaseOutcome
from oota.releases.command import run as run_release_check
from oota.releases.http import REQUEST_TIMEOUT
from oota.render import Drift, check, context_files, fingerprint, render_all, write_all
from oota.report.data import Report
from oota.report.write import write_report
from oota.results.model import Result
from oota.vocab import BAD, LAYERS

# Output formats of `matrix` and `hosts`.
FORMATS = ("table", "json")
# `matrix` also prints the job matrix of the shipped GitHub Actions workflow (oota/github.py).
MATRIX_FORMATS = (*FORMATS, "github")


# --- Flags: each task checks its own before it reads the matrix or contacts Docker. ---------

def choice(flag: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` when it is one of ``choices``; otherwise an InputError naming the valid ones."""
    if value not in choices:
        hint = did_you_mean(value, choices)
        raise InputError(f"{flag} {value!r} is not one of {', '.join(choices)}"
                         + (f"; {hint}" if hint and hint.startswith("did") else ""))
    return value


def name_list(flag: str, items: list[str] | None) -> list[str] | None:
    """Repeatable, comma-separable name flags (``--vendor a,b --vendor c``); None when absent."""
    if not items:
        return None
    found = [name.strip() for item in items for name in item.split(",") if name.strip()]
    if not found:
        raise InputError(f"{flag} needs a name, e.g. {flag}=cpu")
    return found


def layers(text: str) -> tuple[str, ...]:
    """``--layer device,models``: the suite's layers (:data:`oota.vocab.LAYERS`), in order."""
    found = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    for layer in found:
        if layer not in LAYERS:
            hint = did_you_mean(layer, LAYERS)
            raise InputError(f"--layer {layer!r} is not a layer of the verify suite "
                             f"({', '.join(LAYERS)})"
                             + (f"; {hint}" if hint and hint.startswith("did") else ""))
    return found


def folder(flag: str, value: str) -> Path:
    """A folder flag (created when missing): refused when it, or a parent of it, is a file."""
    path = Path(value)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        which = "is a file" if existing == path else f"is inside {existing}, which is a file"
        raise InputError(f"{flag} {value}: {which}; name a folder (it is created when missing)")
    return path


def index_url(value: str | None) -> str | None:
    """``--index-url``: an http(s) URL with a host (pip inside the build cannot read a host's
    file:// path)."""
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--index-url {redact(value)!r} is not an http(s) URL; give the index "
                         "root, e.g. https://pypi.org/simple (or a wheel folder: --find-links)")
    return value


def ca_bundle(value: str | None) -> str | None:
    """``--ca-bundle``: an existing file (InputError otherwise), as an absolute path."""
    found = find_ca_bundle(value) if value else None
    return str(found) if found else None


def check_here_flags(*, here: bool, python: str | None, cells: list[str] | None,
                     everything: bool) -> None:
    """``verify --here`` verifies this environment as the one cell it matches: ``--cell`` and
    ``--all`` make no sense with it, and ``--python`` none without it."""
    if here and (cells or everything):
        raise InputError("--cell and --all do not apply with --here: it verifies this "
                         "environment as the vendor's cell it matches")
    if not here and python is not None:
        raise InputError("--python applies only with --here (built images carry their own)")


def registry_mirrors(items: list[str] | None) -> tuple[tuple[str, str], ...]:
    """``--registry-mirror REGISTRY=MIRROR`` flags, validated (InputError, exit code 2)."""
    return tuple(parse_mirrors(items or []).items())


def build_options(*, results: str, layer: str = "", ca_bundle_file: str | None = None,
                  index: str | None = None, find_links: list[str] | None = None,
                  no_host_pip_config: bool = False, rebuild: bool = False, verify: bool = True,
                  registry_mirror: list[str] | None = None) -> BuildOptions:
    """The build and verify flags, every one checked (InputError, exit 2)."""
    return BuildOptions(results_dir=folder("--results", results),
                        ca_bundle=ca_bundle(ca_bundle_file), index_url=index_url(index),
                        find_links=tuple(find_links or ()),
                        use_host_pip_config=not no_host_pip_config, rebuild=rebuild,
                        verify=verify, layers=layers(layer),
                        registry_mirrors=registry_mirrors(registry_mirror))


def lock_options(*, ca_bundle_file: str | None = None, index: str | None = None,
                 find_links: list[str] | None = None, no_host_pip_config: bool = False,
                 registry_mirror: list[str] | None = None) -> locks.LockOptions:
    """The lock flags, every one checked (InputError, exit 2)."""
    return locks.LockOptions(ca_bundle=ca_bundle(ca_bundle_file), index_url=index_url(index),
                             find_links=tuple(find_links or ()),
                             use_host_pip_config=not no_host_pip_config,
                             registry_mirrors=registry_mirrors(registry_mirror))


# --- What the tasks do. -------------------------------------------------------------------

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


def matrix_text(matrix_path: str, vendors: list[str] | None, fmt: str,
                everything: bool = False) -> str:
    """`invoke matrix`'s output (``fmt`` is one of :data:`MATRIX_FORMATS`). ``github``: the
    workflow's job matrix, one line, of the vendors' default cells (what ``invoke build``
    picks) or with ``everything`` of every cell; the table and JSON list every cell, with its
    ``default`` column, so ``everything`` is refused there."""
    if fmt == "github":
        _, cells = cells_for(matrix_path, vendors, everything=everything)
        return github.matrix_json([github.job_for(cell) for cell in cells])
    if everything:
        raise InputError(f"--all applies only with --format github; --format {fmt} lists "
                         "every cell already (its 'default' column marks the default ones)")
    return format_rows(matrix_rows(matrix_path, vendors), fmt)


def format_rows(rows: list[dict[str, Any]], fmt: str) -> str:
    """`invoke matrix`'s output: a table, or JSON (``fmt`` is one of :data:`FORMATS`)."""
    if fmt == "json":
        return json.dumps(rows, indent=2)
    headers = ("id", "vendor", "torch", "python", "toolkit_version", "os", "default")
    table = [[str(r.get(h) if r.get(h) is not None else "-") for h in headers] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h)
              for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in table]
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


def format_hosts(rows: list[dict[str, Any]], fmt: str) -> str:
    """`invoke hosts`'s output: a line per vendor, or JSON (``fmt`` is one of :data:`FORMATS`)."""
    if fmt == "json":
        return json.dumps(rows, indent=2)
    lines = []
    for row in rows:
        state = "available" if row["supported"] else "unsupported here"
        driver = f" (driver {row['driver']})" if row["driver"] else ""
        reasons = "" if row["supported"] else ": " + "; ".join(row["reasons"])
        lines.append(f"{row['vendor']:<10} {state}{driver}{reasons}")
    return "\n".join(lines)


def verify_here(matrix_path: str, vendors: list[str] | None, results_dir: Path,
                suite_layers: tuple[str, ...], python: str | None) -> Result:
    """``verify --here``: one vendor's suites against ``python`` (default: this interpreter)."""
    if not vendors or len(vendors) != 1:
        raise InputError("--here needs exactly one --vendor (the vendor whose checks apply)")
    matrix = load_matrix(matrix_path)
    plan(matrix, vendors)
    return inplace.verify_here(matrix, vendors[0], results_dir, layers=suite_layers,
                               python=python or sys.executable)


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
