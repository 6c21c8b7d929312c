"""The modules and optimizers layers' decisions without torch (verify/oota_budget.py,
oota_pytorchtests.py, oota_modules.py): their must-run lists, the budgets and the fold of what
they left unrun, PyTorch's skips, the rule that judges them and how a module × dtype ends."""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "verify"))
import oota_budget  # noqa: E402
import oota_modules  # noqa: E402
import oota_pytorchtests  # noqa: E402
import oota_rules  # noqa: E402
import oota_summary  # noqa: E402
from oota_vocab import not_compared_reason  # noqa: E402

DATA = Path(__file__).parent / "data"


def _names(file: str) -> list[str]:
    return [line for line in (DATA / file).read_text().splitlines()
            if line and not line.startswith("#")]


# module_db's and optim_db's names in torch 2.13.0 (recorded from the wheel, 2026-11-28).
MODULE_NAMES = _names("moduleinfo-names.txt")
OPTIMIZER_NAMES = _names("optiminfo-names.txt")
LISTS = [("modules-must-run.yaml", "module", MODULE_NAMES),
         ("optimizers-must-run.yaml", "optimizer", OPTIMIZER_NAMES)]


@pytest.mark.parametrize(("file", "key", "known"), LISTS, ids=["modules", "optimizers"])
def test_each_must_run_file_names_known_entries_each_with_a_reason(file, key, known):
    path = REPO / "verify" / file
    entries = oota_budget.load_entries(path, key)
    assert entries and all(len(e.reason) > 10 for e in entries)
    assert oota_budget.unknown_names([(e.name, e.line) for e in entries], known, file,
                                     "known") == []
    # The parser reads each file as PyYAML does (images may lack PyYAML).
    assert [{key: e.name, "reason": e.reason} for e in entries] == yaml.safe_load(
        path.read_text())


def test_the_modules_must_run_list_holds_what_the_models_and_the_wrong_gradient_need():
    names = {e.name for e in oota_budget.load_entries(
        REPO / "verify" / "modules-must-run.yaml", "module")}
    assert {"nn.Linear", "nn.Embedding", "nn.RMSNorm", "nn.Conv2d", "nn.BatchNorm2d",
            "nn.CrossEntropyLoss", "nn.Tanh"} <= names


def test_an_unknown_or_misspelt_entry_is_named_with_a_suggestion():
    entries = oota_budget.parse_entries("- module: nn.Linera\n  reason: a typo\n"
                                        "- module: nn.Linear\n  reason: b\n"
                                        "- module: nn.Linear\n  reason: c\n", "m.yaml", "module")
    assert oota_budget.unknown_names([(e.name, e.line) for e in entries], MODULE_NAMES,
                                     "m.yaml", "a module of PyTorch's module database") == [
        "m.yaml:1: 'nn.Linera' is not a module of PyTorch's module database; did you mean "
        "'nn.Linear'?",
        "m.yaml:5: 'nn.Linear' is listed twice"]


def test_a_list_with_another_key_is_refused_naming_the_line_and_the_shape():
    with pytest.raises(oota_budget.MustRunError,
                       match=r"^m.yaml:1: expected '- module: NAME' or '  reason: TEXT'"):
        oota_budget.parse_entries("- op: nn.Linear\n  reason: x\n", "m.yaml", "module")


@pytest.mark.parametrize(("value", "seconds"), [("", 60.0), ("0", 0.0), (" 12.5 ", 12.5)])
def test_a_layers_budget_comes_from_its_own_variable(value, seconds):
    environ = {"OOTA_MODULES_BUDGET_S": value, "OOTA_OPS_BUDGET_S": "99"}
    assert oota_budget.budget_seconds("OOTA_MODULES_BUDGET_S", 60.0, environ) == seconds


def test_a_bad_budget_names_its_variable():
    with pytest.raises(ValueError, match="OOTA_OPTIMIZERS_BUDGET_S='soon' is not a number"):
        oota_budget.budget_seconds("OOTA_OPTIMIZERS_BUDGET_S", 60.0,
                                   {"OOTA_OPTIMIZERS_BUDGET_S": "soon"})


def test_a_spent_budget_names_its_variable_and_spares_must_run_entries():
    times = iter([0.0, 3.0, 4.0])
    budget = oota_budget.Budget(2, "OOTA_MODULES_BUDGET_S", clock=lambda: next(times))
    assert budget.skip_reason(False) is None
    assert budget.skip_reason(False) == "time budget of 2 s spent (OOTA_MODULES_BUDGET_S)"
    assert budget.skip_reason(True) is None


