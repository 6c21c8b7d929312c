"""A release candidate's cell, built and verified for real against a local index, and the
report's go/no-go table beside the release cell of the same coordinates.

PyTorch serves its candidates from /whl/test/<platform>, versioned as the release they stand
for. download.pytorch.org is not reachable here, so the test serves its own test channel, as
the nightly test does (tests/docker/test_nightly.py): the host's torch 2.13.0+cpu wheel
rewritten to 2.16.0+cpu, with torch's dependencies, over HTTP on the host's bridge address.
The matrix has the release cell (2.13.0) and {channel: test, version: "2.16.0"}; both are
built and verified (install, compat, device layers) and the report says 'go'. A candidate
expected to be 2.17.0 fails the compat layer ('Torch version mismatch', PyTorch's smoke test
rule) and the report says 'no-go'.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.execute.build import BuildOptions
from oota.plan import plan, select
from oota.report.write import write_report
from tests.conftest import skip_for_host
from tests.engines import host_address
from tests.runs import build_cells

from .conftest import NAMESPACE, copy_project, lean_cpu_vendor, made_by
from .test_nightly import CANARY, MIRROR, WHEEL, index_server, make_index, renamed_wheel

CANDIDATE = "cpu-torchtest-py3.11-debian12"
RELEASE = "cpu-torch2.13.0-py3.11-debian12"


@pytest.fixture(scope="module")
def test_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A test channel holding the candidate 2.16.0+cpu, served on the host's bridge address."""
    if not WHEEL.is_file() or not MIRROR.is_dir():
        skip_for_host("the local wheel folders",
                      f"needs {WHEEL} and the local package mirror {MIRROR}")
    top = tmp_path_factory.mktemp("test-index")
    (top / "wheel").mkdir()
    make_index(top / "test", renamed_wheel(top / "wheel", "2.16.0+cpu"))
    gateway = str(host_address().ip)
    server = index_server(gateway, str(top), "test-index")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://oota:{CANARY}@{gateway}:{server.server_address[1]}/test/simple"
    finally:
        server.shutdown()
        server.server_close()


def build_and_report(engine: Any, run_id: str, root: Path, index: str,
                     release: str) -> tuple[dict[str, dict[str, Any]], str]:
    matrix_file = copy_project(root)
    lean_cpu_vendor(root)
    data = yaml.safe_load(matrix_file.read_text())
    data["vendors"] = {"cpu": {"os": ["debian12"], "python": ["3.11"], "torch": [
        "2.13.0", {"channel": "test", "index": index, "version": release}]}}
    matrix_file.write_text(yaml.safe_dump(data, sort_keys=False))
    matrix = load_matrix(matrix_file)
    cells = select(matrix, plan(matrix), everything=True)
    assert sorted(c.id for c in cells) == [RELEASE, CANDIDATE]
    options = BuildOptions(results_dir=root / "results", run_id=run_id, namespace=NAMESPACE,
                           layers=("install", "compat", "device"),
                           extra_labels=made_by(run_id))
    results = {r.cell.id: r.to_json() for r in build_cells(matrix, cells, engine, Console(),
                                                           options)}
    write_report(root / "results", root / "reports")
    text = (root / "reports" / "matrix.md").read_text(encoding="utf-8")
    return results, text.split("## Release candidates: go/no-go", 1)[1].split("\n## ", 1)[0]


def _row(table: str) -> str:
    return next(line for line in table.splitlines() if line.startswith("| cpu |"))


def test_a_candidate_that_is_its_release_is_go(engine: Any, run_id: str, test_index: str,
                                               tmp_path: Path) -> None:
    results, table = build_and_report(engine, run_id, tmp_path / "project", test_index,
                                      "2.16.0")
    candidate = results[CANDIDATE]
    assert candidate["status"] == "passed", candidate.get("message")
    assert candidate["cell"]["channel"] == "test"
    assert candidate["installed"]["torch"]["version"] == "2.16.0+cpu"
    check = next(t for t in candidate["tests"]
                 if t["id"].endswith("test_candidate_is_the_release_it_stands_for"))
    assert check["status"] == "passed" and check["data"]["expected"] == "2.16.0"
    row = _row(table)
    assert "**go**" in row and f"`{RELEASE}` (2.13.0+cpu)" in row
    assert "torch 2.13.0+cpu → 2.16.0+cpu" in table


def test_a_candidate_that_is_not_its_release_is_no_go(engine: Any, run_id: str,
                                                      test_index: str, tmp_path: Path) -> None:
    results, table = build_and_report(engine, run_id, tmp_path / "project", test_index,
                                      "2.17.0")
    check = next(t for t in results[CANDIDATE]["tests"]
                 if t["id"].endswith("test_candidate_is_the_release_it_stands_for"))
    assert check["status"] == "failed"
    assert "torch 2.16.0+cpu is installed, the candidate of 2.17.0 was expected" in \
        check["message"]
    assert "**no-go**" in _row(table) and "passed → failed ✗" in _row(table)
