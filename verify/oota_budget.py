"""What the layers that walk one of PyTorch's test databases share (ops and autograd: OpInfo,
modules: ModuleInfo, optimizers: OptimizerInfo): a must-run list that always runs, in its
file's order, and a time budget for the rest, whose unrun entries become one folded entry per
test in tests.json.

Standard library only, like ``oota_summary.py``: the list files are read by a small parser of
their one documented shape (``- KEY: NAME`` then ``  reason: TEXT``), because not every image
has PyYAML; the toolkit's unit tests check that the parser and PyYAML read each file alike.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oota_summary  # noqa: F401 - first: it makes oota_vocab importable in a checkout too
from oota_vocab import (
    BUDGET_PREFIX,
    DATABASE_UNITS,
    UNRUN_KEY,
    UNRUN_PARAM,
    entry_unrun,
)

REASON = "reason"


@dataclass(frozen=True, kw_only=True, slots=True)
class MustRun:
    """One entry a layer always runs, and why."""

    name: str
    reason: str
    line: int  # 1-based line of its '- KEY:' in the file, for messages


class MustRunError(ValueError):
    """A must-run file is not in its shape; the message names file:line."""


def _scalar(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def parse_entries(text: str, source: str, key: str) -> list[MustRun]:
    """The entries of a must-run file: ``- KEY: NAME`` then ``  reason: TEXT``, one line each;
    ``#`` comments and blank lines anywhere. Anything else is a :class:`MustRunError`."""
    entries: list[dict[str, str]] = []
    starts: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        item = line.startswith("- ")
        found, sep, value = (line[2:] if item else line).strip().partition(":")
        if not sep or found not in (key, REASON) or (not item and not raw.startswith("  ")):
            raise MustRunError(f"{source}:{number}: expected '- {key}: NAME' or "
                               f"'  reason: TEXT', got {raw.strip()!r}")
        if item:
            entries.append({})
            starts.append(number)
        elif not entries or found in entries[-1]:
            raise MustRunError(f"{source}:{number}: '{found}' outside an entry or given twice")
        entries[-1][found] = _scalar(value)
    return [_entry(e, line, source, key) for e, line in zip(entries, starts, strict=True)]


def _entry(values: Mapping[str, str], line: int, source: str, key: str) -> MustRun:
    missing = [k for k in (key, REASON) if not values.get(k)]
    if missing:
        raise MustRunError(f"{source}:{line}: entry lacks {', '.join(missing)} "
                           f"(every must-run {key} says why it is on the list)")
    return MustRun(name=values[key], reason=values[REASON], line=line)


def load_entries(path: Path, key: str) -> list[MustRun]:
    return parse_entries(path.read_text(encoding="utf-8"), path.name, key)


def selected(layer: str, environ: Mapping[str, str]) -> bool:
    """Whether ``OOTA_VERIFY_LAYERS`` selects ``layer`` (unset: every layer)."""
    wanted = {x.strip() for x in environ.get("OOTA_VERIFY_LAYERS", "").split(",") if x.strip()}
    return not wanted or layer in wanted


def unknown_names(entries: Iterable[tuple[str, int]], known: Iterable[str], source: str,
                  what: str) -> list[str]:
    """One message per (name, line) that names nothing of ``known`` (``what`` says what a
    name should be: 'an operator of PyTorch's OpInfo database'), with a did-you-mean, and per
    name listed twice."""
    names = sorted(set(known))
    problems: list[str] = []
    seen: set[str] = set()
    for name, line in entries:
        if name in seen:
            problems.append(f"{source}:{line}: '{name}' is listed twice")
        seen.add(name)
        if name not in names:
            problems.append(f"{source}:{line}: '{name}' is not {what}{_hint(name, names)}")
    return problems


