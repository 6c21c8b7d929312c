"""What a user sees of the history: `invoke history import/query`, the hooks of build, verify
and `report --merge`, and bad or unreachable stores."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from oota import tasks
from oota.api.history import history_target
from oota.api.runs import Ran
from oota.history.location import locate
from oota.history.store import open_store, read_runs
from oota.project import Project
from tests.history.helpers import MATMUL, invoke, result, typed
from tests.unit.test_report import write_results


def folders(tmp_path: Path) -> tuple[Path, Path]:
    """Two runs of one cell: day 20 passes; day 21 fails matmul with torch 2.13.1."""
    good = write_results(tmp_path / "day20", [result("run-20", 20)])
    bad = write_results(tmp_path / "day21", [result("run-21", 21, matmul="failed",
                                                    torch="2.13.1+cpu")])
    return good, bad


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once it is closed


def test_query_shows_the_change_and_the_input_that_changed(history_url: str,
                                                           tmp_path: Path) -> None:
    good, bad = folders(tmp_path)
    imported = invoke("history", "import", "--dir", str(good), "--dir", str(bad),
                      "--history", history_url)
    assert imported.returncode == 0, imported.stderr
    assert "run run-20: 1 cell(s) added, 0 already there" in imported.stdout
    again = invoke("history", "import", "--dir", str(good), "--history", history_url)
    assert "run run-20: 0 cell(s) added, 1 already there" in again.stdout

    table = invoke("history", "query", "--test", MATMUL, "--history", history_url)
    assert table.returncode == 0, table.stderr
    [header, line] = table.stdout.splitlines()
    assert header.split()[:5] == ["when", "run", "cell", "test", "outcome"]
    assert "run-21" in line and "passed -> failed" in line
    assert line.endswith("torch 2.13.0+cpu -> 2.13.1+cpu")

    as_json = invoke("history", "query", "--cell", "cpu-torch2.13.0-py3.11-debian12",
                     "--format", "json", "--history", history_url)
    [change] = json.loads(as_json.stdout)
    assert change["before"] == "passed" and change["after"] == "failed"
    assert change["run"] == "run-21" and change["before_run"] == "run-20"
    assert change["changed"] == ["torch 2.13.0+cpu -> 2.13.1+cpu"]


def test_query_lists_newest_first_and_says_when_no_input_changed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    runs = [result("r1", 1), result("r2", 2, matmul="failed"), result("r3", 3),
            result("r4", 4, host="lab-b")]
    for i, data in enumerate(runs):
        write_results(tmp_path / f"run{i}", [data])
        assert invoke("history", "import", "--dir", str(tmp_path / f"run{i}"),
                      "--history", url).returncode == 0
    out = invoke("history", "query", "--vendor", "cpu", "--test", MATMUL, "--format", "json",
                 "--history", url)
    found = json.loads(out.stdout)
    assert [(c["run"], c["before"], c["after"]) for c in found] == [
        ("r3", "failed", "passed"), ("r2", "passed", "failed")]
    assert found[1]["changed"] == []
    table = invoke("history", "query", "--test", MATMUL, "--history", url).stdout
    assert "no recorded input changed" in table
    nothing = invoke("history", "query", "--vendor", "cuda", "--history", url)
    assert nothing.returncode == 0
    assert nothing.stdout.strip() == "no change of outcome in the history for this selection"


@pytest.mark.parametrize(("url", "says"), [
    ("mysql://u:s3cret@db/x", "'mysql' is not a history backend oota supports"),
    ("not a url", "is not a database URL"),
    ("postgresql+pg8000://u:s3cret@db/x", "driver 'pg8000' is not installed with oota"),
    ("postgresql:///x", "names no server"),
], ids=["backend", "garbage", "driver", "no-server"])
def test_a_bad_history_url_is_bad_input(url: str, says: str, tmp_path: Path) -> None:
    for args in (("history", "query"), ("build", "--vendor", "cpu"),
                 ("report", "--merge", str(tmp_path))):
        out = invoke(*args, "--history", url)
        assert out.returncode == 2, (args, out.stderr)
        assert says in out.stderr and "s3cret" not in out.stderr + out.stdout


def test_oota_history_names_a_bad_url_too(tmp_path: Path) -> None:
    out = invoke("history", "query", env={"OOTA_HISTORY": "mysql://db/x"})
    assert out.returncode == 2 and out.stderr.startswith("error: OOTA_HISTORY 'mysql://db/x'")


def test_an_unreachable_server_is_exit_3_for_history_tasks(tmp_path: Path) -> None:
    url = f"postgresql://oota:s3cret@127.0.0.1:{closed_port()}/history"
    for args in (("query",), ("import", "--dir", str(tmp_path))):
        out = invoke("history", *args, "--history", url)
        assert out.returncode == 3, out.stderr
        assert "history postgresql+psycopg://oota:***@127.0.0.1:" in out.stderr
        assert "cannot be opened" in out.stderr and "s3cret" not in out.stderr


def test_a_run_whose_history_cannot_be_written_keeps_its_exit_code(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    url = f"postgresql://oota:s3cret@127.0.0.1:{closed_port()}/history"
    kept = history_target(url, False, "build", tmp_path)
    write_results(tmp_path / "results", [result("run-1", 20)])
    tasks._finish(Ran(results=typed(result("run-1", 20))), Project.of(), kept)  # no Exit: 0
    err = capsys.readouterr().err
    assert "warning: history postgresql+psycopg://oota:***@127.0.0.1:" in err
    assert "s3cret" not in err and "(import them later with `oota history import`)" in err


def test_build_and_verify_append_their_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    write_results(tmp_path / "results", [result("run-1", 20)])
    for origin in ("build", "verify"):
        kept = history_target(None, False, origin, tmp_path, env={})
        tasks._finish(Ran(results=typed(result("run-1", 20))), Project.of(), kept)
    assert "history: run run-1 (verify, 1 cell(s) added) in sqlite:///" in capsys.readouterr().err
    runs = read_runs(open_store(locate(None, {}, tmp_path)))
    assert [(r.key, r.origin) for r in runs] == [("run-1", "build"), ("run-1", "verify")]
    assert (tmp_path / "history.db").is_file()
    # the report a build writes shows the history with this run, as `invoke report` does
    hud = (tmp_path / "reports" / "hud.html").read_text(encoding="utf-8")
    assert "cpu-torch2.13.0-py3.11-debian12" in hud
    assert (tmp_path / "reports" / "hud.md").is_file()


def test_no_history_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_results(tmp_path / "results", [result("run-1", 20)])
    kept = history_target(None, True, "build", tmp_path, env={})
    tasks._finish(Ran(results=typed(result("run-1", 20))), Project.of(), kept)
    assert not (tmp_path / "history.db").exists()
    assert not (tmp_path / "reports" / "hud.html").exists()


def test_report_merge_appends_one_run(tmp_path: Path) -> None:
    a = write_results(tmp_path / "a", [result("run-a", 20, host="lab-a")])
    b = write_results(tmp_path / "b", [result("run-b", 20, host="lab-b", python="3.13",
                                              os_key="debian13")])
    url = f"sqlite:///{tmp_path / 'h.db'}"
    out = invoke("report", "--merge", str(a), "--merge", str(b), "--out",
                 str(tmp_path / "reports"), "--history", url)
    assert out.returncode == 0, out.stderr
    assert "history: run sha256:" in out.stderr and "(merge, 2 cell(s) added)" in out.stderr
    [run] = read_runs(open_store(locate(url, {}, tmp_path)))
    assert run.origin == "merge" and run.hosts == ("lab-a", "lab-b")
    # A report of one folder appends nothing (its build or verify did); it reads the history
    # for its HUD.
    alone = invoke("report", "--results", str(a), "--out", str(tmp_path / "r2"),
                   "--history", url)
    assert alone.returncode == 0 and "history: run" not in alone.stderr, alone.stderr
    assert len(read_runs(open_store(locate(url, {}, tmp_path)))) == 1
    assert (tmp_path / "r2" / "hud.html").is_file()


def test_a_history_file_that_cannot_be_opened_is_exit_3(tmp_path: Path) -> None:
    (tmp_path / "not-a-db").write_text("hello, I am text\n" * 100, encoding="utf-8")
    for url, why in ((f"sqlite:///{tmp_path / 'missing' / 'h.db'}", "unable to open"),
                     (f"sqlite:///{tmp_path / 'not-a-db'}", "not a database")):
        out = invoke("history", "query", "--history", url)
        assert out.returncode == 3 and why in out.stderr, out.stderr
        assert f"history {url} cannot be opened" in out.stderr


@pytest.mark.parametrize(("args", "says"), [
    (("history", "export"), "history 'export' is not one of import, query"),
    (("history", "import", "--vendor", "cpu"), "--vendor applies to `history query`"),
    (("history", "query", "--dir", "results"), "--dir applies to `history import`"),
    (("history", "import"), "name a results folder to import: --dir results"),
    (("history", "import", "--dir", "/nowhere/at/all"), "--dir /nowhere/at/all: no such folder"),
    (("history", "query", "--format", "yaml"), "--format 'yaml' is not one of table, json"),
    (("build", "--history", "sqlite:///x.db", "--no-history"), "exclude each other"),
], ids=["action", "query-flag-on-import", "dir-on-query", "no-dir", "missing-dir", "format",
        "history-and-no-history"])
def test_history_flags_are_checked(args: tuple[str, ...], says: str, tmp_path: Path) -> None:
    out = invoke(*args, "--history", f"sqlite:///{tmp_path / 'h.db'}") \
        if "--history" not in args else invoke(*args)
    assert out.returncode == 2 and says in out.stderr, out.stderr
