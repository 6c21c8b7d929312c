"""The fleet: which engine runs which cell, how many at once, and what a lost host costs.

A run has one or more *stations*: a Docker Engine, the vendors whose cells it takes, and how
many cells it runs at once. Without ``hosts.yaml`` there is one, the local engine, taking every
cell (``--jobs N`` at once); with it, one per host of the file. Each station's workers take the
next cell it can run, in matrix order, so a vendor's cells spread over the hosts that carry its
hardware and a host with more ``jobs`` takes more of them.

Per station and once per run: its facts, each base image it builds on (only when a cell there
is really built), and each vendor's host check, which runs on that host
(:mod:`oota.execute.hosts`).

A host that stops answering (its engine does not answer a ping after a stage failed) is out of
the run: the cells it was running end ``error`` saying so and are retried once on another host
of their vendor when there is one (the result says it was retried, and why); cells no live host
can take end ``error`` too. No other cell's result is touched. :func:`lost_hosts` tells the
caller, for the exit code.

SIGINT/SIGTERM stop the run: with one worker the running cell is interrupted where it is (as
ever); with several, every engine's docker processes and the run's containers are stopped, each
running cell's result says ``interrupted``, and no further cell starts.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

from oota.config.matrix import Matrix
from oota.console import Console
from oota.engine.base import Engine
from oota.errors import EnvironmentFault, StepFailed
from oota.execute import enginenames
from oota.execute.bases import Base, ensure_base, foreign_platform
from oota.execute.build import BuildOptions, CellRun
from oota.execute.hostinfo import host_facts
from oota.execute.hosts import HostCheck, check_vendor, check_vendor_in, describe
from oota.execute.interrupts import deferred, signal_name
from oota.execute.leftovers import engine_key, owned_run, waiting
from oota.plan import Cell
from oota.render import cell_fingerprint
from oota.results.assemble import assemble, cell_ref, now
from oota.results.jsonfields import ResultFormatError, json_object
from oota.results.model import Host, Result, Stage, VendorCheck
from oota.results.store import load, save
from oota.vocab import BAD


class Station:
    """One engine of a run and what the run has learned about it. Several workers share it,
    so what is prepared once (a base image, a vendor's host check) is prepared under a lock.

    ``name`` '' is the Engine a run reaches without a hosts file: it is called by the name a
    hosts file gave it before, else by its daemon's machine (:mod:`oota.execute.enginenames`,
    remembered in ``cache``); a named station's name is remembered there."""

    def __init__(self, name: str, engine: Engine, *, vendors: frozenset[str] | None = None,
                 jobs: int = 1, cache: Path | None = None) -> None:
        self.facts = host_facts(engine)
        engine_id = str(self.facts.get("engine_id") or "")
        if not name:
            name = enginenames.name_of(self.facts, cache) if cache else \
                str(self.facts.get("daemon_name") or self.facts.get("hostname") or "local")
        elif cache is not None:
            enginenames.remember(cache, engine_id, name)
        self.facts["engine"] = name
        engine.endpoint = replace(engine.endpoint, name=name)
        self.name, self.engine, self.vendors, self.jobs = name, engine, vendors, jobs
        self.engine_id = engine_id
        self.lost = ""   # why the run stopped using this host ('' while it is in use)
        self._bases: dict[str, Base | StepFailed | EnvironmentFault] = {}
        self._checks: dict[str, HostCheck] = {}
        self._lock = threading.RLock()

    def serves(self, vendor: str) -> bool:
        return self.vendors is None or vendor in self.vendors

    def base(self, cell: Cell, console: Console, workdir: Path,
             mirrors: dict[str, str]) -> Base:
        """The cell's base image on this engine, made available once per run; a failure is
        kept and raised for every cell on it (StepFailed, or EnvironmentFault when the
        registry did not answer)."""
        key = f"{cell.base_image} {cell.platform}"
        with self._lock:
            if key not in self._bases:
                self._bases[key] = _prepare_base(self, cell, console, workdir, mirrors)
        base = self._bases[key]
        if isinstance(base, (StepFailed, EnvironmentFault)):
            raise base
        return base

    def check(self, cell: Cell, console: Console, base_for: Callable[[Cell], Base],
              run_id: str) -> HostCheck:
        """The cell's vendor's host check, on this host, once per run."""
        vendor = cell.vendor
        with self._lock:
            if vendor.name not in self._checks:
                check = self._check(cell, base_for, run_id)
                self._checks[vendor.name] = check
                prefix = f"{self.name}: " if self.vendors is not None else ""
                console.line("ok" if check.supported else "skip",
                             f"host {prefix}{describe(check)}")
            return self._checks[vendor.name]

    def _check(self, cell: Cell, base_for: Callable[[Cell], Base], run_id: str) -> HostCheck:
        vendor = cell.vendor
        if self.engine.local or vendor.host.needs_nothing:
            return check_vendor(vendor, self.facts)
        try:
            image = base_for(cell).ref
        except StepFailed as exc:
            return HostCheck(vendor=vendor.name, reasons=(
                f"no image to probe host {self.name} in: {exc}",))
        return check_vendor_in(self.engine, vendor, self.facts, image, run_id)


