"""The distributed layer in the report and the scorecards: a column in the cells × layers
table, a line per vendor counting its collectives (with the DDP training) and naming its
failures, and the rubric's "distributed backend" and "distributed tested" items read from it,
not measured where the vendor claims no backend. Results are synthetic, as
verify/test_distributed.py writes them."""

from __future__ import annotations

from typing import Any

from oota.report.markdown import to_markdown
from oota.report.rows import COLUMNS
from tests.reports import build_report
from tests.unit.test_report import NOW, case, make_result, typed
from tests.unit.test_scorecard import cards, item

COLLECTIVE = "test_distributed.py::test_collective"
WRONG = ("all_reduce (float32) on 2 ranks (refccl): rank 0 received wrong data in output 0: 6 "
         "of 6 elements differ from the same collective computed on the CPU; first at [0]: "
         "got -1.9466800689697266, the CPU -2.9466800689697266")


def collective(name: str, status: str = "passed", message: str = "") -> dict[str, Any]:
    kind, _, dtype = name.partition("-")
    return case(f"{COLLECTIVE}[world2-{name}]", "distributed", status, message,
                {"collective": kind, "dtype": dtype or None, "world_size": 2,
                 "backend": "refccl"})


def ddp(status: str = "passed") -> dict[str, Any]:
    return case("test_distributed.py::test_ddp_training[world2-ddp]", "distributed", status,
                "" if status == "passed" else "ddp: rank 1 raised",
                {"collective": "ddp", "dtype": "float32", "world_size": 2, "backend": "refccl"})


def reference(*tests: dict[str, Any]) -> dict[str, Any]:
    return make_result("reference", tests=[case("test_device.py::test_device_visible",
                                                "device"), *tests])


PASSED = [collective("barrier"), collective("all_reduce-float32"),
          collective("all_gather-float32"), ddp()]


def test_the_layer_is_a_column_after_workload():
    assert COLUMNS.index("distributed") == COLUMNS.index("compile") + 1 > COLUMNS.index("workload")


def test_each_vendor_line_counts_the_collectives_and_names_a_failure():
    tests = [*PASSED[:1], collective("all_reduce-float32", "failed", WRONG), *PASSED[2:],
             collective("broadcast-float32", "skipped", "not reached: the run on 2 ranks ended "
                        "in reduce_scatter (float32), which fails")]
    report = build_report(typed([reference(*tests)]), [], generated_at=NOW)
    (line,) = report.databases
    assert line.text == ("distributed: 3 of 5 collectives (with the DDP training) pass, 1 "
                         "failed (not run: 1 not reached: the distributed run ended)")
    assert [(f.test, f.message) for f in line.failures] == [("world2-all_reduce-float32", WRONG)]
    text = to_markdown(report)
    assert "## Modules, optimizers and distributed" in text
    assert "`world2-all_reduce-float32`" in text


def test_the_scorecard_scores_a_backend_whose_collectives_and_ddp_passed():
    card = cards([reference(*PASSED)])[0].cards[0]
    backend, tested = item(card, "features.distributed"), item(card, "testing.distributed")
    assert (backend.points, tested.points) == (1, 4)
    assert tested.parts[0].evidence[0].text.endswith(
        "refccl on world size 2: 3 of 3 collectives passed; DDP passed")


def test_a_failed_collective_or_ddp_earns_nothing_and_names_the_test():
    card = cards([reference(collective("barrier"), collective("all_reduce-float32"),
                            ddp("failed"))])[0].cards[0]
    assert item(card, "features.distributed").points == 1  # every collective passed
    tested = item(card, "testing.distributed").parts[0]
    assert tested.points == 0
    assert tested.evidence[0].tests == ("test_distributed.py::test_ddp_training[world2-ddp]",)


def test_a_vendor_that_claims_no_backend_is_not_measured_saying_so():
    # As a result holds it: the suite's "not claimed: " skip given its own status.
    unclaimed = case("test_distributed.py::test_collective[none]", "distributed", "not-claimed",
                     "torch.distributed on the device: the vendor declares no collective "
                     "backend (verify.distributed in its vendor.yaml)")
    card = cards([reference(unclaimed)])[0].cards[0]
    for key in ("features.distributed", "testing.distributed"):
        part = item(card, key).parts[0]
        assert part.points is None
        assert part.how.startswith("the vendor claims no collective backend")
