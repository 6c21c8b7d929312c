"""Writing runs into the history and reading them back (SQLAlchemy Core, SQLite or PostgreSQL).

A run is written in one transaction: it is in the history whole or not at all. A run already
there (same key and origin) is completed with the cells it lacks and otherwise left alone, so
importing a folder twice changes nothing. Two writers at once lose nothing: SQLite takes the
write lock when the transaction begins (``BEGIN IMMEDIATE``) and waits for it (busy timeout),
PostgreSQL's unique constraints settle a race, and a transaction that lost one is run again.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    Engine,
    Row,
    Select,
    create_engine,
    event,
    func,
    insert,
    select,
)
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from oota import times
from oota.console import inert
from oota.errors import EnvironmentProblem
from oota.history import tables as t
from oota.history.changes import Point
from oota.history.location import Location
from oota.history.records import CellRecord, Figure, Inputs, RunRecord
from oota.history.timeline import (
    CellSeries,
    LayerCount,
    MetricPoint,
    MetricSeries,
    Outcome,
    RunHead,
    Timeline,
    deciding,
    summed,
)
from oota.results.jsonfields import status_of
from oota.results.model import CellRef, TestOutcome
from oota.vocab import BAD, FLAKY, METRICS_LAYERS, RAN, Status

T = TypeVar("T")
# SQLite's busy timeout (seconds): how long a writer waits for another's transaction.
BUSY_TIMEOUT_S = 30
CONNECT_TIMEOUT_S = 10
# Transactions that lost a race (a lock, a unique key taken meanwhile) are run again.
ATTEMPTS = 5
# An advisory lock key: PostgreSQL writers creating the tables at once take turns.
_PG_SCHEMA_LOCK = 0x00_07_A0_12
_READING = "oota_reading"


class HistoryUnavailable(EnvironmentProblem):
    """The history cannot be opened, read or written (exit 3); the message names the store."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Store:
    location: Location
    engine: Engine


@dataclass(frozen=True, kw_only=True, slots=True)
class Appended:
    """What an append did: the run's key, and how many of its cells were new."""

    run_key: str
    origin: str
    added: int
    already: int


def open_store(location: Location) -> Store:
    """The store at ``location``, its tables created when missing (HistoryUnavailable if it
    cannot be reached, or was written by a newer oota)."""
    try:
        engine = _engine(location)
    except ImportError as exc:  # a driver oota does not ship, or an installation without it
        raise HistoryUnavailable(f"history {location.shown} cannot be opened: its driver is "
                                 f"not installed ({exc})") from exc
    store = Store(location=location, engine=engine)
    with _problems(store, "cannot be opened"):
        _retry(lambda: _prepare(store))
    return store


def _engine(location: Location) -> Engine:
    if location.is_sqlite:
        # One connection per use: two processes' writers then only meet in SQLite's own lock.
        engine = create_engine(location.url, poolclass=NullPool,
                               connect_args={"timeout": BUSY_TIMEOUT_S})
        event.listen(engine, "connect", _sqlite_manual_transactions)
        event.listen(engine, "begin", _sqlite_begin_immediate)
        return engine
    return create_engine(location.url, poolclass=NullPool,
                         connect_args={"connect_timeout": CONNECT_TIMEOUT_S})


def _sqlite_manual_transactions(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite would begin transactions itself, deferred; SQLAlchemy's begin event does it.
    dbapi_connection.isolation_level = None


def _sqlite_begin_immediate(connection: Connection) -> None:
    # A deferred transaction that reads and then writes can fail at once when another writer
    # holds the lock (no busy wait helps); IMMEDIATE waits for the lock up front. Readers
    # take no write lock.
    reading = connection.get_execution_options().get(_READING, False)
    connection.exec_driver_sql("BEGIN" if reading else "BEGIN IMMEDIATE")


@contextmanager
def _reading(store: Store) -> Iterator[Connection]:
    with _problems(store, "cannot be read"), store.engine.connect() as conn:
        yield conn.execution_options(**{_READING: True})


@contextmanager
def _problems(store: Store, doing: str) -> Iterator[None]:
    try:
        yield
    except HistoryUnavailable:
        raise
    except SQLAlchemyError as exc:
        why = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__]
        raise HistoryUnavailable(f"history {store.location.shown} {doing}: {why[0]}") from exc


def _retry(work: Callable[[], T]) -> T:
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return work()
        except (OperationalError, IntegrityError) as exc:
            if attempt == ATTEMPTS or not _lost_a_race(exc):
                raise
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


