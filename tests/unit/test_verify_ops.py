"""The ops layer's decisions without torch (verify/oota_ops.py): the must-pass list, the order
operators run in, the time budget, and how one operator × dtype ends."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "verify"))
import oota_ops  # noqa: E402
import oota_summary  # noqa: E402

# op_db's full names in torch 2.13.0 (verify/test_ops.py names variants 'name.variant').
OPINFO_NAMES = [line for line in (Path(__file__).parent / "data" / "opinfo-names.txt")
                .read_text().splitlines() if line and not line.startswith("#")]
# The operators the models layer cannot do without: the list must keep covering them.
MODEL_CORE = {"matmul", "nn.functional.linear", "addmm", "nn.functional.conv2d", "softmax",
              "nn.functional.layer_norm", "nn.functional.embedding", "nn.functional.gelu",
              "nn.functional.silu", "add", "mul", "sum", "mean"}


def test_the_must_pass_file_names_known_operators_each_with_a_reason():
    entries = oota_ops.load_must_pass()
    assert {e.op for e in entries} >= MODEL_CORE
    assert all(len(e.reason) > 10 for e in entries)
    assert oota_ops.unknown_names(entries, OPINFO_NAMES) == []


def test_the_parser_reads_the_file_as_yaml_does():
    text = oota_ops.MUST_PASS_FILE.read_text()
    parsed = [{"op": e.op, "reason": e.reason} for e in oota_ops.parse_must_pass(text)]
    assert parsed == yaml.safe_load(text)


@pytest.mark.parametrize(("text", "message"), [
    ("- op: add\n  reason: x\nfoo: bar\n", "must.yaml:3: expected '- op: NAME'"),
    ("- op: add\n", "must.yaml:1: entry lacks reason"),
    ("- op: add\n  reason: x\n  reason: y\n",
     "must.yaml:3: 'reason' outside an entry or given twice"),
    ("  reason: x\n", "must.yaml:1: 'reason' outside an entry"),
    ("- name: add\n", "must.yaml:1: expected '- op: NAME'"),
], ids=["unknown-key", "no-reason", "twice", "no-entry", "wrong-key"])
def test_a_malformed_must_pass_file_is_refused_naming_the_line(text, message):
    with pytest.raises(oota_ops.MustPassError, match="^" + message.replace("(", r"\(")):
        oota_ops.parse_must_pass(text, "must.yaml")


def test_comments_and_quotes_are_read():
    text = "# head\n- op: 'add'  # the op\n  reason: \"residuals: everywhere\"\n\n"
    assert oota_ops.parse_must_pass(text) == [
        oota_ops.MustPass(op="add", reason="residuals: everywhere", line=2)]


def test_unknown_and_repeated_names_are_named_with_a_suggestion():
    entries = oota_ops.parse_must_pass("- op: div\n  reason: a\n- op: add\n  reason: b\n"
                                       "- op: add\n  reason: c\n- op: nn.functional.conv2\n"
                                       "  reason: d\n", "m.yaml")
    assert oota_ops.unknown_names(entries, OPINFO_NAMES, "m.yaml") == [
        "m.yaml:1: 'div' is not an operator of PyTorch's OpInfo database; it has variants, name "
        "one: div.floor_rounding, div.no_rounding_mode, div.trunc_rounding",
        "m.yaml:5: 'add' is listed twice",
        "m.yaml:7: 'nn.functional.conv2' is not an operator of PyTorch's OpInfo database; did "
        "you mean 'nn.functional.conv2d'?"]


def test_must_pass_operators_run_first_in_the_files_order():
    assert oota_ops.ordered(["a", "b", "c", "d"], ["c", "zz", "a", "c"]) == ["c", "a", "b", "d"]


@pytest.mark.parametrize(("value", "seconds"), [("", 180.0), ("30", 30.0), (" 0 ", 0.0),
                                                ("2.5", 2.5)])
def test_the_budget_comes_from_the_environment(value, seconds):
    assert oota_ops.budget_seconds({"OOTA_OPS_BUDGET_S": value}) == seconds
    assert oota_ops.budget_seconds({}) == 180.0


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_bad_budget_says_which_variable(value):
    with pytest.raises(ValueError, match=f"OOTA_OPS_BUDGET_S='{value}' is not a number"):
        oota_ops.budget_seconds({"OOTA_OPS_BUDGET_S": value})


def test_the_budget_starts_at_the_first_operator_and_spares_must_pass_ones():
    times = iter([100.0, 104.0, 105.0, 106.0])
    budget = oota_ops.Budget(5, clock=lambda: next(times))
    assert budget.skip_reason(must_pass=False) is None  # t=0: the clock starts here
    assert budget.skip_reason(must_pass=False) is None  # t=4
    assert budget.skip_reason(must_pass=False) == "time budget of 5 s spent (OOTA_OPS_BUDGET_S)"
    assert budget.skip_reason(must_pass=True) is None  # must-pass runs whatever is left


FAILURE = ("add (float32): sample 3 (Tensor[3, 4] float32, dim=1): output[1] on refdev differs "
           "from the CPU: max abs diff 0.25, max rel diff 0.5 (PyTorch's test_compare_cpu rule: "
           "atol 0.001, rtol 0.001)")
RULE = "PyTorch's test_compare_cpu rule: atol 0.001, rtol 0.001"
REFUSED = "sample 2: RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'"


@pytest.mark.parametrize(("outcome", "must", "status", "message"), [
    (oota_ops.Outcome(samples=4, ran=4, rule=RULE, worst=0.0125), False, "passed",
     "4 samples of add (float32) on refdev within PyTorch's test_compare_cpu rule: atol 0.001, "
     "rtol 0.001 (the worst uses 0.013 of it)"),
    (oota_ops.Outcome(samples=4, ran=4, cpu_only=True), False, "passed",
     "ran 4 samples of add (float32) on the CPU; the CPU vendor's device is the CPU, so nothing "
     "was compared"),
    (oota_ops.Outcome(samples=4, ran=1, failure=FAILURE), False, "failed", FAILURE),
    (oota_ops.Outcome(samples=2, ran=1, not_implemented="NotImplementedError: no kernel"), False,
     "skipped", "add (float32) is not implemented on refdev: NotImplementedError: no kernel "
                "(1 of 2 samples ran)"),
    (oota_ops.Outcome(samples=2, ran=1, not_implemented="NotImplementedError: no kernel"), True,
     "failed", "must-pass operator: add (float32) is not implemented on refdev: "
               "NotImplementedError: no kernel (1 of 2 samples ran)"),
    (oota_ops.Outcome(samples=2, error="sample 0: RuntimeError: boom"), False, "failed",
     "add (float32) raised on refdev: sample 0: RuntimeError: boom (0 of 2 samples ran)"),
    (oota_ops.Outcome(error="making samples: RuntimeError: boom"), False, "failed",
     "add (float32) raised on refdev: making samples: RuntimeError: boom"),
    (oota_ops.Outcome(), False, "skipped", "the OpInfo of add has no sample inputs for float32"),
    (oota_ops.Outcome(samples=3, cpu_errors=3, refused="sample 0: RuntimeError: boom"), False,
     "skipped", "every one of the 3 samples of add (float32) raised on the CPU too: nothing to "
                "compare (first: sample 0: RuntimeError: boom)"),
    # Some samples refused by the CPU: a pass on the others says how many of all ran.
    (oota_ops.Outcome(samples=4, ran=3, cpu_errors=1, refused=REFUSED, rule=RULE, worst=0.5),
     False, "passed", f"3 of 4 samples of add (float32) on refdev within {RULE} (the worst uses "
                      f"0.5 of it); the other 1 raised on the CPU too and were not compared "
                      f"(first: {REFUSED})"),
    # A must-pass operator is run to show it runs: one refusal fails it, with the first error.
    (oota_ops.Outcome(samples=4, ran=3, cpu_errors=1, refused=REFUSED, rule=RULE), True,
     "failed", f"must-pass operator: add (float32) raised on the CPU, the reference the device "
               f"is judged against: {REFUSED} (3 of 4 samples ran)"),
    # The CPU vendor: the CPU is the device, its refusals are the device's.
    (oota_ops.Outcome(samples=8, ran=8, cpu_errors=8, refused=REFUSED, cpu_only=True), True,
     "failed", f"must-pass operator: add (float32) raised on the CPU: {REFUSED} (8 of 8 "
               "samples ran)"),
    (oota_ops.Outcome(samples=8, ran=0, cpu_errors=8, refused=REFUSED, cpu_only=True), True,
     "failed", f"must-pass operator: add (float32) raised on the CPU: {REFUSED} (0 of 8 "
               "samples ran)"),
    (oota_ops.Outcome(samples=8, ran=1, cpu_errors=7, refused=REFUSED, cpu_only=True), False,
     "passed", f"ran 1 of 8 samples of add (float32) on the CPU; the other 7 raised on the CPU "
               f"(first: {REFUSED}); the CPU vendor's device is the CPU, so nothing was "
               "compared"),
    (oota_ops.Outcome(samples=3, cpu_errors=3, refused=REFUSED, cpu_only=True), False,
     "skipped", f"every one of the 3 samples of add (float32) raised on the CPU too: none ran, "
                f"and the CPU is this vendor's device (first: {REFUSED})"),
], ids=["within-the-rule", "cpu-only", "judged-wrong", "not-implemented",
        "not-implemented-must-pass", "device-error", "making-samples", "no-samples",
        "cpu-refuses", "some-refused", "must-pass-refused", "cpu-vendor-must-pass",
        "cpu-vendor-must-pass-none-ran", "cpu-vendor-some-ran", "cpu-vendor-none-ran"])
def test_each_outcome_becomes_one_status_and_message(outcome, must, status, message):
    assert oota_ops.verdict(outcome, op="add", dtype="float32", device="refdev",
                            must_pass=must) == (status, message)


def test_oota_verify_counts_the_ops_layers_skips_instead_of_listing_them():
    tests = [{"id": f"test_ops.py::test_op_runs[op{i}-float32]", "layer": "ops",
              "status": "skipped", "message": "time budget of 180 s spent"} for i in range(3)]
    tests.append({"id": "test_ops.py::test_op_runs[add-float16]", "layer": "ops",
                  "status": "failed", "message": "sample 0 differs"})
    text = oota_summary.report({"id": "cpu"}, tests)
    assert "op0" not in text and "- test_ops.py::test_op_runs[add-float16]: failed" in text
    assert ("- ops layer: 3 operator x dtype pairs not compared: 3 time budget spent (each "
            "reason is in tests.json)") in text
    assert "| ops | ✗ | 0 | 3 | 0 | 1 |" in text


# -- the pairs the budget left unrun: one entry -------------------------------------------------

BUDGET = "time budget of 0 s spent (OOTA_OPS_BUDGET_S)"
PAIR = "test_ops.py::test_op_matches_cpu[{}]"


def pair(name, status="skipped", message=BUDGET, **data):
    test = {"id": PAIR.format(name), "layer": "ops", "status": status, "duration_s": 0.001,
            "message": message}
    return {**test, "data": data} if data else test


# As the suite's recorder holds them: must-pass pairs ran, then the budget was spent.
RUN = [{"id": "test_install.py::test_imports", "layer": "install", "status": "passed",
        "duration_s": 0.5, "message": ""},
       pair("add-float32", "passed", "4 samples of add (float32) match the CPU", op="add",
            tried=True),
       pair("cumsum-float32"), pair("cumsum-float16"),
       pair("sort-int64", message="the OpInfo of sort does not support int64 on the CPU"),
       pair("nn.functional.conv2d-float32", message="skip list: broken (owner x, expires "
            "2099-12-31)"),
       pair("max.binary-float32"),
       pair("cummax-float32", message="cummax (float32) is not implemented on refdev: "
            "NotImplementedError: no kernel", op="cummax", tried=True),
       pair("max.binary-float16"),
       {"id": "test_models.py::test_model[llama]", "layer": "models", "status": "passed",
        "duration_s": 2.0, "message": ""}]


def test_the_pairs_the_budget_left_unrun_become_one_skipped_entry():
    folded = oota_ops.fold_unrun(RUN)
    assert folded[2] == {
        "id": "test_ops.py::test_op_matches_cpu[unrun-by-budget]", "layer": "ops",
        "status": "skipped", "duration_s": 0.004,
        "message": "time budget of 0 s spent (OOTA_OPS_BUDGET_S): 4 operator×dtype pairs of 2 "
                   "operators not run",
        "data": {"unrun_pairs": 4, "unrun_operators": 2}}
    # Every other test stays, in its place: a skip for any other reason is a finding.
    assert [t for t in folded if t is not folded[2]] == [
        t for t in RUN if not t["message"].startswith("time budget")]


def test_folding_again_or_with_nothing_to_fold_changes_nothing():
    folded = oota_ops.fold_unrun(RUN)
    assert oota_ops.fold_unrun(folded) == folded
    assert oota_ops.fold_unrun(RUN[:2]) == RUN[:2]


def test_a_folded_entry_and_more_unrun_pairs_fold_into_one_count():
    folded = oota_ops.fold_unrun(RUN)
    (entry,) = [t for t in oota_ops.fold_unrun([*folded, pair("sub-float32")])
                if t["id"].endswith("[unrun-by-budget]")]
    assert entry["data"] == {"unrun_pairs": 5, "unrun_operators": 3}
    assert entry["message"].endswith(": 5 operator×dtype pairs of 3 operators not run")


def test_oota_verify_lists_the_folded_entry_with_its_count():
    text = oota_summary.report({"id": "cpu"}, oota_ops.fold_unrun(RUN))
    assert ("- test_ops.py::test_op_matches_cpu[unrun-by-budget]: skipped: time budget of 0 s "
            "spent (OOTA_OPS_BUDGET_S): 4 operator×dtype pairs of 2 operators not run") in text
    # The other skipped pairs (dtype, skip list, not implemented) are still counted only, by why.
    assert ("- ops layer: 3 operator x dtype pairs not compared: 1 dtype the OpInfo lacks on the "
            "CPU, 1 not implemented on the device, 1 on the vendor's skip list (each reason is in "
            "tests.json)") in text
    assert "| ops | ✓ | 1 | 4 | 0 | 0 |" in text


FAKE_OPS_LAYER = '''
import pytest

LAYER = "ops"


@pytest.mark.parametrize("pair", ["add-float32", "mul-float32", "div-float32", "mul-float16"])
def test_op_matches_cpu(pair):
    if pair == "div-float32":
        pytest.skip("the OpInfo of div does not support float32 on the CPU")
    if pair != "add-float32":
        pytest.skip("time budget of 0 s spent (OOTA_OPS_BUDGET_S)")
'''


def test_the_suite_writes_the_unrun_pairs_as_one_entry_of_tests_json(tmp_path):
    """The suite's recorder (oota_suite.py, no torch needed) folds what the budget left unrun
    when it writes tests.json; the dtype's skip stays a test of its own."""
    (tmp_path / "test_fake_ops.py").write_text(FAKE_OPS_LAYER)
    (tmp_path / "cell.json").write_text("{}")
    out = tmp_path / "out"
    out.mkdir()
    env = {"PYTHONPATH": str(REPO / "verify"), "OOTA_VERIFY_OUT": str(out),
           "OOTA_CELL_FILE": str(tmp_path / "cell.json"), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "oota_suite", "-p",
                          "no:cacheprovider", "-c", str(REPO / "verify" / "pytest.ini"),
                          "--rootdir", str(tmp_path), str(tmp_path)],
                         capture_output=True, text=True, check=False, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads((out / "tests.json").read_text())
    assert [(t["id"].split("[")[1], t["status"]) for t in data["tests"]] == [
        ("add-float32]", "passed"), ("unrun-by-budget]", "skipped"), ("div-float32]", "skipped")]
    assert data["tests"][1]["message"] == ("time budget of 0 s spent (OOTA_OPS_BUDGET_S): 2 "
                                           "operator×dtype pairs of 1 operators not run")
    assert data["counts"] == {"passed": 1, "skipped": 2}


