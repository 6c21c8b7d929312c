"""The ops layer's decisions, kept free of torch so the toolkit's unit tests can check them:
the must-pass list (``ops-must-pass.yaml``), the order operators run in, the time budget, and
how one operator × dtype ends (passed / failed / skipped, with the message a reader sees).

Standard library only, like ``oota_summary.py``: the must-pass file is read by the small parser
the layers that walk a PyTorch test database share (``oota_budget.py``), because not every
image has PyYAML; the toolkit's unit tests check that the parser and PyYAML read the file alike.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import oota_budget
from oota_budget import MustRunError as MustPassError, fold_unrun, ordered

__all__ = ["Budget", "MustPass", "MustPassError", "Outcome", "budget_seconds", "fold_unrun",
           "load_must_pass", "ordered", "parse_must_pass", "unknown_names", "verdict"]

MUST_PASS_FILE = Path(__file__).resolve().with_name("ops-must-pass.yaml")
BUDGET_VARIABLE = "OOTA_OPS_BUDGET_S"
DEFAULT_BUDGET_S = 180.0
KEY = "op"
WHAT = "an operator of PyTorch's OpInfo database"


@dataclass(frozen=True, kw_only=True, slots=True)
class MustPass:
    """One operator every backend must get right, and why (the models layer needs it)."""

    op: str
    reason: str
    line: int  # 1-based line of its '- op:' in the file, for messages


def parse_must_pass(text: str, source: str = "ops-must-pass.yaml") -> list[MustPass]:
    """The entries of a must-pass file: ``- op: NAME`` then ``  reason: TEXT``, one line each;
    ``#`` comments and blank lines anywhere. Anything else is a :class:`MustPassError`."""
    return [MustPass(op=e.name, reason=e.reason, line=e.line)
            for e in oota_budget.parse_entries(text, source, KEY)]


def load_must_pass(path: Path = MUST_PASS_FILE) -> list[MustPass]:
    return parse_must_pass(path.read_text(encoding="utf-8"), path.name)


def unknown_names(entries: Iterable[MustPass], known: Iterable[str],
                  source: str = "ops-must-pass.yaml") -> list[str]:
    """One message per entry that names no operator of ``known``, with a did-you-mean, and
    per operator listed twice."""
    return oota_budget.unknown_names([(e.op, e.line) for e in entries], known, source, WHAT)


# On the CPU vendor the device is the CPU: an operator's samples are only run, to show that they
# run, and this many of each operator's are enough for that.
CPU_ONLY_SAMPLES = 8


def budget_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """``OOTA_OPS_BUDGET_S`` as seconds (default 180); a bad value is a ValueError that says
    which variable and what it holds."""
    return oota_budget.budget_seconds(BUDGET_VARIABLE, DEFAULT_BUDGET_S, environ)


class Budget(oota_budget.Budget):
    """The layer's time budget. The clock starts at the first operator (not at collection, so
    the layers before ops do not use it up); must-pass operators run whatever is left."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(seconds, BUDGET_VARIABLE, clock)

    def skip_reason(self, must_pass: bool) -> str | None:
        """Why this operator is not run (None: run it)."""
        return super().skip_reason(must_pass)


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """What happened to one operator × dtype's samples (filled by verify/test_ops.py)."""

    samples: int = 0  # sample inputs the OpInfo gave
    ran: int = 0  # samples that ran on the device (and were judged, unless cpu_only)
    cpu_errors: int = 0  # samples the CPU refused (on the CPU vendor: its device refused)
    refused: str = ""  # the first of those: 'sample 2: RuntimeError: ...'
    cpu_only: bool = False  # the CPU vendor: the device is the CPU, nothing is compared
    failure: str = ""  # the judge's message on the first wrong sample (oota_judge.judge)
    rule: str = ""  # the rule that judged the samples, in words (oota_rules.Rule.describe)
    worst: float = 0.0  # the largest share of the rule's allowance a sample used
    not_implemented: str = ""  # the device's NotImplementedError, first line
    error: str = ""  # anything else the device raised (on a sample the CPU ran, or making one)

    @property
    def count(self) -> str:
        """' (3 of 8 samples ran)'; '' before any sample was made."""
        return f" ({self.ran} of {self.samples} samples ran)" if self.samples else ""


def verdict(outcome: Outcome, *, op: str, dtype: str, device: str,
            must_pass: bool) -> tuple[str, str]:
    """(status, message) of one operator × dtype.

    An operator the device does not implement fails when it is on the must-pass list (the
    models layer needs it) and is skipped otherwise: a backend may leave operators to others
    (a CPU fallback, or no support), and the report counts such a skip as not passed. A
    must-pass operator also fails when any of its samples raised on the CPU (on the CPU
    vendor: its device), with the first error: that it runs at all is what the list asks.
    Any other operator passes on the samples that ran, and the message says how many of all."""
    pair = f"{op} ({dtype})"
    if outcome.not_implemented:
        text = f"{pair} is not implemented on {device}: {outcome.not_implemented}{outcome.count}"
        return ("failed", f"must-pass operator: {text}") if must_pass else ("skipped", text)
    if outcome.error:
        return "failed", f"{pair} raised on {device}: {outcome.error}{outcome.count}"
    if outcome.failure:
        return "failed", outcome.failure
    if outcome.samples == 0:
        return "skipped", f"the OpInfo of {op} has no sample inputs for {dtype}"
    if outcome.cpu_errors and must_pass:
        judged = "" if outcome.cpu_only else ", the reference the device is judged against"
        return "failed", (f"must-pass operator: {pair} raised on the CPU{judged}: "
                          f"{outcome.refused}{outcome.count}")
    if outcome.ran == 0:
        return "skipped", (f"every one of the {outcome.samples} samples of {pair} raised on the "
                           "CPU too: " + ("none ran, and the CPU is this vendor's device"
                                          if outcome.cpu_only else "nothing to compare")
                           + f" (first: {outcome.refused})")
    return "passed", _passed(outcome, pair, device)


def _passed(outcome: Outcome, pair: str, device: str) -> str:
    """A pass, saying how many samples ran where not all did (the others raised on the
    CPU)."""
    some = f"{outcome.ran} of {outcome.samples}" if outcome.cpu_errors else str(outcome.ran)
    others = (f"; the other {outcome.cpu_errors} raised on the CPU"
              f"{'' if outcome.cpu_only else ' too and were not compared'} (first: "
              f"{outcome.refused})") if outcome.cpu_errors else ""
    if outcome.cpu_only:
        return (f"ran {some} samples of {pair} on the CPU{others}; the CPU vendor's device is "
                "the CPU, so nothing was compared")
    return (f"{some} samples of {pair} on {device} within {outcome.rule} (the worst uses "
            f"{outcome.worst:.2g} of it){others}")