def _lost_a_race(exc: DBAPIError) -> bool:
    if isinstance(exc, IntegrityError):
        return True
    text = str(exc.orig).lower()
    return any(word in text for word in ("locked", "busy", "deadlock", "could not serialize"))


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _prepare(store: Store) -> None:
    with store.engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(select(func.pg_advisory_xact_lock(_PG_SCHEMA_LOCK)))
        t.metadata.create_all(conn)
        found = conn.execute(select(func.max(t.schema_version.c.version))).scalar()
        if found is None:
            conn.execute(insert(t.schema_version).values(version=t.SCHEMA_VERSION,
                                                         applied_at=_now()))
        elif found > t.SCHEMA_VERSION:
            raise HistoryUnavailable(
                f"history {store.location.shown} has schema version {found}; this oota knows "
                f"up to {t.SCHEMA_VERSION}: use a newer oota with it")
        for version in range((found or t.SCHEMA_VERSION) + 1, t.SCHEMA_VERSION + 1):
            _migrate(conn, version)


def _migrate(conn: Connection, version: int) -> None:
    """Bring a history to ``version`` (in the transaction that holds the schema lock: SQLite's
    write lock, PostgreSQL's advisory lock). The older oota that wrote it still reads it: the
    tables only grow."""
    for statement in t.MIGRATIONS.get(version, ()):
        conn.exec_driver_sql(statement)
    conn.execute(insert(t.schema_version).values(version=version, applied_at=_now()))


# -- writing ----------------------------------------------------------------------------------

def append(store: Store, run: RunRecord) -> Appended:
    """Add ``run`` (the cells of it not yet there) in one transaction."""
    with _problems(store, "cannot be written"):
        return _retry(lambda: _append_once(store, run))


def _append_once(store: Store, run: RunRecord) -> Appended:
    with store.engine.begin() as conn:
        run_id = _run_row(conn, run)
        present = {(row.cell_id, row.host) for row in conn.execute(
            select(t.results.c.cell_id, t.results.c.host).where(t.results.c.run_id == run_id))}
        new = [c for c in run.cells if (c.cell.id, c.host) not in present]
        for cell in new:
            write_cell(conn, run_id, cell)
        hosts = {h for (h,) in conn.execute(select(t.run_hosts.c.host)
                                            .where(t.run_hosts.c.run_id == run_id))}
        for host in sorted(set(run.hosts) - hosts):
            conn.execute(insert(t.run_hosts).values(run_id=run_id, host=host))
    return Appended(run_key=run.key, origin=run.origin, added=len(new),
                    already=len(run.cells) - len(new))


def _run_row(conn: Connection, run: RunRecord) -> int:
    found = conn.execute(select(t.runs.c.id).where(t.runs.c.run_key == run.key,
                                                   t.runs.c.origin == run.origin)).scalar()
    if found is not None:
        return int(found)
    inserted = conn.execute(insert(t.runs).values(
        run_key=run.key, origin=run.origin, started_at=run.started_at,
        finished_at=run.finished_at, recorded_at=_now(), oota_version=run.oota_version,
        git_revision=run.git_revision).returning(t.runs.c.id)).scalar_one()
    return int(inserted)


def write_cell(conn: Connection, run_id: int, cell: CellRecord) -> None:
    """One cell's rows (result, tests, figures, extensions, requirements) inside the run's
    transaction."""
    inputs, cell_ref = cell.inputs, cell.cell
    result_id = conn.execute(insert(t.results).values(
        run_id=run_id, cell_id=cell_ref.id, vendor=cell_ref.vendor, os=cell_ref.os,
        python=cell_ref.python, torch=cell_ref.torch, toolkit=cell_ref.toolkit,
        toolkit_version=cell_ref.toolkit_version,
        fingerprint=cell_ref.fingerprint, status=cell.status,
        message=cell.message, host=cell.host, engine=cell.engine, engine_id=cell.engine_id,
        hostname=cell.hostname,
        started_at=cell.started_at, finished_at=cell.finished_at, torch_version=inputs.torch,
        torch_git=inputs.torch_git, toolkit_resolved=inputs.toolkit, base_ref=cell.base_ref,
        image_tag=cell.image_tag, image_id=cell.image_id, image_digest=cell.image_digest,
    ).returning(t.results.c.id)).scalar_one()
    if cell.tests:
        conn.execute(insert(t.tests), [
            {"result_id": result_id, "test_id": test.id, "layer": test.layer,
             "status": test.status, "duration_s": test.duration_s, "message": test.message}
            for test in cell.tests])
    if cell.figures:
        conn.execute(insert(t.figures), [
            {"result_id": result_id, "test_id": figure.test_id, "name": figure.name,
             "number": figure.number, "text": figure.text}
            for figure in cell.figures])
    if inputs.extensions:
        conn.execute(insert(t.extensions), [
            {"result_id": result_id, "name": name, "version": version}
            for name, version in inputs.extensions])
    if inputs.requested:
        conn.execute(insert(t.requirements), [
            {"result_id": result_id, "position": n, "text": text}
            for n, text in enumerate(inputs.requested)])
    if inputs.env:
        conn.execute(insert(t.environment), [
            {"result_id": result_id, "name": name, "value": value} for name, value in inputs.env])


