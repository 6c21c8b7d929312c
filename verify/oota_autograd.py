"""The autograd layer's decisions, kept free of torch so the toolkit's unit tests can check them:
its three checks, which operator × dtype pairs each runs (as PyTorch's own tests choose them),
its time budget, and how one pair of one check ends (passed / failed / skipped, with the message
a reader sees). The checks themselves are ``oota_grads.py`` (gradients against the CPU's) and
``oota_common.py`` (non-contiguous inputs, ``out=``); the tests are ``test_autograd.py``.

Standard library only, like ``oota_ops.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import oota_budget
import oota_ops
from oota_vocab import BUDGET_PREFIX

LAYER = "autograd"
UNIT = oota_budget.UNITS[LAYER]  # what its folded entries count: operator×dtype pairs
BUDGET_VARIABLE = "OOTA_AUTOGRAD_BUDGET_S"
# The must-run pairs (the ops layer's must-pass operators) always run; the rest of op_db's pairs
# run until this much time is spent, counted from the layer's first pair. None by default: the
# default CPU cell's whole verification is to stay short, and the must-run pairs take a few
# seconds there (docs/performance.md); a vendor's lab sets more (600 s ran all of op_db's
# pairs on refdev).
DEFAULT_BUDGET_S = 0.0

GRADIENTS, NONCONTIGUOUS, OUT = "gradients", "noncontiguous", "out"
CHECKS = (GRADIENTS, NONCONTIGUOUS, OUT)
# PyTorch's test each check follows (test/test_ops.py and test/test_ops_gradients.py), whose
# skips and expected failures in op_db apply to it.
PYTORCH_TESTS: dict[str, tuple[tuple[str, str], ...]] = {
    GRADIENTS: (("TestCommon", "test_compare_cpu"), ("TestBwdGradients", "test_fn_grad")),
    NONCONTIGUOUS: (("TestCommon", "test_noncontiguous_samples"),),
    OUT: (("TestCommon", "test_out"),),
}
# On the CPU vendor the gradient check compares nothing (its device is the CPU): only the skips
# of PyTorch's gradient test apply, not those of test_compare_cpu, which are about comparing.
RUN_ONLY_TESTS = (("TestBwdGradients", "test_fn_grad"),)
# The wrong-shape out= case is PyTorch's test_out_warning: its own skips apply to that case only.
OUT_WARNING_TEST = ("TestCommon", "test_out_warning")
# test_noncontiguous_samples runs in these dtypes only (its allowed_dtypes).
NONCONTIGUOUS_DTYPES = ("float32", "int64", "complex64")
# PyTorch's ANY_DTYPE_ORDER (torch.testing._internal.common_device_type), by name: test_out runs
# in the first of these the operator supports forward and backward (OpDTypes.any_one).
ANY_DTYPE_ORDER = ("float32", "float64", "complex64", "complex128", "float16", "bfloat16",
                   "int64", "int32", "int16", "int8", "uint8", "bool")
# The samples of one pair a check takes, at most (the first ones; max_pool2d has 1,440): the
# layer's three checks cost what one ops layer pair does, and the message says how many of all.
SAMPLES_LIMIT = 64
# On the CPU vendor the gradient check only runs the backward (the device is the CPU): this many
# samples of each pair are enough for that, as the ops layer's CPU_ONLY_SAMPLES.
CPU_ONLY_SAMPLES = oota_ops.CPU_ONLY_SAMPLES


def out_dtype(vendor: Sequence[str], supported: Iterable[str], backward: Iterable[str]) -> str:
    """The one dtype the out= check runs an operator in: PyTorch's test_out's (the first of
    ANY_DTYPE_ORDER supported forward and backward, else forward), among the vendor's dtypes;
    '' when the operator supports none of them."""
    forward = set(supported) & set(vendor)
    both = forward & set(backward)
    chosen = both or forward
    return next((name for name in ANY_DTYPE_ORDER if name in chosen), "")


def check_dtypes(check: str, vendor: Sequence[str], *, supported: Iterable[str],
                 backward: Iterable[str], autograd: bool, has_out: bool) -> list[str]:
    """The vendor's dtypes (in its order) ``check`` runs an operator in, as PyTorch's test
    chooses them: gradients in every dtype the OpInfo differentiates on the CPU, non-contiguous
    inputs in test_noncontiguous_samples's dtypes, out= in the one dtype of test_out."""
    supported, backward = set(supported), set(backward)
    if check == GRADIENTS:
        return [d for d in vendor if autograd and d in backward and d in supported]
    if check == NONCONTIGUOUS:
        return [d for d in vendor if d in NONCONTIGUOUS_DTYPES and d in supported]
    if check == OUT and has_out:
        chosen = out_dtype(vendor, supported, backward)
        return [chosen] if chosen else []
    return []


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """What happened to one operator × dtype's samples in one check."""

    samples: int = 0  # sample inputs the OpInfo gave (its first ``limit`` at most)
    limit: int = 0  # the samples a check takes at most (0: all); reached, the message says so
    ran: int = 0  # samples that ran on the device and were checked
    unchecked: int = 0  # samples with nothing to check (no differentiable output, no tensor)
    cpu_errors: int = 0  # samples the CPU refused (the gradient check's reference)
    refused: str = ""  # the first of those: 'sample 2: RuntimeError: ...'
    cpu_only: bool = False  # the CPU vendor's gradient check: run, nothing compared
    failure: str = ""  # the first wrong sample, in words
    passed: str = ""  # what a pass held to (the rule, PyTorch's cases), in words
    not_implemented: str = ""  # the device's NotImplementedError, first line
    error: str = ""  # anything else the device raised (on a sample the CPU ran, or making one)

    @property
    def count(self) -> str:
        """' (3 of 8 samples ran)'; '' before any sample was made."""
        return f" ({self.ran} of {self.samples}{self.first} samples ran)" if self.samples else ""

    @property
    def first(self) -> str:
        """' (the OpInfo's first 64)' where the check took no more than its limit."""
        return f" (the OpInfo's first {self.limit})" if self.limit and \
            self.samples >= self.limit else ""


