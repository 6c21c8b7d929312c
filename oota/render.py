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
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import jinja2

from oota import vocab
from oota.config.matrix import Matrix
from oota.config.skips import SKIPS_FILE, load_skips
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


def cell_manifest(cell: Cell) -> dict:
    """What the verify suite inside the image expects of itself (written as cell.json).

    ``verify`` is the vendor's ``verify:`` section (dtypes, tolerances, models, extensions,
    toolkit_version) with each extension's torch requirement formatted with the cell;
    ``skips`` is the vendor's validated ``skips.yaml`` (oota/skips.py), applied in the image.
    """
    v = cell.vendor
    verify = dict(v.verify)
    verify["extensions"] = [{**ext, "torch": cell.format(str(ext.get("torch", "")),
                                                         "verify.extensions[].torch")}
                            for ext in verify.get("extensions") or []]
    for key in ("tolerances", "model_tolerances"):  # YAML floats arrive as text (yamlsrc)
        if key in verify:
            verify[key] = {dtype: {k: float(x) for k, x in (tol or {}).items()}
                           for dtype, tol in (verify[key] or {}).items()}
    shown = f"{v.folder.parent.name}/{v.folder.name}/{SKIPS_FILE}"
    return {
        "id": cell.id,
        **cell.coordinates(),
        "device": v.device,
        "smoke_imports": list(v.smoke_imports),
        "index_url": cell.index_url,
        "verify": verify,
        "skips": load_skips(v.folder / SKIPS_FILE, shown).to_json(),
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
    except the host's wheelhouse (host-specific, recorded separately).

    Symbolic links in ``verify/`` and the vendor's folder are followed (a vendor may keep its
    extension's source elsewhere in the project and link it, ``vendors/x/ext -> ../../src/ext``):
    the build gets the files they point to, under the link's name. A link is refused, with an
    InputError naming it, when it points outside both the project and the vendor's folder
    (what the build sees must come from the inputs the fingerprint and the git revision
    describe, never from the rest of the machine), when its target is missing, or when it
    loops back into a folder it is in."""
    files: dict[str, bytes | Path] = {name: text.encode() for name, text in rendered.files.items()}
    vendor = rendered.cell.vendor.folder
    allowed = (matrix.root.resolve(), vendor.resolve())
    for root_name, folder in (("verify", matrix.root / "verify"), ("vendor", vendor)):
        for rel, path in _tree(folder, PurePosixPath(), allowed, matrix.root, (folder.resolve(),)):
            files[f"{root_name}/{rel}"] = path
    # The vocabulary the suite shares with oota (statuses, layers), beside oota-verify.
    files["verify/oota_vocab.py"] = VOCAB_FILE
    lock = lock_path(matrix, rendered.cell)
    if lock.is_file():
        files["lock.txt"] = lock
    return files


def _skipped(rel: PurePosixPath) -> bool:
    """Build outputs and caches: they never shape an image."""
    return bool(_SKIP_PARTS & set(rel.parts)) or rel.name.endswith((".pyc", ".so")) \
        or any(part.endswith(".egg-info") for part in rel.parts)


def _tree(folder: Path, rel: PurePosixPath, allowed: tuple[Path, ...], root: Path,
          ancestors: tuple[Path, ...]) -> list[tuple[str, Path]]:
    """(name relative to the walk's top, path) of every file under ``folder``, in name order,
    following links as :func:`context_files` describes; ``ancestors`` are the resolved folders
    the walk is in (a link back to one of them is a loop)."""
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise InputError(f"{_shown(folder, root)}: cannot be read: {exc.strerror}") from exc
    found: list[tuple[str, Path]] = []
    for path in entries:
        name = rel / path.name
        if _skipped(name):
            continue
        real = _link_target(path, allowed, root) if path.is_symlink() else path.resolve()
        if path.is_dir():
            if real in ancestors:
                raise InputError(f"{_shown(path, root)}: the symbolic link loops back to "
                                 f"{_shown(real, root)}; a build context cannot hold a loop")
            found += _tree(path, name, allowed, root, (*ancestors, real))
        elif path.is_file():
            found.append((name.as_posix(), path))
    return found


def _link_target(link: Path, allowed: tuple[Path, ...], root: Path) -> Path:
    """Where ``link`` points, when the build may follow it (see :func:`context_files`)."""
    target = link.resolve()
    if not target.exists():
        raise InputError(f"{_shown(link, root)}: the symbolic link points to {target}, which "
                         "does not exist")
    if not any(target.is_relative_to(top) for top in allowed):
        raise InputError(f"{_shown(link, root)}: the symbolic link points to {target}, outside "
                         "the project and the vendor's folder; copy (or move) that source into "
                         "the vendor's folder, or link to a place inside the project")
    return target


def _shown(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


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
    changed, diff = [], []
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
