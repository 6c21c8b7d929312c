"""The results store, against SQLite and a real PostgreSQL server: whole runs, idempotent
re-import, nothing of a run that failed half-way, two writers at once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from oota.history import store as history_store, tables
from oota.history.location import locate
from oota.history.records import run_record
from oota.history.store import HistoryUnavailable, Store, append, open_store, read_runs
from tests.conftest import REPO
from tests.history.helpers import MATMUL, result, typed


def open_at(url: str) -> Store:
    return open_store(locate(url, {}, Path.cwd()))


def test_a_run_is_read_back_whole(history_url: str) -> None:
    results = typed(result("run-1", 20), result("run-1", 20, python="3.13",
                                                os_key="debian13", extension="1.2.0"))
    run = run_record(results, "build", "0123abcd")
    store = open_at(history_url)
    done = append(store, run)
    assert (done.added, done.already) == (2, 0)
    [back] = read_runs(store)
    assert back == run
    cell = back.cells[1]
    assert cell.inputs.extensions == (("torch", "2.13.0+cpu"), ("torch_ext", "1.2.0"))
    assert {t.id: t.status for t in cell.tests}[MATMUL] == "passed"
    assert any(f.name == "seconds" and f.number == 1.5 for f in cell.figures)
    assert back.hosts == ("lab-a",) and back.git_revision == "0123abcd"


def test_the_requirements_a_cell_asked_for_are_kept_in_order(history_url: str) -> None:
    asked = ("torch==2.13.0+cpu", "pytest>=8,<10", "numpy>=1.26,<3")
    run = run_record(typed(result("run-1", 20, requested=asked), result("run-1", 20,
                                                                        python="3.13",
                                                                        os_key="debian13")),
                     "build", None)
    store = open_at(history_url)
    append(store, run)
    [back] = read_runs(store)
    assert [c.inputs.requested for c in back.cells] == [asked, ()]


def test_appending_the_same_run_again_changes_nothing(history_url: str) -> None:
    store = open_at(history_url)
    run = run_record(typed(result("run-1", 20)), "import", None)
    append(store, run)
    again = append(open_at(history_url), run)
    assert (again.added, again.already) == (0, 1)
    assert read_runs(store) == [run]
    # The same run id from another origin (a merged report of it) is another run.
    append(store, run_record(typed(result("run-1", 20)), "merge", None))
    assert [r.origin for r in read_runs(store)] == ["import", "merge"]


def test_a_run_that_fails_half_way_leaves_nothing(history_url: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_at(history_url)
    written = history_store.write_cell
    calls: list[str] = []

    def second_one_fails(conn: object, run_id: int, cell: object) -> None:
        calls.append("cell")
        if len(calls) == 2:
            raise RuntimeError("disk gone")
        written(conn, run_id, cell)  # type: ignore[arg-type]

    monkeypatch.setattr(history_store, "write_cell", second_one_fails)
    run = run_record(typed(result("run-1", 20), result("run-1", 20, python="3.13",
                                                       os_key="debian13")), "build", None)
    with pytest.raises(RuntimeError, match="disk gone"):
        append(store, run)
    assert read_runs(store) == []
    monkeypatch.setattr(history_store, "write_cell", written)
    assert append(store, run).added == 2


WRITER = textwrap.dedent("""\
    import sys, time
    from pathlib import Path
    from oota.history.location import locate
    from oota.history.records import run_record
    from oota.history.store import append, open_store
    from tests.history.helpers import result, typed
    url, run_id, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    store = open_store(locate(url, {}, Path.cwd()))
    while time.time() < start:
        time.sleep(0.005)
    for day in range(1, 11):
        cells = [result(f"{run_id}-{day}", day, python=p, os_key=o)
                 for p, o in (("3.11", "debian12"), ("3.13", "debian13"))]
        append(store, run_record(typed(*cells), "build", None))
    print("done")
