"""A vendor's verify hook (verify/oota_hooks.py): its optional oota_vendor.py, and the coverage
the ops layer reads from it (which operator × dtype ran on the device, which on the CPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from oota import vocab

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "verify"))
import oota_hooks  # noqa: E402
import oota_summary  # noqa: E402


class Counters:
    """A backend whose fallback counters grow when told to (like torch_xla's aten:: ones)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.compile_s = 0.0

    def fallback_counts(self) -> dict[str, int]:
        return dict(self.counts)

    def device_metrics(self) -> dict[str, float]:
        return {"compile_s": self.compile_s}

    def run(self, *fell_back: str, compile_s: float = 0.0) -> str:
        for name in fell_back:
            self.counts[name] = self.counts.get(name, 0) + 1
        self.compile_s += compile_s
        return "result"


def test_a_folder_without_a_hook_has_none(tmp_path):
    assert oota_hooks.vendor_hook(tmp_path / oota_hooks.HOOK_FILE) is None


def test_the_hook_is_loaded_once_from_the_vendor_folder(tmp_path, monkeypatch):
    hook = tmp_path / oota_hooks.HOOK_FILE
    hook.write_text("LOADS = []\nLOADS.append(1)\ndef fallback_counts():\n    return {'x': 2}\n")
    monkeypatch.setenv("OOTA_VENDOR_VERIFY", str(tmp_path))
    monkeypatch.delitem(sys.modules, oota_hooks.MODULE_NAME, raising=False)
    first = oota_hooks.vendor_hook()
    assert first is oota_hooks.vendor_hook() and first.LOADS == [1]
    assert oota_hooks.fallback_counts(first) == {"x": 2.0}
    assert oota_hooks.device_metrics(first) == {}  # not declared: nothing
    assert oota_hooks.declares_fallbacks(first)


def test_a_broken_hook_is_an_error_naming_its_file(tmp_path):
    hook = tmp_path / oota_hooks.HOOK_FILE
    hook.write_text("raise ValueError('OOTA_XLA_WRONG_OP=nope: no aten operator')\n")
    with pytest.raises(oota_hooks.HookError, match=f"^{hook}: ValueError: OOTA_XLA_WRONG_OP"):
        oota_hooks.vendor_hook(hook)
    assert oota_hooks.MODULE_NAME not in sys.modules


def test_a_pair_whose_samples_called_the_fallback_ran_on_the_cpu():
    backend = Counters()
    coverage = oota_hooks.Coverage(backend)
    assert coverage.watch(lambda: backend.run(compile_s=0.5)) == "result"
    coverage.watch(lambda: backend.run("nonzero", "nonzero"))
    coverage.watch(lambda: backend.run("nonzero", compile_s=0.25))
    assert coverage.ran_on == oota_hooks.CPU
    assert coverage.to_data() == {"ran_on": "cpu", "fallback_ops": ["nonzero"],
                                  "fallback_samples": 2, "device_metrics": {"compile_s": 0.75}}
    message = coverage.message()
    assert vocab.normalized("skipped", message) == (
        "cpu-fallback", "2 of 3 samples called the CPU fallback (aten::nonzero): their results "
        "are the CPU's own and say nothing about the device")


def test_a_failing_sample_is_still_counted():
    backend = Counters()
    coverage = oota_hooks.Coverage(backend)

    def broken() -> None:
        backend.run("median")
        raise RuntimeError("lowering failed")

    with pytest.raises(RuntimeError):
        coverage.watch(broken)
    assert coverage.to_data()["fallback_ops"] == ["median"]


def test_a_pair_without_fallbacks_ran_on_the_device():
    backend = Counters()
    coverage = oota_hooks.Coverage(backend)
    coverage.watch(backend.run)
    assert coverage.to_data() == {"ran_on": "device"}


@pytest.mark.parametrize("hook", [None, SimpleNamespace()], ids=["no-hook", "no-counters"])
def test_without_counters_where_it_ran_is_unknown(hook):
    coverage = oota_hooks.Coverage(hook)
    coverage.watch(lambda: None)
    assert coverage.ran_on == oota_hooks.UNKNOWN and coverage.to_data() == {"ran_on": "unknown"}


def test_cpu_fallback_counts_apart_and_never_as_a_pass():
    assert vocab.worst(["passed", "cpu-fallback"]) == "passed"
    assert vocab.worst(["cpu-fallback", "skipped"]) == "cpu-fallback"
    assert vocab.FALLBACK not in vocab.BAD
    counts = vocab.layer_counts([("ops", "passed"), ("ops", "cpu-fallback"), ("ops", "skipped")])
    assert counts["ops"] == {"passed": 1, "cpu-fallback": 1, "not-claimed": 0, "skipped": 1,
                             "unsupported-here": 0, "failed": 0}


def test_a_capability_not_claimed_counts_apart_and_never_as_a_pass():
    """A test skipped as 'not claimed: ...' (verify/oota_claims.py) gets its own status:
    counted apart from skips, outranked by a pass, never a pass."""
    assert vocab.normalized("skipped", "not claimed: streams ordering work: the vendor does "
                            "not claim streams") == (vocab.NOT_CLAIMED, "streams ordering work: "
                                                     "the vendor does not claim streams")
    assert vocab.worst(["passed", "not-claimed"]) == "passed"
    assert vocab.worst(["not-claimed", "skipped"]) == "not-claimed"
    assert vocab.NOT_CLAIMED not in vocab.BAD
    assert vocab.run_status([("install", "passed"), ("runtime", "not-claimed")]) == "not-claimed"
    counts = vocab.layer_counts([("runtime", "passed"), ("runtime", "not-claimed")])
    assert counts["runtime"]["not-claimed"] == 1 and counts["runtime"]["skipped"] == 0


def test_verify_log_shows_the_pairs_that_ran_on_the_cpu(tmp_path):
    cpu = {"id": "test_ops.py::test_op_matches_cpu[nonzero-float32]", "layer": "ops",
           "status": "skipped", "message": oota_hooks.CPU_PREFIX + "3 of 3 samples ...",
           "data": {"op": "nonzero", "ran_on": "cpu", "fallback_ops": ["nonzero"]}}
    ran = {"id": "test_ops.py::test_op_matches_cpu[add-float32]", "layer": "ops",
           "status": "passed", "message": "", "data": {"op": "add", "ran_on": "device"}}
    (tmp_path / "cell.json").write_text(json.dumps({"id": "xla-cell", "device": "xla"}))
    (tmp_path / "tests.json").write_text(json.dumps({"tests": [cpu, ran]}))
    text = oota_summary.summary(tmp_path / "cell.json", tmp_path / "tests.json",
                                tmp_path / "none.json")
    assert "| layer | result | passed | ran on CPU | skipped | n/a here | failed |" in text
    assert "| ops | ✓ | 1 | 1 | 0 | 0 | 0 |" in text
    assert ("- ops layer: 1 operator x dtype pairs ran on the CPU (the backend's fallback), not "
            "on the device: aten::nonzero (1)") in text


def test_without_fallbacks_verify_log_keeps_its_columns(tmp_path):
    (tmp_path / "cell.json").write_text(json.dumps({"id": "cpu-cell", "device": "cpu"}))
    (tmp_path / "tests.json").write_text(json.dumps({"tests": [
        {"id": "test_install.py::test_x", "layer": "install", "status": "passed"}]}))
    text = oota_summary.summary(tmp_path / "cell.json", tmp_path / "tests.json",
                                tmp_path / "none.json")
    assert "| layer | result | passed | skipped | n/a here | failed |" in text


def test_samples_are_made_on_the_cpu_only_where_the_vendor_asks():
    assert oota_hooks.samples_on_cpu(SimpleNamespace(SAMPLES_ON_CPU=True))
    assert not oota_hooks.samples_on_cpu(SimpleNamespace(SAMPLES_ON_CPU="yes"))
    assert not oota_hooks.samples_on_cpu(None) and not oota_hooks.samples_on_cpu(Counters())
