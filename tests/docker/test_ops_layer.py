"""The ops layer (PyTorch's OpInfo tests, verify/test_ops.py) run for real in the session's CPU
image: the must-pass operators run whatever the budget, the rest stop at it (one skipped test
holds those, with their count), nothing fails on the CPU, and a skip-list entry naming an
operator skips it in every dtype.

One container, with a small budget (OOTA_OPS_BUDGET_S) so the test stays short.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from oota.engine.base import RUN_LABEL
from tests.docker.test_layers import CELL_IN_IMAGE, _read_file, run_verify

REPO = Path(__file__).resolve().parents[2]
MUST_PASS = [line.split(":", 1)[1].strip() for line in
             (REPO / "verify" / "ops-must-pass.yaml").read_text().splitlines()
             if line.startswith("- op:")]


@pytest.fixture(scope="module")
def ops_run(built, docker_client, run_id, tmp_path_factory) -> tuple[int, dict, str]:
    assert built.results[0]["stages"]["build"]["status"] == "passed", built.results[0]
    container = docker_client.containers.create(built.tag, command=["true"],
                                                labels={RUN_LABEL: run_id})
    try:
        cell = json.loads(_read_file(container, CELL_IN_IMAGE))
    finally:
        container.remove(force=True)
    skips = [{"id": "nn.functional.conv2d", "reason": "an operator's entry", "owner": "tests",
              "expires": "2099-12-31"}]
    override = tmp_path_factory.mktemp("ops") / "cell.json"
    override.write_text(json.dumps({**cell, "skips": skips}))
    override.chmod(0o644)
    return run_verify(docker_client, built.tag, run_id, "--layer", "ops",
                      volumes={str(override): {"bind": "/tmp/oota-cell.json", "mode": "ro"}},
                      environment={"OOTA_CELL_FILE": "/tmp/oota-cell.json",
                                   "OOTA_OPS_BUDGET_S": "5"})


def test_ops_layer_runs_must_pass_operators_and_stops_at_the_budget(ops_run):
    code, data, log = ops_run
    assert code == 0, log[-3000:]
    assert data["layers"] == ["ops"] and data["counts"].get("failed", 0) == 0
    ops = [t for t in data["tests"] if t["layer"] == "ops"]
    ran = [t for t in ops if (t.get("data") or {}).get("tried")]
    assert ran and all(t["status"] == "passed" for t in ran)
    # The CPU vendor compares nothing, and says so in the test's name and its record.
    assert all("::test_op_runs[" in t["id"] and t["data"]["compared"] is False for t in ran)
    assert "nothing was compared" in ran[0]["data"]["note"]
    done = {t["data"]["op"] for t in ran}
    assert set(MUST_PASS) - {"nn.functional.conv2d"} <= done
    # What the budget left unrun is one skipped test with the count (never a must-pass pair:
    # those all ran, above).
    (unrun,) = [t for t in ops if t["message"].startswith("time budget of 5 s spent")]
    pairs = unrun["data"]["unrun_pairs"]
    assert unrun["id"] == "test_ops.py::test_op_runs[unrun-by-budget]" and pairs > 0
    assert unrun["status"] == "skipped" and re.fullmatch(
        rf"time budget of 5 s spent \(OOTA_OPS_BUDGET_S\): {pairs} operator×dtype pairs of "
        rf"{unrun['data']['unrun_operators']} operators not run", unrun["message"])


def test_a_skip_entry_naming_an_operator_skips_it_in_every_dtype(ops_run):
    _, data, _ = ops_run
    conv = [t for t in data["tests"] if "[nn.functional.conv2d-" in t["id"]]
    assert conv and all(t["status"] == "skipped" for t in conv)
    # A dtype the OpInfo lacks keeps that reason (its mark comes first); every other says why.
    reasons = {t["id"]: t["message"] for t in conv}
    assert reasons["test_ops.py::test_op_runs[nn.functional.conv2d-float32]"].startswith(
        "skip list: an operator's entry")
    assert all(m.startswith(("skip list: an operator's entry", "the OpInfo of "))
               for m in reasons.values())
    assert data["skips"]["entries"][0]["matched"] == len(conv)
