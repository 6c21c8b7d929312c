"""What oota-verify prints: the cell's report and the comparison with the image's verification
(verify/oota_summary.py, which runs inside images with the standard library only)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from oota import vocab

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "verify"))
import oota_summary  # noqa: E402
import oota_vocab  # noqa: E402 - importable once oota_summary is: oota/vocab.py in a checkout

CELL = {"id": "cuda-torch2.15.0-cu13.2-py3.11-debian12", "torch": "2.15.0", "python": "3.11",
        "toolkit": "cuda", "toolkit_version": "13.2", "device": "cuda"}


def entry(id_, layer, status, message="", **data):
    entry = {"id": id_, "layer": layer, "status": status, "message": message}
    return {**entry, "data": data} if data else entry


# As the suite inside a GPU-less container writes them: the host check's skips are prefixed.
NOW = [entry("test_install.py::test_core_imports[torch]", "install", "passed"),
       entry("test_device.py::test_matmul", "device", "skipped",
            "unsupported-here: nvidia-smi not found; no cuda device visible here"),
       entry("test_models.py::test_forward_and_train_step[llama]", "models", "passed",
            model="llama", seconds=0.02, peak_bytes=1048576, max_abs_diff=3e-7),
       entry("test_cuda.py::test_cudnn_is_bundled", "vendor", "failed",
             "AssertionError: None\nmore")]


def test_report_has_layers_models_and_every_test_that_did_not_pass():
    text = oota_summary.report(CELL, NOW)
    assert text.splitlines()[0] == ("oota-verify report: cuda-torch2.15.0-cu13.2-py3.11-debian12 "
                                    "(torch 2.15.0, Python 3.11, cuda 13.2, device cuda): ✗")
    assert "| device | n/a here | 0 | 0 | 1 | 0 |" in text
    assert "| vendor | ✗ | 0 | 0 | 0 | 1 |" in text
    assert "| llama | ✓ | 0.02 | 1048576 | 3e-07 |" in text
    assert "- test_device.py::test_matmul: unsupported-here: nvidia-smi not found; no cuda " \
           "device visible here" in text
    assert "- test_cuda.py::test_cudnn_is_bundled: failed: AssertionError: None" in text


@pytest.mark.parametrize(("then_status", "expected_line"), [
    ("unsupported-here", None),   # n/a there, skipped here: both did not run
    ("passed", "- test_device.py::test_matmul: passed then, unsupported-here now "
               "(nvidia-smi not found; no cuda device visible here)"),
])
def test_comparison_names_what_ended_differently(then_status, expected_line):
    expected = {"cell": CELL["id"], "status": "unsupported-here", "verified_by": "oota 0.1.0",
                "verified_at": "2026-11-22T00:00:00+00:00", "host": {"hardware": False},
                "tests": [{"id": t["id"], "layer": t["layer"], "status": t["status"]}
                          for t in NOW[:1] + NOW[2:]]
                + [{"id": NOW[1]["id"], "layer": "device", "status": then_status},
                   {"id": "test_other.py::test_left_out", "layer": "device", "status": "passed"}]}
    expected["tests"][2]["status"] = "passed"  # the vendor test passed at verification
    text = oota_summary.compare(expected, NOW)
    assert text.startswith("Compared with its verification by oota 0.1.0 on 2026-11-22T00:00:00"
                           "+00:00 (a host without the hardware; status unsupported-here):")
    assert "(1 of its tests did not run this time)" in text
    assert "- test_cuda.py::test_cudnn_is_bundled: passed then, failed now (AssertionError: " \
           "None)" in text
    if expected_line:
        assert expected_line in text and "2 test(s) ended differently" in text
    else:
        assert "1 test(s) ended differently" in text


def test_summary_compares_only_with_the_same_cells_verification(tmp_path):
    (tmp_path / "cell.json").write_text(json.dumps(CELL))
    (tmp_path / "tests.json").write_text(json.dumps({"tests": NOW[:1]}))
    (tmp_path / "expected.json").write_text(json.dumps(
        {"cell": "another-cell", "tests": [], "host": {}}))
    files = (tmp_path / "cell.json", tmp_path / "tests.json", tmp_path / "expected.json")
    assert "Compared with" not in oota_summary.summary(*files)
    (tmp_path / "expected.json").write_text(json.dumps(
        {"cell": CELL["id"], "tests": NOW[:1], "host": {"hardware": True}}))
    assert "every one of the 1 tests ended the same way." in oota_summary.summary(*files)


def test_an_unreadable_verification_is_said_not_fatal(tmp_path):
    (tmp_path / "cell.json").write_text(json.dumps(CELL))
    (tmp_path / "tests.json").write_text(json.dumps({"tests": NOW[:1]}))
    (tmp_path / "expected.json").write_text('{"cell": "truncated')
    text = oota_summary.summary(tmp_path / "cell.json", tmp_path / "tests.json",
                                tmp_path / "expected.json")
    assert text.startswith("oota-verify report:")
    assert "Cannot compare with the image's verification" in text


# -- the shared vocabulary ------------------------------------------------------------------

def test_summary_uses_oota_vocabulary():
    """Statuses, their order and the layers are oota's own, not a copy (oota/vocab.py)."""
    assert oota_summary.layer_counts is oota_vocab.layer_counts  # the report counts with it too
    assert oota_vocab.LAYERS == vocab.LAYERS
    assert oota_summary.worst is oota_vocab.worst
    assert oota_vocab.STATUS_ORDER == vocab.STATUS_ORDER
    assert "interrupted" in oota_summary.MARK