# -- reading ----------------------------------------------------------------------------------

def read_runs(store: Store) -> list[RunRecord]:
    """Every run, oldest first, whole (for export, checks and tests; the HUD queries less)."""
    with _reading(store) as conn:
        runs = conn.execute(select(t.runs).order_by(t.runs.c.started_at, t.runs.c.id)).all()
        return [_run_from(conn, row) for row in runs]


def _run_from(conn: Connection, run: Row[Any]) -> RunRecord:
    hosts = conn.execute(select(t.run_hosts.c.host).where(t.run_hosts.c.run_id == run.id)
                         .order_by(t.run_hosts.c.host)).scalars().all()
    rows = conn.execute(select(t.results).where(t.results.c.run_id == run.id)
                        .order_by(t.results.c.id)).all()
    packages = _packages(conn, [r.id for r in rows])
    cells = tuple(_cell_from(conn, r, run.oota_version, packages.get(r.id, NO_PACKAGES))
                  for r in rows)
    return RunRecord(key=run.run_key, origin=run.origin, started_at=run.started_at,
                     finished_at=run.finished_at, oota_version=run.oota_version,
                     git_revision=run.git_revision, hosts=tuple(hosts), cells=cells)


def _cell_from(conn: Connection, r: Row[Any], suite: str, packages: _Packages) -> CellRecord:
    tests = conn.execute(select(t.tests).where(t.tests.c.result_id == r.id)
                         .order_by(t.tests.c.test_id)).all()
    figures = conn.execute(select(t.figures).where(t.figures.c.result_id == r.id)
                           .order_by(t.figures.c.test_id, t.figures.c.name)).all()
    return CellRecord(
        cell=cell_ref(r), status=_status(r.status),
        message=r.message, host=r.host, engine=r.engine, engine_id=r.engine_id,
        hostname=r.hostname,
        started_at=r.started_at, finished_at=r.finished_at, image_tag=r.image_tag,
        image_id=r.image_id, image_digest=r.image_digest, base_ref=r.base_ref,
        inputs=_inputs(r, suite, packages),
        tests=tuple(TestOutcome(id=x.test_id, layer=x.layer, status=_status(x.status),
                                duration_s=x.duration_s, message=x.message) for x in tests),
        figures=tuple(Figure(test_id=f.test_id, name=f.name, number=f.number, text=f.text)
                      for f in figures))


def cell_ref(r: Row[Any]) -> CellRef:
    """The cell a ``results`` row is about."""
    return CellRef(id=r.cell_id, vendor=r.vendor, os=r.os, python=r.python, torch=r.torch,
                   toolkit=r.toolkit, toolkit_version=r.toolkit_version,
                   fingerprint=r.fingerprint)


def _inputs(r: Row[Any], suite: str, packages: _Packages) -> Inputs:
    return Inputs(torch=r.torch_version, torch_git=r.torch_git, toolkit=r.toolkit_resolved,
                  base=r.base_ref, fingerprint=r.fingerprint, host=r.host,
                  engine=r.engine_id or "", suite=suite, extensions=packages.extensions,
                  requested=packages.requested, env=packages.env)


def _status(text: str) -> Status:
    return status_of(text, "history")


@dataclass(frozen=True, kw_only=True, slots=True)
class _Packages:
    """What a result's cell installed of what it asked for, the requirements it asked, and
    the pass_env switches its verification ran with."""

    extensions: tuple[tuple[str, str | None], ...] = ()
    requested: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


NO_PACKAGES = _Packages()


