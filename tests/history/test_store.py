"""The results store, against SQLite and a real PostgreSQL server: whole runs, idempotent
re-import, nothing of a run that failed half-way, two writers at once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from oota.history import store as history_store
from oota.history import tables
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
                                                 r"to 1: use a newer oota"):
        open_at(history_url)