# -- the ops layer on every core (verify/oota_opsworkers.py) --------------------------------------

def test_a_crashed_worker_is_named_by_its_signal() -> None:
    import signal

    import oota_opsworkers

    assert oota_opsworkers.ended(3) == "exit code 3"
    assert oota_opsworkers.ended(-signal.SIGSEGV) == "killed by SIGSEGV"
    assert oota_opsworkers.ended(-signal.SIGFPE) == "killed by SIGFPE"


def test_a_pair_after_the_budget_is_skipped_here_unless_a_worker_took_it(tmp_path,
                                                                          monkeypatch) -> None:
    """After the budget, a pair no worker has taken is skipped by the pytest process itself
    (and taken, so that no worker judges it); a pair a worker took is that worker's result."""
    import oota_opsworkers

    pool = oota_opsworkers.Pool(folder=tmp_path, index={("add", "float32"): 0,
                                                        ("tanh", "float32"): 1})
    pool._going = True
    late = "time budget of 5 s spent (OOTA_OPS_BUDGET_S)"
    assert pool.result("add", "float32", None, late) == oota_opsworkers.PairResult(
        status="skipped", message=late)
    assert not oota_opsworkers.claim(tmp_path, 0)  # a worker now passes it by

    assert oota_opsworkers.claim(tmp_path, 1)  # a worker took it before the budget ran out
    (tmp_path / "1.result").write_text("")
    monkeypatch.setattr(oota_opsworkers, "_read", lambda folder, index: {
        "status": "passed", "message": "judged", "data": {}, "case": None})
    assert pool.result("tanh", "float32", None, late).status == "passed"


