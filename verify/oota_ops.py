"""The ops layer's decisions, kept free of torch so the toolkit's unit tests can check them:
the must-pass list (``ops-must-pass.yaml``), the order operators run in, the time budget, and
how one operator × dtype ends (passed / failed / skipped, with the message a reader sees).

Standard library only, like ``oota_summary.py``: the must-pass file is read by a small parser of
its one documented shape (a list of ``op``/``reason`` entries), because not every image has
PyYAML; the toolkit's unit tests check that the parser and PyYAML read the file alike.
"""

from __future__ import annotations

import difflib
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oota_summary  # noqa: F401 - first: it makes oota_vocab importable in a checkout too
from oota_vocab import BUDGET_PREFIX, UNRUN_KEY, UNRUN_PARAM, entry_unrun

MUST_PASS_FILE = Path(__file__).resolve().with_name("ops-must-pass.yaml")
BUDGET_VARIABLE = "OOTA_OPS_BUDGET_S"
DEFAULT_BUDGET_S = 180.0
UNRUN_OPERATORS = "unrun_operators"  # the folded entry's count of operators (UNRUN_KEY: pairs)
ENTRY_KEYS = ("op", "reason")


@dataclass(frozen=True, kw_only=True, slots=True)
class MustPass:
    """One operator every backend must get right, and why (the models layer needs it)."""

    op: str
    reason: str
    line: int  # 1-based line of its '- op:' in the file, for messages


class MustPassError(ValueError):
    """The must-pass file is not in its shape; the message names file:line."""