""")


def test_two_writers_at_once_lose_nothing(history_url: str) -> None:
    # A new store: the two writers race to create the tables, then on the runs themselves.
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    start = __import__("time").time() + 3
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, history_url, name, str(start)],
                                cwd=REPO, env={**os.environ, "PYTHONPATH": path},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name in ("a", "b")]
    outs = [w.communicate(timeout=240) for w in writers]
    assert [w.returncode for w in writers] == [0, 0], outs
    runs = read_runs(open_at(history_url))
    assert len(runs) == 20 and sum(len(r.cells) for r in runs) == 40
    assert {r.key for r in runs} == {f"{n}-{d}" for n in "ab" for d in range(1, 11)}


def test_a_history_from_a_newer_oota_is_refused(history_url: str) -> None:
    store = open_at(history_url)
    with store.engine.begin() as conn:
        conn.execute(tables.schema_version.insert().values(version=99, applied_at="later"))
    with pytest.raises(HistoryUnavailable, match=r"has schema version 99; this oota knows up "
                                                 r"to 2: use a newer oota"):
        open_at(history_url)


def _identified(run_id: str, day: int, *, host: str, engine_id: str,
                env: dict[str, str] | None = None, matmul: str = "passed") -> dict:
    data = result(run_id, day, host=host, matmul=matmul)
    data["host"]["engine_id"] = engine_id
    if env:
        data["stages"]["verify"]["detail"] = {"env": env}
    return data


def test_engine_identities_and_pass_env_switches_are_kept(history_url: str) -> None:
    store = open_at(history_url)
    append(store, run_record(typed(_identified("run-1", 20, host="main", engine_id="e" * 16)),
                             "build", None))
    append(store, run_record(typed(_identified("run-2", 21, host="vm", engine_id="e" * 16,
                                               env={"REFDEV_WRONG_OP": "tanh"},
                                               matmul="failed")), "build", None))
    before, after = (run.cells[0].inputs for run in read_runs(store))
    assert (before.engine, after.env) == ("e" * 16, (("REFDEV_WRONG_OP", "tanh"),))
    # One Engine under two names is no host change; the switch is what changed.
    assert after.differences(before) == ["pass_env REFDEV_WRONG_OP: unset -> tanh"]


def test_a_merged_run_keeps_a_cell_that_ran_twice_on_one_host(history_url: str) -> None:
    """Two copies of one cell from one Engine (a re-run) in one merged run: both kept, named
    by their run as the report names them (the unique key once refused the second)."""
    first = _identified("run-1", 20, host="vm", engine_id="e" * 16)
    again = _identified("run-2", 20, host="vm", engine_id="e" * 16, matmul="failed")
    store = open_at(history_url)
    done = append(store, run_record(typed(first, again), "merge", None))
    assert (done.added, done.already) == (2, 0)
    [run] = read_runs(store)
    assert sorted(c.host for c in run.cells) == ["vm, run run-1", "vm, run run-2"]
    assert run.hosts == ("vm",)


def test_a_version_1_history_is_migrated_and_still_read(history_url: str) -> None:
    """A history an oota before identities wrote: its results have no engine_id column and
    there is no environment table. Opening it adds both; its runs read back as they were."""
    from sqlalchemy import MetaData, Table, insert

    old = MetaData()
    for table in tables.metadata.sorted_tables:
        if table.name != "environment":
            Table(table.name, old, *(c._copy() for c in table.columns if c.name != "engine_id"))
    store = open_at(history_url)   # makes version 2: start again from version 1's tables
    with store.engine.begin() as conn:
        tables.metadata.drop_all(conn)
        old.create_all(conn)
        conn.execute(insert(old.tables["schema_version"]).values(version=1, applied_at="then"))
    older = typed(result("run-1", 20))
    with store.engine.begin() as conn:
        run_id = conn.execute(insert(old.tables["runs"]).values(
            run_key="run-1", origin="build", started_at="2026-11-20T06:00:00+00:00",
            finished_at="2026-11-20T06:30:00+00:00", recorded_at="then",
            oota_version=older[0].oota_version).returning(old.tables["runs"].c.id)).scalar_one()
        ref = older[0].cell
        conn.execute(insert(old.tables["results"]).values(
            run_id=run_id, cell_id=ref.id, vendor=ref.vendor, os=ref.os, python=ref.python,
            torch=ref.torch, fingerprint=ref.fingerprint, status="passed", message="",
            host="lab-a", started_at="2026-11-20T06:00:00+00:00",
            finished_at="2026-11-20T06:30:00+00:00"))
    store = open_at(history_url)
    append(store, run_record(typed(_identified("run-2", 21, host="lab-a", engine_id="e" * 16,
                                               env={"X": "1"})), "build", None))
    runs = read_runs(store)
    assert [(r.key, r.cells[0].engine_id, r.cells[0].inputs.env) for r in runs] == [
        ("run-1", None, ()), ("run-2", "e" * 16, (("X", "1"),))]
    with store.engine.connect() as conn:
        versions = conn.execute(tables.schema_version.select()).all()
    assert sorted(v.version for v in versions) == [1, 2]