def test_the_ops_layer_runs_one_worker_per_core_unless_told() -> None:
    import os

    import oota_opsworkers

    cores = len(os.sched_getaffinity(0))
    assert oota_opsworkers.workers_wanted({}) == cores
    assert oota_opsworkers.workers_wanted({"OOTA_OPS_WORKERS": "3"}) == 3
    assert oota_opsworkers.workers_wanted({"OOTA_OPS_WORKERS": "0"}) == 0  # in the pytest process
    for bad in ("two", "-1", "1.5"):
        with pytest.raises(ValueError, match=f"OOTA_OPS_WORKERS='{bad}' is not a whole"):
            oota_opsworkers.workers_wanted({"OOTA_OPS_WORKERS": bad})


@pytest.mark.parametrize(("op", "args", "kwargs", "order"), [
    ("sort", [], {}, (False, False)),
    ("sort", [0, True], {"stable": True}, (True, True)),
    ("argsort", [-1, False, True], {}, (False, True)),
    ("topk", [3], {}, (True, False)),
    ("topk", [3, -1, False], {}, (False, False)),
    ("topk", [3], {"sorted": False}, None),
    ("kthvalue", [2], {}, None),
])
def test_what_order_an_index_operator_promises(op: str, args: list[object],
                                               kwargs: dict[str, object],
                                               order: tuple[bool, bool] | None) -> None:
    """sort and topk(sorted=True) return values in order; stable=True keeps ties in input
    order; topk(sorted=False) and kthvalue promise no order."""
    import oota_indices

    found = oota_indices.ordering(op, args, kwargs)
    assert (found if found is None else (found.descending, found.stable)) == order
