"""Compare two runs: what changed per cell between a previous results folder and the current one.

A release manager wants one sentence per regression, naming the cause: "gemma on ascend broke
when torch-npu went from 2.13.0 to 2.14.0". So for each cell we find its previous self, diff
the test statuses (stages count as tests ``stage::build``/``stage::verify``), and name the axes
that moved between the two runs: installed torch, the vendor's extension packages (installed
packages other than torch that the build asked for), the toolkit, OS, Python, the other
(dependency) packages, and the image digest.

Cells are matched by id; a cell whose id changed only because its torch version did is matched
by (vendor, os, python, toolkit name), preferring the same toolkit version, then the newest
previous torch. Reads nothing but ``results/*/result.json``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from oota.errors import InputError
from oota.results.jsonfields import JSONObject
from oota.results.model import Result, TestOutcome
from oota.results.store import load_all
from oota.vocab import BAD, budget_blind, budget_unrun

COMPARE_SCHEMA = "oota.compare/v1"
FAILING = BAD  # interrupted, error, failed
SKIPPING = ("skipped", "unsupported-here", "cpu-fallback", "not-claimed")
# Axes a cause sentence names first; dependency and image changes only when none of these moved.
PRIMARY_AXES = ("torch", "extension", "toolkit", "os", "python")
STAGE_SUBJECT = {"stage::build": "the build", "stage::verify": "the verify run"}
SENTENCE_AXES_MAX = 4


def model_of(test: TestOutcome, known: Iterable[str] = ()) -> str | None:
    """The model a ``models`` test exercised: ``data.model``, else a known model named in its
    parameters (skipped tests carry no data), else the first parameter token."""
    if test.layer != "models":
        return None
    model = test.data.get("model")
    if isinstance(model, str) and model:
        return model
    params = re.search(r"\[(.*)\]$", test.id)
    text = params.group(1) if params else test.id.rsplit("::", 1)[-1].removeprefix("test_")
    named = [k for k in known if re.search(rf"(^|[-_/]){re.escape(k)}($|[-_/])", text)]
    if named:
        return max(named, key=len)
    return re.split(r"[-/]", text, maxsplit=1)[0] or test.id


def known_models(results: Iterable[Result]) -> list[str]:
    names = (t.data.get("model") for r in results for t in r.tests)
    return list(dict.fromkeys(n for n in names if isinstance(n, str) and n))


@dataclass(frozen=True, kw_only=True, slots=True)
class AxisChange:
    axis: str  # torch | extension | toolkit | os | python | dependency | image
    name: str  # how a sentence calls it: "torch", "torch-npu", "cann", "the image digest"
    before: str | None
    after: str | None

    def phrase(self) -> str:
        if self.before is None:
            return f"{self.name} {self.after} was added"
        if self.after is None:
            return f"{self.name} {self.before} was removed"
        return f"{self.name} went from {self.before} to {self.after}"

    def to_json(self) -> JSONObject:
        return {"axis": self.axis, "name": self.name, "before": self.before, "after": self.after}


@dataclass(frozen=True, kw_only=True, slots=True)
class TestChange:
    id: str
    subject: str  # the model for model tests, "the build" for stages, else the test id
    before: str | None  # None: the test is new
    after: str | None  # None: the test is gone
    message: str = ""

    def to_json(self) -> JSONObject:
        return {"id": self.id, "subject": self.subject, "before": self.before,
                "after": self.after, "message": self.message}


@dataclass(frozen=True, kw_only=True, slots=True)
class CellDiff:
    id: str
    previous_id: str
    vendor: str
    status_before: str
    status_after: str
    axes: tuple[AxisChange, ...]
    newly_failing: tuple[TestChange, ...]
    newly_passing: tuple[TestChange, ...]
    new_skips: tuple[TestChange, ...]
    added_tests: tuple[TestChange, ...]
    removed_tests: tuple[TestChange, ...]

    @property
    def changed(self) -> bool:
        return bool(self.axes or self.newly_failing or self.newly_passing or self.new_skips
                    or self.added_tests or self.removed_tests
                    or self.status_before != self.status_after)

    def cause(self) -> str:
        """The axes that moved, as a clause: 'torch went from 2.13.0 to 2.14.0 and ...'."""
        primary = [a for a in self.axes if a.axis in PRIMARY_AXES]
        chosen = primary or [a for a in self.axes if a.axis == "dependency"] or \
            [a for a in self.axes if a.axis == "image"]
        if not chosen:
            return ""
        phrases = [a.phrase() for a in chosen[:SENTENCE_AXES_MAX]]
        if len(chosen) > SENTENCE_AXES_MAX:
            phrases.append(f"{len(chosen) - SENTENCE_AXES_MAX} more packages changed")
        return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]

    def sentences(self) -> list[str]:
        cause = self.cause()
        when = f" when {cause}" if cause else \
            " with no change in torch, extensions, toolkit, OS, Python or image"
        out = [f"{s} on {self.vendor} broke{when}{_first_message(c)}"
               for s, c in _by_subject(self.newly_failing)]
        for subject, changes in _by_subject(self.newly_passing):
            was = sorted({c.before for c in changes if c.before})
            verb = "was fixed" if set(was) <= set(FAILING) else f"now passes (was {', '.join(was)})"
            out.append(f"{subject} on {self.vendor} {verb}{when if cause else ''}")
        for subject, changes in _by_subject(self.new_skips):
            label = "skipped" if changes[0].after == "skipped" else "n/a here"
            reason = f": {changes[0].message}" if changes[0].message else ""
            out.append(f"{subject} on {self.vendor} is now {label}{reason}")
        return out

    def to_json(self) -> JSONObject:
        tests = {name: [c.to_json() for c in getattr(self, name)]
                 for name in ("newly_failing", "newly_passing", "new_skips", "added_tests",
                              "removed_tests")}
        return {"id": self.id, "previous_id": self.previous_id, "vendor": self.vendor,
                "status_before": self.status_before, "status_after": self.status_after,
                "axes": [a.to_json() for a in self.axes], "cause": self.cause(),
                "sentences": [*self.sentences()], **tests}


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    previous: str
    current: str
    cells: tuple[CellDiff, ...]  # matched cells that changed
    unchanged: int
    added_cells: tuple[str, ...]
    removed_cells: tuple[str, ...]
    problems: tuple[str, ...] = ()

    @property
    def regressions(self) -> int:
        return sum(len(c.newly_failing) for c in self.cells)

    def to_json(self) -> JSONObject:
        return {"schema": COMPARE_SCHEMA, "previous": self.previous, "current": self.current,
                "cells": [c.to_json() for c in self.cells], "unchanged": self.unchanged,
                "added_cells": list(self.added_cells),
                "removed_cells": list(self.removed_cells), "problems": list(self.problems)}

    def headline(self) -> str:
        return (f"{len(self.cells)} cell(s) changed, {self.unchanged} unchanged, "
                f"{len(self.added_cells)} added, {len(self.removed_cells)} removed; "
                f"{self.regressions} newly failing test(s)")

    def text(self) -> str:
        """Plain-text summary for stdout."""
        lines = [f"changes since {self.previous}: {self.headline()}"]
        for cell in self.cells:
            was = f" (was {cell.previous_id})" if cell.previous_id != cell.id else ""
            lines.append(f"{cell.id}{was}: {cell.status_before} -> {cell.status_after}")
            lines += [f"  changed: {a.phrase()}" for a in cell.axes]
            lines += [f"  {s}" for s in cell.sentences()]
            lines += [f"  test added: {t.id} ({t.after})" for t in cell.added_tests]
            lines += [f"  test removed: {t.id} (was {t.before})" for t in cell.removed_tests]
        lines += [f"cell added: {c}" for c in self.added_cells]
        lines += [f"cell removed: {c}" for c in self.removed_cells]
        lines += [f"warning: {p}" for p in self.problems]
        return "\n".join(lines)


def _by_subject(changes: tuple[TestChange, ...]) -> list[tuple[str, list[TestChange]]]:
    groups: dict[str, list[TestChange]] = {}
    for change in changes:
        groups.setdefault(change.subject, []).append(change)
    return list(groups.items())


def _first_message(changes: list[TestChange]) -> str:
    message = next((c.message for c in changes if c.message), "")
    line = message.strip().splitlines()[0] if message.strip() else ""
    return f" ({line[:200]})" if line else ""


# -- axes -------------------------------------------------------------------------------------

def _torch_version(result: Result) -> str:
    installed = result.installed.torch.version if result.installed else None
    return installed or result.cell.torch


def _packages(result: Result) -> dict[str, tuple[str | None, bool]]:
    """canonical name -> (version, requested), torch left out: it is its own axis."""
    packages = result.installed.packages if result.installed else {}
    out: dict[str, tuple[str | None, bool]] = {}
    for name, info in packages.items():
        key = canonicalize_name(name)
        if key != "torch":
            out[key] = (info.version, info.requested)
    return out


def _package_axes(before: Result, after: Result) -> list[AxisChange]:
    old, new = _packages(before), _packages(after)
    changes = []
    for name in sorted(old.keys() | new.keys()):
        was, now_ = old.get(name, (None, False)), new.get(name, (None, False))
        if was[0] != now_[0]:
            axis = "extension" if was[1] or now_[1] else "dependency"
            changes.append(AxisChange(axis=axis, name=name, before=was[0], after=now_[0]))
    return sorted(changes, key=lambda c: c.axis != "extension")


def _base_ref(result: Result) -> str | None:
    base = result.image.base if result.image else None
    return base.ref or None if base else None


def _digest(result: Result) -> str | None:
    digest = result.image.digest if result.image else None
    if digest and digest.startswith("sha256:"):
        return digest[:19]
    return digest


def axes_changed(before: Result, after: Result) -> tuple[AxisChange, ...]:
    old, new = before.cell, after.cell
    changes = []

    def add(axis: str, name: str, was: str | None, now_: str | None) -> None:
        if was != now_:
            changes.append(AxisChange(axis=axis, name=name, before=was, after=now_))

    add("torch", "torch", _torch_version(before), _torch_version(after))
    changes += [c for c in _package_axes(before, after) if c.axis == "extension"]
    add("toolkit", new.toolkit or old.toolkit or "toolkit", old.toolkit_version,
        new.toolkit_version)
    add("os", "the OS", old.os, new.os)
    add("os", "the base image", _base_ref(before), _base_ref(after))
    add("python", "Python", old.python, new.python)
    changes += [c for c in _package_axes(before, after) if c.axis == "dependency"]
    add("image", "the image digest", _digest(before), _digest(after))
    return tuple(changes)


# -- tests ------------------------------------------------------------------------------------

def _statuses(result: Result, known: list[str]) -> dict[str, TestChange]:
    """test id -> (subject, status, message) as a TestChange with ``after`` = the status."""
    out = {f"stage::{name}": TestChange(id=f"stage::{name}", subject=STAGE_SUBJECT.get(
        f"stage::{name}", f"the {name} stage"), before=None, after=stage.status,
        message=stage.message) for name, stage in result.stages.items()}
    for test in result.tests:
        out[test.id] = TestChange(id=test.id, subject=model_of(test, known) or test.id,
                                  before=None, after=test.status, message=test.message)
    return out


def _unrun(result: Result) -> dict[str, int]:
    return {t.id: budget_unrun(t.status, t.message, t.data) for t in result.tests}


def diff_cell(before: Result, after: Result, known: list[str]) -> CellDiff:
    old, new = _statuses(before, known), _statuses(after, known)
    failing, passing, skips = [], [], []
    for test_id in old.keys() & new.keys():
        was, now_ = old[test_id].after, new[test_id]
        change = TestChange(id=test_id, subject=now_.subject, before=was, after=now_.after,
                            message=now_.message)
        if now_.after in FAILING and was not in FAILING:
            failing.append(change)
        elif now_.after == "passed" and was != "passed":
            passing.append(change)
        elif now_.after in SKIPPING and was not in SKIPPING:
            skips.append(change)
    # An ops pair one run's time budget left unrun (folded into one test there) is no test
    # added or removed: which pairs a budget reaches depends on the host's speed. One that
    # fails now is still listed.
    blind = budget_blind(_unrun(before), _unrun(after))
    added = [TestChange(id=i, subject=new[i].subject, before=None, after=new[i].after,
                        message=new[i].message) for i in new.keys() - old.keys()
             if i not in blind or new[i].after in FAILING]
    removed = [TestChange(id=i, subject=old[i].subject, before=old[i].after, after=None)
               for i in old.keys() - new.keys() - blind]

    def order(items: list[TestChange]) -> tuple[TestChange, ...]:
        return tuple(sorted(items, key=lambda c: (not c.id.startswith("stage::"), c.id)))

    return CellDiff(id=after.cell.id, previous_id=before.cell.id,
                    vendor=after.cell.vendor, status_before=before.status,
                    status_after=after.status, axes=axes_changed(before, after),
                    newly_failing=order(failing), newly_passing=order(passing),
                    new_skips=order(skips), added_tests=order(added), removed_tests=order(removed))


# -- matching ---------------------------------------------------------------------------------

def _version(text: str) -> Version:
    try:
        return Version(text)
    except ValueError:  # InvalidVersion, or more digits than int() reads
        return Version("0")


def _fallback_key(result: Result) -> tuple[str, str, str, str | None]:
    cell = result.cell
    return cell.vendor, cell.os, cell.python, cell.toolkit


def match_cells(previous: list[Result], current: list[Result]) -> list[tuple[Result, Result]]:
    """(previous, current) pairs: same id first, then the fallback key (same toolkit version
    first, then the newest previous torch)."""
    old = {r.cell.id: r for r in previous}
    pairs = [(old.pop(r.cell.id), r) for r in current if r.cell.id in old]
    paired = {id(r) for _, r in pairs}
    left = sorted((r for r in current if id(r) not in paired), key=lambda r: r.cell.id)
    for same_toolkit in (True, False):
        for result in list(left):
            candidates = [p for p in old.values() if _fallback_key(p) == _fallback_key(result)
                          and (not same_toolkit
                               or p.cell.toolkit_version == result.cell.toolkit_version)]
            if candidates:
                best = max(candidates, key=lambda p: _version(p.cell.torch))
                pairs.append((old.pop(best.cell.id), result))
                left.remove(result)
    return pairs


def compare(previous: list[Result], current: list[Result], *,
            previous_name: str = "previous", current_name: str = "current",
            problems: Iterable[str] = ()) -> Comparison:
    known = known_models([*previous, *current])
    pairs = match_cells(previous, current)
    diffs = [diff_cell(before, after, known) for before, after in pairs]
    matched_old = {b.cell.id for b, _ in pairs}
    matched_new = {a.cell.id for _, a in pairs}
    changed = tuple(sorted((d for d in diffs if d.changed), key=lambda d: (d.vendor, d.id)))
    return Comparison(
        previous=previous_name, current=current_name, cells=changed,
        unchanged=len(diffs) - len(changed),
        added_cells=tuple(sorted(r.cell.id for r in current if r.cell.id not in matched_new)),
        removed_cells=tuple(sorted(r.cell.id for r in previous
                                   if r.cell.id not in matched_old)),
        problems=tuple(problems))


def load_previous(previous_dir: Path) -> tuple[list[Result], list[str]]:
    if not previous_dir.is_dir():
        raise InputError(f"{previous_dir}: no such results folder to compare with "
                         "(give the results/ folder of an earlier run)")
    results, problems = load_all(previous_dir)
    return results, [f"previous run: {p}" for p in problems]
