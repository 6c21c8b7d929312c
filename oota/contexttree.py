"""The files of a folder as a cell's build context holds them (oota.render.context_files): the
walk that skips build outputs and follows symbolic links only where the build may.

Symbolic links in ``verify/`` and the vendor's folder are followed (a vendor may keep its
extension's source elsewhere in the project and link it, ``vendors/x/ext -> ../../src/ext``):
the build gets the files they point to, under the link's name. A link is refused, with an
InputError naming it, when it points outside every allowed folder (what the build sees must
come from the inputs the fingerprint and the git revision describe, never from the rest of the
machine), when its target is missing, or when it loops back into a folder it is in.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from oota.errors import InputError

_SKIP_PARTS = {"__pycache__", "build", "dist", ".pytest_cache"}


def relative(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` when it lies inside, else as it is."""
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def walk(folder: Path, allowed: tuple[Path, ...], root: Path) -> list[tuple[str, Path]]:
    """(name relative to ``folder``, path) of every file under it, in name order, links
    followed where they stay inside ``allowed``; ``root`` is the project messages are
    relative to."""
    return _tree(folder, PurePosixPath(), allowed, root, (folder.resolve(),))


def _skipped(rel: PurePosixPath) -> bool:
    """Build outputs and caches: they never shape an image."""
    return bool(_SKIP_PARTS & set(rel.parts)) or rel.name.endswith((".pyc", ".so")) \
        or any(part.endswith(".egg-info") for part in rel.parts)


def _tree(folder: Path, rel: PurePosixPath, allowed: tuple[Path, ...], root: Path,
          ancestors: tuple[Path, ...]) -> list[tuple[str, Path]]:
    """(name relative to the walk's top, path) of every file under ``folder``, in name order,
    following links as :func:`walk` describes; ``ancestors`` are the resolved folders
    the walk is in (a link back to one of them is a loop)."""
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise InputError(f"{relative(folder, root)}: cannot be read: {exc.strerror}") from exc
    found: list[tuple[str, Path]] = []
    for path in entries:
        name = rel / path.name
        if _skipped(name):
            continue
        try:
            real = _link_target(path, allowed, root) if path.is_symlink() else path.resolve()
        except (OSError, RuntimeError):  # RuntimeError: a link loop (Python 3.11)
            raise InputError(f"{relative(path, root)}: the symbolic link loops (it points, through "
                             "other links, back to itself); remove it") from None
        if path.is_dir():
            if real in ancestors:
                raise InputError(f"{relative(path, root)}: the symbolic link loops back to "
                                 f"{relative(real, root)}; a build context cannot hold a loop")
            found += _tree(path, name, allowed, root, (*ancestors, real))
        elif path.is_file():
            found.append((name.as_posix(), path))
    return found


def _link_target(link: Path, allowed: tuple[Path, ...], root: Path) -> Path:
    """Where ``link`` points, when the build may follow it (see :func:`context_files`)."""
    target = link.resolve()
    if not target.exists():
        raise InputError(f"{relative(link, root)}: the symbolic link points to {target}, which "
                         "does not exist")
    if not any(target.is_relative_to(top) for top in allowed):
        raise InputError(f"{relative(link, root)}: the symbolic link points to {target}, outside "
                         "the project and the vendor's folder; copy (or move) that source into "
                         "the vendor's folder, or link to a place inside the project")
    return target
