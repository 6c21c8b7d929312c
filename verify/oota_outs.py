"""The autograd layer's out= check: PyTorch's ``TestCommon.test_out`` and ``test_out_warning``
(test/test_ops.py) on the vendor's device, case by case, for operators whose OpInfo supports
``out=``. On each sample with a tensor result (or a sequence of them):

0. an out= of the right shape, dtype and device full of NaN (the largest integer for integer
   results) gives the result without out=, in the same strides and the same storage;
1. a non-contiguous out= likewise: its strides are respected, its storage is not changed;
2. an empty out= is resized, without a warning;
3. an out= of the wrong shape with elements is resized with PyTorch's warning ("An output with
   one or more elements was resized ...") unless PyTorch's test_out_warning skips the operator;
4. an out= on another device raises a RuntimeError (on the CPU vendor there is none);
5. an out= of dtype long for a floating or complex result raises a RuntimeError (the result
   cannot be cast safely).

A factory function (``is_factory_function``) called without ``device=`` / ``dtype=`` writes
into any out= instead (cases 4 and 5), as PyTorch's test asks.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from oota_autograd import Outcome
from oota_common import Pair, Tally, call_args, device_error, differs, on_device, raises_on_cpu
from oota_samples import synchronize

RESIZE_WARNING = "An output with one or more elements"
# Operators whose unsafe cast into a long out= raises a TypeError, which PyTorch's test_out
# expects of them (its "remove me when all ops will raise type error" list); the others raise
# a RuntimeError.
TYPE_ERROR_OPS = frozenset({"_chunk_cat", "cat", "column_stack", "dstack", "hstack", "vstack",
                            "stack"})


def _tensors(result: Any) -> list[Any] | None:
    """The result's tensors, or None where it is not a tensor or a sequence of them (PyTorch's
    test skips such an operator)."""
    import torch

    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (list, tuple)) and all(isinstance(t, torch.Tensor) for t in result):
        return list(result)
    return None


def _like(result: Any, make: Callable[[Any], Any]) -> Any:
    """An out= for ``result``: ``make`` applied to its tensor, or to each of its tensors."""
    import torch

    if isinstance(result, torch.Tensor):
        return make(result)
    return tuple(make(t) for t in result)


def _strides(out: Any) -> list[tuple[int, ...]]:
    return [tuple(t.stride()) for t in _tensors(out) or []]


def _pointers(out: Any) -> list[int]:
    """The outs' data pointers, or [] where the device's tensors have no storage to point at.
    PyTorch's test_out compares them on the CPU and CUDA only, "since some device types don't
    have storage": PyTorch/XLA's tensors are such (untyped_storage().data_ptr() raises "invalid
    python storage", and data_ptr() is the view's offset from a null storage: 4 before an out=
    write into a non-contiguous view, 0 after), so 'written in place' cannot be asked of them.
    A device whose storage answers is held to it, as the CPU and CUDA are."""
    try:
        tensors = _tensors(out) or []
        for t in tensors:
            t.untyped_storage().data_ptr()  # raises where the device keeps no storage
        return [int(t.data_ptr()) for t in tensors]
    except (RuntimeError, NotImplementedError):
        return []


def _extremal(t: Any) -> Any:
    import torch

    try:
        return torch.full_like(t, torch.iinfo(t.dtype).max)
    except TypeError:
        return torch.full_like(t, float("nan"))


def _noncontiguous(t: Any) -> Any:
    from torch.testing import make_tensor

    return make_tensor(t.shape, dtype=t.dtype, device=t.device, noncontiguous=True)


def _empty(t: Any) -> Any:
    from torch.testing import make_tensor

    return make_tensor((0,), dtype=t.dtype, device=t.device)


def _empty_like(t: Any) -> Any:
    import torch

    return torch.empty_like(t)


def _wrong_shape(t: Any) -> Any:
    from torch.testing import make_tensor

    shape = list(t.shape)
    shape = [2] if not shape else [*shape[:-1], shape[-1] + 1]
    return make_tensor(shape, dtype=t.dtype, device=t.device)


class _Sample:
    """One sample's out= cases on the device; each returns what is wrong ('' when nothing)."""

    def __init__(self, pair: Pair, sample: Any, expected: Any) -> None:
        self.pair, self.sample, self.expected = pair, sample, expected
        self.call = functools.partial(pair.op, *call_args(sample), **sample.kwargs)

    def write(self, out: Any) -> None:
        """The operator into ``out``, unwatched: under a Python dispatch mode, as the coverage
        watcher is, PyTorch's composite out= operators (linalg.matrix_rank) return a new tensor
        and leave ``out`` as it was, on the CPU too."""
        self.call(out=out)
        synchronize(self.pair.device)

    def watched(self) -> None:
        """One more call into a fresh out=, watched: where the out= variant computes (the
        cases themselves run unwatched, see :meth:`write`)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            on_device(self.pair, lambda: self.call(out=_like(self.expected, _empty_like)))

    def into(self, make: Callable[[Any], Any], what: str, *, same_storage: bool) -> str:
        out = _like(self.expected, make)
        strides, pointers = _strides(out), _pointers(out)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.write(out)
        problem = differs(out, self.expected, self.pair.tolerance)
        if problem:
            return f"{what} does not hold the result without out=: {problem}"
        if same_storage and _strides(out) != strides:
            return f"{what}: its strides changed from {strides} to {_strides(out)}"
        if same_storage and _pointers(out) != pointers:
            return f"{what} was given new storage instead of being written in place"
        return ""

    def resized(self, make: Callable[[Any], Any], what: str, *, warns: bool) -> str:
        problem = self.into(make, what, same_storage=False)
        if problem:
            return problem
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.write(_like(self.expected, make))
        warned = any(RESIZE_WARNING in str(w.message) for w in caught)
        if warned and not warns:
            return f"{what} was resized with a warning ('{RESIZE_WARNING} ...'); PyTorch " \
                   "resizes an empty out= silently"
        if warns and not warned:
            return f"{what} was resized without PyTorch's warning ('{RESIZE_WARNING} " \
                   "was resized ...')"
        return ""

    def refused(self, make: Callable[[Any], Any], what: str, kwarg: str,
                error: type[Exception] = RuntimeError) -> str:
        """An out= the operator must refuse with ``error`` (a factory function called without
        ``kwarg`` writes into it instead)."""
        out = _like(self.expected, make)
        factory = self.pair.op.is_factory_function and self.sample.kwargs.get(kwarg) is None
        if factory:
            return ""
        try:
            self.write(out)
        except error:
            return ""
        return f"{what} was accepted; PyTorch's test_out expects a {error.__name__}"

    def problems(self) -> list[str]:
        """Every case, in PyTorch's order; the first wrong one is what fails."""
        import torch

        device = self.pair.device
        checks = [lambda: self.into(_extremal, "an out= full of NaN (or the largest integer)",
                                    same_storage=True),
                  lambda: self.into(_noncontiguous, "a non-contiguous out=", same_storage=True),
                  lambda: self.resized(_empty, "an empty out=", warns=False)]
        if self.pair.warning_case and any(t.numel() for t in _tensors(self.expected) or []):
            checks.append(lambda: self.resized(_wrong_shape, "an out= of the wrong shape",
                                               warns=True))
        if device.type != "cpu":
            checks.append(lambda: self.refused(lambda t: _on_cpu(t), f"an out= on the CPU for "
                                               f"a result on {device.type}", "device"))
        if any(t.is_floating_point() or t.is_complex() for t in _tensors(self.expected) or []):
            checks.append(lambda: self.refused(lambda t: torch.zeros(
                t.shape, dtype=torch.long, device=t.device), "an out= of dtype long for a "
                f"{_dtypes(self.expected)} result (no safe cast)", "dtype",
                TypeError if self.pair.op.name in TYPE_ERROR_OPS else RuntimeError))
        self.watched()
        for check in checks:
            problem = check()
            if problem:
                return [problem]
        return []


