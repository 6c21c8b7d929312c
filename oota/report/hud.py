"""The HUD: ``reports/hud.html`` (runs x cells over the history, a section per vendor) and
``reports/hud.md`` (the digest: what broke, was fixed, is overdue or flaky), built as data
first (:class:`HudPage`, :class:`~oota.history.timeline.Digest`) and rendered from
``templates/hud.html.j2`` and ``templates/hud.md.j2``.

The page stays static like the rest of the report: vendors are sections with anchors, not a
script; each metric's trend is an inline SVG polyline, not a charting library.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from oota import __version__
from oota.history.policy import Judgement, Policy, judge
from oota.history.timeline import (
    OVERDUE,
    CellSeries,
    CellState,
    Digest,
    LayerCount,
    MetricSeries,
    RunHead,
    Timeline,
    digest,
    judge as judge_cell,
    shown,
    summed,
)
from oota.report.templating import html_environment, markdown_environment
from oota.vocab import FLAKY, MaybeStatus

DEFAULT_RUNS = 50
DEFAULT_SINCE = dt.timedelta(hours=24)
HUD_FILE, DIGEST_FILE = "hud.html", "hud.md"
SYMBOL = {"passed": "✓", "failed": "✗", "error": "⚠", "interrupted": "◼", "skipped": "–",
          "unsupported-here": "○", "cpu-fallback": "c", "not-claimed": "n", "flaky": "≈",
          "": "·"}
SPARK_W, SPARK_H, SPARK_PAD = 120, 26, 3
# A line needs three points to show a trend; before that a figure is shown as its value.
MIN_CHART_RUNS = 3
FAILING_SHOWN = 12  # failing tests named on a cell's line; the rest are counted
_SINCE = re.compile(r"^\s*(\d+)\s*([hdw])\s*$")
_UNIT = {"h": dt.timedelta(hours=1), "d": dt.timedelta(days=1), "w": dt.timedelta(weeks=1)}


@dataclass(frozen=True, kw_only=True, slots=True)
class HudInput:
    """What the HUD is made from: the history read, the policy, the moment it describes, how
    many runs it shows and the digest's window."""

    timeline: Timeline
    policy: Policy
    now: dt.datetime
    runs: int = DEFAULT_RUNS
    since: dt.timedelta = DEFAULT_SINCE


@dataclass(frozen=True, kw_only=True, slots=True)
class HudMark:
    status: MaybeStatus  # "" when the cell was not in that run
    flaky: bool
    title: str
    link: str | None  # the cell's page, when this run's results are the report's

    @property
    def css(self) -> str:
        return "flaky" if self.flaky else (self.status or "none")

    @property
    def symbol(self) -> str:
        return "≈" if self.flaky else SYMBOL.get(self.status, "?")


@dataclass(frozen=True, kw_only=True, slots=True)
class Trend:
    """One metric of one cell: its values as an SVG polyline, and the policy's verdict."""

    label: str
    points: str  # "x,y x,y ..." in a SPARK_W x SPARK_H box
    last: tuple[float, float] | None
    baseline_y: float | None
    judgement: Judgement | None  # None: the policy has no rule for it
    rule: str

    @property
    def verdict(self) -> str:
        return self.judgement.verdict if self.judgement else "no policy"

    @property
    def css(self) -> str:
        return self.verdict.replace(" ", "-")


@dataclass(frozen=True, kw_only=True, slots=True)
class Reading:
    """A measured figure with too few runs for a chart yet: its latest value and how many
    runs measured it (and the policy's verdict, when it names the figure)."""

    label: str
    value: str
    runs: int
    verdict: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class HudRow:
    state: CellState
    marks: tuple[HudMark, ...]  # one per shown run, newest first
    failing_since: str
    age: str
    overdue: bool
    last_passed: str
    blame: str
    flaky: int
    trends: tuple[Trend, ...]  # measured figures with enough runs: charted
    readings: tuple[Reading, ...] = ()  # measured figures with too few runs for a chart
    steady: str = ""  # figures that never changed (settings, mostly): one line of text
    failing_tests: tuple[str, ...] = ()  # of the failure the cell is in now
    more_failing: int = 0
    layers: tuple[LayerCount, ...] = ()  # its tests that ran in the shown runs, per layer

    @property
    def id(self) -> str:
        return self.state.cell.id


@dataclass(frozen=True, kw_only=True, slots=True)
class HudSection:
    vendor: str
    rows: tuple[HudRow, ...]

    @property
    def failing(self) -> int:
        return sum(1 for r in self.rows if r.failing_since)

    @property
    def flaky_share(self) -> str:
        """Of the vendor's cells' outcomes in the shown runs, how many were flaky: '2 of 40
        (5%)' (a flaky test's status, or a failure between two passes with the same inputs)."""
        marks = [m for r in self.rows for m in r.marks if m.status]
        flaky = sum(m.flaky for m in marks)
        return f"{flaky} of {len(marks)} ({flaky / len(marks):.0%})" if marks else "–"

    @property
    def flaky_by_layer(self) -> tuple[LayerCount, ...]:
        """Of the vendor's tests that ran in the shown runs, how many were flaky, per layer (in
        the suite's order of layers): the HUD's line under the vendor's table."""
        return summed(count for row in self.rows for count in row.layers)


