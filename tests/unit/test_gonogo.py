"""Release candidates: a `{channel: test}` torch value makes a candidate cell, and the report's
go/no-go table puts it beside the release cell of the same coordinates, per layer."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest

from oota.config.matrix import load_matrix
from oota.errors import MatrixError
from oota.plan import plan
from oota.render import cell_manifest
from oota.report.write import write_report
from tests.unit.test_report import case, make_result, refresh, write_results

CANDIDATE = "cpu-torchtest-py3.11-debian12"


def _candidate(tests: list[dict[str, Any]]) -> dict[str, Any]:
    result = make_result(torch="test", tests=tests, installed_torch="2.16.0+cpu")
    result["cell"] |= {"id": CANDIDATE, "channel": "test"}
    result["image"]["tag"] = f"oota/cpu:{CANDIDATE}"
    return refresh(result)


TESTS = [case("test_install.py::test_imports", "install"),
         case("test_compat.py::test_torch_is_the_cells_release", "compat"),
         case("test_device.py::test_matmul[float32]", "device")]


def _report(tmp_path: Path, candidate_tests: list[dict[str, Any]]) -> tuple[str, str]:
    release = make_result(torch="2.15.0", tests=TESTS)
    results = write_results(tmp_path / "results", [release, _candidate(candidate_tests)])
    write_report(results, tmp_path / "reports")
    matrix_md = (tmp_path / "reports" / "matrix.md").read_text(encoding="utf-8")
    index = html.unescape((tmp_path / "reports" / "index.html").read_text(encoding="utf-8"))
    return matrix_md.split("## Release candidates: go/no-go", 1)[1].split("\n## ", 1)[0], index


def test_a_candidate_that_does_as_well_as_the_release_is_go(tmp_path: Path) -> None:
    table, index = _report(tmp_path, TESTS)
    row = next(line for line in table.splitlines() if line.startswith("| cpu |"))
    assert f"`{CANDIDATE}` (2.16.0+cpu)" in row
    assert "`cpu-torch2.15.0-py3.11-debian12` (2.15.0+cpu)" in row
    assert "**go**" in row and "passed → passed" in row and "✗" not in row
    assert "torch 2.15.0+cpu → 2.16.0+cpu" in table
    assert "Release candidates: go/no-go" in index and "<strong>go</strong>" in \
        (tmp_path / "reports" / "index.html").read_text(encoding="utf-8")


def test_a_layer_the_candidate_breaks_is_no_go_and_says_what_changed(tmp_path: Path) -> None:
    broken = [*TESTS[:2], case("test_device.py::test_matmul[float32]", "device", "failed",
                                "mismatch: 3 of 16 elements")]
    table, _ = _report(tmp_path, broken)
    row = next(line for line in table.splitlines() if line.startswith("| cpu |"))
    assert "**no-go**" in row and "passed → failed ✗" in row
    assert "test\\_device.py::test\\_matmul\\[float32\\]: passed → failed" in table


def test_the_test_channel_cell_and_its_expected_release(project) -> None:
    project.write(project.matrix.read_text().replace(
        'torch: ["2.13.0"]',
        'torch: ["2.13.0", {channel: test, version: "2.16.0", index: "http://10.0.0.1/t"}]'))
    cells = {c.id: c for c in plan(load_matrix(project.matrix))}
    assert CANDIDATE in cells and "cpu-torch2.13.0-py3.11-debian12" in cells
    channel = cell_manifest(cells[CANDIDATE])["channel"]
    assert channel == {"name": "test", "index_url": "http://10.0.0.1/t", "max_age_days": 3,
                       "version": "2.16.0"}


def test_the_default_test_index_is_pytorchs(project) -> None:
    project.write(project.matrix.read_text().replace('torch: ["2.13.0"]',
                                                     'torch: ["2.13.0", {channel: test}]'))
    cell = next(c for c in plan(load_matrix(project.matrix)) if c.id == CANDIDATE)
    assert cell.index_url == "https://download.pytorch.org/whl/test/cpu"


@pytest.mark.parametrize(("entry", "message"), [
    ('{channel: nightly, version: "2.16.0"}', "only the test channel names the version"),
    ('{channel: test, version: "2.x"}', "'2.x' is not a version"),
])
def test_a_release_on_the_wrong_channel_or_not_a_version_is_located(project, entry: str,
                                                                   message: str) -> None:
    project.write(project.matrix.read_text().replace('torch: ["2.13.0"]',
                                                     f'torch: ["2.13.0", {entry}]'))
    with pytest.raises(MatrixError, match=message):
        load_matrix(project.matrix)