def _on_cpu(t: Any) -> Any:
    from torch.testing import make_tensor

    return make_tensor(t.shape, dtype=t.dtype, device="cpu")


def _dtypes(result: Any) -> str:
    return "/".join(dict.fromkeys(str(t.dtype).removeprefix("torch.")
                                  for t in _tensors(result) or []))


def check_out(pair: Pair, made: Sequence[Any]) -> Outcome:
    """PyTorch's test_out (and test_out_warning's case) on the device, sample by sample."""
    tally = Tally(samples=len(made))
    for index, sample in enumerate(made):
        try:
            expected = pair.op(*call_args(sample), **sample.kwargs)  # watched with out= below
            synchronize(pair.device)
        except Exception as exc:  # noqa: BLE001 - refused by the CPU too, or the finding
            if pair.device.type == "cpu" or raises_on_cpu(pair.op, sample):
                tally.refuse(exc, index)
                continue
            return device_error(tally, exc, index, "")
        if _tensors(expected) is None:
            tally.unchecked += 1
            continue
        try:
            problems = _Sample(pair, sample, expected).problems()
        except Exception as exc:  # noqa: BLE001 - an out= case the device raised on
            return device_error(tally, exc, index, " with out=")
        tally.ran += 1
        if problems:
            return tally.outcome(failure=f"{pair.where(index, sample)}: {problems[0]}")
    cases = "NaN-filled, non-contiguous and empty outs" + (
        ", a wrong-shape out resized with PyTorch's warning" if pair.warning_case else "") + (
        ", an out on the CPU refused" if pair.device.type != "cpu" else "") + \
        ", a long out for a floating result refused"
    return tally.outcome(passed=f"as PyTorch's test_out asks ({cases})")
