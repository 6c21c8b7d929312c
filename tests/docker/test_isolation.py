"""A failing cell never stops a passing one, and both results are written; a suite that dies
ends its container at once."""

from __future__ import annotations

import json
import shutil
import time

import yaml

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import RUN_LABEL, RunRequest
from oota.plan import plan
from tests.runs import build_cells

from .conftest import DEFAULT_CELL, copy_project


def test_failing_cell_does_not_stop_the_next(built, engine, tmp_path):
    matrix_file = copy_project(tmp_path)
    data = yaml.safe_load(matrix_file.read_text())
    cpu = data["vendors"]["cpu"]
    # torch 0.0.1 does not exist for Python 3.11: pip must fail in the builder stage.
    cpu.update(os=["debian12"], python=["3.11"], torch=["0.0.1", "2.13.0"], exclude=[], include=[],
               default=[], platform=["linux/amd64"])
    matrix_file.write_text(yaml.safe_dump(data, sort_keys=False))
    matrix = load_matrix(matrix_file)
    cells = plan(matrix, ["cpu"])
    assert [c.id for c in cells] == ["cpu-torch0.0.1-py3.11-debian12", DEFAULT_CELL]
    results_dir = tmp_path / "results"
    # The passing cell is the session's image, unchanged: with the session's result beside it,
    # its verification holds (no second run of the suite, which `built` already ran).
    shutil.copytree(built.results_dir / DEFAULT_CELL, results_dir / DEFAULT_CELL)
    options = built.options.__class__(**{**_fields(built.options), "results_dir": results_dir,
                                         "rebuild": False})
    results = [r.to_json() for r in build_cells(matrix, cells, engine, Console(), options)]
    failing, passing = results
    assert "reused" in passing["stages"]["verify"]["detail"], passing["stages"]
    assert failing["status"] == "failed"
    assert failing["stages"]["build"]["status"] == "failed"
    assert "verify" not in failing["stages"]
    # The result says why, in pip's words, not only that docker build exited with 1.
    assert "No matching distribution found for torch==0.0.1" in failing["message"]
    assert passing["status"] == "passed", passing.get("message")
    for cell_id in (failing["cell"]["id"], passing["cell"]["id"]):
        on_disk = json.loads((results_dir / cell_id / "result.json").read_text())
        assert on_disk["status"] in ("failed", "passed")
    assert "torch==0.0.1" in (results_dir / failing["cell"]["id"] / "build.log").read_text()


def _fields(options) -> dict:
    return {name: getattr(options, name) for name in options.__dataclass_fields__}


def test_a_process_that_kills_itself_ends_its_container_at_once(engine, debian12_base, run_id):
    """The kernel spares a container's PID 1 every signal it has no handler for: a suite that
    ends itself by a signal (QEMU does so for an emulated program's crash) lived on there, and
    a crashed arm64 verification hung to its 30-minute deadline. oota's containers run an init."""
    started = time.monotonic()
    outcome = engine.run(RunRequest(image=debian12_base, labels={RUN_LABEL: run_id},
                                    command=["sh", "-c", "kill -SEGV $$; echo survived"],
                                    timeout_s=60))
    assert (outcome.exit_code, outcome.timed_out) == (139, False), outcome.output_tail
    assert "survived" not in outcome.output_tail
    assert time.monotonic() - started < 30