def _unrun(test_id: str, layer: str, variable: str) -> dict:
    return {"id": test_id, "layer": layer, "status": "skipped", "duration_s": 0.001,
            "message": f"time budget of 0 s spent ({variable})"}


RUN = [{"id": "test_modules.py::test_module_matches_cpu[nn.Linear-float32]", "layer": "modules",
        "status": "passed", "duration_s": 0.1, "message": ""},
       _unrun("test_modules.py::test_module_matches_cpu[nn.GRU-float32]", "modules",
              "OOTA_MODULES_BUDGET_S"),
       _unrun("test_modules.py::test_module_matches_cpu[nn.GRU-float64]", "modules",
              "OOTA_MODULES_BUDGET_S"),
       _unrun("test_modules.py::test_module_matches_cpu[nn.ReLU-float32]", "modules",
              "OOTA_MODULES_BUDGET_S"),
       _unrun("test_optimizers.py::test_optimizer_matches_cpu[NAdam-foreach-float32]",
              "optimizers", "OOTA_OPTIMIZERS_BUDGET_S"),
       _unrun("test_optimizers.py::test_optimizer_matches_cpu[NAdam-forloop-float32]",
              "optimizers", "OOTA_OPTIMIZERS_BUDGET_S"),
       _unrun("test_optimizers.py::test_optimizer_state_dict_moves[NAdam-float32]",
              "optimizers", "OOTA_OPTIMIZERS_BUDGET_S")]


def test_what_each_budget_left_unrun_is_one_entry_per_test_with_its_layers_count():
    folded = oota_budget.fold_unrun(RUN)
    assert [t["id"] for t in folded] == [
        "test_modules.py::test_module_matches_cpu[nn.Linear-float32]",
        "test_modules.py::test_module_matches_cpu[unrun-by-budget]",
        "test_optimizers.py::test_optimizer_matches_cpu[unrun-by-budget]",
        "test_optimizers.py::test_optimizer_state_dict_moves[unrun-by-budget]"]
    modules, optimizers, moves = folded[1:]
    assert modules["message"] == ("time budget of 0 s spent (OOTA_MODULES_BUDGET_S): 3 "
                                  "module×dtype pairs of 2 modules not run")
    assert modules["data"] == {"unrun_pairs": 3, "unrun_modules": 2}
    assert optimizers["message"] == ("time budget of 0 s spent (OOTA_OPTIMIZERS_BUDGET_S): 2 "
                                     "optimizer tests of 1 optimizers not run")
    assert moves["data"] == {"unrun_pairs": 1, "unrun_optimizers": 1}
    assert oota_budget.fold_unrun(folded) == folded


def test_pytorchs_skips_and_expected_failures_decide_and_nothing_else_does():
    skip = unittest.skip("Skipped!")
    expected = unittest.expectedFailure

    def dynamo_only(reason: str):  # the shape of skipIfTorchDynamo: a closure named decorator
        def decorator(fn):
            return fn, reason
        return decorator

    test = "test_cpu_gpu_parity"
    assert oota_pytorchtests.decision([skip], test) == (
        "PyTorch's test_cpu_gpu_parity skips this comparison: Skipped!")
    assert oota_pytorchtests.decision([expected], test) == (
        "PyTorch's test_cpu_gpu_parity expects this comparison to fail")
    assert oota_pytorchtests.decision([dynamo_only("dynamo differs"), object()], test) == ""


def test_modules_are_judged_by_the_float64_rule_for_composed_results():
    rule = oota_modules.rule_for("float32", {})
    assert (rule.kind, rule.multiplier, rule.floor_ulps) == (
        oota_rules.FLOAT64, oota_rules.ADDON_MULTIPLIER, oota_rules.ADDON_FLOOR_ULPS)
    assert rule.describe() == ("error against float64 at most 10x the CPU's + 8 ulp (oota's "
                               "float64 rule for composed results)")
    # The vendor's verify.judge overrides it; float64 has no wider reference: its tolerance.
    judged = {"judge": {"float32": {"multiplier": 3, "reason": "its own"}}}
    assert oota_modules.rule_for("float32", judged).multiplier == 3
    tolerance = oota_modules.rule_for("float64", {"tolerances": {"float64": {"rtol": 1e-7,
                                                                             "atol": 1e-7}}})
    assert tolerance.describe() == "the CPU within atol 1e-07, rtol 1e-07 (verify.tolerances)"


RULE = "error against float64 at most 10x the CPU's + 16 ulp (oota's float64 rule)"