@dataclass(frozen=True, kw_only=True, slots=True)
class HudPage:
    runs: tuple[RunHead, ...]  # shown, newest first
    total_runs: int
    sections: tuple[HudSection, ...]
    now: str
    digest: Digest
    regressions: tuple[tuple[str, Trend], ...]  # (cell id, trend) judged a regression

    @property
    def cells(self) -> int:
        return sum(len(s.rows) for s in self.sections)

    @property
    def failing(self) -> int:
        return sum(s.failing for s in self.sections)

    @property
    def overdue(self) -> int:
        return sum(1 for s in self.sections for r in s.rows if r.overdue)

    @property
    def latest(self) -> str:
        return _utc(self.runs[0].when) if self.runs else ""


# A hundred years: more than any history holds, and far inside what a datetime can subtract.
LONGEST_SINCE_DAYS = 36_500


def parse_since(text: str) -> dt.timedelta:
    """``--since 24h`` / ``3d`` / ``2w`` as a window (ValueError for anything else, zero, or more
    than :data:`LONGEST_SINCE_DAYS`: a window reaching before any run is asked as "all of it")."""
    found = _SINCE.match(text)
    digits = found.group(1) if found else ""
    if not found or len(digits) > 9 or int(digits) == 0:  # 9 digits: a timedelta holds them
        raise ValueError(text)
    window = int(digits) * _UNIT[found.group(2)]
    if window > dt.timedelta(days=LONGEST_SINCE_DAYS):
        raise ValueError(text)
    return window


def build(source: HudInput, current: Mapping[str, str | None]) -> HudPage:
    """The page; ``current`` maps each cell of the report to the run its results are from."""
    shown_runs = tuple(reversed(source.timeline.runs[-source.runs:])) if source.runs else ()
    judged = [judge_cell(series) for series in source.timeline.cells]
    by_cell: dict[str, list[MetricSeries]] = {}
    for series in source.timeline.metrics:
        by_cell.setdefault(series.cell_id, []).append(series)
    rows = [_row(series, state, shown_runs, source, current.get(state.cell.id),
                 by_cell.get(state.cell.id, []))
            for series, state in zip(source.timeline.cells, judged, strict=True)]
    vendors = sorted({r.state.cell.vendor for r in rows})
    sections = tuple(HudSection(vendor=v, rows=tuple(r for r in rows
                                                     if r.state.cell.vendor == v))
                     for v in vendors)
    return HudPage(runs=shown_runs, total_runs=len(source.timeline.runs), sections=sections,
                   now=_utc(source.now), digest=digest(judged, source.now, source.since),
                   regressions=tuple((r.id, t) for r in rows for t in r.trends
                                     if t.verdict == "regression"))


def _row(series: CellSeries, state: CellState, runs: Sequence[RunHead], source: HudInput,
         current: str | None, metrics: list[MetricSeries]) -> HudRow:
    outcomes = {o.run.id: o for o in series.outcomes}
    flaky = state.flaky_runs
    link = f"cells/{state.cell.id}.html"
    marks = []
    for run in runs:
        outcome = outcomes.get(run.id)
        status = outcome.status if outcome else ""
        why = f" — {outcome.message}" if outcome and outcome.message else ""
        title = (f"{run.key} ({run.origin}), {_utc(run.when)}: "
                 f"{'flaky ' if run.id in flaky else ''}{status or 'not run'}{why}")
        # A flaky status (a test that passed only on its retry) is flaky, as is a failure the
        # history proved flaky: neither is blamed on a change.
        marks.append(HudMark(status=status, flaky=run.id in flaky or status == FLAKY,
                             title=title,
                             link=link if outcome and current == run.key else None))
    failing, age = state.failing, state.failing_for(source.now)
    broken = failing.last.failed_tests if failing else ()
    figures = _figures(metrics, source.policy, source.runs)
    return HudRow(
        state=state, marks=tuple(marks),
        failing_since=shown(failing.first) if failing else "",
        age=_age(age) if age is not None else "", overdue=state.overdue(source.now),
        last_passed=shown(state.last_passed) if state.last_passed else "never",
        blame=failing.blame.line() if failing else "",
        flaky=len(flaky | {o.run.id for o in series.outcomes if o.status == FLAKY}),
        trends=figures[0], readings=figures[1], steady=figures[2],
        failing_tests=broken[:FAILING_SHOWN], more_failing=max(len(broken) - FAILING_SHOWN, 0),
        layers=summed(c for run in runs if run.id in outcomes for c in outcomes[run.id].layers))