def _packages(conn: Connection, result_ids: list[int] | Select[tuple[int]]
              ) -> dict[int, _Packages]:
    """The extensions and requirements of the results ``result_ids`` lists or selects."""
    extensions: dict[int, list[tuple[str, str | None]]] = {}
    requested: dict[int, list[str]] = {}
    env: dict[int, list[tuple[str, str]]] = {}
    if not isinstance(result_ids, list) or result_ids:
        rows = conn.execute(select(t.extensions).where(t.extensions.c.result_id.in_(result_ids))
                            .order_by(t.extensions.c.name))
        for row in rows:
            extensions.setdefault(row.result_id, []).append((row.name, row.version))
        lines = conn.execute(select(t.requirements)
                             .where(t.requirements.c.result_id.in_(result_ids))
                             .order_by(t.requirements.c.result_id, t.requirements.c.position))
        for line in lines:
            requested.setdefault(line.result_id, []).append(line.text)
        switches = conn.execute(select(t.environment)
                                .where(t.environment.c.result_id.in_(result_ids))
                                .order_by(t.environment.c.result_id, t.environment.c.name))
        for switch in switches:
            env.setdefault(switch.result_id, []).append((switch.name, switch.value))
    return {k: _Packages(extensions=tuple(extensions.get(k, ())),
                         requested=tuple(requested.get(k, ())), env=tuple(env.get(k, ())))
            for k in extensions.keys() | requested.keys() | env.keys()}


def outcomes(store: Store, *, vendor: str | None = None, cell: str | None = None,
             test: str | None = None) -> tuple[list[Point], list[str]]:
    """The selected cells' (or, with ``test``, that test's) outcomes, oldest run first, and a
    line for each run left out because its time cannot be read."""
    r, runs = t.results, t.runs
    status, message = (t.tests.c.status, t.tests.c.message) if test else (r.c.status,
                                                                          r.c.message)
    query = select(r, runs.c.run_key, runs.c.origin, runs.c.oota_version,
                   runs.c.started_at.label("run_started"), status.label("outcome"),
                   message.label("outcome_message")).join(runs, runs.c.id == r.c.run_id)
    if test:
        query = query.join(t.tests, t.tests.c.result_id == r.c.id).where(
            t.tests.c.test_id == test)
    if vendor:
        query = query.where(r.c.vendor == vendor)
    if cell:
        query = query.where(r.c.cell_id == cell)
    query = query.order_by(runs.c.started_at, runs.c.id, r.c.host)
    with _reading(store) as conn:
        rows = conn.execute(query).all()
        packages = _packages(conn, query.with_only_columns(r.c.id).order_by(None))
    found: list[tuple[str, Row[Any]]] = []
    left_out: dict[str, None] = {}
    for row in rows:
        when, why = _when(row.run_key, row.origin, row.run_started)
        if why:
            left_out[why] = None
        else:
            found.append((when, row))
    found.sort(key=lambda pair: pair[0])  # stable: the store's order within one moment
    return [Point(run_key=row.run_key, origin=row.origin, started_at=when,
                  cell_id=row.cell_id, test_id=test, status=_status(row.outcome),
                  message=row.outcome_message,
                  inputs=_inputs(row, row.oota_version, packages.get(row.id, NO_PACKAGES)))
            for when, row in found], list(left_out)


# -- the HUD's reading: the whole history in one query per table ------------------------------

