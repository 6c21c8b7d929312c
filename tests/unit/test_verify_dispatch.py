"""The dispatcher's view of where an operator ran (verify/oota_dispatch.py, and the coverage the
ops layer builds from it with a vendor's counters, verify/oota_hooks.py), checked on what
PyTorch's dispatcher really answered: torch 2.13.0+cpu with no backend, with refdev loaded in
the reference image, and torch 2.9.0 with torch_xla in the XLA image (tests/data/dispatch/)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "verify"))
import oota_dispatch  # noqa: E402
import oota_hooks  # noqa: E402
from oota_dispatch import COMPOSITE, FALLBACK, KERNEL, MISSING  # noqa: E402

RECORDED = REPO / "tests" / "data" / "dispatch"


def recorded(name: str) -> dict[tuple[str, str], dict[str, Any]]:
    data = json.loads((RECORDED / name).read_text())
    return {(row["op"], row["key"]): row for row in data["answers"]}


BARE = recorded("torch-2.13.0-cpu.json")
REFDEV = recorded("refdev-torch-2.13.0.json")
XLA = recorded("xla-torch-2.9.0.json")


@pytest.mark.parametrize(("name", "torch", "rows"), [
    ("torch-2.13.0-cpu.json", "2.13.0+cpu", 462), ("refdev-torch-2.13.0.json", "2.13.0+cpu", 154),
    ("xla-torch-2.9.0.json", "2.9.0+cu128", 77)])
def test_the_classification_is_the_dispatchers_own_choice(name, torch, rows):
    """For every recorded operator and key, what the ops layer derives from the queries is
    what the dispatcher's computed table says it takes."""
    data = json.loads((RECORDED / name).read_text())
    assert data["torch"] == torch and len(data["answers"]) == rows
    for row in data["answers"]:
        assert oota_dispatch.Answers.from_mapping(row).how == row["table"], row


@pytest.mark.parametrize(("answers", "op", "key", "how"), [
    (BARE, "aten::add.Tensor", "CPU", KERNEL),
    (BARE, "aten::linear", "CPU", COMPOSITE),  # CompositeImplicitAutograd: t + addmm
    (BARE, "aten::add.Tensor", "PrivateUse1", COMPOSITE),  # structured: calls add.out
    (BARE, "aten::add.out", "PrivateUse1", MISSING),  # no backend: nothing serves it
    (BARE, "aten::nonzero", "PrivateUse1", MISSING),
    (BARE, "aten::add.Tensor", "XLA", MISSING),  # XLA is outside the NonFunctional alias
    (BARE, "aten::linear", "XLA", COMPOSITE),
    # A sparse tensor's call goes to its own key: the recorder asks the call's key, not the
    # device type's dense one, where nothing serves it.
    (BARE, "aten::sparse_sampled_addmm", "SparseCsrCPU", KERNEL),
    (BARE, "aten::sparse_sampled_addmm", "CPU", MISSING),
    (REFDEV, "aten::view", "PrivateUse1", KERNEL),  # refdev's own
    (REFDEV, "aten::fill_.Scalar", "PrivateUse1", KERNEL),
    (REFDEV, "aten::nonzero", "PrivateUse1", FALLBACK),  # refdev's boxed CPU fallback
    (REFDEV, "aten::add.out", "PrivateUse1", FALLBACK),
    (REFDEV, "aten::add.Tensor", "PrivateUse1", COMPOSITE),
    # refdev registers its host fallback as this operator's kernel: a kernel to the
    # dispatcher; only refdev's counters know it ran on the CPU.
    (REFDEV, "aten::native_layer_norm", "PrivateUse1", KERNEL),
    # torch_xla's own lowering; on PJRT's CPU client it still runs addmm on the CPU (its
    # aten::addmm counter grew in the XLA cell's run, 2026-11-28): only counters know that.
    (XLA, "aten::addmm", "XLA", KERNEL),
    (XLA, "aten::embedding_renorm_", "XLA", FALLBACK),
    (XLA, "aten::linear", "XLA", COMPOSITE),
], ids=lambda v: v if isinstance(v, str) else "")
def test_what_the_dispatcher_really_answered(answers, op, key, how):
    assert oota_dispatch.Answers.from_mapping(answers[(op, key)]).how == how


def test_which_keys_have_a_boxed_fallback():
    assert not any(row["fallback"] for row in BARE.values())  # CPU; no backend
    assert all(row["fallback"] for (_, key), row in REFDEV.items() if key == "PrivateUse1")
    assert all(row["fallback"] for row in XLA.values())
    assert not any(row["fallback"] for (_, key), row in REFDEV.items() if key == "CPU")


@pytest.mark.parametrize(("hows", "boxed", "counters", "grew", "served"), [
    ({KERNEL}, True, False, False, KERNEL),
    ({KERNEL, FALLBACK}, True, False, False, FALLBACK),
    ({KERNEL, MISSING, FALLBACK}, True, False, False, MISSING),
    ({KERNEL}, True, True, True, FALLBACK),  # the counters saw what the dispatcher did not
    # A composite's own calls: only a key with a boxed fallback could have sent them to the
    # CPU, and only counters can tell whether it did.
    ({KERNEL, COMPOSITE}, False, False, False, KERNEL),
    ({KERNEL, COMPOSITE}, True, False, False, COMPOSITE),
    ({KERNEL, COMPOSITE}, True, True, False, KERNEL),
    (set(), False, False, False, ""),
], ids=["kernels", "one-fell-back", "missing-first", "counters", "composite-no-fallback",
        "composite-unknown", "composite-counted", "nothing-called"])
