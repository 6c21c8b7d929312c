"""The workload layer's arithmetic: percentiles of timings and the judgement of loss curves.

Standard library only (plain lists of floats in, numbers out), so oota's unit tests check it
without torch; verify/test_workload.py runs the models and hands their numbers here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# Why there is no device-vs-CPU figure on the CPU vendor: its device is the CPU itself.
CPU_IS_DEVICE = "n/a: the device is the CPU"


@dataclass(frozen=True)
class Curves:
    """A training run's losses on the device and, when the device is not the CPU, on the CPU
    from the same seed, weights and batch."""

    device: Sequence[float]
    cpu: Sequence[float] | None
    rtol: float
    atol: float

    @property
    def max_diff(self) -> float | None:
        """The largest |device - cpu| over the steps; None when there is no CPU curve."""
        if self.cpu is None:
            return None
        return max((abs(d - c) for d, c in zip(self.device, self.cpu, strict=True)),
                   default=0.0)

    def problems(self) -> list[str]:
        """Why the run is not stable (empty when it is): a non-finite loss, a loss that did
        not fall, the first step where the device left the CPU's curve."""
        found = [f"step {i}: the loss is {loss}" for i, loss in enumerate(self.device)
                 if not math.isfinite(loss)][:1]
        if not found and not self.device[-1] < self.device[0]:
            found.append(f"the loss did not fall: {self.device[0]:.6g} at step 0, "
                         f"{self.device[-1]:.6g} at step {len(self.device) - 1}")
        step = self._first_departure()
        if step is not None and self.cpu is not None:
            found.append(f"step {step}: the device's loss {self.device[step]:.8g} is not within "
                         f"rtol {self.rtol:g} / atol {self.atol:g} of the CPU's "
                         f"{self.cpu[step]:.8g}")
        return found

    def _first_departure(self) -> int | None:
        if self.cpu is None:
            return None
        return next((i for i, (d, c) in enumerate(zip(self.device, self.cpu, strict=True))
                     if not abs(d - c) <= self.atol + self.rtol * abs(c)), None)


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
