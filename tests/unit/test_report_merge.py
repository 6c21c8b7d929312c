"""`report --merge`: one report from results folders made on several hosts or CI runners, every
copy of a cell kept and shown agreeing or disagreeing, never one overwriting another."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from oota.errors import InputError
from oota.report.data import Report, collect_merged
from oota.report.htmlpages import cell_page, to_html
from oota.report.jsondoc import to_json
from oota.report.markdown import to_markdown
from oota.report.rows import Origin
from oota.report.write import write_report
from oota.results.model import Result
from tests import forkcli
from tests.unit.test_report import case, make_result, refresh, write_results

REPO = Path(__file__).resolve().parents[2]
MATMUL = "test_device.py::test_matmul[float16]"
CELL = "cpu-torch2.13.0-py3.11-debian12"
OTHER = "cpu-torch2.13.0-py3.13-debian13"


def host(engine: str | None, hostname: str = "box") -> dict[str, Any]:
    facts: dict[str, Any] = {"arch": "x86_64", "hostname": hostname}
    if engine is not None:
        facts |= {"engine": engine, "endpoint": f"tcp://{engine}.lab:2376"}
    return facts


def cell(engine: str | None, matmul: str = "passed", *, hostname: str = "box",
         run_id: str = "abc123", python: str = "3.11", os_key: str = "debian12"
         ) -> dict[str, Any]:
    tests = [case("test_install.py::test_imports", "install"),
             case(MATMUL, "device", matmul, "" if matmul == "passed" else "max abs diff 0.5")]
    result = make_result("cpu", python=python, os_key=os_key, tests=tests,
                         host=host(engine, hostname))
    result["run_id"] = run_id
    return refresh(result)


def folders(tmp_path: Path, a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[Path]:
    """Two runners' artifacts unpacked side by side, as the workflow's last job has them."""
    return [write_results(tmp_path / "artifacts" / "results-A", a),
            write_results(tmp_path / "artifacts" / "results-B", b)]


def plain(report: Report) -> Any:
    """results.json as a reader loads it."""
    return json.loads(json.dumps(to_json(report)))


def oota(*args: str) -> subprocess.CompletedProcess[str]:
    """`oota ARGS` as a user runs it, from the checkout."""
    return forkcli.run([sys.executable, "-m", "oota", *args], cwd=REPO, text=True,
                       capture_output=True, timeout=120, check=False,
                       env={**os.environ, "PYTHONPATH": str(REPO)})


# -- grouping copies ----------------------------------------------------------------------------

def test_copies_that_agree_are_kept_and_shown_agreeing(tmp_path: Path) -> None:
    report = collect_merged(folders(tmp_path, [cell("lab-a")], [cell("lab-b", run_id="b2")]))
    (group,) = report.groups
    assert [r.origin for r in group.copies] == ["lab-a", "lab-b"]
    assert group.agreement == "agree" and group.differences == ()
    assert report.counts == {"passed": 1}  # the summary counts the cell once
    md = to_markdown(report)
    assert f"| `{CELL}` (2 copies, they agree) |" in md
    assert "| ↳ lab-a |" in md and "| ↳ lab-b |" in md
    assert "2 result files in 2 folders: 1 cells (1 passed)" in md
    data = plain(report)
    (entry,) = data["cells"]
    assert entry["agreement"] == "agree" and entry["status"] == "passed"
    assert [c["origin"]["label"] for c in entry["copies"]] == ["lab-a", "lab-b"]
    assert entry["copies"][1]["origin"]["endpoint"] == "tcp://lab-b.lab:2376"


def test_copies_that_disagree_name_the_test_and_the_hosts(tmp_path: Path) -> None:
    report = collect_merged(folders(tmp_path, [cell("lab-a")],
                                    [cell("lab-b", "failed", run_id="b2")]))
    (group,) = report.groups
    line = f"{MATMUL}: passed on lab-a, failed on lab-b"
    assert group.status == "failed"  # the worst copy
    assert group.agreement == "disagree" and line in group.differences
    assert report.counts == {"failed": 1}
    md = to_markdown(report)
    assert "(2 copies, they disagree)" in md and "## Cells from more than one host" in md
    assert "test\\_device.py::test\\_matmul\\[float16\\]: passed on lab-a, failed on lab-b" in md
    html = to_html(report)
    assert 'class="disagree"' in html and line in html
    assert f'href="cells/{CELL}.html#copy-2"' in html
    page = cell_page(group, "../../results")
    assert 'id="copy-1"' in page and 'id="copy-2"' in page and line in page
    entry = plain(report)["cells"][0]
    assert entry["agreement"] == "disagree" and line in entry["differences"]
    assert [c["status"] for c in entry["copies"]] == ["passed", "failed"]


def test_a_cell_in_one_folder_only_is_one_copy(tmp_path: Path) -> None:
    report = collect_merged(folders(tmp_path, [cell("lab-a"), cell("lab-a", python="3.13",
                                                                  os_key="debian13")],
                                    [cell("lab-b", run_id="b2")]))
    by_id = {g.id: g for g in report.groups}
    assert len(by_id[CELL].copies) == 2
    assert len(by_id[OTHER].copies) == 1 and by_id[OTHER].agreement is None
    assert report.counts == {"passed": 2}
    only = next(c for c in plain(report)["cells"] if c["id"] == OTHER)
    assert only["agreement"] is None and len(only["copies"]) == 1


def test_the_same_folder_twice_is_one_copy(tmp_path: Path) -> None:
    a, _ = folders(tmp_path, [cell("lab-a")], [cell("lab-b")])
    report = collect_merged([a, a])
    (group,) = report.groups
    assert len(group.copies) == 1 and report.sources == (str(a),)
    assert len(report.results) == 1


def test_the_same_host_twice_is_told_apart_by_its_run(tmp_path: Path) -> None:
    report = collect_merged(folders(tmp_path, [cell("lab-a", run_id="run1")],
                                    [cell("lab-a", "failed", run_id="run2")]))
    (group,) = report.groups
    assert [r.origin for r in group.copies] == ["lab-a, run run1", "lab-a, run run2"]
    assert f"{MATMUL}: passed on lab-a, run run1, failed on lab-a, run run2" in group.differences


@pytest.mark.parametrize(("facts", "place"), [
    pytest.param({"engine": "lab-a", "hostname": "box"}, "lab-a", id="engine-name"),
    pytest.param({"engine": "local", "hostname": "runner-7"}, "runner-7", id="local-engine"),
    pytest.param({"hostname": "old-box"}, "old-box", id="older-result"),
    pytest.param({}, "unknown host", id="nothing-known"),
])
def test_a_copy_is_named_by_its_origin(facts: dict[str, Any], place: str) -> None:
    result = make_result("cpu", host={"arch": "x86_64", **facts})
    assert Origin.of(Result.from_json(result)).place == place


def test_two_runners_with_the_default_engine_are_two_hosts(tmp_path: Path) -> None:
    report = collect_merged(folders(tmp_path, [cell("local", hostname="runner-1")],
                                    [cell("local", "error", hostname="runner-2")]))
    (group,) = report.groups
    assert [r.origin for r in group.copies] == ["runner-1", "runner-2"]
    assert group.status == "error"


def test_links_point_into_each_copys_files(tmp_path: Path) -> None:
    """Each copy's files are copied into the report, one folder per copy, and linked there."""
    dirs = folders(tmp_path, [cell("lab-a")], [cell("lab-b", run_id="b2")])
    write_report(tmp_path / "results", tmp_path / "reports", merge=dirs)
    index = (tmp_path / "reports" / "index.html").read_text(encoding="utf-8")
    assert f'href="files/{CELL}.1/build.log"' in index
    assert f'href="files/{CELL}.2/build.log"' in index
    page = (tmp_path / "reports" / "cells" / f"{CELL}.html").read_text(encoding="utf-8")
    assert f'href="../files/{CELL}.2/verify.log"' in page
    copied = tmp_path / "reports" / "files" / f"{CELL}.2" / "verify.log"
    assert copied.read_bytes() == (dirs[1] / CELL / "verify.log").read_bytes()