def read_timeline(store: Store, *, metrics_layers: tuple[str, ...] = METRICS_LAYERS
                  ) -> Timeline:
    """Every cell's outcomes run by run, and the figures of its ``metrics_layers``' tests
    (the workload layer's and the compile layer's, whose speedup and compile time a
    regression must show as a workload figure's does). A run
    whose time cannot be read is left out (a line in ``left_out`` names it), not the history."""
    with _reading(store) as conn:
        heads: dict[int, tuple[RunHead, str]] = {}
        left_out: list[str] = []
        for row in conn.execute(select(t.runs.c.id, t.runs.c.run_key, t.runs.c.origin,
                                       t.runs.c.started_at, t.runs.c.oota_version)):
            when, why = _when(row.run_key, row.origin, row.started_at)
            if why:
                left_out.append(why)
                continue
            heads[row.id] = (RunHead(id=row.id, key=row.run_key, origin=row.origin,
                                     started_at=when), row.oota_version)
        rows = [r for r in conn.execute(select(t.results).order_by(t.results.c.id))
                if r.run_id in heads]
        packages = _packages(conn, select(t.results.c.id))
        failed: dict[int, list[str]] = {}
        for result_id, test_id in conn.execute(
                select(t.tests.c.result_id, t.tests.c.test_id)
                .where(t.tests.c.status.in_(sorted(BAD))).order_by(t.tests.c.test_id)):
            failed.setdefault(result_id, []).append(test_id)
        counted: dict[int, list[LayerCount]] = {}  # per result: the flaky share per layer
        for result_id, layer, status, n in conn.execute(
                select(t.tests.c.result_id, t.tests.c.layer, t.tests.c.status, func.count())
                .where(t.tests.c.status.in_(sorted(RAN)))
                .group_by(t.tests.c.result_id, t.tests.c.layer, t.tests.c.status)):
            counted.setdefault(result_id, []).append(
                LayerCount(layer, n if status == FLAKY else 0, n))
        ran = {result_id: summed(counts) for result_id, counts in counted.items()}
        figures = [f for f in conn.execute(
            select(t.results.c.cell_id, t.results.c.host, t.results.c.engine_id,
                   t.results.c.run_id, t.figures.c.test_id, t.figures.c.name,
                   t.figures.c.number, t.tests.c.status)
            .join(t.tests, (t.tests.c.result_id == t.figures.c.result_id)
                  & (t.tests.c.test_id == t.figures.c.test_id))
            .join(t.results, t.results.c.id == t.figures.c.result_id)
            .where(t.tests.c.layer.in_(metrics_layers), t.figures.c.number.is_not(None)))
            if f.run_id in heads]
    order = sorted(heads.values(), key=lambda h: (h[0].started_at, h[0].id))
    return Timeline(runs=tuple(h for h, _ in order),
                    cells=_series(rows, heads, packages, failed, ran),
                    metrics=_metric_series(figures, heads), left_out=tuple(left_out))


def _when(run_key: str, origin: str, started_at: object) -> tuple[str, str]:
    """A run's start in UTC (the form the history writes, which sorts as text), or '' and
    the line that says why the run is left out."""
    try:
        return times.utc(str(started_at)), ""
    except times.BadTime as exc:
        return "", (f"run {inert(run_key)} ({inert(origin)}) left out of what is read: its "
                    f"started_at {exc}")


def _series(rows: Sequence[Row[Any]], heads: dict[int, tuple[RunHead, str]],
            packages: dict[int, _Packages], failed: dict[int, list[str]],
            ran: dict[int, tuple[LayerCount, ...]]) -> tuple[CellSeries, ...]:
    newest: dict[str, Row[Any]] = {}
    by_cell: dict[str, dict[int, list[Outcome]]] = {}
    for r in rows:
        head, suite = heads[r.run_id]
        newest[r.cell_id] = r  # its coordinates name the cell (rows are in id order)
        by_cell.setdefault(r.cell_id, {}).setdefault(r.run_id, []).append(Outcome(
            run=head, status=_status(r.status), message=r.message,
            inputs=_inputs(r, suite, packages.get(r.id, NO_PACKAGES)),
            failed_tests=tuple(failed.get(r.id, ())),
            layers=ran.get(r.id, ())))
    series = [CellSeries(cell=cell_ref(newest[cell]), outcomes=tuple(sorted(
        (found[0] if len(found) == 1 else deciding(found) for found in runs.values()),
        key=lambda o: (o.run.started_at, o.run.id)))) for cell, runs in by_cell.items()]
    return tuple(sorted(series, key=lambda s: (s.cell.vendor, s.cell.id)))


def _metric_series(figures: Sequence[Row[Any, Any, Any, Any, Any, Any, Any, Any]],
                   heads: dict[int, tuple[RunHead, str]]) -> tuple[MetricSeries, ...]:
    """One series per cell, Engine (its identity, else its name), test and figure; shown
    under the name the Engine had in its newest run."""
    found: dict[tuple[str, str, str, str], list[MetricPoint]] = {}
    names: dict[tuple[str, str], tuple[str, int, str]] = {}
    for cell, host, engine_id, run_id, test, name, number, status in figures:
        head = heads[run_id][0]
        key = engine_id or host
        found.setdefault((cell, key, test, name), []).append(MetricPoint(
            run=head, value=float(number), good=status == "passed"))
        names[cell, key] = max(names.get((cell, key), ("", 0, host)),
                               (head.started_at, head.id, host.split(", run ")[0]))
    return tuple(MetricSeries(cell_id=cell, host=names[cell, key][2], test_id=test, name=name,
                              points=tuple(sorted(points, key=lambda p: (p.run.started_at,
                                                                         p.run.id))))
                 for (cell, key, test, name), points in sorted(found.items()))
