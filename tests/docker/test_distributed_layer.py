"""The distributed layer on refdev: refdev's own c10d backend (refccl) in the reference image,
its collectives and DDP on two processes, and each collective fault failing exactly its case.
Every verification of this suite runs the layer in float32 only (conftest.py): these runs do
too; the CPU image's run in every dtype is in test_layers.py."""

from __future__ import annotations

import json

from oota.report.write import write_report
from tests.docker.test_reference import REFERENCE_CELL, _verify_refdev

FLOAT32 = ("barrier", "all_reduce-float32", "all_gather-float32", "reduce_scatter-float32",
           "broadcast-float32", "all_to_all-float32")
COLLECTIVE = "test_distributed.py::test_collective[world2-{}]"
DDP = "test_distributed.py::test_ddp_training[world2-ddp]"
ONLY_FLOAT32 = {"OOTA_DISTRIBUTED_DTYPES": "float32"}


def _distributed(tests: list[dict]) -> dict[str, dict]:
    return {t["id"]: t for t in tests if t["layer"] == "distributed"}


def test_refdevs_collectives_and_ddp_pass_over_its_own_backend(reference_built, tmp_path):
    """The session's verification of the reference cell: barrier, the five collectives refdev
    claims and a two-step DDP training passed on two refdev processes over refccl, not gloo;
    the report's distributed column passed and its line counts the collectives."""
    tests = _distributed(reference_built.results[0]["tests"])
    assert set(tests) == {*(COLLECTIVE.format(c) for c in FLOAT32), DDP}
    assert {t["status"] for t in tests.values()} == {"passed"}, tests
    assert {t["data"]["backend"] for t in tests.values()} == {"refccl"}
    write_report(reference_built.results_dir, tmp_path / "reports")
    report = json.loads((tmp_path / "reports" / "results.json").read_text())
    (cell,) = [c for c in report["cells"] if c["id"] == REFERENCE_CELL]
    assert cell["layers"]["distributed"]["status"] == "passed"
    line = next(d for d in report["databases"] if d["layer"] == "distributed")
    assert (line["passed"], line["total"]) == (7, 7)


def test_a_wrong_reduction_and_stale_data_each_fail_exactly_their_collective(
        reference_built, docker_client, tmp_path):
    """refccl broken on purpose in one run: all_reduce adds 1 to every element
    (REFDEV_COLLECTIVE_WRONG) and rank 0 keeps its own data in a broadcast from rank 1
    (REFDEV_COLLECTIVE_STALE). Each fails its own collective naming the rank and the element;
    DDP, whose gradients go through all_reduce, fails too; the device layer still passes."""
    tests = _verify_refdev(docker_client, reference_built, tmp_path,
                           "oota-verify --layer device,distributed",
                           {"REFDEV_COLLECTIVE_WRONG": "all_reduce",
                            "REFDEV_COLLECTIVE_STALE": "broadcast", **ONLY_FLOAT32})
    failed = {t["id"]: t["message"] for t in tests if t["status"] == "failed"}
    assert set(failed) == {COLLECTIVE.format("all_reduce-float32"),
                           COLLECTIVE.format("broadcast-float32"), DDP}, failed
    assert ("all_reduce (float32) on 2 ranks (refccl): rank 0 received wrong data in output 0: "
            "6 of 6 elements differ from the same collective computed on the CPU") in failed[
                COLLECTIVE.format("all_reduce-float32")]
    assert "broadcast (float32) on 2 ranks (refccl): rank 0 received wrong data" in failed[
        COLLECTIVE.format("broadcast-float32")]
    # The device layer keeps its results: its evidence passed and nothing of it failed.
    device = {t["id"]: t["status"] for t in tests if t["layer"] == "device"}
    assert device["test_device.py::test_device_visible"] == "passed"
    assert "failed" not in device.values() and "error" not in device.values(), device


def test_a_collective_that_never_completes_ends_the_layer_at_its_deadline(
        reference_built, docker_client, tmp_path):
    """The last rank never joins all_gather (REFDEV_COLLECTIVE_HANG): at the deadline (5 s
    here) every rank is killed and all_gather fails naming both ranks and where each was; the
    cases after it are not reached, skipped saying so; the device layer keeps its passes."""
    tests = _verify_refdev(docker_client, reference_built, tmp_path,
                           "oota-verify --layer device,distributed",
                           {"REFDEV_COLLECTIVE_HANG": "all_gather",
                            "OOTA_DISTRIBUTED_TIMEOUT_S": "5", **ONLY_FLOAT32})
    ours = _distributed(tests)
    hung = ours[COLLECTIVE.format("all_gather-float32")]
    assert hung["status"] == "failed"
    assert ("all_gather (float32): all_gather (float32) never completed: no rank moved on "
            "within the deadline of 5 s (rank 0 in all_gather (float32), rank 1 in all_gather "
            "(float32)); every rank was killed") in hung["message"]
    assert {ours[COLLECTIVE.format(c)]["status"] for c in FLOAT32[:2]} == {"passed"}
    later = [ours[COLLECTIVE.format(c)] for c in FLOAT32[3:]] + [ours[DDP]]
    assert {t["status"] for t in later} == {"skipped"}
    assert all(t["message"].startswith("not reached: the run on 2 ranks ended in all_gather "
                                       "(float32)") for t in later), later
    # The device layer keeps its results: its evidence passed and nothing of it failed.
    device = {t["id"]: t["status"] for t in tests if t["layer"] == "device"}
    assert device["test_device.py::test_device_visible"] == "passed"
    assert "failed" not in device.values() and "error" not in device.values(), device
