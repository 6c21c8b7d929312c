"""Times checked where they enter: a result's ``started_at`` that is no time, or one that
overflows when brought to UTC, is refused on every read (import, report, merge); the history
stores UTC; a run already stored with such a time (by an older oota) is left out and named,
never a crash of every digest and report after it; the query's text shows values inert."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from oota import times
from oota.history import tables
from oota.history.location import locate
from oota.history.store import open_store, outcomes, read_runs, read_timeline
from oota.results.store import load
from tests.history.helpers import MATMUL, invoke, result
from tests.unit.test_report import refresh, write_results

POISONS = {
    "overflows-to-utc": "9999-12-31T23:59:59-23:59",
    "before-year-one-in-utc": "0001-01-01T00:00:00+14:00",
    "markup": "<img src=//e.co>",
}


@pytest.mark.parametrize(("text", "says"), [
    (POISONS["overflows-to-utc"], "lies outside the times oota accepts (2000 to 2099)"),
    (POISONS["before-year-one-in-utc"], "lies outside the times oota accepts"),
    (POISONS["markup"], "is not an RFC 3339 time with an offset"),
    ("2026-11-26T10:00:00", "is not an RFC 3339 time with an offset"),
    ("2026-13-01T00:00:00Z", "month must be in 1..12"),
    ("2026-11-26T10:00:00+24:00", "its offset is not -23:59 to +23:59"),
    ("२०२६-11-26T10:00:00Z", "is not an RFC 3339 time"),  # Devanagari digits
], ids=["overflows", "year-one", "markup", "no-offset", "month-13", "offset-24h", "non-ascii"])
def test_a_time_that_is_not_one_is_refused_with_the_reason(text: str, says: str) -> None:
    with pytest.raises(times.BadTime, match=re.escape(says)):
        times.parse(text)


@pytest.mark.parametrize(("text", "utc"), [
    ("2026-11-26T10:00:00+00:00", "2026-11-26T10:00:00+00:00"),
    ("2026-11-26T10:00:00Z", "2026-11-26T10:00:00+00:00"),
    ("2026-11-26T15:30:00+05:30", "2026-11-26T10:00:00+00:00"),
    ("2026-11-26T02:00:00.25-08:00", "2026-11-26T10:00:00.250000+00:00"),
], ids=["utc", "zulu", "india", "fraction-pacific"])
def test_a_time_is_normalised_to_utc(text: str, utc: str) -> None:
    assert times.utc(text) == utc


def poisoned(folder: Path, when: str, run: str = "run-bad") -> Path:
    """A results folder whose one result says it started at ``when``."""
    write_results(folder, [result(run, 20)])
    path = next(folder.glob("*/result.json"))
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "started_at": when}))
    return path


@pytest.mark.parametrize("when", POISONS.values(), ids=POISONS.keys())
def test_a_poisoned_time_is_refused_when_read(tmp_path: Path, when: str) -> None:
    path = poisoned(tmp_path / "r", when)
    with pytest.raises(ValueError, match="does not match the schema: started_at: "):
        load(path)


def test_import_report_and_merge_refuse_the_result_and_keep_the_rest(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    poisoned(bad, POISONS["overflows-to-utc"])
    good = write_results(tmp_path / "good", [result("run-good", 21, python="3.13")])
    url = f"sqlite:///{tmp_path / 'h.db'}"
    imported = invoke("history", "import", "--dir", str(bad), "--dir", str(good),
                      "--history", url)
    assert imported.returncode == 0, imported.stderr
    assert "started_at: '9999-12-31T23:59:59-23:59' lies outside" in imported.stderr
    assert [r.key for r in read_runs(open_store(locate(url, {}, tmp_path)))] == ["run-good"]
    merged = invoke("report", "--merge", str(bad), "--merge", str(good), "--out",
                    str(tmp_path / "out"), "--history", url)
    assert merged.returncode == 0, merged.stderr
    assert "lies outside the times oota accepts" in merged.stderr
    assert (tmp_path / "out/hud.html").is_file()
    assert "internal error" not in merged.stderr


def store_with_a_poisoned_run(tmp_path: Path, when: str) -> str:
    """A history holding a good run and one whose time an older oota stored unchecked."""
    url = f"sqlite:///{tmp_path / 'h.db'}"
    for run, day in (("run-old", 19), ("run-bad", 20), ("run-new", 21)):
        folder = write_results(tmp_path / run, [result(run, day, matmul="failed"
                                                       if run == "run-new" else "passed")])
        assert invoke("history", "import", "--dir", str(folder), "--history", url
                      ).returncode == 0
    store = open_store(locate(url, {}, tmp_path))
    with store.engine.begin() as conn:
        conn.execute(update(tables.runs).where(tables.runs.c.run_key == "run-bad")
                     .values(started_at=when))
    return url


@pytest.mark.parametrize("when", POISONS.values(), ids=POISONS.keys())
def test_a_stored_run_with_a_bad_time_is_left_out_and_named(tmp_path: Path, when: str) -> None:
    url = store_with_a_poisoned_run(tmp_path, when)
    store = open_store(locate(url, {}, tmp_path))
    timeline = read_timeline(store)
    assert [r.key for r in timeline.runs] == ["run-old", "run-new"]
    [line] = timeline.left_out
    assert line.startswith("run run-bad (import) left out of what is read: its started_at ")
    points, left_out = outcomes(store, test=MATMUL)
    assert [p.run_key for p in points] == ["run-old", "run-new"] and left_out == [line]

    digest = invoke("history", "digest", "--since", "5w", "--history", url, cwd=tmp_path)
    assert digest.returncode == 0, digest.stderr
    assert "run-new" in digest.stdout and "run run-bad (import) left out" in digest.stderr
    query = invoke("history", "query", "--test", MATMUL, "--history", url)
    assert query.returncode == 0 and "passed -> failed" in query.stdout
    assert "run run-bad (import) left out" in query.stderr
    assert when not in query.stdout
    report = invoke("report", "--results", str(tmp_path / "run-new"), "--out",
                    str(tmp_path / "out"), "--history", url)
    assert report.returncode == 0, report.stderr
    assert "run run-bad (import) left out" in report.stderr
    assert (tmp_path / "out/hud.html").is_file() and (tmp_path / "out/index.html").is_file()


def test_the_history_stores_utc(tmp_path: Path) -> None:
    data: dict[str, Any] = result("run-india", 20)
    data["started_at"], data["finished_at"] = ("2026-11-20T11:30:00+05:30",
                                               "2026-11-20T12:00:00+05:30")
    folder = write_results(tmp_path / "r", [data])
    url = f"sqlite:///{tmp_path / 'h.db'}"
    assert invoke("history", "import", "--dir", str(folder), "--history", url).returncode == 0
    [run] = read_runs(open_store(locate(url, {}, tmp_path)))
    assert (run.started_at, run.finished_at) == ("2026-11-20T06:00:00+00:00",
                                                 "2026-11-20T06:30:00+00:00")
    assert run.cells[0].started_at == "2026-11-20T06:00:00+00:00"


def test_the_query_table_shows_every_value_inert(tmp_path: Path) -> None:
    test_id = "test_device.py::test_matmul[\x1b[2J\u202e]"
    url = f"sqlite:///{tmp_path / 'h.db'}"
    for run, day, status in (("r1", 20, "passed"), ("r2", 21, "failed")):
        data = result(run, day)
        data["tests"][1]["id"], data["tests"][1]["status"] = test_id, status
        folder = write_results(tmp_path / run, [refresh(data)])
        assert invoke("history", "import", "--dir", str(folder), "--history", url
                      ).returncode == 0
    table = invoke("history", "query", "--test", test_id, "--history", url)
    assert table.returncode == 0, table.stderr
    assert "\x1b" not in table.stdout and "\u202e" not in table.stdout
    assert "test_matmul[\\x1b[2J\\u202e]" in table.stdout