def test_in_an_image_the_copy_beside_the_suite_is_used(tmp_path):
    """The image layout: verify/ files with oota_vocab.py beside them (render.context_files),
    no oota package anywhere."""
    for name in ("oota_summary.py", "oota_ops.py", "oota_budget.py", "oota_hooks.py",
                 "oota_dispatch.py", "oota_suite.py", "oota_expected.py", "oota_rerun.py",
                 "oota_journal.py", "oota_recorder.py", "oota_isacache.py",
                 "oota-verify"):
        shutil.copy(REPO / "verify" / name, tmp_path / name)
    shutil.copy(REPO / "oota" / "vocab.py", tmp_path / "oota_vocab.py")
    code = ("import oota_summary, oota_vocab, oota_suite, oota_recorder; "
            "print(oota_vocab.__file__); print(oota_recorder.LAYERS == oota_vocab.LAYERS)")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=False, env={"PYTHONPATH": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(tmp_path / "oota_vocab.py"), "True"]
    layers = subprocess.run([sys.executable, str(tmp_path / "oota-verify"), "--layer", "bogus"],
                            capture_output=True, text=True, check=False, cwd=tmp_path)
    assert layers.returncode == 2
    assert f"layers: {', '.join(vocab.LAYERS)}\n" in layers.stderr


def test_tests_the_ops_budget_left_unrun_are_not_compared():
    """Which operators a time budget reaches depends on the host's speed: a pair unrun in
    either run is no difference between them, and the comparison says how many it left out."""
    budget = "time budget of 20 s spent (OOTA_OPS_BUDGET_S)"
    ops = "test_ops.py::test_op_runs[{}-float32]"
    expected = {"verified_by": "oota", "verified_at": "then", "status": "passed",
                "host": {"hardware": True}, "tests": [
                    {"id": ops.format("add"), "status": "passed"},
                    {"id": ops.format("mul"), "status": "skipped", "message": budget},
                    {"id": ops.format("sub"), "status": "passed"}]}
    now = [{"id": ops.format("add"), "status": "passed"},
           {"id": ops.format("mul"), "status": "passed"},
           {"id": ops.format("sub"), "status": "skipped", "message": budget}]
    text = oota_summary.compare(expected, now)
    assert "every one of the 1 tests ended the same way" in text
    assert ("the layers' time budgets left 1 entries (operator x dtype pairs, module x dtype "
            "pairs, ...) unrun this time and 1 then: those are not compared") in text
    now[0] = {"id": ops.format("add"), "status": "failed", "message": "mismatch"}
    assert f"- {ops.format('add')}: passed then, failed now (mismatch)" in oota_summary.compare(
        expected, now)


