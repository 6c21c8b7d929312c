"""Nothing is overwritten by less: a report is replaced only by one holding at least the results
it had, unless --replace says so. An empty or mistaken --results, merged folders whose every
result is corrupt, and a verify of one cell into another folder leave ``reports/`` as it was."""

from __future__ import annotations

import json
from pathlib import Path

from oota.api.history import History
from oota.api.reports import finish_report
from oota.project import Project
from oota.results.model import Result
from tests.unit.test_report import case, make_result, refresh, write_results
from tests.unit.test_results_checked import oota, write_raw


def cell(python: str) -> dict:
    return refresh(make_result("cpu", python=python, tests=[
        case("test_install.py::test_imports", "install")]))


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def reported(tmp_path: Path) -> dict[str, tuple[int, int]]:
    """A report of two cells in tmp_path/reports, as a lab's would be."""
    write_results(tmp_path / "results", [cell("3.11"), cell("3.13")])
    proc = oota("report", "--no-history", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return snapshot(tmp_path / "reports")


def test_an_empty_results_folder_does_not_wipe_the_report(tmp_path):
    before = reported(tmp_path)
    (tmp_path / "empty").mkdir()
    proc = oota("report", "--results", "empty", "--no-history", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: reports/ shows 2 result(s) of 2 cell(s); these results hold 0, without "
        "cpu-torch2.13.0-py3.11-debian12, cpu-torch2.13.0-py3.13-debian12; nothing written (a "
        "report is replaced only by one holding at least the results it had): check the "
        "results folder, write elsewhere with --out, or replace it anyway with --replace\n")
    assert snapshot(tmp_path / "reports") == before


def test_a_merge_of_corrupt_results_does_not_wipe_the_report(tmp_path):
    before = reported(tmp_path)
    for name in ("lab-a", "lab-b"):
        (write_raw(tmp_path / name, cell("3.11"))).write_text("{corrupt")
    proc = oota("report", "--merge", "lab-a", "--merge", "lab-b", "--no-history", cwd=tmp_path)
    assert proc.returncode == 2 and "these results hold 0" in proc.stderr
    assert snapshot(tmp_path / "reports") == before


def test_replace_says_so_and_writes_it(tmp_path):
    reported(tmp_path)
    write_results(tmp_path / "one", [cell("3.11")])
    proc = oota("report", "--results", "one", "--replace", "--no-history", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    cells = json.loads((tmp_path / "reports/results.json").read_text())["cells"]
    assert [c["id"] for c in cells] == ["cpu-torch2.13.0-py3.11-debian12"]


def test_more_results_replace_the_report_as_ever(tmp_path):
    reported(tmp_path)
    write_results(tmp_path / "results", [cell("3.12")])
    proc = oota("report", "--no-history", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads((tmp_path / "reports/results.json").read_text())["cells"]) == 3


def test_a_verify_into_another_folder_leaves_the_main_report_alone(tmp_path, monkeypatch):
    before = reported(tmp_path)
    write_results(tmp_path / "other", [cell("3.11")])
    monkeypatch.chdir(tmp_path)
    ran = [Result.from_json(cell("3.11"))]
    done = finish_report(ran, Project.of(results="other"),
                         History(location=None, origin="verify", root=tmp_path))
    assert done.cells is None
    assert done.notes[0].startswith("note: reports/ left as it was: reports/ shows 2 result(s) "
                                    "of 2 cell(s); these results hold 1, without "
                                    "cpu-torch2.13.0-py3.13-debian12; `oota report --results "
                                    "other --out OTHER` writes a report of these results")
    assert snapshot(tmp_path / "reports") == before