def _figures(metrics: Sequence[MetricSeries], policy: Policy, runs: int
             ) -> tuple[tuple[Trend, ...], tuple[Reading, ...], str]:
    """A cell's figures, as a release manager reads them: only what was measured is charted
    (a figure the policy names, or one whose value changed between runs), and only once it
    has :data:`MIN_CHART_RUNS` runs (before that: its value and "n runs"); figures that never
    changed (the workload's settings, mostly) are one line of text."""
    several_hosts = len({m.host for m in metrics}) > 1
    charts: list[Trend] = []
    readings: list[Reading] = []
    steady: list[MetricSeries] = []
    for series in metrics:
        rule = policy.rule(series.name)
        if rule is None and len({p.value for p in series.points}) <= 1:
            steady.append(series)
        elif len(series.points) >= MIN_CHART_RUNS:
            charts.append(trend(series, policy, runs, several_hosts=several_hosts))
        else:
            judged = judge([(p.value, p.good) for p in series.points], rule) if rule else None
            readings.append(Reading(
                label=_label(series, several_hosts), value=f"{series.points[-1].value:.4g}",
                runs=len(series.points), verdict=judged.verdict if judged else None))
    return tuple(charts), tuple(readings), _steady_line(steady)


def _steady_line(series: Sequence[MetricSeries]) -> str:
    """'train_steps 20, loss_atol 0.0001, loss_first 2.3 (llama), 1.9 (resnet)': each
    figure that never changed, once when every test of the cell gave it the same value."""
    values: dict[str, dict[str, str]] = {}
    for s in series:
        values.setdefault(s.name, {})[_test(s.test_id)] = f"{s.points[-1].value:.4g}"
    parts = []
    for name, by_test in values.items():
        if len(set(by_test.values())) == 1:
            parts.append(f"{name} {next(iter(by_test.values()))}")
        else:
            parts.append(f"{name} " + ", ".join(f"{v} ({t})" for t, v in by_test.items()))
    return "; ".join(parts)


def _test(test_id: str) -> str:
    """A workload test's short name: its parameter ('llama'), else its function's name."""
    name = test_id.rsplit("::", 1)[-1]
    inner = name.partition("[")[2].rstrip("]")
    return inner or name


def _label(series: MetricSeries, several_hosts: bool) -> str:
    return f"{_test(series.test_id)} {series.name}" + (
        f" @ {series.host}" if several_hosts else "")


def trend(series: MetricSeries, policy: Policy, runs: int, *, several_hosts: bool) -> Trend:
    """``series``'s last ``runs`` values drawn, and judged on the whole series."""
    rule = policy.rule(series.name)
    judgement = judge([(p.value, p.good) for p in series.points], rule) if rule else None
    values = [p.value for p in series.points[-runs:]] if runs else []
    baseline = judgement.baseline if judgement else None
    low = min([*values, *([baseline] if baseline is not None else [])], default=0.0)
    high = max([*values, *([baseline] if baseline is not None else [])], default=0.0)
    span = (high - low) or 1.0

    def y(value: float) -> float:
        return round(SPARK_H - SPARK_PAD - (value - low) / span * (SPARK_H - 2 * SPARK_PAD), 1)

    step = (SPARK_W - 2 * SPARK_PAD) / max(len(values) - 1, 1)
    xy = [(round(SPARK_PAD + i * step, 1), y(v)) for i, v in enumerate(values)]
    return Trend(label=_label(series, several_hosts),
                 points=" ".join(f"{x:g},{v:g}" for x, v in xy), last=xy[-1] if xy else None,
                 baseline_y=y(baseline) if baseline is not None else None,
                 judgement=judgement, rule=rule.describe() if rule else "no rule in the policy")


def _utc(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _age(age: dt.timedelta) -> str:
    hours = age.total_seconds() / 3600
    return f"{hours / 24:.1f} days" if hours >= 48 else f"{hours:.0f} h"


def to_html(page: HudPage) -> str:
    return html_environment().get_template("hud.html.j2").render(
        title="oota HUD", page=page, version=__version__, overdue_h=_hours(OVERDUE),
        utc=dt.timezone.utc,
        spark_w=SPARK_W, spark_h=SPARK_H,
        legend=(("passed", "✓ passed"), ("failed", "✗ failed"), ("error", "⚠ error"),
                ("flaky", "≈ flaky: a test passed only when run again in a fresh process, "
                          "or a failure between two passes with the same inputs"),
                ("skipped", "– skipped"), ("unsupported-here", "○ no such hardware"),
                ("cpu-fallback", "c ran on the CPU: the backend's fallback computed it"),
                ("not-claimed", "n not claimed: a capability the vendor does not claim"),
                ("none", "· not in that run")))


def to_markdown(found: Digest, regressions: Sequence[tuple[str, Trend]] = ()) -> str:
    text = markdown_environment().get_template("hud.md.j2").render(
        d=found, start=_utc(found.start), window=_window(found.since), shown_tests=FAILING_SHOWN,
        overdue_h=_hours(OVERDUE), regressions=regressions, now=_utc(found.now))
    return text.rstrip("\n") + "\n"


def _hours(delta: dt.timedelta) -> int:
    return int(delta.total_seconds() // 3600)


def _window(since: dt.timedelta) -> str:
    if since == DEFAULT_SINCE:
        return "since yesterday"
    hours = _hours(since)
    if hours % (24 * 7) == 0:
        weeks = hours // (24 * 7)
        return "in the last week" if weeks == 1 else f"in the last {weeks} weeks"
    return f"in the last {hours // 24} days" if hours % 24 == 0 else f"in the last {hours} h"
