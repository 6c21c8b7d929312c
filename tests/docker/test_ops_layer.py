"""The ops layer (PyTorch's OpInfo tests, verify/test_ops.py) run for real in the session's CPU
image: the must-pass operators run whatever the budget, the rest stop at it (one skipped test
holds those, with their count), nothing fails on the CPU, and a skip-list entry naming an
operator skips it in every dtype. A kernel that crashes the process fails its pair, named by
its signal, and the layer goes on; workers that keep crashing never hang it.

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


def _cell_file(built, docker_client, run_id, folder: Path, change) -> Path:
    """The image's cell.json as ``change`` makes it of the image's own, written into ``folder``
    for a container to read (OOTA_CELL_FILE)."""
    container = docker_client.containers.create(built.tag, command=["true"],
                                                labels={RUN_LABEL: run_id})
    try:
        cell = json.loads(_read_file(container, CELL_IN_IMAGE))
    finally:
        container.remove(force=True)
    path = folder / "cell.json"
    path.write_text(json.dumps(change(cell)))
    path.chmod(0o644)
    return path


@pytest.fixture(scope="module")
def cell_override(built, docker_client, run_id, tmp_path_factory) -> Path:
    """The image's cell.json with float32 alone as the ops layer's dtype."""
    return _cell_file(built, docker_client, run_id, tmp_path_factory.mktemp("float32"),
                      lambda cell: {**cell, "verify": {**cell.get("verify", {}),
                                                       "dtypes": ["float32"]}})


@pytest.fixture(scope="module")
def ops_run(built, docker_client, run_id, tmp_path_factory) -> tuple[int, dict, str]:
    assert built.results[0]["stages"]["build"]["status"] == "passed", built.results[0]
    skips = [{"id": "nn.functional.conv2d", "reason": "an operator's entry", "owner": "tests",
              "expires": "2099-12-31"}]
    override = _cell_file(built, docker_client, run_id, tmp_path_factory.mktemp("ops"),
                          lambda cell: {**cell, "skips": skips})
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


# A vendor hook (verify/oota_hooks.py loads it) whose tanh kernel crashes the process, as
# PyTorch/XLA's roll (SIGFPE) and nll_loss (SIGSEGV) did: only in the ops layer's worker
# processes, which judge the pairs (the pytest process's device layer uses no tanh anyway).
CRASHING_TANH = """\
import os
import signal

import torch

# A worker process of the ops layer, or the process that runs a failed test again (which
# judges in process): the kernel crashes wherever tanh runs, as a real one would.
if os.environ.get("OOTA_OPS_FOLDER") or os.environ.get("OOTA_RERUN"):
    _library = torch.library.Library("aten", "IMPL")

    def _crash(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGSEGV)

    _library.impl("tanh", _crash, "CPU")
"""


def test_a_kernel_that_crashes_fails_its_pair_and_the_layer_goes_on(built, docker_client, run_id,
                                                                    cell_override, tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "oota_vendor.py").write_text(CRASHING_TANH)
    must = tmp_path / "must-pass.yaml"
    must.write_text("- op: add\n  reason: before the crash\n- op: tanh\n  reason: crashes\n"
                    "- op: mul\n  reason: after the crash, on a new worker\n")
    for path in (hook, hook / "oota_vendor.py", must):
        path.chmod(0o755 if path.is_dir() else 0o644)
    code, data, log = run_verify(
        docker_client, built.tag, run_id, "--layer", "ops",
        volumes={str(hook): {"bind": "/x/hook", "mode": "ro"},
                 str(must): {"bind": "/opt/oota/verify/ops-must-pass.yaml", "mode": "ro"},
                 str(cell_override): {"bind": "/tmp/oota-cell.json", "mode": "ro"}},
        environment={"OOTA_VENDOR_VERIFY": "/x/hook", "OOTA_OPS_BUDGET_S": "0",
                     "OOTA_OPS_WORKERS": "1", "OOTA_CELL_FILE": "/tmp/oota-cell.json"})
    assert data, (code, log[-3000:])  # the run ended and wrote its results
    pairs = {t["id"].split("[", 1)[1].rstrip("]"): t for t in data["tests"] if "[" in t["id"]}
    assert pairs["add-float32"]["status"] == "passed", pairs["add-float32"]
    assert pairs["mul-float32"]["status"] == "passed", pairs["mul-float32"]
    tanh = pairs["tanh-float32"]
    assert tanh["status"] == "failed" and "killed by SIGSEGV" in tanh["message"], tanh
    assert "_crash" in tanh["message"]  # the worker's Python stack (faulthandler)


def test_workers_that_keep_crashing_leave_no_pair_waiting(built, docker_client, run_id):
    script = REPO / "tests" / "docker" / "opsworkers_crash.py"
    output = docker_client.containers.run(
        built.tag, ["python", "/x/opsworkers_crash.py"], remove=True, stderr=False,
        labels={RUN_LABEL: run_id},
        volumes={str(script): {"bind": "/x/opsworkers_crash.py", "mode": "ro"}})
    found = json.loads(output.decode().strip().splitlines()[-1])
    results = found["results"]
    assert found["restarts"] == 8
    held = results["tanh-float32"]
    assert held["status"] == "failed" and "killed by SIGSEGV" in held["message"], held
    assert "judging a pair, then a crash" in held["message"]  # the end of the worker's log
    left = ("no worker process is left to judge this pair (8 restarted after crashes; the last "
            "killed by SIGSEGV)")
    assert results["tanh-bfloat16"]["status"] == "failed"  # a must-pass operator
    assert results["erf-float32"]["status"] == "skipped"  # not judged, not failed
    assert all(r["message"].startswith(left) for r in (results["tanh-bfloat16"],
                                                       results["erf-float32"]))
