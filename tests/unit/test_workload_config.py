"""``verify.workload`` in vendor.yaml: opt-in, checked at every key like the rest of the file,
and shipped in cell.json with every default filled in (the in-image suite has no defaults)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from oota.config.vendors import JudgeOverride, WorkloadSpec, load_vendor
from oota.config.yamlsrc import load_yaml
from tests.unit.test_vendor_schema import REPO, SHIPPED, VALIDATOR, copy_vendor, problems_of

CPU_CELL = REPO / "images" / "cpu" / "cpu-torch2.13.0-py3.11-debian12" / "cell.json"
WORKLOAD = """  workload:
    models:
      - llama
      - resnet
    train_steps: 20
    timed_forwards: 30
    warmup_forwards: 3
"""
# The curve rule with a vendor's own numbers, and why (the only way to change how it judges).
JUDGED = WORKLOAD + "    judge: {multiplier: 6, floor_ulps: 16, reason: 'cuDNN picks algorithms'}\n"


@pytest.mark.parametrize("name", ["cpu", "reference"])
def test_cpu_and_reference_run_the_workload(name: str) -> None:
    workload = load_vendor(SHIPPED[name], REPO).verify.workload
    assert workload == WorkloadSpec(models=("llama", "resnet"), train_steps=20,
                                    timed_forwards=30, warmup_forwards=3, judge=None)


def test_xla_runs_the_workload_of_llama() -> None:
    """PyTorch/XLA compiles each new graph: one model keeps its cell's run in minutes."""
    workload = load_vendor(SHIPPED["xla"], REPO).verify.workload
    assert workload == WorkloadSpec(models=("llama",), train_steps=20, timed_forwards=30,
                                    warmup_forwards=3, judge=None)


@pytest.mark.parametrize("name", sorted(set(SHIPPED) - {"cpu", "reference", "xla"}))
def test_it_is_off_unless_a_vendor_asks(name: str) -> None:
    assert load_vendor(SHIPPED[name], REPO).verify.workload is None
    cells = sorted((REPO / "images" / name).glob("*/cell.json"))
    assert cells and all("workload" not in json.loads(c.read_text())["verify"] for c in cells)


def test_cell_json_carries_every_setting() -> None:
    assert json.loads(CPU_CELL.read_text())["verify"]["workload"] == {
        "models": ["llama", "resnet"], "train_steps": 20, "timed_forwards": 30,
        "warmup_forwards": 3}


def test_only_models_is_required_the_rest_has_defaults(tmp_path: Path) -> None:
    folder = copy_vendor(tmp_path, "cpu", (WORKLOAD, "  workload: {models: [gemma]}\n"))
    workload = load_vendor(folder, tmp_path).verify.workload
    assert workload is not None
    assert workload.to_json() == {
        "models": ["gemma"], "train_steps": 20, "timed_forwards": 30, "warmup_forwards": 3}


def test_a_vendor_overrides_the_curve_rule_with_a_reason(tmp_path: Path) -> None:
    folder = copy_vendor(tmp_path, "cpu", (WORKLOAD, JUDGED))
    workload = load_vendor(folder, tmp_path).verify.workload
    assert workload is not None and workload.judge == JudgeOverride(
        reason="cuDNN picks algorithms", multiplier=6.0, floor_ulps=16.0)
    assert workload.to_json()["judge"] == {"reason": "cuDNN picks algorithms", "multiplier": 6.0,
                                           "floor_ulps": 16.0}


# (replacement of WORKLOAD in cpu's vendor.yaml, the problem after file:line:col, whether
# the published schema alone rejects it too)
BAD = {
    "key-typo": (WORKLOAD.replace("train_steps:", "train_step:"),
                 "verify.workload.train_step: unknown key 'train_step'; did you mean "
                 "'train_steps'?", True),
    "model-typo": (WORKLOAD.replace("- resnet", "- resnte"),
                   "verify.workload.models[1]: 'resnte' is not a model of the suite "
                   "(verify/test_models.py MODELS); did you mean 'resnet'?", True),
    "no-models": ("  workload: {train_steps: 20}\n",
                  "verify.workload: missing required key 'models'", True),
    "empty-models": ("  workload: {models: []}\n",
                     "verify.workload.models: must not be empty", True),
    "one-step": (WORKLOAD.replace("train_steps: 20", "train_steps: 1"),
                 "verify.workload.train_steps: 1 is not a whole number from 2 to 1000", True),
    "steps-as-text": (WORKLOAD.replace("train_steps: 20", "train_steps: twenty"),
                      "verify.workload.train_steps: expected a whole number, got a string",
                      True),
    "no-forwards": (WORKLOAD.replace("timed_forwards: 30", "timed_forwards: 0"),
                    "verify.workload.timed_forwards: 0 is not a whole number from 1 to 10000",
                    True),
    "judge-without-reason": (JUDGED.replace(", reason: 'cuDNN picks algorithms'", ""),
                             "verify.workload.judge: missing required key 'reason'", True),
    "judge-loosened-by-typo": (JUDGED.replace("multiplier: 6", "multiplier: 6.0e+3"),
                               "verify.workload.judge.multiplier: '6.0e+3' is not a number from "
                               "0 to 1000; give how many times the CPU's own error (or ulps) to "
                               "allow", False),
    "retired-tolerance": (WORKLOAD + "    loss_tolerance: {rtol: 1.0e-3, atol: 1.0e-4}\n",
                          "verify.workload.loss_tolerance: unknown key 'loss_tolerance'", True),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_workload_is_one_located_problem(tmp_path: Path, case: str) -> None:
    replacement, expected, _ = BAD[case]
    problems = problems_of(copy_vendor(tmp_path, "cpu", (WORKLOAD, replacement)), tmp_path)
    pattern = r"vendors/cpu/vendor\.yaml:\d+:\d+: " + re.escape(expected)
    assert [p for p in problems if re.match(pattern, p)], "\n".join(problems)


@pytest.mark.parametrize("case", [c for c, (*_, by_schema) in BAD.items() if by_schema])
def test_the_published_schema_rejects_it_too(tmp_path: Path, case: str) -> None:
    folder = copy_vendor(tmp_path, "cpu", (WORKLOAD, BAD[case][0]))
    assert list(VALIDATOR.iter_errors(load_yaml(folder / "vendor.yaml").data)), case
