"""A failing cell never stops a passing one, and both results are written; a suite that dies
ends its container at once; the end of a run removes its own containers only."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time

import yaml

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import IMAGE_RUN_LABEL, RUN_LABEL, BuildRequest, RunRequest
from oota.plan import plan
from tests.runs import build_cells

from .conftest import DEFAULT_CELL, copy_project


def test_failing_cell_does_not_stop_the_next(built, engine, tmp_path, run_id):
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
    # A run of its own id: the end of a run removes every container of its id, and other
    # workers run containers of the shared image's meanwhile.
    options = dataclasses.replace(built.options, results_dir=results_dir, rebuild=False,
                                  run_id=run_id)
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


def test_the_end_of_a_run_leaves_the_containers_others_started_from_its_images(
        engine, docker_client, debian12_base, run_id, tmp_path):
    """A container carries its image's labels. An image a run makes (a lock builder) is
    labelled ``oota.image-run``, never ``oota.run``: the end of the run, which removes every
    container labelled ``oota.run`` with its id, leaves a container someone else started from
    that image running (the Docker tests' judge, started from the shared image, was killed so
    by the end of another test's run, exit 137); the run's own container goes, and the image
    goes when its images are asked for."""
    made = f"{run_id}-made"
    (tmp_path / "Dockerfile").write_text(f"FROM {debian12_base} AS runtime\n")
    tag = f"oota-test/made-by:{made}"
    engine.build(BuildRequest(context=tmp_path, tag=tag, labels={IMAGE_RUN_LABEL: made}),
                 lambda _event: None)
    others = docker_client.containers.run(tag, ["sleep", "120"], detach=True)
    own = docker_client.containers.run(tag, ["sleep", "120"], detach=True,
                                       labels={RUN_LABEL: made})
    try:
        assert engine.cleanup(made, images=False) == 1
        others.reload()
        assert others.status == "running"
        assert not docker_client.containers.list(all=True, filters={"id": own.id})
    finally:
        others.remove(force=True)
    assert engine.cleanup(made, images=True) == 1
    assert engine.image_id(tag) is None