def test_how_a_pair_was_served(hows, boxed, counters, grew, served):
    assert oota_dispatch.pair_served(hows, boxed_fallback=boxed, counters=counters,
                                     counters_grew=grew) == served


class Recorder:
    """A device run's calls as the dispatcher serves them (oota_dispatch.CallRecorder's
    shape), told what each run calls."""

    def __init__(self, key: str, answers: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.key, self.answers = key, answers
        self.boxed_fallback = any(r["fallback"] for (_, k), r in answers.items() if k == key)
        self.calls: dict[str, str] = {}
        self.next: list[str] = []

    def during(self, run):
        self.calls = {op: oota_dispatch.Answers.from_mapping(self.answers[(op, self.key)]).how
                      for op in self.next}
        return run()


def watched(recorder: Recorder, *runs: list[str], hook: Any = None,
            own_device: bool = False) -> oota_hooks.Coverage:
    coverage = oota_hooks.Coverage(hook, calls=recorder, own_device=own_device)
    for calls in runs:
        recorder.next = calls
        coverage.watch(lambda: None)
    return coverage


def test_a_pair_that_called_the_boxed_fallback_ran_on_the_cpu_without_any_hook():
    """refdev's answers with no counters read: nonzero goes to the boxed fallback."""
    coverage = watched(Recorder("PrivateUse1", REFDEV), ["aten::view"], ["aten::nonzero"])
    assert coverage.ran_on == oota_hooks.CPU
    assert coverage.message() == (
        "ran on the CPU: 1 of 2 samples called the CPU fallback (aten::nonzero; the dispatcher "
        "sends aten::nonzero to PrivateUse1's boxed fallback): their results are the CPU's own "
        "and say nothing about the device")
    data = coverage.to_data()
    assert data["served"] == FALLBACK and data["fallback_ops"] == ["nonzero"]
    assert data["dispatch"] == {KERNEL: ["view"], FALLBACK: ["nonzero"]}
    assert data["dispatch_key"] == "PrivateUse1" and data["boxed_fallback"] is True


def test_own_kernels_are_a_device_run():
    coverage = watched(Recorder("PrivateUse1", REFDEV), ["aten::view", "aten::fill_.Scalar"])
    assert coverage.ran_on == oota_hooks.DEVICE and coverage.to_data()["served"] == KERNEL


def test_a_composite_on_a_key_with_a_fallback_is_unknown_without_counters():
    """add.Tensor is refdev's composite: its add.out call goes to the fallback, which only
    refdev's counters see."""
    coverage = watched(Recorder("PrivateUse1", REFDEV), ["aten::add.Tensor"])
    assert coverage.ran_on == oota_hooks.UNKNOWN
    assert coverage.to_data()["served"] == COMPOSITE


class Counters:
    """refdev's hook: its host fallback's counters, grown by what a run sends there."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def fallback_counts(self) -> dict[str, int]:
        return dict(self.counts)


def test_the_counters_see_what_a_composite_called():
    hook, recorder = Counters(), Recorder("PrivateUse1", REFDEV)
    coverage = oota_hooks.Coverage(hook, calls=recorder)
    recorder.next = ["aten::add.Tensor"]
    coverage.watch(lambda: hook.counts.update({"add.out": 1}))
    assert coverage.ran_on == oota_hooks.CPU
    assert coverage.to_data()["fallback_ops"] == ["add.out"]
    quiet = watched(Recorder("PrivateUse1", REFDEV), ["aten::add.Tensor"], hook=Counters())
    assert quiet.ran_on == oota_hooks.DEVICE  # counters watched and stayed quiet


def test_on_a_key_without_a_boxed_fallback_composites_are_the_devices_own():
    """CUDA's or XPU's shape: nothing can send a composite's calls to the CPU (the CPU key's
    recorded answers stand in: composites and kernels, no fallback)."""
    coverage = watched(Recorder("CPU", BARE), ["aten::linear", "aten::add.Tensor"])
    assert coverage.ran_on == oota_hooks.DEVICE


def test_the_cpu_vendor_is_its_own_device_never_a_fallback():
    """Even were a boxed fallback registered on the CPU key (torch.library can), what the
    CPU vendor runs is its own device's work."""
    row = {**REFDEV[("aten::nonzero", "PrivateUse1")], "key": "CPU"}
    coverage = watched(Recorder("CPU", {("aten::nonzero", "CPU"): row}), ["aten::nonzero"],
                       own_device=True)
    assert coverage.ran_on == oota_hooks.DEVICE and coverage.fell_back == 0
    assert coverage.to_data()["dispatch_key"] == "CPU"
    assert "fallback_ops" not in coverage.to_data()


def test_a_pair_that_ran_nothing_on_the_device_is_asked_by_name_and_placed_nowhere():
    coverage = watched(Recorder("PrivateUse1", BARE))
    coverage.name_if_silent(lambda key: {"aten::nonzero": MISSING} if key == "PrivateUse1"
                            else {})
    data = coverage.to_data()
    assert data["dispatch_from"] == "name" and data["served"] == MISSING
    assert coverage.ran_on == oota_hooks.UNKNOWN
