"""The lock-file format: ``locks/<vendor>/<cell-id>.txt``, one per cell, made by pip-compile.

Pure: no Docker, no network. :mod:`oota.execute.lock` drives pip-compile inside the cell's
builder stage and writes what it resolved through :func:`write_lock`.

The lock's input is the vendor's ``requirements`` + ``test_requirements`` formatted for the
cell. Its first lines record a hash of those inputs (plus the cell's Python and OS), so
:func:`lock_status` can say ``fresh``, ``stale`` (the inputs changed) or ``missing``. A
channel's cell (``torch: nightly``) is ``unlocked``: its torch is whatever the channel holds on
the day it is built, so there is nothing to pin.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from oota.config.matrix import Matrix
from oota.errors import InputError
from oota.files import DATA_LIMIT, read_text, write_atomic
from oota.plan import Cell
from oota.project import command_name

LOCKS_DIR = "locks"
INPUTS_LINE = "# oota-lock-inputs: "
Status = Literal["fresh", "stale", "missing", "unlocked"]
CHANNEL_NOT_LOCKED = ("a channel's cell is never locked: its torch is resolved from the "
                      "channel's index when it is built")


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
    """The inputs hash a lock file records; a lock that cannot be read is an InputError
    (it was edited or damaged by hand: oota only ever writes pip-compile's UTF-8 output)."""
    if not path.exists() and not path.is_symlink():
        return None
    fix = f"regenerate it with `{command_name()} lock` (or delete it)"
    shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    try:
        text = read_text(path, DATA_LIMIT)
    except OSError as exc:
        raise InputError(f"{shown}: cannot read the lock file ({exc.strerror or exc}); {fix}"
                         ) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{shown}: not UTF-8 text ({exc.reason} at byte {exc.start}), so not "
                         f"a lock oota wrote; {fix}") from None
    for line in text.splitlines()[:10]:
        if line.startswith(INPUTS_LINE):
            return line[len(INPUTS_LINE):].strip()
    return None


def lock_status(matrix: Matrix, cell: Cell) -> Status:
    if cell.channel is not None:
        return "unlocked"
    path = lock_path(matrix, cell)
    if not path.exists() and not path.is_symlink():  # a link to a device is not "missing"
        return "missing"
    return "fresh" if recorded_digest(path) == inputs_digest(cell) else "stale"


def header(cell: Cell) -> str:
    return "\n".join([
        f"# oota lock for cell {cell.id}: CPython {cell.python} on {cell.os.key} "
        f"({cell.base_image}), resolved inside the cell's builder stage.",
        f"{INPUTS_LINE}{inputs_digest(cell)}",
        "# inputs: " + "; ".join(cell_requirements(cell)),
        f"# regenerate: {command_name(cell.vendor.folder.parents[1])} lock "
        f"--vendor={cell.vendor.name} --cell={cell.id}",
        "#",
    ]) + "\n"


def write_lock(path: Path, text: str) -> bool:
    """Write atomically; False when the file already holds exactly ``text``."""
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
    except OSError:  # missing or unreadable: the write below replaces it or says why not
        pass
    write_atomic(path, data)
    return True


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


@dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    """One pin of a lock: ``name==version``, the sha256 hashes pip accepts for it, and which
    packages of the lock need it (pip-compile's ``# via`` lines; ``-r FILE`` is the input)."""

    name: str                 # canonical: lower case, '-'
    version: str
    hashes: tuple[str, ...]
    via: tuple[str, ...] = ()


_VIA = re.compile(r"^#\s+via(?:\s+(?P<one>\S.*))?$")
_VIA_MORE = re.compile(r"^#\s{2,}(?P<name>\S.*)$")


def entries(text: str) -> list[Entry]:
    """Every pin of a pip-compile ``--generate-hashes`` file, with its hashes and ``via``."""
    found: list[Entry] = []
    in_via = False
    for raw in text.splitlines():
        line = raw.strip()
        match = _PIN.match(line)
        if match:
            found.append(Entry(name=canonicalize_name(match.group(1)), version=match.group(2),
                               hashes=()))
            in_via = False
        elif found and "--hash=sha256:" in line:
            last = found[-1]
            more = tuple(re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
            found[-1] = Entry(name=last.name, version=last.version, hashes=last.hashes + more,
                              via=last.via)
        elif found and (via := _VIA.match(line)):
            in_via = True
            _add_via(found, via.group("one"))
        elif found and in_via and (more_via := _VIA_MORE.match(line)):
            _add_via(found, more_via.group("name"))
        else:
            in_via = False
    return found


def _add_via(found: list[Entry], name: str | None) -> None:
    if not name:
        return
    last = found[-1]
    parent = name if name.startswith("-r ") else canonicalize_name(name.split()[0])
    found[-1] = Entry(name=last.name, version=last.version, hashes=last.hashes,
                      via=last.via + (parent,))


def closure(text: str, requirements: Iterable[str]) -> tuple[Entry, ...]:
    """The pins of ``requirements`` (PEP 508 texts, e.g. the vendor's own) and of everything
    they need, in the lock's order: what installs them with ``--require-hashes``, without the
    packages only another requirement (the test suite's) brought in."""
    roots = set()
    for text_ in requirements:
        try:
            roots.add(canonicalize_name(Requirement(text_).name))
        except InvalidRequirement:
            continue
    pinned = entries(text)
    wanted = {e.name for e in pinned if e.name in roots}
    grew = True
    while grew:
        more = {e.name for e in pinned if e.name not in wanted and wanted.intersection(e.via)}
        wanted |= more
        grew = bool(more)
    return tuple(e for e in pinned if e.name in wanted)
