"""The workload layer's arithmetic: percentiles of timings and the judgement of loss curves.

Standard library only (plain lists of floats in, numbers out), so oota's unit tests check it
without torch; verify/test_workload.py runs the models and hands their numbers here.

A device's training curve is judged the way ``oota_rules.judge_curve`` says: against the same
run on the CPU in float64, relative to how far the CPU's own float32 run drifts from it. A
per-step tolerance against the CPU's float32 curve does not hold on real hardware: at a large
learning rate a curve amplifies rounding, so two correct float32 runs part by far more than
one operation's error (the CPU's own resnet curve leaves the float64 one by 0.41).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from oota_rules import CurveJudgement, CurveRule, judge_curve

# Why there is no device-vs-CPU figure on the CPU vendor: its device is the CPU itself.
CPU_IS_DEVICE = "n/a: the device is the CPU"


@dataclass(frozen=True)
class Curves:
    """A training run's losses on the device and, when the device is not the CPU, on the CPU
    in the model's dtype and in float64, from the same seed, weights and batch."""

    device: Sequence[float]
    cpu: Sequence[float] | None
    reference: Sequence[float] | None
    rule: CurveRule

    @property
    def max_diff(self) -> float | None:
        """The largest |device - cpu| over the steps; None when there is no CPU curve."""
        if self.cpu is None:
            return None
        return max((abs(d - c) for d, c in zip(self.device, self.cpu, strict=True)),
                   default=0.0)

    @property
    def judgement(self) -> CurveJudgement | None:
        if self.cpu is None or self.reference is None:
            return None
        return judge_curve(self.device, self.cpu, self.reference, self.rule)

    def problems(self) -> list[str]:
        """Why the run is not stable (empty when it is): a non-finite loss, a loss that did
        not fall, a device curve that leaves the float64 one further than the CPU's allows."""
        found = [f"step {i}: the loss is {loss}" for i, loss in enumerate(self.device)
                 if not math.isfinite(loss)][:1]
        if not found and not self.device[-1] < self.device[0]:
            found.append(f"the loss did not fall: {self.device[0]:.6g} at step 0, "
                         f"{self.device[-1]:.6g} at step {len(self.device) - 1}")
        judged = self.judgement
        if judged is not None and not judged.passed:
            found.append(judged.message("the device's loss curve"))
        return found


def p90(seconds: Sequence[float]) -> float:
    """The 90th percentile (linear between the nearest ranks, as numpy's default does)."""
    if len(seconds) == 1:
        return seconds[0]
    return statistics.quantiles(seconds, n=10, method="inclusive")[8]


def latency(seconds: Sequence[float]) -> dict[str, float]:
    """``latency_median_s`` and ``latency_p90_s`` of timed forwards."""
    return {"latency_median_s": statistics.median(seconds), "latency_p90_s": p90(seconds)}


def steps_per_second(step_seconds: Sequence[float]) -> float | None:
    """Throughput over the steps after the first: the first pays for one-off work (allocator
    growth, kernel selection) that a long training run does not repeat. None when the clock
    measured no time at all (then there is no figure, rather than an infinite one)."""
    timed = step_seconds[1:] or step_seconds
    total = sum(timed)
    return len(timed) / total if total > 0 else None