FOLDED = {"id": "test_ops.py::test_op_runs[unrun-by-budget]", "layer": "ops",
          "status": "skipped", "message": "time budget of 0 s spent (OOTA_OPS_BUDGET_S): 3 "
          "operator×dtype pairs of 2 operators not run",
          "data": {"unrun_pairs": 3, "unrun_operators": 2}}


def test_an_image_verified_before_the_fold_compares_with_a_folded_run():
    """An image sealed with one skipped test per unrun pair, run by a suite that folds them:
    the pairs and the folded entry are not compared, and nothing is said to be missing."""
    budget = "time budget of 0 s spent (OOTA_OPS_BUDGET_S)"
    ops = "test_ops.py::test_op_runs[{}-float32]"
    expected = {"verified_by": "oota", "verified_at": "then", "status": "passed",
                "host": {"hardware": True}, "tests": [
                    {"id": "test_install.py::test_imports", "status": "passed"},
                    {"id": ops.format("add"), "status": "passed"},
                    *({"id": ops.format(op), "status": "skipped", "message": budget}
                      for op in ("mul", "sub", "div"))]}
    now = [{"id": "test_install.py::test_imports", "status": "passed"},
           {"id": ops.format("add"), "status": "passed"}, FOLDED]
    text = oota_summary.compare(expected, now)
    assert text.endswith("every one of the 2 tests ended the same way (the layers' time "
                         "budgets left 3 entries (operator x dtype pairs, module x dtype pairs, "
                         "...) unrun this time and 3 then: those are not compared).")


def test_pairs_a_folded_run_holds_are_not_compared_with_those_the_other_run_reached():
    """Both runs folded: a pair that ran in one and is in the other's fold is no difference."""
    ops = "test_ops.py::test_op_runs[{}-float32]"
    then_folded = {**FOLDED, "data": {"unrun_pairs": 2, "unrun_operators": 2}}
    expected = {"verified_by": "oota", "verified_at": "then", "status": "passed",
                "host": {"hardware": True}, "tests": [
                    {"id": ops.format("add"), "status": "passed"},
                    {"id": ops.format("mul"), "status": "passed"}, then_folded]}
    now = [{"id": ops.format("add"), "status": "passed"}, FOLDED]
    text = oota_summary.compare(expected, now)
    assert "every one of the 1 tests ended the same way" in text
    assert "did not run this time" not in text and "pairs, ...) unrun this time and 2 then" in \
        text
    now[0] = {"id": ops.format("add"), "status": "failed", "message": "mismatch"}
    assert "1 test(s) ended differently" in oota_summary.compare(expected, now)


@pytest.mark.parametrize(("status", "message", "data", "pairs"), [
    ("skipped", "time budget of 5 s spent (OOTA_OPS_BUDGET_S)", {}, 1),
    ("skipped", "time budget of 5 s spent (OOTA_OPS_BUDGET_S): 7 operator×dtype pairs of 3 "
                "operators not run", {"unrun_pairs": 7, "unrun_operators": 3}, 7),
    ("skipped", "time budget of 5 s spent (OOTA_OPS_BUDGET_S): ...", {"unrun_pairs": True}, 1),
    ("skipped", "the OpInfo of add does not support int8 on the CPU", {}, 0),
    ("passed", "time budget of 5 s spent", {"unrun_pairs": 7}, 0),
], ids=["one-pair", "folded", "bad-count", "other-skip", "not-skipped"])
def test_how_many_pairs_a_test_says_the_budget_left_unrun(status, message, data, pairs):
    assert vocab.budget_unrun(status, message, data) == pairs
