"""Render: one Dockerfile (plus cell.json) per cell from Jinja2 templates, committed in-tree.

Templates are looked up in the vendor's folder first, then in ``images/templates`` (the shared
stages), so a vendor's ``Dockerfile.j2`` ``{% extends "base.Dockerfile.j2" %}`` and overrides
only the blocks it needs. Output is deterministic: same inputs, same bytes.

The build context of a cell is a fixed set of files (:func:`context_files`); its fingerprint
is the hash of exactly those files, so any change that could shape the image changes it.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from oota import vocab
from oota.config.matrix import Matrix
from oota.config.skips import SKIPS_FILE, load_skips
from oota.config.vendors import Tolerance, VerifySpec
from oota.errors import InputError
from oota.lockfile import lock_path
from oota.plan import Cell

GENERATED_FILES = ("Dockerfile", "cell.json")
VOCAB_FILE = Path(vocab.__file__)
_SKIP_PARTS = {"__pycache__", "build", "dist", ".pytest_cache"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Rendered:
    cell: Cell
    folder: Path                      # images/<vendor>/<cell-id>
    files: dict[str, str]             # file name -> text


def cell_folder(matrix: Matrix, cell: Cell) -> Path:
    return matrix.images_dir / cell.vendor.name / cell.id


def cell_manifest(cell: Cell) -> dict[str, Any]:
    """What the verify suite inside the image expects of itself (written as cell.json).

    ``verify`` is the vendor's ``verify:`` section (dtypes, tolerances, models, extensions,
    toolkit_version; every key, defaults filled in) with each extension's torch requirement
    formatted with the cell; ``skips`` is the vendor's validated ``skips.yaml``
    (oota/config/skips.py), applied in the image.
    """
    v = cell.vendor
    shown = f"{v.folder.parent.name}/{v.folder.name}/{SKIPS_FILE}"
    return {
        "id": cell.id,
        **cell.coordinates(),
        "device": v.device,
        "smoke_imports": list(v.smoke_imports),
        "index_url": cell.index_url,
        "verify": _verify_manifest(cell, v.verify),
        "skips": load_skips(v.folder / SKIPS_FILE, shown).to_json(),
    }


def _verify_manifest(cell: Cell, spec: VerifySpec) -> dict[str, Any]:
    """The suite's ``verify`` object (read by verify/oota_suite.py and the layers' tests)."""
    def tolerances(table: Mapping[str, Tolerance]) -> dict[str, dict[str, float]]:
        return {dtype: {"rtol": t.rtol, "atol": t.atol} for dtype, t in table.items()}

    return {
        "dtypes": list(spec.dtypes),
        "tolerances": tolerances(spec.tolerances),
        "models": list(spec.models),
        "model_dtype": spec.model_dtype,
        "model_tolerances": tolerances(spec.model_tolerances),
        "extensions": [{"import": ext.import_name, "distribution": ext.distribution,
                        "torch": cell.format(ext.torch, "verify.extensions[].torch")}
                       for ext in spec.extensions],
        "toolkit_version": spec.toolkit_version,
    }


def _environment(matrix: Matrix, cell: Cell) -> jinja2.Environment:
    return _environment_for((str(cell.vendor.folder), str(matrix.root / "images" / "templates")))


@functools.lru_cache(maxsize=64)
def _environment_for(search: tuple[str, ...]) -> jinja2.Environment:
    """One environment per vendor, so each template is compiled once, not once per cell
    (compiling was ~90% of `generate`); Jinja reloads a template whose file changed."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(list(search)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # Dockerfiles, not HTML
    )


def _format_all(cell: Cell, items: tuple[str, ...], what: str) -> list[str]:
    return [cell.format(item, what) for item in items]


def render_cell(matrix: Matrix, cell: Cell) -> Rendered:
    coords = cell.format_vars()
    vendor = cell.vendor
    rel_vendor = vendor.folder.relative_to(matrix.root) if vendor.folder.is_relative_to(
        matrix.root) else vendor.folder
    context = {
        "cell": cell,
        "cell_id": cell.id,
        "coords": coords,
        "vendor": vendor,
        "os": cell.os,
        "python": str(cell.python),
        "requirements": _format_all(cell, vendor.requirements, "requirements"),
        "test_requirements": _format_all(cell, vendor.test_requirements, "test_requirements"),
        "regenerate": f"invoke generate --vendor={vendor.name}",
        "lock": lock_path(matrix, cell).is_file(),
        "sources": f"{matrix.file.name} and {rel_vendor}/",
    }
    env = _environment(matrix, cell)
    try:
        dockerfile = env.get_template("Dockerfile.j2").render(**context)
    except jinja2.TemplateError as exc:
        where = getattr(exc, "filename", None) or vendor.template
        line = getattr(exc, "lineno", None)
        raise InputError(f"{where}:{line or 1}: template error: {exc}") from exc
    manifest = json.dumps(cell_manifest(cell), indent=2, sort_keys=True) + "\n"
    return Rendered(cell=cell, folder=cell_folder(matrix, cell),
                    files={"Dockerfile": dockerfile, "cell.json": manifest})


