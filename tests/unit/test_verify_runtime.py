"""The runtime layer's words and its forked child (verify/oota_runtime.py), without torch: what
a vendor reads when its device breaks the fork claim or its allocator leaks, and what a child
forked from the suite's process reports back."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "verify"))
from oota_runtime import ForkOutcome, fork_and_compute, fork_problem, leak_problem  # noqa: E402

CUDA_FORK_ERROR = ("RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA "
                   "with multiprocessing, you must use the 'spawn' start method")


@pytest.mark.parametrize(("claim", "outcome", "problem"), [
    ("works", ForkOutcome(value=6.0), ""),
    ("fails", ForkOutcome(error=CUDA_FORK_ERROR), ""),
    ("works", ForkOutcome(error=CUDA_FORK_ERROR),
     "a child forked after cuda:0 was opened raised RuntimeError: Cannot re-initialize CUDA in "
     "forked subprocess."),
    ("works", ForkOutcome(value=0.0),
     "a child forked after cuda:0 was opened computed 0.0, not 6.0 (the vendor declares fork: "
     "works)"),
    ("fails", ForkOutcome(value=6.0),
     "a child forked after cuda:0 was opened computed 6.0 with no error, but the vendor declares "
     "fork: fails (set verify.capabilities.fork: works if it is meant to)"),
    ("fails", ForkOutcome(how="died of signal 11"),
     "a child forked after cuda:0 was opened died of signal 11: it neither computed nor raised "
     "a clear error (the vendor declares fork: fails)"),
], ids=["works", "fails-clearly", "works-but-raised", "works-but-wrong", "fails-but-computed",
        "crashed"])
def test_a_fork_claim_holds_or_says_what_the_child_did(claim, outcome, problem):
    found = fork_problem(claim, outcome, 6.0, "cuda:0")
    assert found.startswith(problem) if problem else found == ""


@pytest.mark.parametrize(("after", "problem"), [
    (1000, ""),
    (1000 + 4096, "memory_allocated is 4096 bytes above its baseline (1000) after the 4096-byte "
                  "tensor was deleted: the allocator did not give it back (a leak)"),
    (0, "memory_allocated fell 1000 bytes below its baseline of 1000 after the 4096-byte tensor "
        "was deleted: the statistics do not add up"),
], ids=["back", "leaked", "below"])
def test_memory_after_del_is_its_baseline_or_named_a_leak(after, problem):
    assert leak_problem("memory_allocated", 1000, after, 4096) == problem


def test_a_forked_child_answers_with_its_value_or_its_error():
    assert fork_and_compute(lambda: 2.0 * 3) == ForkOutcome(value=6.0)
    def refuse() -> float:
        raise RuntimeError("Cannot re-initialize the device in forked subprocess\nmore")
    assert fork_and_compute(refuse) == ForkOutcome(
        error="RuntimeError: Cannot re-initialize the device in forked subprocess")


def test_a_forked_child_that_dies_is_neither_a_value_nor_an_error():
    outcome = fork_and_compute(lambda: float(os.kill(os.getpid(), signal.SIGKILL) or 0))
    assert outcome == ForkOutcome(how=f"died of signal {int(signal.SIGKILL)}")
    assert fork_problem("fails", outcome, 6.0, "refdev:0").startswith(
        "a child forked after refdev:0 was opened died of signal 9: it neither computed")