def _prepare_base(station: Station, cell: Cell, console: Console, workdir: Path,
                  mirrors: dict[str, str]) -> Base | StepFailed | EnvironmentFault:
    t0 = dt.datetime.now()
    where = f" on {station.name}" if station.vendors is not None else ""
    try:
        with console.status(f"base image {cell.base_image}{where}"):
            base = ensure_base(station.engine, cell.base_image, cell.os, workdir, mirrors,
                               platform=foreign_platform(cell, station.engine))
    except (StepFailed, EnvironmentFault) as exc:
        # Said here once, in full; each cell on this base then names it in one line.
        kind = "error" if isinstance(exc, EnvironmentFault) else "fail"
        console.line(kind, f"base {cell.base_image}{where}: {exc}")
        return exc
    took = (dt.datetime.now() - t0).total_seconds()
    note = f", {base.note}" if base.how == "pulled" and base.note else ""
    console.line("ok", f"base {cell.base_image}{where}: {base.ref} ({base.how}{note})", took)
    return base


@dataclass(frozen=True, kw_only=True, slots=True)
class Down:
    """A host of hosts.yaml that could not be used from the start (its engine did not answer)."""

    name: str
    vendors: frozenset[str]
    why: str


@dataclass(slots=True)
class _Task:
    cell: Cell
    index: int
    lost_on: list[str] = field(default_factory=list)   # hosts that stopped answering during it


class _Schedule:
    """The cells still to run, and which station may take which (under one condition)."""

    def __init__(self, cells: list[Cell], stations: list[Station]) -> None:
        self.pending = deque(_Task(cell=c, index=i) for i, c in enumerate(cells))
        self.stations = stations
        self.running = 0
        self.results: dict[int, Result] = {}
        self.stopping = ""
        self.cond = threading.Condition()

    def take(self, station: Station) -> _Task | None:
        """The next cell ``station`` may run, waiting while a running cell may still come
        back to the queue; None when there is nothing left for it."""
        with self.cond:
            while True:
                if self.stopping or station.lost:
                    return None
                for task in self.pending:
                    if station.serves(task.cell.vendor.name) and station.name not in task.lost_on:
                        self.pending.remove(task)
                        self.running += 1
                        return task
                if not self.running:
                    return None
                self.cond.wait()

    def done(self, station: Station, task: _Task, result: Result | None, lost: str) -> None:
        """Record a finished cell. When its host stopped answering, the host leaves the run
        and the cell goes back to the queue once, for another host of its vendor."""
        with self.cond:
            self.running -= 1
            if lost:
                station.lost = station.lost or lost
                task.lost_on.append(station.name)
                if len(task.lost_on) == 1 and self._another_host(task):
                    self.pending.appendleft(task)
                    result = None
            if result is not None:
                self.results[task.index] = result
            self.cond.notify_all()

    def _another_host(self, task: _Task) -> bool:
        return any(s.serves(task.cell.vendor.name) and not s.lost and s.name not in task.lost_on
                   for s in self.stations)

    def stop(self, signal: str) -> None:
        with self.cond:
            self.stopping = signal
            self.cond.notify_all()


