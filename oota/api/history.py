"""The history wired into the tasks: where a run is appended, the HUD's source, and the
``history`` task's import, query and digest."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from oota.api.flags import HISTORY_FORMATS, choice
from oota.errors import (
    InputError,
)
from oota.history import changes as history_changes
from oota.history.location import Location, locate
from oota.history.policy import policy_at
from oota.history.records import Origin, group_by_run, run_record
from oota.history.timeline import Timeline
from oota.project import command_name
from oota.report import hud
from oota.report.hud import HudInput
from oota.results.model import Result
from oota.results.store import load_all

# The store (and SQLAlchemy, about a quarter of a second of a command's start) is imported
# where a history is read or written: a run with --no-history, and any task that touches no
# history, does not pay it.
if TYPE_CHECKING:
    from oota.history import store as history_store

DEFAULT_SINCE = hud.DEFAULT_SINCE   # the window of `history digest` without --since


@dataclass(frozen=True, kw_only=True, slots=True)
class History:
    """Where a run is appended (``location`` None: ``--no-history``), as what, and the project
    whose git revision it records."""

    location: Location | None
    origin: Origin
    root: Path


def history_location(flag: str | None, *, off: bool = False, root: Path | None = None,
                     env: Mapping[str, str] | None = None) -> Location | None:
    """The store ``--history``/``OOTA_HISTORY`` name (default: history.db in ``root``), or
    None with ``--no-history`` (the request refused both at once). A URL that cannot be a
    store is InputError (exit 2)."""
    if off:
        return None
    return locate(flag, os.environ if env is None else env, root or Path.cwd())


def history_target(flag: str | None, off: bool, origin: Origin, root: Path, *,
                   used: bool = True, env: Mapping[str, str] | None = None) -> History:
    """The flags of a task that appends its run (checked before the run starts). ``used``
    False: this invocation appends nothing (a report without --merge: its build or verify
    added the run already; it still reads the history for its HUD)."""
    location = history_location(flag, off=off, root=root, env=env)
    return History(location=location if used else None, origin=origin, root=root)


def record_history(target: History, results: Sequence[Result]) -> list[str]:
    """Append ``results`` as one run (lines for stderr). A history that cannot be written is a
    warning: the results are on disk already, and the run's exit code is its own."""
    location = target.location
    if location is None or not results:
        return []
    from oota.history import store as history_store

    run = run_record(results, target.origin, git_revision(target.root))
    try:
        done = history_store.append(history_store.open_store(location), run)
    except history_store.HistoryUnavailable as exc:
        return [f"warning: {exc}; the results are in their folder (import them later with "
                f"`{command_name()} history import`)"]
    return [f"history: run {done.run_key} ({target.origin}, {done.added} cell(s) added) in "
            f"{location.shown}"]


def git_revision(root: Path) -> str | None:
    """The commit the project is at (None outside a git checkout, or without git)."""
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], text=True,
                              capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def hud_source(location: Location | None, runs: int, root: Path,
               now: dt.datetime | None = None) -> tuple[HudInput | None, str]:
    """The history the HUD shows, or None and why not (a line for stderr; "" with
    ``--no-history``). A history file that does not exist is not created by reading it. Runs
    the store cannot read are left out, and the line names them."""
    if location is None:
        return None, ""
    from oota.history import store as history_store

    try:
        timeline = _timeline(location)
    except history_store.HistoryUnavailable as exc:
        return None, f"no HUD: {exc}"
    left_out = _left_out(location, timeline.left_out if timeline else ())
    if timeline is None or not timeline.runs:
        return None, (f"no HUD: the history {location.shown} holds no run yet (build, verify "
                      f"or `{command_name()} history import` add runs)"
                      + (f"\n{left_out}" if left_out else ""))
    return HudInput(timeline=timeline, policy=policy_at(root), runs=runs,
                    now=now or dt.datetime.now(dt.timezone.utc)), left_out


def _left_out(location: Location, lines: Sequence[str]) -> str:
    """A warning line per run left out, as one text."""
    return "\n".join(f"warning: history {location.shown}: {line}" for line in lines)


def _timeline(location: Location) -> Timeline | None:
    from oota.history import store as history_store

    file = location.file
    if file is not None and not file.is_file():
        return None
    return history_store.read_timeline(history_store.open_store(location))


@dataclass(frozen=True, kw_only=True, slots=True)
class Shown:
    """What a ``history`` action prints: its text (stdout) and warnings (stderr)."""

    text: str
    warnings: tuple[str, ...] = ()


def history_digest(location: Location | None, *, window: dt.timedelta, root: Path,
                   now: dt.datetime | None = None) -> Shown:
    """``history digest``: the Markdown digest of the last ``window`` (hud.md's text)."""
    from oota.history import store as history_store

    if location is None:
        raise InputError("history digest with --no-history has nothing to read")
    source, why = hud_source(location, hud.DEFAULT_RUNS, root, now)
    if source is None:
        raise history_store.HistoryUnavailable(why.removeprefix("no HUD: "))
    page = hud.build(replace(source, since=window), {})
    return Shown(text=hud.to_markdown(page.digest, page.regressions),
                 warnings=(why,) if why else ())


@dataclass(frozen=True, kw_only=True, slots=True)
class Imported:
    """What ``history import`` did: a line per run appended, and results it could not read."""

    appended: tuple[history_store.Appended, ...]
    problems: tuple[str, ...]


def history_import(location: Location | None, folders: list[str] | None) -> Imported:
    """Load result folders (``results/<cell>/result.json``) into the history, a run per run
    id they carry; results already there are left alone."""
    from oota.history import store as history_store

    if location is None:
        raise InputError("history import with --no-history has nowhere to write")
    if not folders:
        raise InputError("name a results folder to import: --dir results (repeatable)")
    missing = [f for f in folders if not Path(f).is_dir()]
    if missing:
        raise InputError(f"--dir {missing[0]}: no such folder; name a results folder (one "
                         "result.json per cell folder in it)")
    store = history_store.open_store(location)
    appended: list[history_store.Appended] = []
    problems: list[str] = []
    for folder in folders:
        results, bad = load_all(Path(folder))
        problems += bad or ([] if results else [f"{folder}: no */result.json in it"])
        appended += [history_store.append(store, run_record(group, "import", None))
                     for group in group_by_run(results)]
    return Imported(appended=tuple(appended), problems=tuple(problems))


def history_query(location: Location | None, *, vendor: str | None, cell: str | None,
                  test: str | None, fmt: str) -> Shown:
    """Every run where the selection changed outcome, newest first, with what changed in
    its inputs: a table, or JSON (``fmt`` is one of :data:`HISTORY_FORMATS`)."""
    from oota.history import store as history_store

    if location is None:
        raise InputError("history query with --no-history has nothing to read")
    choice("--format", fmt, HISTORY_FORMATS)
    store = history_store.open_store(location)
    points, left_out = history_store.outcomes(store, vendor=vendor, cell=cell, test=test)
    found = history_changes.changes(points)
    warnings = (_left_out(location, left_out),) if left_out else ()
    if fmt == "json":
        return Shown(text=json.dumps([c.to_json() for c in found], indent=2), warnings=warnings)
    return Shown(text=history_changes.table(found), warnings=warnings)
