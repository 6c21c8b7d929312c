"""A fully cached rebuild of an unchanged cell is the same image: no clock and no run id in its
labels, and the sealed image (the build output plus its verification) stays in place, also
when the verification that follows is interrupted."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time

import pytest

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import RUN_LABEL, SEALED_FROM_LABEL
from oota.execute.interrupts import Interrupted, signals_as_interrupts
from oota.execute.verify import EXPECTED_IN_IMAGE
from oota.plan import plan, select
from tests.runs import build_cells

from .conftest import DEFAULT_CELL, REPO


def _rebuild(built, engine, tmp_path, run_id: str, *, verify: bool) -> dict:
    """Rebuild the default cell as the run ``run_id`` (not the shared image's run: the end of
    a run removes every container of its id, and other workers run some of that one's);
    its result as result.json holds it."""
    options = dataclasses.replace(built.options, results_dir=tmp_path, rebuild=True,
                                  verify=verify, run_id=run_id)
    matrix = load_matrix(REPO / "matrix.yaml")
    cells = select(matrix, plan(matrix, ["cpu"]), ids=[DEFAULT_CELL])
    (result,) = build_cells(matrix, cells, engine, Console(), options)
    return result.to_json()


def test_a_rebuild_of_an_unchanged_cell_is_the_same_image(built, engine, tmp_path, run_id):
    first = built.results[0]["image"]
    sealed, output = first["sealed"]["id"], first["digest"]
    assert engine.image_labels(built.tag)[SEALED_FROM_LABEL] == output

    result = _rebuild(built, engine, tmp_path / "build", run_id, verify=False)
    assert result["stages"]["build"]["status"] == "passed"
    assert "up_to_date" not in result["stages"]["build"].get("detail", {})
    assert engine.image_id(built.tag) == sealed      # the very image, seal and all
    assert engine.image_digest(built.tag) == output  # made from the same build output



def _sigterm_once_verifying(client, run_id: str, stop: threading.Event) -> None:
    """Send this process SIGTERM once the verify container of ``run_id`` runs."""
    selector = {"label": [f"{RUN_LABEL}={run_id}", f"oota.cell={DEFAULT_CELL}"],
                "status": "running"}
    deadline = time.monotonic() + 300
    while not stop.is_set() and time.monotonic() < deadline:
        if client.containers.list(filters=selector):
            os.kill(os.getpid(), signal.SIGTERM)
            return
        time.sleep(0.05)


def test_an_interrupted_verify_of_a_rebuild_keeps_the_sealed_image(built, engine, docker_client,
                                                                   tmp_path, run_id):
    sealed = built.results[0]["image"]["sealed"]["id"]
    stop = threading.Event()
    watcher = threading.Thread(target=_sigterm_once_verifying,
                               args=(docker_client, run_id, stop))
    try:
        with pytest.raises(Interrupted), signals_as_interrupts():
            watcher.start()
            _rebuild(built, engine, tmp_path, run_id, verify=True)
    finally:
        stop.set()
        watcher.join()
    result = json.loads((tmp_path / DEFAULT_CELL / "result.json").read_text())
    assert result["stages"]["build"]["status"] == "passed"
    assert result["stages"]["verify"]["status"] == "interrupted"
    assert engine.image_id(built.tag) == sealed
    assert json.loads(engine.read_file(built.tag, EXPECTED_IN_IMAGE))["status"] == "passed"
