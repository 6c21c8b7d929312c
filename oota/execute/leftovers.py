"""What a run leaves behind when it is killed, and how the next run finds and removes it.

A run that ends normally, or by SIGINT/SIGTERM (:mod:`oota.execute.interrupts`), removes its
containers and its build context folders itself. SIGKILL (or a power cut) gives it no chance,
and neither does an Engine that stopped answering while the run used it. So every run first
writes, for each Engine it uses, who owns it into ``.oota-cache/runs/<run-id>@<engine>.json``
(host, process id and that process's start time, which tells a reused pid from the original;
the Engine's identity, name and endpoint) and keeps its context folders under
``.oota-cache/contexts/<run-id>/``. Each Engine's marker is removed once the run's containers
on that Engine are gone: at the run's end, or, when the Engine did not answer then (a killed
daemon, a host cut off), by the next run that reaches that Engine. A run removes, on each of
its Engines, what runs whose process is gone left there: their containers (running ones too:
a daemon killed mid-verify leaves its verify container running; it is stopped, then removed)
and images (by the labels ``oota.run`` and ``oota.image-run``), their context folders (which
hold the pip configuration, a secret, and the torch wheel), and the marker, and says so. A dead
run's duty towards an Engine this run does not use stays, and is listed.

What a live run owns is never touched, nor what a run on another host owns (a shared
``DOCKER_HOST`` or checkout): whether that process lives cannot be told from here. Context
folders no marker owns come from an oota older than the markers; they are removed once they
are older than the longest build. A marker without an Engine (an older oota's) is discharged
on whichever Engine the next run uses.
"""

from __future__ import annotations