def _hint(name: str, names: list[str]) -> str:
    """Its variants when the database has several ('div' -> 'div.trunc_rounding', ...), else
    the closest name."""
    variants = [n for n in names if n.startswith(name + ".")]
    if variants:
        return f"; it has variants, name one: {', '.join(variants)}"
    close = difflib.get_close_matches(name, names, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def ordered(names: Sequence[str], must: Sequence[str]) -> list[str]:
    """``names`` (the database's order) with the must-run ones first, in the file's order:
    when the budget runs out, what is left unrun is never a must-run entry."""
    present = set(names)
    first = [n for n in dict.fromkeys(must) if n in present]
    chosen = set(first)
    return first + [n for n in names if n not in chosen]


def budget_seconds(variable: str, default: float, environ: Mapping[str, str]) -> float:
    """``environ[variable]`` as seconds (``default`` when unset); a bad value is a ValueError
    that says which variable and what it holds."""
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
    """A layer's time budget. The clock starts at the layer's first entry (not at collection,
    so the layers before it do not use it up); must-run entries run whatever is left."""

    def __init__(self, seconds: float, variable: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.variable = variable
        self.clock = clock
        self.started: float | None = None

    def skip_reason(self, must_run: bool) -> str | None:
        """Why this entry is not run (None: run it)."""
        now = self.clock()
        if self.started is None:
            self.started = now
        if must_run or now - self.started < self.seconds:
            return None
        return f"{BUDGET_PREFIX}{self.seconds:g} s spent ({self.variable})"


@dataclass(frozen=True, kw_only=True, slots=True)
class Unit:
    """How a layer's folded entry counts what its budget left unrun: 'operator×dtype pairs of
    N operators', kept in data as ``unrun_pairs`` and ``unrun_<names>``."""

    entries: str  # 'operator×dtype pairs'
    names: str  # 'operators'
    first_part: bool = False  # the name is the id parameter's first '-' part ('Adam-foreach-...')

    @property
    def key(self) -> str:
        return f"unrun_{self.names}"

    def name_of(self, test_id: str) -> str:
        param = test_id.partition("[")[2].removesuffix("]")
        return param.partition("-")[0] if self.first_part else param.rpartition("-")[0]


# Per layer that walks a database (oota_vocab.DATABASE_UNITS says what one entry is): what its
# entries are of. The autograd layer folds each check's (test function's) pairs on their own.
NAMES = {"ops": "operators", "autograd": "operators", "modules": "modules",
         "optimizers": "optimizers"}
UNITS = {layer: Unit(entries=entries, names=NAMES[layer], first_part=layer == "optimizers")
         for layer, entries in DATABASE_UNITS.items()}
# The compile layer is no database, but its budget leaves cases unrun the same way.
UNITS["compile"] = Unit(entries="compiled cases", names="cases")
DEFAULT_UNIT = UNITS["ops"]


def split_unrun(pairs: Sequence[tuple[str, str]], must: Iterable[str],
                seconds: float) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(the (name, dtype) pairs collected as tests, the pairs folded before they are
    collected). With a budget of 0 s, which pairs run is known before any runs: the must-run
    ones; the others are one skipped test from the start, as :func:`fold_unrun` would fold
    them, instead of a test each that only says so (thousands of tests cost pytest seconds)."""
    if seconds > 0:
        return list(pairs), []
    wanted = set(must)
    return [p for p in pairs if p[0] in wanted], [p for p in pairs if p[0] not in wanted]


def unrun_message(unrun: Sequence[tuple[str, str]], seconds: float, variable: str,
                  unit: Unit) -> str:
    """The skip message of the pairs :func:`split_unrun` folded, worded as :func:`fold_unrun`
    words a fold."""
    names = len({name for name, _ in unrun})
    return (f"{BUDGET_PREFIX}{seconds:g} s spent ({variable}): {len(unrun)} {unit.entries} of "
            f"{names} {unit.names} not run")


def _data(test: Mapping[str, Any]) -> Mapping[str, Any]:
    return test.get("data") or {}


def _names(unrun: Sequence[Mapping[str, Any]], unit: Unit) -> int:
    """How many names (operators, modules...) the unrun entries are of: a folded entry's count,
    and the name in each unfolded entry's id."""
    folded = sum(int(_data(t).get(unit.key, 0)) for t in unrun if UNRUN_KEY in _data(t))
    return folded + len({unit.name_of(str(t["id"])) for t in unrun if UNRUN_KEY not in _data(t)})


def _fold_one(tests: list[Mapping[str, Any]], unrun: list[Mapping[str, Any]]
              ) -> list[Mapping[str, Any]]:
    """``tests`` with ``unrun`` (entries of one test function) folded into one entry where the
    first of them stood."""
    first = unrun[0]
    layer = str(first.get("layer", "ops"))
    unit = UNITS.get(layer, DEFAULT_UNIT)
    count, names = sum(entry_unrun(t) for t in unrun), _names(unrun, unit)
    folded = {"id": f"{str(first['id']).partition('[')[0]}[{UNRUN_PARAM}]", "layer": layer,
              "status": "skipped",
              "duration_s": round(sum(float(t.get("duration_s") or 0) for t in unrun), 4),
              "message": f"{str(first['message']).partition(': ')[0]}: {count} {unit.entries} "
                         f"of {names} {unit.names} not run",
              "data": {UNRUN_KEY: count, unit.key: names}}
    gone = {id(u) for u in unrun}
    kept = [t for t in tests if id(t) not in gone]
    at = next(i for i, t in enumerate(tests) if t is first)  # only kept tests come before it
    return [*kept[:at], folded, *kept[at:]]


def fold_unrun(tests: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``tests`` (tests.json's entries) with the entries a time budget left unrun folded into
    one skipped entry per test function, where the first of them stood: its message gives the
    budget and how many entries of how many names it left unrun, its data the counts. Entries
    skipped for any other reason stay as they are: each says something of its own (the device
    lacks the operator, a skip list names it). Folding folded entries again changes nothing."""
    result = list(tests)
    functions = dict.fromkeys(str(t["id"]).partition("[")[0] for t in tests if entry_unrun(t))
    for function in functions:
        unrun = [t for t in result if entry_unrun(t)
                 and str(t["id"]).partition("[")[0] == function]
        result = _fold_one(result, unrun)
    return result