def test_a_folder_of_one_cell_can_be_merged(tmp_path: Path) -> None:
    """An artifact uploaded per cell unpacks as that cell's folder (result.json at its top)."""
    a, b = folders(tmp_path, [cell("lab-a")], [cell("lab-b", run_id="b2")])
    report = collect_merged([a, b / CELL])
    assert [r.origin for r in report.groups[0].copies] == ["lab-a", "lab-b"]


def test_the_matrix_stays_under_its_bound(tmp_path: Path) -> None:
    many = [cell(f"lab-{i}", "failed" if i % 2 else "passed", run_id=f"r{i}") for i in range(40)]
    dirs = [write_results(tmp_path / f"r{i}", [c]) for i, c in enumerate(many)]
    md = to_markdown(collect_merged(dirs), limit=3000)
    assert len(md.encode()) <= 3000 and "**Truncated:**" in md


# -- without --merge nothing changes ----------------------------------------------------------

def test_one_folder_has_no_copies_section(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", [cell("lab-a")])
    report = write_report(results, tmp_path / "reports")
    data = json.loads((tmp_path / "reports" / "results.json").read_text(encoding="utf-8"))
    assert "merged_from" not in data and "copies" not in data["cells"][0]
    assert not report.merged
    md = (tmp_path / "reports" / "matrix.md").read_text(encoding="utf-8")
    assert "Cells from more than one host" not in md and "folders" not in md.splitlines()[2]


# -- bad input ----------------------------------------------------------------------------------

def test_merge_refuses_a_missing_or_empty_folder_and_compare(tmp_path: Path) -> None:
    good = write_results(tmp_path / "good", [cell("lab-a")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"--merge .*missing: no such results folder"):
        write_report(good, tmp_path / "reports", merge=[good, tmp_path / "missing"])
    with pytest.raises(InputError, match=r"--merge .*empty: holds no result files"):
        write_report(good, tmp_path / "reports", merge=[tmp_path / "empty"])
    with pytest.raises(InputError, match="--compare takes one results folder"):
        write_report(good, tmp_path / "reports", good, merge=[good])
    assert not (tmp_path / "reports").exists()


# -- through the real command ---------------------------------------------------------------

def test_merge_through_the_command(tmp_path: Path) -> None:
    a, b = folders(tmp_path, [cell("lab-a"), cell("lab-a", python="3.13", os_key="debian13")],
                   [cell("lab-b", "failed", run_id="b2")])
    broken = cell("lab-b", run_id="b2", python="3.13", os_key="debian13")
    (b / OTHER).mkdir()
    (b / OTHER / "result.json").write_text(json.dumps(broken)[:-20], encoding="utf-8")
    out = tmp_path / "reports"
    proc = oota("report", "--merge", str(a), "--merge", str(b), "--out", str(out), "--no-history")
    assert proc.returncode == 0, proc.stderr
    assert "2 cells" in proc.stdout and "disagreeing: 1" in proc.stdout
    assert f"{CELL}: status: passed on lab-a, failed on lab-b" in proc.stdout
    assert f"warning: {b / OTHER / 'result.json'}: unreadable" in proc.stderr
    assert "Traceback" not in proc.stderr
    for name in ("matrix.md", "index.html", "results.json", f"cells/{CELL}.html",
                 f"cells/{OTHER}.html"):
        assert (out / name).is_file(), name
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert data["merged_from"] == [str(a), str(b)] and data["counts"] == {"failed": 1,
                                                                          "passed": 1}


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--merge", "{tmp}/nowhere"], "--merge {tmp}/nowhere: no such results folder",
                 id="missing"),
    pytest.param(["--merge", "{tmp}/empty"], "--merge {tmp}/empty: holds no result files",
                 id="empty"),
    pytest.param(["--merge", "{tmp}/empty", "--results", "{tmp}/empty"],
                 "--merge and --results {tmp}/empty exclude each other", id="with-results"),
])
def test_bad_merge_flags_are_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                                 message: str) -> None:
    (tmp_path / "empty").mkdir()
    proc = oota("report", *[a.format(tmp=tmp_path) for a in args],
                "--out", str(tmp_path / "reports"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        line for line in proc.stderr.strip().splitlines() if line.startswith("error: ")]
    assert message.format(tmp=tmp_path) in proc.stderr
    assert not (tmp_path / "reports").exists()


def test_a_cell_run_twice_on_one_host_is_counted_once_and_kept_in_the_history(
        tmp_path: Path) -> None:
    """A re-run of one cell on one Engine (under two names: 'main' in hosts.yaml and the
    machine's name without it) is one host, two copies; the merged run's history has both."""
    first, again = cell("main", run_id="r1"), cell("local", "failed", run_id="r2", hostname="vm")
    for data in (first, again):
        data["host"]["engine_id"] = "e" * 16
    a, b = folders(tmp_path, [refresh(first)], [refresh(again)])
    history = tmp_path / "history.db"
    proc = oota("report", "--merge", str(a), "--merge", str(b), "--out", str(tmp_path / "r"),
                "--history", f"sqlite:///{history}")
    assert proc.returncode == 0, proc.stderr
    assert "cells run on more than one host: 0, run more than once on one host: 1" in proc.stdout
    assert "cannot be written" not in proc.stderr and "2 cell(s) added" in proc.stderr