import json
import logging
import os
import re
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
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True, kw_only=True, slots=True)
class Owner:
    """The process that owns a run, as its marker file records it."""

    run_id: str
    host: str
    pid: int
    pid_started: str   # /proc/<pid>/stat start time; '' where there is no /proc
    engine_key: str = ""   # the Engine whose containers it is about ('' in older markers)
    engine: str = ""       # its name, for messages

    @classmethod
    def this_process(cls, run_id: str, engine_key: str = "", engine: str = "") -> Owner:
        pid = os.getpid()
        return cls(run_id=run_id, host=socket.gethostname(), pid=pid,
                   pid_started=process_start(pid), engine_key=engine_key, engine=engine)

    @classmethod
    def read(cls, path: Path) -> Owner | None:
        """The marker's owner; None for a file that is not one (reported, never deleted)."""
        try:
            data = json.loads(read_text(path, SMALL_LIMIT))
            return cls(run_id=str(data["run_id"]), host=str(data["host"]), pid=int(data["pid"]),
                       pid_started=str(data.get("pid_started", "")),
                       engine_key=str(data.get("engine_key", "")),
                       engine=str(data.get("engine", "")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.debug("not a run marker: %s: %s", path, exc)
            return None

    def on(self, key: str) -> bool:
        """Is this duty towards the Engine ``key`` (an older marker's is towards any)?"""
        return not self.engine_key or self.engine_key == key

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
    engine: str = ""

    def text(self) -> str:
        parts = [_count(self.containers, "container"), _count(self.images, "image"),
                 _count(self.folders, "context folder")]
        shown = [p for p in parts if p] or ["its marker"]
        joined = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
        where = f" on host {self.engine}" if self.engine and self.containers + self.images \
            else ""
        return f"removed {joined} left by run {self.run_id}{where} (killed?)"


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


def marker_path(cache: Path, run_id: str, key: str = "") -> Path:
    """The marker of ``run_id``'s duty towards the Engine ``key`` ('': an older oota's, for
    the whole run)."""
    return cache / RUNS / (f"{run_id}@{key}.json" if key else f"{run_id}.json")


def engine_key(engine: Engine) -> str:
    """The Engine's identity as a file name: its ``engine_id`` (Docker's ID and data root),
    else its name (an engine that gives no ID)."""
    try:
        found = str(engine.facts().get("engine_id") or "")
    except Exception as exc:  # noqa: BLE001 - a silent engine is known by its name then
        log.debug("no engine id for %s: %s", engine.endpoint.name, exc)
        found = ""
    return found or _KEY_UNSAFE.sub("_", engine.endpoint.name) or "default"


def sweep(engine: Engine, cache: Path, key: str = "") -> list[Removed]:
    """Remove what runs whose process is gone left behind on the Engine ``key`` (see the
    module's docstring)."""
    removed: list[Removed] = []
    owned: set[str] = set()
    for marker, owner in _markers(cache):
        owned.add(owner.run_id)
        if owner.on(key or owner.engine_key) and not owner.alive():
            removed.append(_remove_run(engine, cache, owner))
            marker.unlink(missing_ok=True)
    contexts = cache / CONTEXTS
    for folder in sorted(contexts.iterdir()) if contexts.is_dir() else []:
        if folder.name not in owned and _age_s(folder) > UNOWNED_AFTER_S:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(Removed(run_id=folder.name, folders=1))
    return removed


def waiting(cache: Path, keys: set[str]) -> list[str]:
    """'run R on host NAME' for every dead run's duty towards an Engine not among ``keys``:
    what it left there is removed when a run reaches that Engine again."""
    return [f"run {o.run_id} on host {o.engine or o.engine_key}" for _, o in _markers(cache)
            if o.engine_key and o.engine_key not in keys and not o.alive()]


def _markers(cache: Path) -> list[tuple[Path, Owner]]:
    found = ((m, Owner.read(m)) for m in sorted((cache / RUNS).glob("*.json")))
    return [(m, o) for m, o in found if o is not None]


def _remove_run(engine: Engine, cache: Path, owner: Owner) -> Removed:
    run_id = owner.run_id
    containers = engine.cleanup(run_id, images=False)
    images = engine.cleanup(run_id, images=True)   # images a dead run labelled (lock builders)
    folder = context_root(cache, run_id)
    folders = int(folder.exists())
    shutil.rmtree(folder, ignore_errors=True)
    return Removed(run_id=run_id, containers=containers, images=images, folders=folders,
                   engine=owner.engine or engine.endpoint.name)


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


@contextmanager
def owned_run(engine: Engine, cache: Path, run_id: str, console: Console, *,
              key: str = "") -> Iterator[Path]:
    """The body runs as the owner of ``run_id`` on ``engine`` (``key``: its identity, else
    :func:`engine_key`): leftovers of dead runs on that Engine are removed first (and
    reported), this run's marker for it is written, and whatever ends the body (success,
    error, SIGINT or SIGTERM) the run's containers there, its context folders and the marker
    are removed. Yields the folder to make the run's build contexts in."""
    key = key or engine_key(engine)
    for item in sweep(engine, cache, key):
        console.warn(item.text())
    marker = marker_path(cache, run_id, key)
    owner = Owner.this_process(run_id, key, engine.endpoint.name)
    write_json(marker, {**asdict(owner), "endpoint": engine.endpoint.where(),
                        "started_at": now()})
    try:
        yield context_root(cache, run_id)
    finally:
        with deferred():
            _release(engine, cache, marker, run_id, console)


def _release(engine: Engine, cache: Path, marker: Path, run_id: str, console: Console) -> None:
    """A run's own clean-up on one Engine; when that Engine cannot be reached its marker
    stays, so the next run that reaches it does the rest, and the run's outcome (or the error
    that ended it) is what the user sees."""
    shutil.rmtree(context_root(cache, run_id), ignore_errors=True)
    try:
        if not engine.alive():  # asked with a short deadline: a lost host is not waited for
            raise ConnectionError("it does not answer")
        engine.cleanup(run_id, images=False)
    except Exception as exc:  # noqa: BLE001 - must not replace the run's own outcome
        name = engine.endpoint.name
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        console.warn(f"could not remove the containers of run {run_id} on host {name} "
                     f"({why}); the next run that reaches {name} will")
        return
    marker.unlink(missing_ok=True)
