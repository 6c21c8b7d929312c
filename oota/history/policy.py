"""The regression policy: how a workload figure is judged against the history, kept as data
(``history-policy.yaml``, ``schema/history-policy-v1.json``), and the verdicts it gives.

Per metric: which way is better, a threshold (a ratio above 1), and a baseline, the median of
the last K good runs of the same cell on the same host. The last two runs are judged against
it: both past the threshold is a regression, the last one alone is suspicious (one slow run is
not yet a trend), fewer good runs than the minimum before them is insufficient data. This is
the shape of PyTorch's HUD: one bad run does not flag, two do.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from oota import schemas
from oota.config.schemacheck import check_against
from oota.config.yamlsrc import Doc, load_yaml

POLICY_FILE = "history-policy.yaml"
SCHEMA_NAME = "history-policy-v1.json"

Direction = Literal["lower", "higher"]
Verdict = Literal["regression", "suspicious", "ok", "insufficient data"]
JUDGED_RUNS = 2  # the runs judged against the baseline: the last two


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    metric: str
    direction: Direction
    threshold: float
    baseline_runs: int
    min_runs: int

    def violated_by(self, value: float, baseline: float) -> bool:
        if self.direction == "lower":
            return value > baseline * self.threshold
        return value * self.threshold < baseline

    def describe(self) -> str:
        way = "lower" if self.direction == "lower" else "higher"
        return (f"{way} is better; over {self.threshold:g}x worse than the median of the last "
                f"{self.baseline_runs} good runs (at least {self.min_runs})")


@dataclass(frozen=True, kw_only=True, slots=True)
class Policy:
    file: str | None  # None: no policy file, nothing is judged
    rules: tuple[Rule, ...] = ()

    def rule(self, figure: str) -> Rule | None:
        """The rule of a figure named ``figure`` (its last dotted part is the metric)."""
        metric = figure.rsplit(".", 1)[-1]
        return next((r for r in self.rules if r.metric == metric), None)


@dataclass(frozen=True, kw_only=True, slots=True)
class Judgement:
    verdict: Verdict
    baseline: float | None = None
    latest: float | None = None

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.latest is None or self.baseline == 0:
            return None
        return self.latest / self.baseline


def judge(values: Sequence[tuple[float, bool]], rule: Rule) -> Judgement:
    """The verdict on a metric's ``values`` (oldest first; each with whether its test passed,
    as only good runs make the baseline). "regression": the last two runs are both past the
    baseline of the good runs before them; "suspicious": the last run is past the baseline of
    the good runs before it (which may include the run just before: a slow run after a
    normal one is one violation, not two)."""
    if len(values) >= JUDGED_RUNS:
        baseline = _baseline(values[:-JUDGED_RUNS], rule)
        pair = [value for value, _ in values[-JUDGED_RUNS:]]
        if baseline is not None and all(rule.violated_by(v, baseline) for v in pair):
            return Judgement(verdict="regression", baseline=baseline, latest=pair[-1])
    latest = values[-1][0] if values else None
    baseline = _baseline(values[:-1], rule)
    if latest is None or baseline is None:
        return Judgement(verdict="insufficient data", latest=latest)
    verdict: Verdict = "suspicious" if rule.violated_by(latest, baseline) else "ok"
    return Judgement(verdict=verdict, baseline=baseline, latest=latest)


def _baseline(values: Sequence[tuple[float, bool]], rule: Rule) -> float | None:
    """The median of the last ``baseline_runs`` good values; None below ``min_runs`` of them."""
    good = [value for value, ok in values if ok][-rule.baseline_runs:]
    return statistics.median(good) if len(good) >= rule.min_runs else None


def load_policy(file: Path) -> Policy:
    """``file`` checked against the schema and for what it cannot say (a threshold above 1,
    min_runs not above baseline_runs); every problem at once with file:line:col (exit 2)."""
    doc = load_yaml(file, str(file))
    check_against(doc, schemas.load(SCHEMA_NAME))
    rules: list[Rule] = []
    data = doc.data if isinstance(doc.data, dict) else {}
    found = data.get("defaults")
    defaults: Mapping[str, Any] = found if isinstance(found, dict) else {}
    metrics = data.get("metrics")
    if not doc.problems and isinstance(metrics, dict):
        rules = [_rule(doc, name, spec, defaults) for name, spec in metrics.items()]
    doc.sort_problems()
    doc.raise_if_problems()
    return Policy(file=str(file), rules=tuple(rules))


def policy_at(root: Path) -> Policy:
    """The project's policy (``history-policy.yaml`` in ``root``), or none when it has none."""
    file = root / POLICY_FILE
    return load_policy(file) if file.is_file() else Policy(file=None)


def _rule(doc: Doc, name: str, spec: Mapping[str, Any], defaults: Mapping[str, Any]) -> Rule:
    path = ("metrics", name)
    threshold = float(spec["threshold"])
    if threshold <= 1:
        doc.error((*path, "threshold"), f"{spec['threshold']} is not above 1",
                  "give how much worse than the baseline a run may be, e.g. 1.2 (20% worse)")
    baseline_runs = int(spec.get("baseline_runs", defaults.get("baseline_runs", 5)))
    min_runs = int(spec.get("min_runs", defaults.get("min_runs", 3)))
    if min_runs > baseline_runs:
        where = (*path, "min_runs") if "min_runs" in spec else ("defaults", "min_runs")
        doc.error(where, f"{min_runs} is more than baseline_runs ({baseline_runs}): the "
                  "minimum could never be met", f"use min_runs: {baseline_runs} or less")
    return Rule(metric=name, direction="lower" if spec["direction"] == "lower" else "higher",
                threshold=threshold, baseline_runs=baseline_runs, min_runs=min_runs)