WHAT = {GRADIENTS: "the backward of", NONCONTIGUOUS: "non-contiguous inputs of",
        OUT: "out= of"}


def verdict(check: str, outcome: Outcome, *, op: str, dtype: str, device: str,
            must_run: bool) -> tuple[str, str]:
    """(status, message) of one operator × dtype in one check. As in the ops layer
    (``oota_ops.verdict``): what the device does not implement fails for a must-run operator
    (the models layer trains it) and is skipped otherwise; anything else the device raises, or
    a wrong result, fails; a pass says on how many samples. A sample the CPU refuses too is
    not compared, and said so (that the CPU runs the must-run operators is the ops layer's
    to check)."""
    pair = f"{WHAT[check]} {op} ({dtype})"
    if outcome.not_implemented:
        text = f"{pair} is not implemented on {device}: {outcome.not_implemented}{outcome.count}"
        return ("failed", f"must-run operator: {text}") if must_run else ("skipped", text)
    if outcome.error:
        return "failed", f"{pair} raised on {device}: {outcome.error}{outcome.count}"
    if outcome.failure:
        return "failed", outcome.failure
    if outcome.samples == 0:
        return "skipped", f"the OpInfo of {op} has no sample inputs for {dtype}"
    if outcome.ran == 0:
        return "skipped", _none_ran(check, outcome, pair)
    return "passed", _passed(check, outcome, pair, device)


def _none_ran(check: str, outcome: Outcome, pair: str) -> str:
    if outcome.cpu_errors:
        return (f"every one of the {outcome.samples} samples of {pair} raised on the CPU too: "
                f"nothing to compare (first: {outcome.refused})")
    nothing = "no output that requires grad" if check == GRADIENTS else "no tensor output"
    return f"none of the {outcome.samples} samples of {pair} has anything to check ({nothing})"


def _passed(check: str, outcome: Outcome, pair: str, device: str) -> str:
    others = []
    if outcome.cpu_errors:
        others.append(f"{outcome.cpu_errors} raised on the CPU too and were not compared "
                      f"(first: {outcome.refused})")
    if outcome.unchecked:
        others.append(f"{outcome.unchecked} had nothing to check")
    rest = f"; of the other samples, {', '.join(others)}" if others else ""
    if check == GRADIENTS and outcome.cpu_only:
        return (f"ran {pair} on {_samples(outcome.ran)}{outcome.first} on the CPU{rest}; the "
                "CPU vendor's device is the CPU, so nothing was compared")
    return f"{pair} on {device}: {_samples(outcome.ran)}{outcome.first} {outcome.passed}{rest}"


def _samples(count: int) -> str:
    return f"{count} sample{'' if count == 1 else 's'}"


class SharedBudget:
    """The layer's time budget, shared by its checks, which run one after another: each check
    may use, from its first pair, an equal share of what is left of the budget for it and the
    checks after it (time the checks before it did not use passes on). The clock starts at the
    layer's first pair; must-run pairs run whatever is left. Each share is a budget of the
    layers that walk a database (``oota_budget.Budget``); a skip names the layer's budget."""

    def __init__(self, seconds: float, checks: Sequence[str] = CHECKS,
                 clock: Callable[[], float] = time.monotonic,
                 variable: str = BUDGET_VARIABLE) -> None:
        self.seconds = seconds
        self.checks = tuple(checks)
        self.clock = clock
        self.variable = variable
        self.started: float | None = None
        self.shares: dict[str, oota_budget.Budget] = {}

    def skip_reason(self, check: str, must_run: bool) -> str | None:
        """Why this pair of ``check`` is not run (None: run it)."""
        if check not in self.shares:
            now = self.clock()
            self.started = now if self.started is None else self.started
            left = max(0.0, self.seconds - (now - self.started))
            after = self.checks[self.checks.index(check):] if check in self.checks else ()
            self.shares[check] = oota_budget.Budget(left / max(1, len(after)), self.variable,
                                                    self.clock)
        if self.shares[check].skip_reason(must_run) is None:
            return None
        return f"{BUDGET_PREFIX}{self.seconds:g} s spent ({self.variable})"


WORKERS_VARIABLE = "OOTA_AUTOGRAD_WORKERS"
OPS_WORKERS_VARIABLE = "OOTA_OPS_WORKERS"  # oota_opsworkers.WORKERS_VARIABLE


def workers(seconds: float) -> tuple[tuple[str, ...], int | None]:
    """(the variables that set how many worker processes judge the pairs, first set wins; how
    many when none is set, None: one per core), for a budget of ``seconds``. The must-run
    pairs alone (0 s) are judged in the pytest process unless OOTA_AUTOGRAD_WORKERS says
    otherwise: a worker imports torch and op_db again (5 s of CPU time on a 2-core machine),
    more than those pairs take, and they are the models' operators, which the models layer runs
    in its process anyway. A budget reaches into the rest of op_db, where crashes are (refdev's
    backward of sgn): workers then, as many as the ops layer's."""
    if not seconds:
        return (WORKERS_VARIABLE,), 0
    return (WORKERS_VARIABLE, OPS_WORKERS_VARIABLE), None