def _scalar(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def parse_must_pass(text: str, source: str = "ops-must-pass.yaml") -> list[MustPass]:
    """The entries of a must-pass file: ``- op: NAME`` then ``  reason: TEXT``, one line each;
    ``#`` comments and blank lines anywhere. Anything else is a :class:`MustPassError`."""
    entries: list[dict[str, str]] = []
    starts: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        item = line.startswith("- ")
        key, sep, value = (line[2:] if item else line).strip().partition(":")
        if not sep or key not in ENTRY_KEYS or (not item and not raw.startswith("  ")):
            raise MustPassError(f"{source}:{number}: expected '- op: NAME' or '  reason: TEXT', "
                                f"got {raw.strip()!r}")
        if item:
            entries.append({})
            starts.append(number)
        elif not entries or key in entries[-1]:
            raise MustPassError(f"{source}:{number}: '{key}' outside an entry or given twice")
        entries[-1][key] = _scalar(value)
    return [_entry(e, line, source) for e, line in zip(entries, starts, strict=True)]


def _entry(values: Mapping[str, str], line: int, source: str) -> MustPass:
    missing = [k for k in ENTRY_KEYS if not values.get(k)]
    if missing:
        raise MustPassError(f"{source}:{line}: entry lacks {', '.join(missing)} "
                            "(every must-pass operator says why it is on the list)")
    return MustPass(op=values["op"], reason=values["reason"], line=line)


def load_must_pass(path: Path = MUST_PASS_FILE) -> list[MustPass]:
    return parse_must_pass(path.read_text(encoding="utf-8"), path.name)


def unknown_names(entries: Iterable[MustPass], known: Iterable[str],
                  source: str = "ops-must-pass.yaml") -> list[str]:
    """One message per entry that names no operator of ``known``, with a did-you-mean, and
    per operator listed twice."""
    names = sorted(set(known))
    problems: list[str] = []
    seen: set[str] = set()
    for entry in entries:
        if entry.op in seen:
            problems.append(f"{source}:{entry.line}: '{entry.op}' is listed twice")
        seen.add(entry.op)
        if entry.op not in names:
            problems.append(f"{source}:{entry.line}: '{entry.op}' is not an operator of "
                            f"PyTorch's OpInfo database{_hint(entry.op, names)}")
    return problems


def _hint(op: str, names: list[str]) -> str:
    """Its variants when the OpInfo has several ('div' -> 'div.trunc_rounding', ...), else
    the closest name."""
    variants = [n for n in names if n.startswith(op + ".")]
    if variants:
        return f"; it has variants, name one: {', '.join(variants)}"
    close = difflib.get_close_matches(op, names, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def ordered(names: Sequence[str], must: Sequence[str]) -> list[str]:
    """``names`` (the database's order) with the must-pass ones first, in the file's order:
    when the budget runs out, what is left unrun is never a must-pass operator."""
    present = set(names)
    first = [n for n in dict.fromkeys(must) if n in present]
    chosen = set(first)
    return first + [n for n in names if n not in chosen]


# On the CPU vendor the device is the CPU: an operator's samples are only run, to show that they
# run, and this many of each operator's are enough for that.
CPU_ONLY_SAMPLES = 8


def budget_seconds(environ: Mapping[str, str] = os.environ, variable: str = BUDGET_VARIABLE,
                   default: float = DEFAULT_BUDGET_S) -> float:
    """``OOTA_OPS_BUDGET_S`` (or the layer's ``variable``) as seconds (default 180, or
    ``default``); a bad value is a ValueError that says which variable and what it holds."""
    text = environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0 or value != value:  # NaN too
        raise ValueError(f"{variable}={text!r} is not a number of seconds >= 0")
    return value


class Budget:
    """A layer's time budget (the ops layer's, or the one ``variable`` names). The clock starts
    at the layer's first operator (not at collection, so the layers before it do not use it
    up); must-pass operators run whatever is left."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic,
                 variable: str = BUDGET_VARIABLE) -> None:
        self.seconds = seconds
        self.clock = clock
        self.variable = variable
        self.started: float | None = None

    def skip_reason(self, must_pass: bool) -> str | None:
        """Why this operator is not run (None: run it)."""
        now = self.clock()
        if self.started is None:
            self.started = now
        if must_pass or now - self.started < self.seconds:
            return None
        return f"{BUDGET_PREFIX}{self.seconds:g} s spent ({self.variable})"


def _data(test: Mapping[str, Any]) -> Mapping[str, Any]:
    return test.get("data") or {}


def _operators(unrun: Sequence[Mapping[str, Any]]) -> int:
    """How many operators the unrun pairs are of: a folded entry's count, and the operator of
    each unfolded pair's id ('test_ops.py::test_op_runs[max.binary-float32]')."""
    folded = sum(int(_data(t).get(UNRUN_OPERATORS, 0)) for t in unrun if UNRUN_KEY in _data(t))
    names = {str(t["id"]).partition("[")[2].rpartition("-")[0] for t in unrun
             if UNRUN_KEY not in _data(t)}
    return folded + len(names)


def _test_name(test: Mapping[str, Any]) -> str:
    """The test function an entry is of: its id without parameters."""
    return str(test["id"]).partition("[")[0]


def fold_unrun(tests: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``tests`` (tests.json's entries) with the pairs a time budget left unrun folded into one
    skipped entry per test function (the ops layer's pairs; each check of the autograd layer),
    where the first of them stood: its message gives the budget and how many pairs and
    operators it left unrun, its data the counts. Pairs skipped for any other reason stay as
    they are: each says something of its own (the device lacks the operator, a skip list names
    it). Folding folded entries again changes nothing."""
    folded = list(tests)
    for name in dict.fromkeys(_test_name(t) for t in tests if entry_unrun(t)):
        folded = _fold(folded, name)
    return folded


def _fold(tests: Sequence[Mapping[str, Any]], name: str) -> list[Mapping[str, Any]]:
    """``tests`` with the unrun pairs of the test function ``name`` folded (fold_unrun)."""
    unrun = [t for t in tests if entry_unrun(t) and _test_name(t) == name]
    first, pairs, operators = unrun[0], sum(entry_unrun(t) for t in unrun), _operators(unrun)
    folded = {"id": f"{name}[{UNRUN_PARAM}]",
              "layer": first.get("layer", "ops"), "status": "skipped",
              "duration_s": round(sum(float(t.get("duration_s") or 0) for t in unrun), 4),
              "message": f"{str(first['message']).partition(': ')[0]}: {pairs} operator×dtype "
                         f"pairs of {operators} operators not run",
              "data": {UNRUN_KEY: pairs, UNRUN_OPERATORS: operators}}
    gone = {id(t) for t in unrun}
    rest = [t for t in tests if id(t) not in gone]
    at = next(i for i, t in enumerate(tests) if t is first)  # only kept tests come before it
    return [*rest[:at], folded, *rest[at:]]


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