class FleetRun:
    """Runs cells on stations; see the module's docstring."""

    def __init__(self, matrix: Matrix, stations: list[Station], console: Console,
                 options: BuildOptions, *, build: bool, down: tuple[Down, ...] = ()) -> None:
        self.matrix, self.stations, self.console = matrix, stations, console
        self.down = down
        self.options, self.build = options, build
        self._workdir = matrix.root / ".oota-cache"
        self._mirrors = dict(options.registry_mirrors)
        self._schedule: _Schedule | None = None
        self._total = 0
        self._announce = len(stations) > 1 or any(s.vendors is not None for s in stations)
        # Cell id -> the earlier result its folder keeps (this run's error was not written).
        self.kept: dict[str, Result] = {}

    def run(self, cells: list[Cell]) -> list[Result]:
        schedule = self._schedule = _Schedule(cells, self.stations)
        self._total = len(cells)
        workers = [s for s in self.stations for _ in range(s.jobs)]
        with _Watch(self.stations, self.console):
            if len(workers) == 1:
                self._work(workers[0], inline=True)
            else:
                with self.console.unfolded():
                    self._in_parallel(workers, schedule)
        for task in schedule.pending:  # no live host of their vendor was left
            schedule.results[task.index] = self._no_host(task)
        return [schedule.results[i] for i in sorted(schedule.results)]

    def _in_parallel(self, workers: list[Station], schedule: _Schedule) -> None:
        # Each thread's end is an Event the main thread waits on, not Thread.join: a signal
        # that interrupts CPython 3.11's join while the thread still runs makes that thread
        # look ended (threading's bpo-45274 clean-up releases the lock the running thread
        # holds), so a join after it returns at once and the run would end before the cell
        # wrote its result. Event.wait is interrupted without such damage.
        ended = [threading.Event() for _ in workers]
        threads = [threading.Thread(target=self._work_then, args=(station, end), daemon=True,
                                    name=f"oota-{station.name}-{n}")
                   for n, (station, end) in enumerate(zip(workers, ended, strict=True))]
        try:
            with deferred():  # a signal is taken once every thread has started
                for thread in threads:
                    thread.start()
            for end in ended:
                while not end.wait(0.2):
                    pass
        except KeyboardInterrupt as exc:
            with deferred():  # the running cells' results are written before the run ends
                schedule.stop(signal_name(exc))
                for station in self.stations:
                    station.engine.abort()
                for end in ended:
                    end.wait()
            raise

    def _work_then(self, station: Station, end: threading.Event) -> None:
        try:
            self._work(station)
        finally:
            end.set()

    def _work(self, station: Station, *, inline: bool = False) -> None:
        assert self._schedule is not None
        while (task := self._schedule.take(station)) is not None:
            result, lost = None, ""
            try:
                result, lost = self._run_one(station, task)
            except KeyboardInterrupt:
                self._schedule.done(station, task, None, "")
                if inline:
                    raise
                return
            except Exception as exc:  # noqa: BLE001 - a bug must not stop the other cells
                result = self._error(task.cell, station, f"internal error: "
                                     f"{type(exc).__name__}: {exc}")
            self._schedule.done(station, task, result, lost)

    def _run_one(self, station: Station, task: _Task) -> tuple[Result, str]:
        cell = task.cell
        where = f" on {station.name}" if self._announce else ""
        self.console.info(f"[{task.index + 1}/{self._total}] {cell.id}{where}")

        def base_for(c: Cell) -> Base:
            return station.base(c, self.console, self._workdir, self._mirrors)

        check = station.check(cell, self.console, base_for, self.options.run_id)
        facts = dict(station.facts)
        if task.lost_on:
            facts["retried_after"] = f"host {', '.join(task.lost_on)} stopped answering"
        driver = check.for_cell(str(cell.toolkit) if cell.toolkit else None, cell.vendor)
        if driver.note:
            self.console.info(f"  {cell.id}: {driver.note}")
        checked = {**check.facts, **({"driver": driver.facts} if driver.facts else {})}
        host = Host(facts=json_object(facts, "host"), vendor_check=VendorCheck(
            supported=check.supported, reasons=tuple(check.reasons),
            facts=json_object(checked, "host.vendor_check")))
        unsupported = driver.reason
        schedule = self._schedule
        assert schedule is not None
        run = CellRun(self.matrix, cell, station.engine, self.console, self.options, base_for,
                      host, unsupported=unsupported, stopping=lambda: schedule.stopping,
                      elsewhere=self._engine_of)
        with self.console.status(cell.id):
            result = run.run(build=self.build)
        return result, run.lost

    def _engine_of(self, engine_id: str) -> Engine | None:
        """The Engine of this run that has the identity ``engine_id`` (None: not reached)."""
        return next((s.engine for s in self.stations
                     if engine_id and s.engine_id == engine_id and not s.lost), None)

    def _no_host(self, task: _Task) -> Result:
        vendor = task.cell.vendor.name
        lost = "; ".join([f"{s.name}: {s.lost}" for s in self.stations
                          if s.lost and s.serves(vendor)]
                         + [f"{d.name}: {d.why}" for d in self.down if vendor in d.vendors])
        return self._error(task.cell, None, f"no host of vendor {task.cell.vendor.name} is "
                           f"left to run it ({lost})")

    def _error(self, cell: Cell, station: Station | None, message: str) -> Result:
        """The result of a cell that could not run at all, saved like any other, except over
        an earlier result that passed: a run that verified nothing (no host answered) does
        not replace a verification that holds. The run still counts it as an error."""
        self.console.line("fail", f"{cell.id}: {message}")
        facts = station.facts if station is not None else {}
        stage = Stage(status="error", message=message, duration_s=0.0)
        result = assemble(cell=cell_ref(cell.coordinates(), id=cell.id,
                                        fingerprint=_fingerprint(self.matrix, cell)),
                          stages={"schedule": stage}, tests=(),
                          host=Host(facts=json_object(dict(facts), "host")), started_at=now(),
                          run_id=self.options.run_id)
        folder = self.options.results_dir / cell.id
        earlier = _good_result(folder)
        if earlier is not None:
            self.console.warn(f"{cell.id}: its earlier result ({earlier.status}, run "
                              f"{earlier.run_id}) is kept in {folder}/result.json")
            self.kept[cell.id] = earlier
            return result
        save(folder, result)
        return result