@pytest.mark.parametrize(("outcome", "must", "status", "message"), [
    (oota_modules.Outcome(samples=3, ran=3, worst=0.03), False, "passed",
     f"3 samples of nn.Linear (float32) on refdev, forward and backward, within {RULE} (the "
     "worst uses 0.03 of it)"),
    (oota_modules.Outcome(samples=4, ran=4, formats=2, cpu_only=True), False, "passed",
     "ran 4 samples of nn.Linear (float32) forward and backward on the CPU, 2 of them also in a "
     "channels-last memory format; the CPU vendor's device is the CPU, so nothing was compared"),
    (oota_modules.Outcome(samples=2, ran=1, failure="nn.Linear (float32): sample 1: wrong"),
     False, "failed", "nn.Linear (float32): sample 1: wrong"),
    (oota_modules.Outcome(samples=1, not_implemented="sample 0 (default): NotImplementedError: "
                          "no kernel"), False, "skipped",
     "nn.Linear (float32) is not implemented on refdev: sample 0 (default): "
     "NotImplementedError: no kernel (0 of 1 samples ran)"),
    (oota_modules.Outcome(samples=1, not_implemented="sample 0 (default): NotImplementedError: "
                          "no kernel"), True, "failed",
     "must-run module: nn.Linear (float32) is not implemented on refdev: sample 0 (default): "
     "NotImplementedError: no kernel (0 of 1 samples ran)"),
    (oota_modules.Outcome(samples=2, ran=1, cpu_errors=1, refused="sample 1 (x): ValueError: v",
                          worst=0.5), True, "failed",
     "must-run module: nn.Linear (float32) raised on the CPU: sample 1 (x): ValueError: v (1 of "
     "2 samples ran)"),
    (oota_modules.Outcome(samples=2, cpu_errors=2, refused="sample 0 (x): ValueError: v"),
     False, "skipped", "every one of the 2 samples of nn.Linear (float32) raised on the CPU "
                       "(first: sample 0 (x): ValueError: v)"),
], ids=["passed", "cpu-vendor", "failed", "not-implemented", "must-run-not-implemented",
        "must-run-cpu-refused", "all-refused"])
def test_a_module_pair_ends_as_a_reader_is_told(outcome, must, status, message):
    assert oota_modules.verdict(outcome, name="nn.Linear", dtype="float32", device="refdev",
                                must_run=must, rule=RULE) == (status, message)


@pytest.mark.parametrize(("message", "reason"), [
    ("PyTorch's test_cpu_gpu_parity skips this comparison: Skipped!",
     "skipped by PyTorch's own test"),
    ("the ModuleInfo of nn.X declares none of the vendor's dtypes (int64) for refdev and the "
     "CPU", "dtypes the ModuleInfo lacks"),
    ("nn.GRU (float32) is not implemented on refdev: sample 0 (default): NotImplementedError",
     "not implemented on the device"),
    ("PyTorch's OptimizerInfo of LBFGS declares no foreach implementation",
     "implementation the OptimizerInfo lacks"),
    ("PyTorch's OptimizerInfo of Adam declares its fused implementation on cpu, cuda, not on "
     "refdev", "fused not declared for the device"),
    ("not claimed: Adam's fused implementation: the vendor does not claim fused "
     "(verify.capabilities.fused in its vendor.yaml)", "not claimed by the vendor"),
    ("none of the 5 configurations of X (forloop, float16) ran: the CPU's for-loop steps "
     "refused 5", "every configuration refused on the CPU"),
    ("PyTorch's test_compare_cpu skips this comparison: random", "skipped by PyTorch's own test"),
])
def test_why_an_entry_was_not_compared_is_counted_by_its_reason(message, reason):
    assert not_compared_reason(message) == reason


def test_verify_log_counts_the_skipped_entries_of_each_database_layer_by_why():
    tests = [{"id": f"test_optimizers.py::test_optimizer_matches_cpu[{n}-fused-float32]",
              "layer": "optimizers", "status": "skipped",
              "message": f"PyTorch's OptimizerInfo of {n} declares no fused implementation"}
             for n in ("NAdam", "RAdam")]
    tests.append({"id": "test_modules.py::test_module_matches_cpu[nn.GRU-float32]",
                  "layer": "modules", "status": "skipped",
                  "message": "nn.GRU (float32) is not implemented on refdev: no kernel"})
    text = oota_summary.report({"id": "reference"}, tests)
    assert ("- optimizers layer: 2 optimizer tests not compared: 2 implementation the "
            "OptimizerInfo lacks (each reason is in tests.json)") in text
    assert ("- modules layer: 1 module x dtype pairs not compared: 1 not implemented on the "
            "device") in text
    assert "nn.GRU-float32]: skipped" not in text
