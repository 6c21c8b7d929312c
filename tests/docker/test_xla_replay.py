"""PyTorch/XLA's recordings judged again in CI (tests/data/recordings/xla-cpu-2026-11-26, its
README): the ops cases of the XLA cell (torch 2.9.0, torch_xla 2.9.0 on PJRT's CPU client)
replayed by ``oota judge`` in the CPU image (torch 2.13), where the XLA cell's own Docker test is
opt-in (-m xla, a 7.9 GB image). Every verdict is the recorded one, XLA's real divergences fail
with the judge's message, and the fault switch's recording fails tanh in every dtype and nothing
else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oota.api.runs import judge
from oota.execute.judge import Judged, Replay

REPO = Path(__file__).resolve().parents[2]
XLA = REPO / "tests" / "data" / "recordings" / "xla-cpu-2026-11-26"
PAIRS = json.loads((XLA / "pairs.json").read_text())["pairs"]


@pytest.fixture(scope="module")
def replay(built) -> Replay:
    return judge([str(XLA)], python=None, image=built.tag,
                 matrix_path=str(REPO / "matrix.yaml"), check=True)


def _pair(case: Judged) -> str:
    """'diagonal-int64' of a case whose message starts 'diagonal (int64): ...'."""
    op, dtype = case.message.split(": ", 1)[0].rsplit(" (", 1)
    return f"{op}-{dtype.rstrip(')')}"


def _rule(message: str) -> str:
    """What failed and by which rule: the pair, the sample and the rule's words, without the
    measure after them ('norm (bfloat16): sample 16 (...): the result on xla rounds away from
    zero'), which a sharper judge words anew (a verdict is its status, docs/design/judging.md)."""
    return ": ".join(message.split(": output")[0].split(": ")[:3])


def _of(replay: Replay, name: str) -> list[Judged]:
    return [c for c in replay.cases if c.file.endswith(name)]


def test_torch_213_gives_every_verdict_the_xla_run_recorded(replay) -> None:
    assert len(replay.cases) == 167 + 18 and replay.moved == 0
    assert replay.count("error") == 0


def test_each_failed_case_is_a_pair_the_run_failed_with_the_same_message(replay) -> None:
    """The replay's verdict on each recorded failure is the run's: the same pair failed, the
    same first words (what failed, and by which rule)."""
    failed = [c for c in _of(replay, "cases.pt") if c.status == "failed"]
    assert len(failed) == 75
    for case in failed:
        recorded = PAIRS[_pair(case)]
        assert recorded["status"] == "failed", case.message
        assert _rule(recorded["message"]) == _rule(case.message)


@pytest.mark.parametrize("pair, words", [
    ("diagonal-int64", "differs from the CPU in 15 of 15 elements"),
    ("nn.functional.avg_pool2d-float32", "output on xla differs from the CPU"),
    ("nn.functional.interpolate.bilinear-float32", "output on xla differs from the CPU"),
    ("where-float32", "output is int64 on xla, float32 on the CPU"),
    ("nn.functional.pixel_shuffle-float32", "output has shape [1, 9, 2, 2] on xla"),
    ("maximum-float32", "NaN or infinite"),
    ("log_softmax-bfloat16", "oota's float64 rule"),
])
def test_xlas_real_divergences_fail_with_the_judges_message(replay, pair, words) -> None:
    (case,) = [c for c in _of(replay, "cases.pt") if _pair(c) == pair]
    assert case.status == "failed" and words in case.message, case.message


def test_operators_that_fell_back_to_the_cpu_were_not_device_passes(replay) -> None:
    """Their cases pass (the CPU's own result), and the run reported the pairs as
    cpu-fallback, never passed."""
    fell_back = {k for k, v in PAIRS.items() if v["status"] == "cpu-fallback"}
    replayed = {_pair(c): c.status for c in _of(replay, "cases.pt")}
    assert {"nonzero-float32", "masked_select-float32", "lgamma-float32"} <= fell_back
    assert {replayed[k] for k in fell_back if k in replayed} == {"passed"}


def test_the_fault_switch_fails_tanh_in_every_dtype_and_nothing_else(replay) -> None:
    """OOTA_XLA_WRONG_OP=tanh registered a wrong tanh on the XLA dispatch key: the recording's
    tanh fails in float32, bfloat16 and int64, the operators beside it pass."""
    cases = _of(replay, "fault-tanh.pt")
    failed = {_pair(c) for c in cases if c.status == "failed"}
    assert failed == {"tanh-float32", "tanh-bfloat16", "tanh-int64"}
    assert {c.status for c in cases if not _pair(c).startswith("tanh-")} == {"passed"}
