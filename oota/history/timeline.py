"""Each cell's outcomes over the runs of a history, and what the HUD and the digest say of
them: failing since when (against the 72-hour rule), last passed, the first bad run blamed on
what changed since the last good one, and failures that were only flaky. Pure: the store reads
a :class:`Timeline` in a few bulk queries, everything here works on it.

Only passes and bad outcomes (failed, interrupted) are judged; a skipped cell, one whose host
lacked the hardware, or an error (the environment or oota broke: an unreachable registry, a
full disk, a lost Engine) says nothing about whether the cell works, so it neither ends nor
starts a failure, and no one is blamed for it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from oota import times
from oota.history.records import Inputs
from oota.results.model import CellRef
from oota.vocab import BAD, LAYERS, Status, worst

# The bad outcomes that are the stack's: an error is the environment's (or oota's).
JUDGED_BAD = BAD - {"error"}
# Breakage is to be found and fixed within 72 hours (the out-of-tree validation RFC): a cell
# failing for longer is flagged.
OVERDUE = dt.timedelta(hours=72)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunHead:
    """One run of the history. ``id`` is the store's: a run key is there once per origin
    (a build and the verify of the same run are two runs)."""

    id: int
    key: str
    origin: str
    started_at: str

    @property
    def when(self) -> dt.datetime:
        return moment(self.started_at)


@dataclass(frozen=True, slots=True)
class LayerCount:
    """Of one layer's tests that ran (oota.vocab.RAN), how many were flaky."""

    layer: str
    flaky: int
    ran: int


def summed(counts: Iterable[LayerCount]) -> tuple[LayerCount, ...]:
    """Counts of one layer added up, one per layer, in the suite's order of layers."""
    found: dict[str, LayerCount] = {}
    for c in counts:
        had = found.get(c.layer, LayerCount(c.layer, 0, 0))
        found[c.layer] = LayerCount(c.layer, had.flaky + c.flaky, had.ran + c.ran)
    order = {layer: i for i, layer in enumerate(LAYERS)}
    return tuple(sorted(found.values(), key=lambda c: (order.get(c.layer, len(order)), c.layer)))


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """A cell's outcome in one run (the worst of its hosts', when it ran on several)."""

    run: RunHead
    status: Status
    message: str
    inputs: Inputs
    failed_tests: tuple[str, ...] = ()  # the tests that failed, errored or were interrupted
    layers: tuple[LayerCount, ...] = ()  # per layer whose tests ran, in the suite's order


@dataclass(frozen=True, kw_only=True, slots=True)
class CellSeries:
    cell: CellRef
    outcomes: tuple[Outcome, ...]  # oldest first, at most one per run


@dataclass(frozen=True, kw_only=True, slots=True)
class MetricPoint:
    run: RunHead
    value: float
    good: bool  # the test that measured it passed: only those make a baseline


