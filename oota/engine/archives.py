"""Tar archives to and from containers: files put into an image, a file read out of one (bounded),
and a container's results extracted without anything landing outside their folder."""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from oota.errors import StepFailed

# A file read out of an image (its sealed results): an image may hold anything there.
READ_FILE_LIMIT = 64 << 20
# A container's results folder as a whole (results, logs, the ops layer's recording), and how
# many files and folders it may hold: a pulled image's suite may write anything there.
RESULTS_LIMIT = 2 << 30
RESULTS_MEMBERS = 100_000


def bounded(stream: Iterable[bytes], limit: int) -> bytes:
    """The chunks of ``stream`` joined, refused (StepFailed) past ``limit`` bytes."""
    chunks, size = [], 0
    for chunk in stream:
        size += len(chunk)
        if size > limit + 4096:  # the tar header and padding around the file
            raise StepFailed(f"the file is larger than {limit >> 20} MiB; not read")
        chunks.append(chunk)
    return b"".join(chunks)


def extract_safely(tar: tarfile.TarFile, members: list[tarfile.TarInfo], dest: Path) -> None:
    """Extract ``members`` (regular files and folders) of ``tar`` into ``dest``; nothing may land
    outside it. Python's ``data`` filter does it where this Python has one (3.12, 3.11.4 and
    later); stock Debian 12's 3.11.2 has none (``extractall(filter=...)`` is a TypeError there),
    so the same rules are applied by hand: an absolute name is taken as relative to ``dest``,
    there is no way out of it (also not through a link already in it), only files and folders,
    no set-id bits, nothing writable by others. A member that breaks them is a StepFailed
    naming it."""
    if hasattr(tarfile, "data_filter"):
        try:
            tar.extractall(dest, members=members, filter="data")
        except tarfile.TarError as exc:
            raise StepFailed(f"refused to extract a container's results into {dest}: "
                             f"{exc}") from exc
        return
    root = dest.resolve()
    for member in members:
        target = (root / member.name.lstrip("/")).resolve()
        if not target.is_relative_to(root) or not (member.isfile() or member.isdir()):
            raise StepFailed(f"refused to extract a container's results into {dest}: "
                             f"{member.name!r} is not a file or folder inside it")
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        source = tar.extractfile(member)
        assert source is not None  # a regular file always has content
        with source, target.open("wb") as sink:
            shutil.copyfileobj(source, sink)
        target.chmod((member.mode & 0o755) | 0o600)


def extract_results(stream: Iterable[bytes], dest: Path) -> None:
    """A container's results folder (``stream``: the Engine's tar of it) extracted into
    ``dest``, its top folder stripped: files and folders only, nothing outside ``dest``
    (:func:`extract_safely`), spooled to disk (not memory) and refused past
    :data:`RESULTS_LIMIT` bytes or :data:`RESULTS_MEMBERS` entries (StepFailed)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=dest.parent) as spool:
        size = 0
        for chunk in stream:
            size += len(chunk)
            if size > RESULTS_LIMIT:
                raise StepFailed(f"the container's results are larger than "
                                 f"{RESULTS_LIMIT >> 30} GiB; not copied into {dest}")
            spool.write(chunk)
        spool.seek(0)
        with tarfile.open(fileobj=spool) as tar:
            members = []
            for count, member in enumerate(tar, start=1):
                if count > RESULTS_MEMBERS:
                    raise StepFailed(f"the container's results hold more than "
                                     f"{RESULTS_MEMBERS} files; not copied into {dest}")
                _, _, rest = member.name.partition("/")  # strip the archive's top folder
                if rest and (member.isfile() or member.isdir()):
                    member.name = rest
                    members.append(member)
            extract_safely(tar, members, dest)


def tar_of(files: dict[str, bytes]) -> bytes:
    """A tar archive of absolute paths, owned by root and readable by everyone."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
