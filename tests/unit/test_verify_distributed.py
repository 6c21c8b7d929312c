"""The distributed layer's plan and its ranks without torch (verify/oota_distributed.py): which
cases a run holds, the deadline, and how a run that hangs or loses a rank ends; and the
vendor's claim as cell.json carries it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "verify"))
import oota_distributed  # noqa: E402
from oota_distributed import Launch, deadline_s, plan  # noqa: E402

from oota.config.vendors import load_vendor  # noqa: E402

# A rank that takes every case in turn (writing its progress as oota_distworker.py does), or
# stops at STOP: "hang" sleeps there, "die" exits 7 there after printing a line.
FAKE_RANK = """
import os, sys, time
from pathlib import Path
folder, rank = Path(os.environ["OOTA_DISTRIBUTED_FOLDER"]), os.environ["RANK"]
stop, how = int(sys.argv[1]), sys.argv[2]
for index in range({count}):
    (folder / f"rank{{rank}}.progress").write_text(str(index))
    if index == stop and (how == "hang" or rank == "1"):
        if how == "die":
            print("Fatal Python error: Segmentation fault in rank", rank, flush=True)
            os._exit(7)
        time.sleep(600)
"""


def test_a_run_holds_the_barrier_each_collective_in_each_dtype_then_ddp():
    cases = plan({"backend": "gloo"}, ["float32", "int64"])
    assert [c.id for c in cases] == [
        "barrier", "all_reduce-float32", "all_gather-float32", "reduce_scatter-float32",
        "broadcast-float32", "all_reduce-int64", "all_gather-int64", "reduce_scatter-int64",
        "broadcast-int64", "ddp"]
    claimed = plan({"backend": "gloo", "all_to_all": True}, ["float32"])
    assert "all_to_all-float32" in [c.id for c in claimed]
    assert [c.index for c in claimed] == list(range(len(claimed)))


def test_the_deadline_comes_from_the_environment_then_the_vendor_then_60_s():
    assert deadline_s({}, {}) == 300
    assert deadline_s({"timeout_s": 30}, {}) == 30
    assert deadline_s({"timeout_s": 30}, {"OOTA_DISTRIBUTED_TIMEOUT_S": "2.5"}) == 2.5
    with pytest.raises(ValueError, match="OOTA_DISTRIBUTED_TIMEOUT_S='soon' is not a number"):
        deadline_s({}, {"OOTA_DISTRIBUTED_TIMEOUT_S": "soon"})


def _launch(tmp_path: Path, stop: int, how: str, deadline: float = 1.0) -> Launch:
    cases = plan({"backend": "gloo"}, ["float32"])
    script = tmp_path / "rank.py"
    script.write_text(FAKE_RANK.format(count=len(cases)))
    folder = tmp_path / "run"
    folder.mkdir()
    launch = Launch(world=2, cases=cases, deadline=deadline, folder=folder,
                    command=(sys.executable, str(script), str(stop), how))
    launch.start({})
    return launch


def test_a_collective_that_never_completes_ends_the_run_at_its_deadline_naming_each_rank(
        tmp_path):
    launch = _launch(tmp_path, stop=2, how="hang")
    ending = launch.wait()
    assert ending is not None and ending.index == 2
    assert ending.message == (
        "all_gather (float32) never completed: no rank moved on within the deadline of 1 s "
        "(rank 0 in all_gather (float32), rank 1 in all_gather (float32)); every rank was "
        "killed")
    assert all(p.poll() is not None for p in launch.processes)


def test_a_rank_that_dies_ends_the_run_with_its_exit_and_its_log(tmp_path):
    launch = _launch(tmp_path, stop=3, how="die", deadline=60)
    ending = launch.wait()
    assert ending is not None and ending.index == 3
    assert ending.message.startswith("rank 1 of 2 ended (exit code 7) in reduce_scatter "
                                     "(float32): Fatal Python error: Segmentation fault")
    # The other rank, waiting in the collective for ever, was killed, not waited for.
    assert all(p.poll() is not None for p in launch.processes)


def test_a_run_whose_ranks_all_finish_ends_without_a_failure(tmp_path):
    assert _launch(tmp_path, stop=-1, how="none").wait() is None


def test_a_rank_still_joining_the_group_gets_the_setup_allowance_not_the_deadline():
    launch = Launch(world=2, cases=[], deadline=1.0, folder=Path("."))
    assert launch._allowed((-1, 0)) == oota_distributed.SETUP_S
    assert launch._allowed((0, 0)) == 1.0


def test_cell_json_carries_the_vendors_claim_with_every_default_filled_in():
    reference = load_vendor(REPO / "vendors" / "reference").verify.distributed
    assert reference is not None and reference.to_json() == {
        "backend": "refccl", "world_sizes": [2], "dtypes": [], "all_to_all": True,
        "timeout_s": 60.0, "imports": []}
    gaudi = load_vendor(REPO / "vendors" / "gaudi").verify.distributed
    assert gaudi is not None and gaudi.imports == ("habana_frameworks.torch.distributed.hccl",)
    assert load_vendor(REPO / "vendors" / "xla").verify.distributed is None


def test_the_dtypes_are_the_layers_own_else_the_vendors_narrowed_by_the_environment():
    verify = {"dtypes": ["float32", "float16", "int64"]}
    assert oota_distributed.dtypes_of(verify, {}) == ["float32", "float16", "int64"]
    assert oota_distributed.dtypes_of({**verify, "distributed": {"dtypes": ["int64"]}},
                                      {}) == ["int64"]
    narrowed = {"OOTA_DISTRIBUTED_DTYPES": "float32, bfloat16"}
    assert oota_distributed.dtypes_of(verify, narrowed) == ["float32"]


def test_oota_verify_counts_the_cases_a_hang_left_unreached_instead_of_listing_them():
    import oota_summary

    reached = "test_distributed.py::test_collective[world2-all_gather-float32]"
    tests = [{"id": reached, "layer": "distributed", "status": "failed",
              "message": "all_gather (float32) never completed"},
             *({"id": f"test_distributed.py::test_collective[world2-{c}-float32]",
                "layer": "distributed", "status": "skipped",
                "message": "not reached: the run on 2 ranks ended in all_gather (float32), "
                           "which fails"} for c in ("reduce_scatter", "broadcast"))]
    text = oota_summary.report({"id": "cpu", "verify": {}}, tests)
    assert f"- {reached}: failed: all_gather (float32) never completed" in text
    assert ("- distributed layer: 2 collectives not compared: 2 not reached: the distributed "
            "run ended (each reason is in tests.json)") in text