@dataclass(frozen=True, kw_only=True, slots=True)
class MetricSeries:
    """One figure of one workload test of a cell on one host, oldest first."""

    cell_id: str
    host: str
    test_id: str
    name: str
    points: tuple[MetricPoint, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Timeline:
    runs: tuple[RunHead, ...]  # oldest first
    cells: tuple[CellSeries, ...]  # by vendor, then cell id
    metrics: tuple[MetricSeries, ...]
    left_out: tuple[str, ...] = ()  # a line per run of the store that could not be read


@dataclass(frozen=True, kw_only=True, slots=True)
class Blame:
    """The first bad run of a failure and the pass before it, with what changed between."""

    bad: Outcome
    good: Outcome | None  # None: the cell never passed before
    changed: tuple[str, ...]

    def line(self) -> str:
        if self.good is None:
            return f"failing since its first recorded run ({self.bad.run.key}, {shown(self.bad)})"
        what = "; ".join(self.changed) or "no recorded input changed"
        return (f"first bad run {self.bad.run.key} ({shown(self.bad)}) after "
                f"{self.good.run.key} passed ({shown(self.good)}): {what}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Episode:
    """A cell failing run after run, from its first bad run to the pass that ended it."""

    first: Outcome
    last: Outcome
    fixed_by: Outcome | None
    blame: Blame
    flaky: bool  # one failure between two passes with identical inputs: not a regression


@dataclass(frozen=True, kw_only=True, slots=True)
class CellState:
    cell: CellRef
    latest: Outcome | None
    last_passed: Outcome | None
    episodes: tuple[Episode, ...]  # oldest first

    @property
    def failing(self) -> Episode | None:
        """The failure the cell is in now (its latest judged outcome is bad)."""
        last = self.episodes[-1] if self.episodes else None
        return last if last is not None and last.fixed_by is None else None

    def failing_for(self, now: dt.datetime) -> dt.timedelta | None:
        episode = self.failing
        return None if episode is None else now - episode.first.run.when

    def overdue(self, now: dt.datetime) -> bool:
        age = self.failing_for(now)
        return age is not None and age > OVERDUE

    @property
    def flaky_runs(self) -> frozenset[int]:
        return frozenset(e.first.run.id for e in self.episodes if e.flaky)


def moment(text: str) -> dt.datetime:
    """A time of the history (RFC 3339, checked by the store as it reads it), in UTC."""
    return times.parse(text)


def shown(outcome: Outcome) -> str:
    return outcome.run.when.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def judge(series: CellSeries) -> CellState:
    """Where ``series`` stands: its failures, each blamed on its first bad run, flaky or not."""
    episodes: list[Episode] = []
    last_pass: Outcome | None = None
    open_: Episode | None = None
    for outcome in series.outcomes:
        if outcome.status == "passed":
            if open_ is not None:
                episodes.append(_closed(open_, outcome))
                open_ = None
            last_pass = outcome
        elif outcome.status in JUDGED_BAD:
            open_ = _extended(open_, outcome, last_pass)
    if open_ is not None:
        episodes.append(open_)
    return CellState(cell=series.cell, latest=series.outcomes[-1] if series.outcomes else None,
                     last_passed=last_pass, episodes=tuple(episodes))


def _extended(episode: Episode | None, bad: Outcome, last_pass: Outcome | None) -> Episode:
    if episode is not None:
        return Episode(first=episode.first, last=bad, fixed_by=None, blame=episode.blame,
                       flaky=False)
    changed = tuple(bad.inputs.differences(last_pass.inputs)) if last_pass else ()
    return Episode(first=bad, last=bad, fixed_by=None, flaky=False,
                   blame=Blame(bad=bad, good=last_pass, changed=changed))


def _closed(episode: Episode, fix: Outcome) -> Episode:
    before = episode.blame.good
    flaky = (before is not None and episode.first is episode.last and not episode.blame.changed
             and not fix.inputs.differences(episode.last.inputs))
    return Episode(first=episode.first, last=episode.last, fixed_by=fix, blame=episode.blame,
                   flaky=flaky)


@dataclass(frozen=True, kw_only=True, slots=True)
class Digest:
    """What changed in a window: cells that broke (and still fail), cells fixed, cells failing
    past the 72-hour rule, and flaky failures; each with its blame."""

    now: dt.datetime
    since: dt.timedelta
    broke: tuple[CellState, ...]
    fixed: tuple[tuple[CellState, Episode], ...]
    overdue: tuple[CellState, ...]
    flaky: tuple[tuple[CellState, Episode], ...]

    @property
    def start(self) -> dt.datetime:
        return self.now - self.since


def digest(states: Sequence[CellState], now: dt.datetime, since: dt.timedelta) -> Digest:
    start = now - since
    broke = [s for s in states if (e := s.failing) is not None and e.first.run.when >= start]
    ended = [(s, e) for s in states for e in s.episodes
             if e.fixed_by is not None and e.fixed_by.run.when >= start]
    return Digest(now=now, since=since, broke=tuple(broke),
                  fixed=tuple((s, e) for s, e in ended if not e.flaky and s.failing is None),
                  overdue=tuple(s for s in states if s.overdue(now)),
                  flaky=tuple((s, e) for s, e in ended if e.flaky))


def states(timeline: Timeline) -> list[CellState]:
    return [judge(series) for series in timeline.cells]


def deciding(outcomes: Sequence[Outcome]) -> Outcome:
    """Of one run's outcomes of a cell (one per host), the one whose status wins."""
    status = worst(o.status for o in outcomes)
    return next(o for o in outcomes if o.status == status)