class _Watch:
    """While a run goes on, ask every engine now and then whether it still answers. One that
    has not answered for a while (a hung daemon, a host cut off: its docker commands would hang
    until their own deadlines, an hour for a build) gets its docker processes stopped, so its
    running cells fail at once, find the engine silent, and are retried elsewhere."""

    EVERY_S = 15.0
    MISSES = 3   # with the ping's own 5 s deadline: about a minute of silence

    def __init__(self, stations: list[Station], console: Console) -> None:
        self.stations, self.console = stations, console
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="oota-watch")

    def __enter__(self) -> _Watch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        misses = dict.fromkeys((s.name for s in self.stations), 0)
        while not self._stop.wait(self.EVERY_S):
            for station in self.stations:
                if station.lost or self._stop.is_set():
                    continue
                misses[station.name] = 0 if station.engine.alive() else misses[station.name] + 1
                if misses[station.name] == self.MISSES:
                    self.console.warn(f"host {station.name}: no answer for "
                                      f"{self.MISSES} pings; stopping its docker commands")
                    station.engine.abort()


def _good_result(folder: Path) -> Result | None:
    """The result in ``folder`` when it is a readable one that did not go wrong."""
    try:
        result = load(folder / "result.json")
    except (ResultFormatError, OSError):
        return None
    return None if result.status in BAD else result


def _fingerprint(matrix: Matrix, cell: Cell) -> str:
    """The cell's fingerprint; when even rendering it fails (the error being recorded may be
    that very failure), the digest of nothing, which no real cell has."""
    try:
        return cell_fingerprint(matrix, cell)
    except Exception:  # noqa: BLE001 - the error result must still be written
        return "sha256:" + hashlib.sha256(b"").hexdigest()


def lost_hosts(stations: list[Station]) -> list[str]:
    """'name: why' of every host the run stopped using."""
    return [f"{s.name}: {s.lost}" for s in stations if s.lost]


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcomes:
    """A run's results, in the order of its cells, and the earlier results that the folders
    of some of them keep instead (cell id -> result: a cell that could not run at all does
    not replace a verification that passed)."""

    results: list[Result]
    kept: Mapping[str, Result] = field(default_factory=dict)


def run_on_stations(matrix: Matrix, cells: list[Cell], stations: list[Station],
                    console: Console, options: BuildOptions, *, build: bool = True,
                    down: tuple[Down, ...] = ()) -> Outcomes:
    """Build (optionally) and verify ``cells`` on ``stations``; their results, in order.

    The run owns its containers and context folders on every engine
    (:func:`oota.execute.leftovers.owned_run`): removed however it ends, and what killed runs
    left is removed before it starts."""
    cache = matrix.root / ".oota-cache"
    keys = {s.name: s.engine_id or engine_key(s.engine) for s in stations}
    for duty in waiting(cache, set(keys.values())):
        console.info(f"{duty} left containers when it ended; they are removed when a run "
                     "reaches that host again")
    with ExitStack() as owned:
        for station in stations:
            owned.enter_context(owned_run(station.engine, cache, options.run_id, console,
                                          key=keys[station.name]))
        run = FleetRun(matrix, stations, console, options, build=build, down=down)
        return Outcomes(results=run.run(cells), kept=dict(run.kept))
