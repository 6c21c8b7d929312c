"""PyTorch's common operator checks (test/test_ops.py ``TestCommon``) on the vendor's device, for
the autograd layer (``test_autograd.py``): what they share, and the first of them (the out=
check is ``oota_outs.py``):

* **non-contiguous inputs** (``test_noncontiguous_samples``): each sample's tensors made
  non-contiguous as PyTorch makes them (``SampleInput.noncontiguous()``: every element beside a
  NaN, or 12, that a kernel must not read) give the result of the contiguous sample on the
  same device, within PyTorch's comparison (``assertEqual``: ``torch.testing.assert_close``'s
  tolerance for the dtype, widened by the OpInfo's override for that test). A kernel that reads
  its input as if it were contiguous fails here;
* **out=** (``test_out`` and ``test_out_warning``): an ``out=`` full of NaN (or the largest
  integer) and a non-contiguous one give the result without ``out=`` and keep their strides
  and storage; an empty one is resized without a warning, and one of the wrong shape with
  PyTorch's warning ("An output with one or more elements was resized"); an ``out=`` on another
  device, and a long one for a floating result, raise a RuntimeError (factory functions
  excepted, as PyTorch excepts them).

Both compare the device with itself: they need no CPU, and they mean the same on every vendor
(the CPU vendor has no other device, so its out= check has no device-mismatch case).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from oota_autograd import Outcome
from oota_cases import describe_sample
from oota_samples import cpu_copy, first_line, not_implemented, synchronize

Watch = Callable[[Callable[[], Any]], Any]


@dataclass(frozen=True, kw_only=True)
class Pair:
    """One operator × dtype of a common check: the operator, its names, the device, what
    watches the device's runs (``oota_hooks.Coverage.watch``) and PyTorch's tolerance for the
    comparison ((atol, rtol), None: assert_close's default for the dtype)."""

    op: Any
    name: str
    dtype: str
    device: Any
    watch: Watch
    tolerance: tuple[float, float] | None = None
    warning_case: bool = True  # False: PyTorch's test_out_warning skips this operator

    def where(self, index: int, sample: Any) -> str:
        return (f"{self.name} ({self.dtype}): sample {index} "
                f"({describe_sample(sample.input, sample.args, sample.kwargs)})")


def differs(actual: Any, expected: Any, tolerance: tuple[float, float] | None) -> str:
    """How ``actual`` differs from ``expected`` as PyTorch's assertEqual would say it (''
    when it does not): assert_close with NaN equal to NaN."""
    import torch

    atol, rtol = tolerance if tolerance is not None else (None, None)
    try:
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)
    except (AssertionError, TypeError, ValueError, RuntimeError) as exc:
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        return "; ".join(lines)[:600]
    return ""


def on_device(pair: Pair, call: Callable[[], Any]) -> Any:
    def run() -> Any:
        result = call()
        synchronize(pair.device)
        return result
    return pair.watch(run)


def call_args(sample: Any) -> tuple[Any, ...]:
    return (sample.input, *sample.args)


@dataclass
class Tally:
    """What the samples of one pair came to so far."""

    samples: int
    ran: int = 0
    unchecked: int = 0
    cpu_errors: int = 0
    refused: str = ""

    def outcome(self, **more: Any) -> Outcome:
        return Outcome(samples=self.samples, ran=self.ran, unchecked=self.unchecked,
                       cpu_errors=self.cpu_errors, refused=self.refused, **more)

    def refuse(self, exc: Exception, index: int) -> None:
        self.cpu_errors += 1
        self.refused = self.refused or f"sample {index}: {first_line(exc)}"


def device_error(tally: Tally, exc: Exception, index: int, doing: str) -> Outcome:
    text = f"sample {index}{doing}: {first_line(exc)}"
    if not_implemented(exc):
        return tally.outcome(not_implemented=text)
    return tally.outcome(error=text)


# -- non-contiguous inputs ------------------------------------------------------------------

def noncontiguous(pair: Pair, made: Sequence[Any]) -> Outcome:
    """PyTorch's test_noncontiguous_samples (forward) on the device."""
    tally = Tally(samples=len(made))
    for index, sample in enumerate(made):
        runs = _Both(pair, sample)
        try:
            expected, actual = pair.watch(runs)  # one sample, watched once
        except Exception as exc:  # noqa: BLE001 - refused by the CPU too, or the finding
            if runs.contiguous_ran:
                return device_error(tally, exc, index, " with non-contiguous inputs (it runs "
                                    "with contiguous ones)")
            if pair.device.type == "cpu" or raises_on_cpu(pair.op, sample):
                tally.refuse(exc, index)
                continue
            return device_error(tally, exc, index, "")
        tally.ran += 1
        problem = differs(actual, expected, pair.tolerance)
        if problem:
            return tally.outcome(failure=(
                f"{pair.where(index, sample)}: with non-contiguous inputs the result on "
                f"{pair.device.type} is not the contiguous inputs' result: {problem}"))
    return tally.outcome(passed=_tolerance_words(pair, "with non-contiguous inputs give the "
                                                 "contiguous inputs' result"))


class _Both:
    """A sample run on the device as it is, then with its tensors made non-contiguous."""

    def __init__(self, pair: Pair, sample: Any) -> None:
        self.pair, self.sample = pair, sample
        self.contiguous_ran = False

    def __call__(self) -> tuple[Any, Any]:
        expected = self.pair.op(*call_args(self.sample), **self.sample.kwargs)
        synchronize(self.pair.device)
        self.contiguous_ran = True
        moved = self.sample.noncontiguous()
        actual = self.pair.op(*call_args(moved), **moved.kwargs)
        synchronize(self.pair.device)
        return expected, actual


def raises_on_cpu(op: Any, sample: Any) -> bool:
    """Whether the sample raises on the CPU too (then it has nothing to show of the device)."""
    try:
        copied = cpu_copy(sample)
        op(*call_args(copied), **copied.kwargs)
    except Exception:  # noqa: BLE001 - the CPU refuses the sample too
        return True
    return False


def _tolerance_words(pair: Pair, what: str) -> str:
    if pair.tolerance is None:
        return f"{what} (PyTorch's assertEqual, its default tolerance for {pair.dtype})"
    atol, rtol = pair.tolerance
    return f"{what} (PyTorch's assertEqual, the OpInfo's atol {atol:g}, rtol {rtol:g})"

