"""Where a task reads and writes (oota/project.py): the folders a flag names are read as
typed, relative to the current folder; those left out are the project's, beside --matrix.
A build with ``--matrix lab/matrix.yaml`` writes its results, report and history in lab/,
the report marked against lab/matrix.yaml as ``report --matrix`` marks it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from oota import tasks
from oota.api.fields import parse
from oota.api.history import history_location, history_target
from oota.api.requests import (
    BuildRequest,
    HistoryRequest,
    PublishRequest,
    PullRequest,
    ReportRequest,
    VerifyRequest,
)
from oota.api.runs import Ran
from oota.project import Project, command_name
from oota.results.model import Result
from tests import forkcli
from tests.conftest import REPO
from tests.unit.test_report import make_result, write_results

UNVERIFIED = "## Cells resting on unverified vendor facts"


def test_in_a_checkout_a_build_writes_where_it_always_did(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    project = parse(BuildRequest, vendor=["cpu"]).project()
    assert (project.results, project.reports, project.cache) == (
        Path("results"), Path("reports"), Path(".oota-cache"))
    where = history_location(None, root=project.root, env={})
    assert where is not None and where.url == f"sqlite:///{tmp_path / 'history.db'}"


@pytest.mark.parametrize("request_class", [BuildRequest, VerifyRequest, PublishRequest,
                                           ReportRequest])
def test_defaults_live_beside_the_matrix_and_flags_as_typed(
        request_class: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    extra = {"registry": "registry.lab:5000"} if request_class is PublishRequest else {}
    beside = parse(request_class, matrix="lab/matrix.yaml", **extra).project()
    assert (beside.root, beside.results, beside.reports) == (
        Path("lab"), Path("lab/results"), Path("lab/reports"))
    given = parse(request_class, matrix="lab/matrix.yaml", results="mine", **extra).project()
    assert given.results == Path("mine")   # relative to the current folder, as typed


def test_history_and_pull_use_the_matrix_folder(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse(PullRequest, ref="r/o/cpu:x", matrix="lab/matrix.yaml").project().cache == \
        Path("lab/.oota-cache")
    root = parse(HistoryRequest, action="digest", matrix="lab/matrix.yaml").project().root
    where = history_location(None, root=root, env={})
    assert where is not None and where.url == f"sqlite:///{tmp_path / 'lab' / 'history.db'}"


def test_a_build_with_matrix_elsewhere_writes_and_marks_its_report_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The CUDA 13.0 cell rests on an unverified fact of the shipped matrix: the report a
    build writes after its run marks it, as `report --matrix lab/matrix.yaml` does (it read
    ./matrix.yaml, absent here, and marked nothing)."""
    (tmp_path / "lab").mkdir()
    shutil.copy(REPO / "matrix.yaml", tmp_path / "lab" / "matrix.yaml")
    monkeypatch.chdir(tmp_path)
    request = parse(BuildRequest, matrix="lab/matrix.yaml", no_history=True)
    project = request.project()
    cell = make_result("cuda", torch="2.15.0", toolkit="cuda", toolkit_version="13.0",
                       installed_torch="2.15.0")
    write_results(project.results, [cell])
    kept = history_target(None, True, "build", project.root, env={})
    tasks._finish(Ran(results=[Result.from_json(cell)]), project, kept)
    assert "report: lab/reports/matrix.md, lab/reports/index.html (1 cells)" in \
        capsys.readouterr().out
    section = (tmp_path / "lab/reports/matrix.md").read_text(encoding="utf-8")
    assert f"- `{cell['cell']['id']}`" in section.split(UNVERIFIED, 1)[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab"]   # nothing in the cwd


def test_the_command_named_is_the_one_the_folder_has(tmp_path: Path) -> None:
    assert command_name(tmp_path) == "oota"
    (tmp_path / "oota.sh").write_text("#!/bin/sh\n")
    assert command_name(tmp_path) == "./oota.sh"
    assert command_name(REPO) == "./oota.sh"
    assert Project.of(tmp_path / "matrix.yaml").cache == tmp_path / ".oota-cache"


def test_init_elsewhere_names_the_command_and_the_folders_of_that_project(tmp_path: Path) -> None:
    proc = forkcli.run([sys.executable, "-m", "oota", "init", "--vendor", "acme", "--matrix",
                        "lab/matrix.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == ("next: oota build --vendor acme --matrix "
                                            "lab/matrix.yaml, then open lab/reports/index.html")