def context_files(matrix: Matrix, rendered: Rendered) -> dict[str, bytes | Path]:
    """Archive name -> content (bytes) or source file, for everything the build sees
    except the host's wheelhouse (host-specific, recorded separately)."""
    files: dict[str, bytes | Path] = {name: text.encode() for name, text in rendered.files.items()}
    for root_name, folder in (("verify", matrix.root / "verify"),
                              ("vendor", rendered.cell.vendor.folder)):
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if path.is_file() and not (_SKIP_PARTS & set(rel.parts)) \
                    and not rel.name.endswith((".pyc", ".so", ".egg-info")) \
                    and not any(p.endswith(".egg-info") for p in rel.parts):
                files[f"{root_name}/{rel.as_posix()}"] = path
    # The vocabulary the suite shares with oota (statuses, layers), beside oota-verify.
    files["verify/oota_vocab.py"] = VOCAB_FILE
    lock = lock_path(matrix, rendered.cell)
    if lock.is_file():
        files["lock.txt"] = lock
    return files


def fingerprint(files: dict[str, bytes | Path]) -> str:
    """sha256 over (name, content hash, executable bit) of every context file, in name order."""
    digest = hashlib.sha256()
    for name in sorted(files):
        source = files[name]
        data = source if isinstance(source, bytes) else source.read_bytes()
        executable = (not isinstance(source, bytes)) and bool(source.stat().st_mode & 0o111)
        digest.update(f"{name}\0{hashlib.sha256(data).hexdigest()}\0{int(executable)}\n".encode())
    return "sha256:" + digest.hexdigest()


def render_all(matrix: Matrix, cells: list[Cell]) -> list[Rendered]:
    return [render_cell(matrix, cell) for cell in cells]


@dataclass(frozen=True, kw_only=True, slots=True)
class Drift:
    changed: list[Path]
    stale_diff: str

    @property
    def clean(self) -> bool:
        return not self.changed


def write_all(rendered: list[Rendered]) -> list[Path]:
    """Write every rendered file whose content changed; return those paths."""
    written = []
    for item in rendered:
        item.folder.mkdir(parents=True, exist_ok=True)
        for name, text in item.files.items():
            path = item.folder / name
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                tmp = path.with_suffix(path.suffix + ".tmp")
                tmp.write_text(text, encoding="utf-8")
                tmp.replace(path)
                written.append(path)
    return written


def orphans(matrix: Matrix, rendered: list[Rendered], vendors: list[str]) -> list[Path]:
    """Generated cell folders of the given vendors that no cell renders any more."""
    live = {item.folder for item in rendered}
    found = []
    for vendor in vendors:
        base = matrix.images_dir / vendor
        if base.is_dir():
            found += [p for p in sorted(base.iterdir())
                      if p.is_dir() and (p / "Dockerfile").exists() and p not in live]
    return found


def check(matrix: Matrix, rendered: list[Rendered], vendors: list[str]) -> Drift:
    """Compare rendered output with the files on disk; nothing is written."""
    changed: list[Path] = []
    diff: list[str] = []
    for item in rendered:
        for name, text in item.files.items():
            path = item.folder / name
            old = path.read_text(encoding="utf-8") if path.exists() else ""
            if old != text:
                changed.append(path)
                rel = path.relative_to(matrix.root)
                diff += difflib.unified_diff(old.splitlines(keepends=True),
                                             text.splitlines(keepends=True),
                                             f"a/{rel}", f"b/{rel}")
    for folder in orphans(matrix, rendered, vendors):
        changed.append(folder)
        diff.append(f"stale: {folder.relative_to(matrix.root)}/ belongs to no cell any more\n")
    return Drift(changed=changed, stale_diff="".join(diff))
