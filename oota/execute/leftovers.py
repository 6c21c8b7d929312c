"""What a run leaves behind when it is killed, and how the next run finds and removes it.

A run that ends normally, or by SIGINT/SIGTERM (:mod:`oota.execute.interrupts`), removes its
containers and its build context folders itself. SIGKILL (or a power cut) gives it no chance,
so every run first writes who owns it into ``.oota-cache/runs/<run-id>.json`` (host, process id
and that process's start time, which tells a reused pid from the original) and keeps its
context folders under ``.oota-cache/contexts/<run-id>/``. The next run removes what belongs to
runs whose process is gone: their containers and images (by the ``oota.run`` label), their
context folders (which hold the pip configuration, a secret, and the torch wheel) and the
marker, and says so.

What a live run owns is never touched, nor what a run on another host owns (a shared
``DOCKER_HOST`` or checkout): whether that process lives cannot be told from here. Context
folders no marker owns come from an oota older than the markers; they are removed once they
are older than the longest build.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from oota.console import Console
from oota.engine.base import Engine
from oota.execute.interrupts import deferred
from oota.files import SMALL_LIMIT, read_text, write_json
from oota.results.assemble import now

log = logging.getLogger("oota.leftovers")

RUNS = "runs"
CONTEXTS = "contexts"
# A context folder without an owner is from an oota that wrote no markers; one that old is no
# build in progress (builds time out after an hour by default).
UNOWNED_AFTER_S = 6 * 3600


@dataclass(frozen=True, kw_only=True, slots=True)
class Owner:
    """The process that owns a run, as its marker file records it."""

    run_id: str
    host: str
    pid: int
    pid_started: str   # /proc/<pid>/stat start time; '' where there is no /proc

    @classmethod
    def this_process(cls, run_id: str) -> Owner:
        pid = os.getpid()
        return cls(run_id=run_id, host=socket.gethostname(), pid=pid,
                   pid_started=process_start(pid))

    @classmethod
    def read(cls, path: Path) -> Owner | None:
        """The marker's owner; None for a file that is not one (reported, never deleted)."""
        try:
            data = json.loads(read_text(path, SMALL_LIMIT))
            return cls(run_id=str(data["run_id"]), host=str(data["host"]), pid=int(data["pid"]),
                       pid_started=str(data.get("pid_started", "")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.debug("not a run marker: %s: %s", path, exc)
            return None

    def alive(self) -> bool:
        """False only when this host can see that the owning process is gone."""
        if self.host != socket.gethostname():
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # a process of another user has the pid
            pass
        started = process_start(self.pid)
        return not (self.pid_started and started and started != self.pid_started)


@dataclass(frozen=True, kw_only=True, slots=True)
class Removed:
    """What was removed of one dead run."""

    run_id: str
    containers: int = 0
    images: int = 0
    folders: int = 0

    def text(self) -> str:
        parts = [_count(self.containers, "container"), _count(self.images, "image"),
                 _count(self.folders, "context folder")]
        shown = [p for p in parts if p] or ["its marker"]
        joined = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
        return f"removed {joined} left by run {self.run_id} (killed?)"


def _count(n: int, noun: str) -> str:
    return "" if not n else f"{n} {noun}" + ("s" if n != 1 else "")


def process_start(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot, field 22 of /proc/<pid>/stat),
    or '' where that cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return ""
    fields = stat.rpartition(")")[2].split()   # the command name may hold spaces
    return fields[19] if len(fields) > 19 else ""


def context_root(cache: Path, run_id: str) -> Path:
    """The folder a run's build contexts are made in."""
    return cache / CONTEXTS / run_id


def marker_path(cache: Path, run_id: str) -> Path:
    return cache / RUNS / f"{run_id}.json"


def sweep(engine: Engine, cache: Path) -> list[Removed]:
    """Remove what runs whose process is gone left behind (see the module's docstring)."""
    removed: list[Removed] = []
    owned: set[str] = set()
    for marker in sorted((cache / RUNS).glob("*.json")):
        owner = Owner.read(marker)
        if owner is None:
            continue
        owned.add(owner.run_id)
        if not owner.alive():
            removed.append(_remove_run(engine, cache, owner.run_id))
            marker.unlink(missing_ok=True)
    contexts = cache / CONTEXTS
    for folder in sorted(contexts.iterdir()) if contexts.is_dir() else []:
        if folder.name not in owned and _age_s(folder) > UNOWNED_AFTER_S:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(Removed(run_id=folder.name, folders=1))
    return removed


def _remove_run(engine: Engine, cache: Path, run_id: str) -> Removed:
    containers = engine.cleanup(run_id, images=False)
    images = engine.cleanup(run_id, images=True)   # images a dead run labelled (lock builders)
    folder = context_root(cache, run_id)
    folders = int(folder.exists())
    shutil.rmtree(folder, ignore_errors=True)
    return Removed(run_id=run_id, containers=containers, images=images, folders=folders)


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


@contextmanager
def owned_run(engine: Engine, cache: Path, run_id: str, console: Console) -> Iterator[Path]:
    """The body runs as the owner of ``run_id``: leftovers of dead runs are removed first (and
    reported), the marker is written, and whatever ends the body (success, error, SIGINT or
    SIGTERM) the run's containers, its context folders and the marker are removed. Yields the
    folder to make the run's build contexts in."""
    for item in sweep(engine, cache):
        console.warn(item.text())
    marker = marker_path(cache, run_id)
    write_json(marker, {**asdict(Owner.this_process(run_id)), "started_at": now()})
    try:
        yield context_root(cache, run_id)
    finally:
        with deferred():
            _release(engine, cache, run_id, console)


def _release(engine: Engine, cache: Path, run_id: str, console: Console) -> None:
    """A run's own clean-up; when Docker cannot be reached the marker stays, so the next run
    retries, and the run's outcome (or the error that ended it) is what the user sees."""
    shutil.rmtree(context_root(cache, run_id), ignore_errors=True)
    try:
        engine.cleanup(run_id, images=False)
    except Exception as exc:  # noqa: BLE001 - must not replace the run's own outcome
        console.warn(f"could not remove the containers of run {run_id} ({exc}); "
                     "the next run will")
        return
    marker_path(cache, run_id).unlink(missing_ok=True)
