"""The report from typed results, as a user sees it: an interrupted cell shown as such, the exit
code, and reports/ that is never half written nor written from a misspelled --results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from oota.api.runs import Ran, exit_code_for
from oota.errors import InputError
from oota.report import write as report_write
from oota.report.htmlpages import to_html
from oota.report.markdown import to_markdown
from oota.report.write import ReportShrinks, write_report
from oota.results.model import Result
from tests import forkcli
from tests.reports import build_report
from tests.unit.test_report import NOW, case, make_result, refresh, typed, write_results

REPO = Path(__file__).resolve().parents[2]


def interrupted_result() -> dict[str, Any]:
    result = make_result("cpu", python="3.13", os_key="debian13",
                         tests=[case("test_install.py::test_imports", "install")])
    result["stages"]["verify"] = {"status": "interrupted", "duration_s": 2.0,
                                  "message": "interrupted by the user", "log": "verify.log"}
    return refresh(result)


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    """`invoke ARGS` as a user runs it, from the checkout."""
    return forkcli.run([sys.executable, "-m", "invoke", *args], cwd=REPO, text=True,
                       capture_output=True, timeout=120, check=False,
                       env={**os.environ, "PYTHONPATH": str(REPO)})


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, Path]:
    """A results folder and the report written from it."""
    results = write_results(tmp_path / "results", [make_result("cpu"), interrupted_result()])
    write_report(results, tmp_path / "reports")
    return results, tmp_path / "reports"


# -- interrupted ------------------------------------------------------------------------------

def test_an_interrupted_cell_is_shown_as_interrupted() -> None:
    report = build_report(typed([make_result("cpu"), interrupted_result()]), [],
                          generated_at=NOW)
    assert report.counts == {"passed": 1, "interrupted": 1}
    row = next(r for r in report.rows if r.status == "interrupted")
    assert row.message == "verify: interrupted by the user"
    assert row.overall.symbol == "stopped"
    html = to_html(report)
    assert 'class="s interrupted"' in html and "1 interrupted" in html
    assert "**stopped**" in to_markdown(report)


def test_an_interrupted_cell_fails_the_run() -> None:
    passed, stopped = typed([make_result("cpu"), interrupted_result()])
    assert exit_code_for(Ran(results=[passed])) == 0
    assert exit_code_for(Ran(results=[passed, stopped])) == 1
    assert exit_code_for(Ran(results=[])) == 1
    # Every cell passed, but a host was lost on the way: the run says so.
    assert exit_code_for(Ran(results=[passed], lost=("gpu-b: stopped answering",))) == 4
    assert exit_code_for(Ran(results=[passed, stopped],
                                     lost=("gpu-b: stopped answering",))) == 1


# -- a report never half written ----------------------------------------------------------

def test_missing_results_folder_is_bad_input_and_the_report_stays(
        site: tuple[Path, Path], tmp_path: Path) -> None:
    _, reports = site
    before = snapshot(reports)
    run = invoke("report", "--results", str(tmp_path / "resluts"), "--out", str(reports))
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and str(tmp_path / "resluts") in lines[0]
    assert "no such results folder" in lines[0] and "Traceback" not in run.stderr
    assert snapshot(reports) == before


def test_out_naming_a_file_is_bad_input(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", [make_result("cpu")])
    (tmp_path / "notes.txt").write_text("mine\n")
    run = invoke("report", "--results", str(results), "--out", str(tmp_path / "notes.txt"))
    assert run.returncode == 2
    assert run.stderr.strip() == (f"error: --out {tmp_path / 'notes.txt'}: is a file, not a "
                                  "folder; name a folder for the report (default: reports)")
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_out_holding_other_files_is_refused(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", [make_result("cpu")])
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    with pytest.raises(InputError, match=r"holds files that are not part of a report "
                                         r"\(thesis.tex\)"):
        write_report(results, tmp_path / "mine")
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"


def test_a_failing_writer_leaves_the_previous_report(
        site: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    results, reports = site
    before = snapshot(reports)
    pages: list[str] = []

    def second_page_breaks(row: Any, rel: str) -> str:
        pages.append(row.id)
        if len(pages) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the cell pages are written
        return "<p>new</p>"

    monkeypatch.setattr(report_write, "cell_page", second_page_breaks)
    with pytest.raises(KeyboardInterrupt):
        write_report(results, reports)
    assert snapshot(reports) == before
    # No half-written folder beside it; the writers' lock file stays (test_report_race.py).
    assert [p.name for p in reports.parent.iterdir() if p.name.startswith(".")] == [
        ".reports.lock"]


def test_the_new_report_replaces_the_old_one_whole(site: tuple[Path, Path]) -> None:
    results, reports = site
    (results / "cpu-torch2.13.0-py3.11-debian12" / "result.json").unlink()
    with pytest.raises(ReportShrinks):  # fewer results than it shows: only when told to
        write_report(results, reports)
    report = write_report(results, reports, replace=True)
    assert [r.cell.id for r in report.results] == ["cpu-torch2.13.0-py3.13-debian13"]
    assert sorted(p.name for p in (reports / "cells").iterdir()) == [
        "cpu-torch2.13.0-py3.13-debian13.html"]
    assert not (reports / "compare.json").exists()
    assert oct(reports.stat().st_mode & 0o777) == oct(0o755)
    index = (reports / "index.html").read_text(encoding="utf-8")
    assert "files/cpu-torch2.13.0-py3.13-debian13/" in index  # links into reports/ itself
    assert ".reports.new" not in index


def test_what_a_killed_run_left_is_cleaned_up(site: tuple[Path, Path]) -> None:
    results, reports = site
    (reports.parent / ".reports.new-x1").mkdir()
    (reports.parent / ".reports.new-x1" / "index.html").write_text("half")
    reports.rename(reports.parent / ".reports.old-x2")  # killed between the two renames
    write_report(results, reports)
    assert sorted(p.name for p in reports.parent.iterdir()) == [
        ".reports.lock", "reports", "results"]
    assert json.loads((reports / "results.json").read_text())["counts"] == {
        "interrupted": 1, "passed": 1}


def test_a_report_folder_behind_a_link_is_filled_in_place(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", [make_result("cpu")])
    (tmp_path / "www").mkdir()
    (tmp_path / "reports").symlink_to(tmp_path / "www")
    write_report(results, tmp_path / "reports")
    assert (tmp_path / "reports").is_symlink()
    assert (tmp_path / "www" / "index.html").is_file()


def test_the_report_reads_results_back_as_the_model(site: tuple[Path, Path]) -> None:
    results, reports = site
    report = write_report(results, reports)
    assert all(isinstance(r, Result) for r in report.results)
    data = json.loads((reports / "results.json").read_text())
    stopped = next(c for c in data["cells"] if c["status"] == "interrupted")
    assert stopped["message"] == "verify: interrupted by the user"
