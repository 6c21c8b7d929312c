"""The autograd layer's decisions (verify/oota_autograd.py, standard library only): which pairs
each check runs, as PyTorch's own tests choose them; how one pair of one check ends, in the words
a reader sees; the time budget its three checks share; the pairs a budget of 0 s folds before
they are collected; and how verify.log and the report count the layer. What needs torch (the
gradients, the non-contiguous and out= checks themselves) is tested in the images:
tests/docker/test_autograd_layer.py and test_autograd_reference.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "verify"))
import oota_autograd  # noqa: E402
import oota_budget  # noqa: E402
import oota_summary  # noqa: E402
from oota_autograd import GRADIENTS, NONCONTIGUOUS, OUT, Outcome, SharedBudget  # noqa: E402

from oota import vocab  # noqa: E402

VENDOR = ["float32", "float64", "float16", "bfloat16", "int64"]
FLOATS = ["float32", "float64", "float16", "bfloat16", "complex64"]


@pytest.mark.parametrize(("check", "supported", "backward", "autograd", "has_out", "expected"), [
    (GRADIENTS, FLOATS + ["int64"], FLOATS, True, True, ["float32", "float64", "float16",
                                                          "bfloat16"]),
    (GRADIENTS, FLOATS, ["float32", "float64"], True, False, ["float32", "float64"]),
    (GRADIENTS, FLOATS, FLOATS, False, True, []),
    (NONCONTIGUOUS, FLOATS + ["int64"], [], False, False, ["float32", "int64"]),
    (NONCONTIGUOUS, ["float16", "bfloat16"], [], False, False, []),
    (OUT, FLOATS + ["int64"], FLOATS, True, True, ["float32"]),
    (OUT, ["int64", "bool"], [], False, True, ["int64"]),
    (OUT, FLOATS, FLOATS, True, False, []),
], ids=["grads-every-backward-dtype", "grads-fewer-dtypes", "grads-no-autograd",
        "noncontiguous-pytorchs-dtypes", "noncontiguous-none-of-them", "out-one-dtype",
        "out-integer-op", "out-unsupported"])
def test_each_check_runs_the_dtypes_pytorchs_test_would(check, supported, backward, autograd,
                                                        has_out, expected):
    assert oota_autograd.check_dtypes(check, VENDOR, supported=supported, backward=backward,
                                      autograd=autograd, has_out=has_out) == expected


def test_out_takes_pytorchs_first_dtype_supported_forward_and_backward():
    # OpDTypes.any_one: forward and backward first, else forward only.
    assert oota_autograd.out_dtype(VENDOR, ["float16", "float64"], ["float16"]) == "float16"
    assert oota_autograd.out_dtype(VENDOR, ["int64", "float64"], []) == "float64"
    assert oota_autograd.out_dtype(["float16"], ["float32"], ["float32"]) == ""


@pytest.mark.parametrize(("check", "outcome", "must", "status", "message"), [
    (GRADIENTS, Outcome(samples=3, ran=3, passed="within R (the worst gradient uses 0.1 of "
                        "it)"), False, "passed",
     "the backward of tanh (float32) on refdev: 3 samples within R (the worst gradient uses "
     "0.1 of it)"),
    (GRADIENTS, Outcome(samples=64, limit=64, ran=64, passed="within R"), False, "passed",
     "the backward of tanh (float32) on refdev: 64 samples (the OpInfo's first 64) within R"),
    (GRADIENTS, Outcome(samples=8, limit=8, ran=1, unchecked=7, cpu_only=True), False, "passed",
     "ran the backward of tanh (float32) on 1 sample (the OpInfo's first 8) on the CPU; of the "
     "other samples, 7 had nothing to check; the CPU vendor's device is the CPU, so nothing "
     "was compared"),
    (NONCONTIGUOUS, Outcome(samples=4, ran=3, cpu_errors=1, refused="sample 2: E: no",
                            passed="give it"), False, "passed",
     "non-contiguous inputs of tanh (float32) on refdev: 3 samples give it; of the other "
     "samples, 1 raised on the CPU too and were not compared (first: sample 2: E: no)"),
    (OUT, Outcome(samples=2, not_implemented="sample 0: NotImplementedError: x"), True, "failed",
     "must-run operator: out= of tanh (float32) is not implemented on refdev: sample 0: "
     "NotImplementedError: x (0 of 2 samples ran)"),
    (OUT, Outcome(samples=2, not_implemented="sample 0: NotImplementedError: x"), False,
     "skipped", "out= of tanh (float32) is not implemented on refdev: sample 0: "
     "NotImplementedError: x (0 of 2 samples ran)"),
    (GRADIENTS, Outcome(samples=2, ran=1, error="sample 1: RuntimeError: boom (the CPU ran "
                        "it)"), False, "failed",
     "the backward of tanh (float32) raised on refdev: sample 1: RuntimeError: boom (the CPU "
     "ran it) (1 of 2 samples ran)"),
    (GRADIENTS, Outcome(samples=2, ran=1, failure="tanh (float32): sample 0 (...): the gradient "
                        "of input on refdev: element [3, 1] is 1.76"), True, "failed",
     "tanh (float32): sample 0 (...): the gradient of input on refdev: element [3, 1] is 1.76"),
    (OUT, Outcome(), False, "skipped", "the OpInfo of tanh has no sample inputs for float32"),
    (GRADIENTS, Outcome(samples=2, unchecked=2), False, "skipped",
     "none of the 2 samples of the backward of tanh (float32) has anything to check (no output "
     "that requires grad)"),
    (GRADIENTS, Outcome(samples=2, cpu_errors=2, refused="sample 0: E: x"), True, "skipped",
     "every one of the 2 samples of the backward of tanh (float32) raised on the CPU too: "
     "nothing to compare (first: sample 0: E: x)"),
], ids=["grads-pass", "grads-first-64", "cpu-vendor-runs", "noncontiguous-some-refused",
        "not-implemented-must-run", "not-implemented-other", "device-error", "wrong",
        "no-samples", "nothing-to-check", "cpu-refuses-all"])
def test_each_outcome_becomes_one_status_and_message(check, outcome, must, status, message):
    assert oota_autograd.verdict(check, outcome, op="tanh", dtype="float32", device="refdev",
                                 must_run=must) == (status, message)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_checks_share_the_budget_and_pass_on_what_one_left():
    clock = Clock()
    budget = SharedBudget(30.0, clock=clock)
    assert budget.skip_reason(GRADIENTS, must_run=False) is None  # its share: 10 s
    clock.now = 109.0
    assert budget.skip_reason(GRADIENTS, must_run=False) is None
    clock.now = 110.0
    assert budget.skip_reason(GRADIENTS, must_run=False) == (
        "time budget of 30 s spent (OOTA_AUTOGRAD_BUDGET_S)")
    assert budget.skip_reason(GRADIENTS, must_run=True) is None  # must-run pairs always run
    clock.now = 112.0  # 18 s left for the last two checks: 9 s each
    assert budget.skip_reason(NONCONTIGUOUS, must_run=False) is None
    clock.now = 115.0  # the non-contiguous check stopped early: 15 s left for out=
    assert budget.skip_reason(OUT, must_run=False) is None
    clock.now = 129.9
    assert budget.skip_reason(OUT, must_run=False) is None
    clock.now = 130.0
    assert budget.skip_reason(OUT, must_run=False) is not None


def test_a_budget_of_nothing_runs_the_must_run_pairs_only():
    budget = SharedBudget(0.0, clock=Clock())
    assert budget.skip_reason(GRADIENTS, must_run=False) is not None
    assert budget.skip_reason(OUT, must_run=True) is None


PAIRS = [("add", "float32"), ("add", "float16"), ("tanh", "float32"), ("sgn", "float32")]


def test_a_budget_of_0_s_folds_the_other_pairs_before_they_are_collected():
    assert oota_budget.split_unrun(PAIRS, {"add"}, 5.0) == (PAIRS, [])
    run, unrun = oota_budget.split_unrun(PAIRS, {"add"}, 0.0)
    assert run == PAIRS[:2] and unrun == PAIRS[2:]
    assert oota_budget.unrun_message(unrun, 0.0, "OOTA_AUTOGRAD_BUDGET_S",
                                     oota_autograd.UNIT) == (
        "time budget of 0 s spent (OOTA_AUTOGRAD_BUDGET_S): 2 operator×dtype pairs of 2 "
        "operators not run")


def _entry(test: str, pair: str, status: str, message: str = "", **data) -> dict:
    return {"id": f"test_autograd.py::{test}[{pair}]", "layer": "autograd", "status": status,
            "duration_s": 0.001, "message": message, **({"data": data} if data else {})}


SPENT = "time budget of 5 s spent (OOTA_AUTOGRAD_BUDGET_S)"
RUN = [
    {"id": "test_ops.py::test_op_runs[add-float32]", "layer": "ops", "status": "passed",
     "duration_s": 0.1, "message": ""},
    {"id": "test_ops.py::test_op_runs[sub-float32]", "layer": "ops", "status": "skipped",
     "duration_s": 0.001, "message": "time budget of 0 s spent (OOTA_OPS_BUDGET_S)"},
    _entry("test_grad_matches_cpu", "add-float32", "passed"),
    _entry("test_grad_matches_cpu", "sub-float32", "skipped", SPENT),
    _entry("test_grad_matches_cpu", "sub-float16", "skipped", SPENT),
    _entry("test_noncontiguous", "add-float32", "passed"),
    _entry("test_noncontiguous", "sub-float32", "skipped", SPENT),
]


def test_the_pairs_a_budget_left_unrun_fold_per_check():
    folded = {t["id"]: t for t in oota_budget.fold_unrun(RUN)}
    assert folded["test_ops.py::test_op_runs[unrun-by-budget]"]["data"] == {
        "unrun_pairs": 1, "unrun_operators": 1}
    grads = folded["test_autograd.py::test_grad_matches_cpu[unrun-by-budget]"]
    assert grads["layer"] == "autograd" and grads["data"] == {"unrun_pairs": 2,
                                                              "unrun_operators": 1}
    assert grads["message"] == f"{SPENT}: 2 operator×dtype pairs of 1 operators not run"
    assert folded["test_autograd.py::test_noncontiguous[unrun-by-budget]"]["data"][
        "unrun_pairs"] == 1
    assert len(folded) == 6  # three tests ran, one fold per test function
    # Each fold stands where its first unrun pair stood.
    ids = [t["id"] for t in oota_budget.fold_unrun(RUN)]
    assert ids.index("test_autograd.py::test_grad_matches_cpu[unrun-by-budget]") == 3


def test_folded_at_collection_a_check_folds_no_further():
    early = _entry("test_out", "unrun-by-budget", "skipped",
                   "time budget of 0 s spent (OOTA_AUTOGRAD_BUDGET_S): 7 operator×dtype pairs "
                   "of 5 operators not run", unrun_pairs=7, unrun_operators=5)
    assert oota_budget.fold_unrun([early]) == [early]
    assert vocab.entry_unrun(early) == 7


FALLBACK = ("ran on the CPU: 3 of 3 samples called the CPU fallback (aten::tanh.out): their "
            "results are the CPU's own and say nothing about the device")


def test_verify_log_counts_the_autograd_layers_skips_and_fallbacks_apart_from_the_ops_layers():
    tests = [*RUN,
             _entry("test_out", "tanh-float32", "skipped", FALLBACK, fallback_ops=["tanh.out"]),
             _entry("test_out", "cat-float32", "skipped",
                    "PyTorch's test_out expects this test to fail"),
             _entry("test_grad_matches_cpu", "sgn-float32", "failed", "killed by SIGSEGV")]
    text = oota_summary.report({"id": "reference"}, oota_budget.fold_unrun(tests))
    assert ("- autograd layer: 1 operator x dtype pairs not compared: 1 expected to fail by "
            "PyTorch's own test (each reason is in tests.json)") in text
    assert ("- autograd layer: 1 operator x dtype pairs ran on the CPU (the backend's "
            "fallback), not on the device: aten::tanh.out (1)") in text
    assert "- test_autograd.py::test_grad_matches_cpu[sgn-float32]: failed" in text
    assert "| autograd | ✗ | 2 | 1 | 3 | 0 | 1 |" in text


@pytest.mark.parametrize(("message", "reason"), [
    ("PyTorch's test_noncontiguous_samples skips this test: Skipped!",
     "skipped by PyTorch's own test"),
    ("PyTorch's test_out expects this test to fail", "expected to fail by PyTorch's own test"),
    ("PyTorch's test_compare_cpu skips this comparison: output is random",
     "skipped by PyTorch's own test"),
    ("the OpInfo of tanh does not differentiate bfloat16 for xla",
     "dtype the OpInfo lacks on the device"),
    ("the backward of tanh (float32) is not implemented on xla: x",
     "not implemented on the device"),
    ("none of the 3 samples of out= of tanh (float32) has anything to check (no tensor output)",
     "nothing to check"),
    ("the autograd layer is not selected", "layer not selected"),
])
def test_why_an_autograd_pair_was_not_compared(message, reason):
    assert vocab.not_compared_reason(message) == reason


def test_the_autograd_layer_is_in_the_report_and_uses_the_device():
    assert vocab.LAYERS.index("autograd") == vocab.LAYERS.index("ops") + 1
    assert "autograd" in vocab.DEVICE_LAYERS and "autograd" in vocab.DATABASE_UNITS
    # A cell whose only device evidence is an autograd pass passes; fallbacks alone do not.
    assert vocab.run_status([("install", "passed"), ("autograd", "passed"),
                             ("autograd", "cpu-fallback")]) == "passed"
    assert vocab.run_status([("install", "passed"), ("autograd", "cpu-fallback")]) == \
        "cpu-fallback"


def test_the_layers_that_walk_a_database_are_one_list():
    # The fold, verify.log's counts and the report's marks all read oota.vocab.DATABASE_UNITS.
    # verify.log counts the distributed layer's skips too (its collectives).
    assert list(oota_summary.COUNTED) == [*vocab.DATABASE_UNITS, "distributed"]
    # The compile layer folds its unrun cases too, though it walks no database.
    assert list(oota_budget.UNITS) == [*vocab.DATABASE_UNITS, "compile"]
    assert oota_summary.COUNTED["autograd"] == "operator x dtype pairs"
    assert oota_budget.UNITS["optimizers"].name_of("t.py::t[Adam-foreach-float32]") == "Adam"
    assert oota_autograd.UNIT.name_of("t.py::test_out[max.binary-float32]") == "max.binary"


def test_oota_passes_the_layers_budget_on_into_the_verify_container():
    from oota.execute.verify import forwarded_env

    assert forwarded_env({"OOTA_AUTOGRAD_BUDGET_S": "600", "OOTA_AUTOGRAD_WORKERS": "0",
                          "HOME": "/root"}) == {"OOTA_AUTOGRAD_BUDGET_S": "600",
                                                "OOTA_AUTOGRAD_WORKERS": "0"}


@pytest.mark.parametrize(("environ", "budget", "workers"), [
    ({"OOTA_OPS_WORKERS": "2"}, 0.0, 0),  # the must-run pairs alone: in the pytest process
    ({"OOTA_AUTOGRAD_WORKERS": "1"}, 0.0, 1),
    ({"OOTA_OPS_WORKERS": "0"}, 60.0, 0),  # a device one process at a time may open
    ({"OOTA_OPS_WORKERS": "4", "OOTA_AUTOGRAD_WORKERS": "2"}, 60.0, 2),
], ids=["none-for-the-must-run-pairs", "its-own", "as-the-ops-layer", "its-own-first"])
def test_the_layers_workers(environ, budget, workers):
    import oota_opsworkers

    variables, default = oota_autograd.workers(budget)
    assert oota_autograd.OPS_WORKERS_VARIABLE == oota_opsworkers.WORKERS_VARIABLE
    assert oota_opsworkers.workers_wanted(environ, variables, default) == workers
    with pytest.raises(ValueError, match="OOTA_AUTOGRAD_WORKERS='two' is not a whole number"):
        oota_opsworkers.workers_wanted({"OOTA_AUTOGRAD_WORKERS": "two"}, variables, default)
