"""The rubric's items the history of runs measures: how fast the vendor's cells recover from a
failure (CI/CD stability: "recovery period not longer than 3 days"), and whether they passed on
the day PyTorch released their torch (binary release on the same day). Pure: over the
:class:`~oota.history.timeline.Timeline` the HUD reads.

Only what the history shows earns points: a failure fixed within 72 hours, a pass on the
release day. A failure not yet fixed and younger than 72 hours, or a history that does not
reach the release day, measures nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from oota.history.timeline import (
    OVERDUE,
    CellSeries,
    CellState,
    Episode,
    Outcome,
    Timeline,
    judge,
    shown,
)
from oota.report import rubric, torchreleases
from oota.report.gonogo import GO, CandidateRow
from oota.report.scoremodel import Evidence, PartScore, not_measured

_HOURS = OVERDUE.total_seconds() / 3600


def _series(timeline: Timeline, vendor: str, torch: str) -> list[CellSeries]:
    return [s for s in timeline.cells if s.cell.vendor == vendor and s.cell.torch == torch
            and s.outcomes]


def _hours(delta: dt.timedelta) -> str:
    return f"{delta.total_seconds() / 3600:.1f} h"


# -- CI/CD stability: recovery within 3 days ------------------------------------------------------

def recovery(timeline: Timeline | None, vendor: str, torch: str,
             now: dt.datetime) -> tuple[PartScore, ...]:
    item = rubric.BY_KEY["ci.recovery"]
    found = _series(timeline, vendor, torch) if timeline else []
    if not found:
        return (not_measured("", item.category, item.points, (
            "the history holds no run of these cells (a report with --history, or runs "
            "appended by build and verify, measure it)")),)
    states = [judge(s) for s in found]
    outages = [(st, e) for st in states for e in st.episodes if not e.flaky]
    late = [(st, e) for st, e in outages if _took(e, now) > OVERDUE]
    open_ = [(st, e) for st, e in outages if e.fixed_by is None and (st, e) not in late]
    runs = [o for s in found for o in s.outcomes]
    span = max(o.run.when for o in runs) - min(o.run.when for o in runs)
    lines = tuple(_outage(st, e, now) for st, e in outages)
    summary = Evidence.of(f"{len(runs)} outcomes of {len(found)} cells over {_hours(span)} "
                          f"(first {shown(min(runs, key=_when))}, last "
                          f"{shown(max(runs, key=_when))}); {len(outages)} failures, flaky "
                          "ones left out", cells=[s.cell.id for s in found])
    if late:
        return (PartScore(key="", label=item.category, max=item.points, points=0,
                          evidence=(summary, *lines), how=(
                              f"{len(late)} failure(s) took longer than {_HOURS:.0f} h to "
                              "fix, or are still failing past it")),)
    if open_:
        return (PartScore(key="", label=item.category, max=item.points, points=None,
                          evidence=(summary, *lines), how=(
                              f"{len(open_)} failure(s) not fixed yet, younger than "
                              f"{_HOURS:.0f} h: how long they take is not known yet")),)
    if span < OVERDUE:
        return (PartScore(key="", label=item.category, max=item.points, points=None,
                          evidence=(summary, *lines), how=(
                              f"the history covers {_hours(span)} of these cells' runs, less "
                              f"than the {_HOURS:.0f} h the item is about")),)
    longest = max((_took(e, now) for _, e in outages), default=None)
    said = (f"every failure fixed within {_HOURS:.0f} h (longest {_hours(longest)})"
            if longest is not None else "no failure")
    return (PartScore(key="", label=item.category, max=item.points, points=item.points,
                      evidence=(summary, *lines), how=f"{said} over {_hours(span)} of runs"),)


def _when(outcome: Outcome) -> dt.datetime:
    return outcome.run.when


def _took(episode: Episode, now: dt.datetime) -> dt.timedelta:
    end = episode.fixed_by.run.when if episode.fixed_by else now
    return end - episode.first.run.when


def _outage(state: CellState, episode: Episode, now: dt.datetime) -> Evidence:
    fixed = episode.fixed_by
    end = (f"fixed by run {fixed.run.key} ({shown(fixed)})" if fixed
           else "still failing")
    runs = [episode.first.run.key, *([fixed.run.key] if fixed else [])]
    return Evidence.of(f"{state.cell.id}: failing since run {episode.first.run.key} "
                       f"({shown(episode.first)}), {end}: {_hours(_took(episode, now))}",
                       cells=[state.cell.id], runs=runs, tests=episode.first.failed_tests)


# -- binary release on the same day as PyTorch's ---------------------------------------------

def same_day(timeline: Timeline | None, vendor: str, torch: str,
             candidates: Sequence[CandidateRow]) -> PartScore:
    part = rubric.BY_KEY["ux.binaries"].parts[2]
    released = torchreleases.released(torch)
    ready = tuple(Evidence.of(
        f"release candidate {row.candidate} ({row.candidate_torch}): {row.verdict} against "
        f"{row.release or 'no release cell'}", cells=[row.candidate])
        for row in candidates if row.vendor == vendor and row.verdict == GO)
    if released is None:
        return _unmeasured(part, f"PyTorch's release day of torch {torch} is not in oota's "
                           f"table ({torchreleases.SOURCE})", ready)
    day = released.date()
    outcomes = [o for s in (_series(timeline, vendor, torch) if timeline else [])
                for o in s.outcomes]
    on_day = [o for o in outcomes if o.run.when.astimezone(dt.timezone.utc).date() == day]
    source = f"torch {torch} released {released:%Y-%m-%d %H:%M} UTC ({torchreleases.SOURCE})"
    passed = [o for o in on_day if o.status == "passed"]
    if passed:
        return PartScore(key=part.key, label=part.label, max=part.points, points=part.points,
                         how="a cell of this release passed on PyTorch's release day",
                         evidence=(Evidence.of(f"{len(passed)} passing run(s) on {day}",
                                               runs=[o.run.key for o in passed],
                                               source=source), *ready))
    failed = [o for o in on_day if o.status == "failed"]
    if failed:
        return PartScore(key=part.key, label=part.label, max=part.points, points=0,
                         how="the release's cells ran on PyTorch's release day and failed",
                         evidence=(Evidence.of(f"{len(failed)} failing run(s) on {day}",
                                               runs=[o.run.key for o in failed],
                                               tests=[t for o in failed for t in o.failed_tests],
                                               source=source), *ready))
    first = min((o for o in outcomes if o.status == "passed"), key=_when, default=None)
    seen = (f"first passed in run {first.run.key} ({shown(first)}), "
            f"{(first.run.when.date() - day).days} days after") if first else \
        "the history holds no pass of these cells"
    return _unmeasured(part, f"{seen}: the history has no run of these cells on PyTorch's "
                       f"release day ({day}), so the vendor's own release day is not known",
                       (Evidence.of(source, source=source), *ready))


def _unmeasured(part: rubric.Part, why: str, evidence: tuple[Evidence, ...]) -> PartScore:
    return PartScore(key=part.key, label=part.label, max=part.points, points=None, how=why,
                     evidence=evidence)
