"""Reading and writing files safely.

Writes: every write goes to a temporary file in the same folder, then ``os.replace`` swaps it
in. A crash or Ctrl-C leaves the old file or the new one, never a torn one. The one place oota
writes its output files.

Reads of what a user or another host hands oota (data files, results, keys, configuration) go
through :func:`read_bytes`: regular files only (a FIFO would block forever, ``/dev/zero`` would
fill memory), and never more than a limit of their kind. A file past it is :class:`TooLarge`,
anything else :class:`NotARegularFile`; both are ``OSError``, so a caller that reports a
file it cannot read reports these too, with their reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from oota.errors import EnvironmentProblem

MIB = 1 << 20
# A data file (matrix.yaml, vendor.yaml, skips.yaml, hosts.yaml, a lock, history-policy.yaml):
# the largest real one is a lock of about 100 KiB.
DATA_LIMIT = 4 * MIB
# A result.json (or the suite's tests.json): about 2 MiB with every operator of the ops layer.
RESULT_LIMIT = 64 * MIB
# A report's results.json (read back before it is replaced): many cells, several copies each.
REPORT_LIMIT = 256 * MIB
# A small secret or configuration file: a key, --registry-auth, docker's config.json, an event.
SMALL_LIMIT = 1 * MIB


class TooLarge(OSError):
    """A file larger than oota reads of its kind."""


class NotARegularFile(OSError):
    """A FIFO, a device, a socket: oota reads regular files only."""


def shown_size(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit >= MIB and limit % MIB == 0 else f"{limit} bytes"


def read_bytes(path: Path, limit: int) -> bytes:
    """The content of the regular file ``path``, refused (:class:`TooLarge`) past ``limit``
    bytes, or when it is not a regular file (:class:`NotARegularFile`); other OSErrors as the
    system raises them (missing, a folder, no permission)."""
    # O_NONBLOCK: opening a FIFO must not wait for a writer; it changes nothing for a file.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise NotARegularFile(0, f"not a regular file (a {_kind(mode)}); oota reads "
                                  "regular files only", str(path))
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise TooLarge(0, f"larger than {shown_size(limit)}, the most oota reads of such a "
                       "file", str(path))
    return b"".join(chunks)


def read_text(path: Path, limit: int) -> str:
    """:func:`read_bytes` decoded as UTF-8 (UnicodeDecodeError, a ValueError, otherwise)."""
    return read_bytes(path, limit).decode("utf-8")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def link_problem(path: Path, root: Path) -> str:
    """Why oota may not write at ``path`` ('' when it may): a part of it inside the project
    ``root`` is a symbolic link that points outside the project, or nowhere (a link checked
    into a repository, ``reports -> ~/.ssh``, would take oota's writes there; a dangling one
    would create its target). A path outside ``root`` is the user's own and is not looked at;
    links that stay inside the project are followed as usual."""
    top = root.resolve()
    full = Path(os.path.normpath(path if path.is_absolute() else Path.cwd() / path))
    if not full.is_relative_to(top):
        return ""
    current = top
    for part in full.relative_to(top).parts:
        current = current / part
        if current.is_symlink():
            target = os.readlink(current)
            resolved = current.resolve()
            if not resolved.exists():
                return f"{current} is a symbolic link to {target}, which does not exist"
            if not resolved.is_relative_to(top):
                return f"{current} is a symbolic link to {target}, outside the project ({top})"
        elif not current.exists():
            break
    return ""


class Busy(EnvironmentProblem):
    """Another process holds the lock of what this one is to write (exit 3)."""


@contextlib.contextmanager
def exclusive(lock: Path, what: str, wait_s: float) -> Iterator[None]:
    """Hold ``lock`` (an advisory ``flock`` on that file, created beside what it guards)
    while the body writes ``what``; another process holding it is waited for up to
    ``wait_s`` seconds, then :class:`Busy` names it. The system drops a lock whose process
    is gone (killed too), so what a lock holder finds left beside ``what`` is a dead
    writer's, and a live writer's work is never taken for leftovers."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
                    raise Busy(f"{what} is being written by another oota (pid {holder}); "
                               f"waited {wait_s:g} s: run again when it has finished, or "
                               "write elsewhere") from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_atomic(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; reports are served by static web servers
        os.replace(tmp, path)
    except OSError as exc:  # a full disk names no file: say which one was being written
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def json_bytes(data: Any) -> bytes:
    """``data`` as oota writes a JSON file: sorted keys, indented, UTF-8, a final newline."""
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json_bytes(data))
