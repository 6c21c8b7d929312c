"""The regression policy: its verdicts on synthetic histories, the HUD's trends, and bad
policy files (every problem at once, file:line:col, exit 2)."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path

import pytest

from oota.errors import MatrixError
from oota.history.policy import Policy, Rule, judge, load_policy, policy_at
from oota.report import hud
from tests.conftest import REPO
from tests.history.synthetic import day, metric, runs, timeline

LATENCY = Rule(metric="latency_median_s", direction="lower", threshold=1.2, baseline_runs=5,
               min_runs=3)
THROUGHPUT = Rule(metric="train_steps_per_s", direction="higher", threshold=1.2,
                  baseline_runs=5, min_runs=3)
STEADY = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0]


def good(values: list[float]) -> list[tuple[float, bool]]:
    return [(v, True) for v in values]


@pytest.mark.parametrize(("values", "rule", "verdict"), [
    (STEADY + [1.05, 1.1], LATENCY, "ok"),
    (STEADY + [1.0, 1.3], LATENCY, "suspicious"),
    (STEADY + [1.3, 1.35], LATENCY, "regression"),
    (STEADY + [1.3, 1.0], LATENCY, "ok"),                 # the last run is back to normal
    ([1.0, 1.0, 1.5], LATENCY, "insufficient data"),  # 2 good runs before the last
    # The minimum of good runs before the last one, the last one slow: one violation so far.
    ([1.0, 1.02, 0.98, 1.5], LATENCY, "suspicious"),
    ([1.0, 1.02, 0.98, 1.5, 1.6], LATENCY, "regression"),
    ([], LATENCY, "insufficient data"),
    ([10.0] * 6 + [8.0, 8.1], THROUGHPUT, "regression"),  # higher is better: 10/8 > 1.2
    ([10.0] * 6 + [9.0, 12.0], THROUGHPUT, "ok"),
], ids=["ok", "one-bad-run", "two-bad-runs", "recovered", "few-runs", "min-runs-then-one",
        "min-runs-then-two", "no-runs",
        "throughput-down", "throughput-up"])
def test_the_three_verdicts(values: list[float], rule: Rule, verdict: str) -> None:
    assert judge(good(values), rule).verdict == verdict


def test_not_flagged_after_one_bad_run_flagged_after_two() -> None:
    history = STEADY.copy()
    history.append(1.5)
    assert judge(good(history), LATENCY).verdict == "suspicious"
    history.append(1.5)
    found = judge(good(history), LATENCY)
    assert found.verdict == "regression" and found.baseline == 1.0 and found.ratio == 1.5


def test_the_baseline_is_the_median_of_the_last_k_good_runs() -> None:
    values = [(5.0, True)] * 3 + [(1.0, True), (1.1, True), (9.0, False), (0.9, True),
                                  (1.0, True), (1.05, True), (1.0, True), (1.0, True)]
    # Before the last two: the good ones, the last five of them: 1.0 1.1 0.9 1.0 1.05.
    assert judge(values, LATENCY).baseline == 1.0


def test_the_hud_draws_each_metric_with_its_verdict() -> None:
    heads = runs(8)
    found = timeline({"cpu-a": "PPPPPPPP"}, metrics=(
        metric("cpu-a", STEADY + [1.0, 1.4], heads),
        metric("cpu-a", [5.0] * 8, heads, name="peak_device_bytes"),
        metric("cpu-a", [3.0] * 8, heads, name="loss_final")))
    policy = Policy(file="p", rules=(LATENCY, Rule(metric="peak_device_bytes",
                                                   direction="lower", threshold=1.1,
                                                   baseline_runs=5, min_runs=3)))
    page = hud.build(hud.HudInput(timeline=found, policy=policy, now=day(8)), {})
    [row] = page.sections[0].rows
    verdicts = {t.label: t.verdict for t in row.trends}
    # A figure the policy names is charted even when it never moved; one it does not name
    # and that never moved (a setting, most likely) is a line of text, not a flat chart.
    assert verdicts == {"tiny latency_median_s": "suspicious", "tiny peak_device_bytes": "ok"}
    assert row.steady == "loss_final 3"
    latency = row.trends[0]
    assert len(latency.points.split()) == 8 and latency.last == (117.0, 3.0)
    html = hud.to_html(page)
    assert html.count("<svg") == 2 and "<polyline" in html and "<script" not in html
    assert page.regressions == ()


def test_the_projects_policy_loads() -> None:
    policy = policy_at(REPO)
    assert policy.file is not None
    rules = {r.metric: r for r in policy.rules}
    assert set(rules) >= {"latency_median_s", "latency_p90_s", "train_steps_per_s",
                          "peak_device_bytes", "loss_final"}
    assert rules["train_steps_per_s"].direction == "higher"
    assert rules["latency_median_s"].threshold == 1.2
    assert policy.rule("workload.latency_median_s") is rules["latency_median_s"]
    assert policy_at(REPO / "vendors").file is None  # no file: nothing judged


@pytest.mark.parametrize(("text", "problems"), [
    ("""\
     version: 1
     metrics:
       latency_median_s: {direction: lowr, threshold: 1.2}
     """, ["policy.yaml:3:22: metrics.latency_median_s.direction: 'lowr' is not lower or "
           "higher: which way is better; did you mean 'lower'?"]),
    ("""\
     version: 1
     defaults: {baseline_runs: 3, min_run: 2}
     metrics:
       latency_median_s:
         direction: lower
         threshold: 0.8
       loss_final: {direction: lower, threshold: 1.1, min_runs: 9}
     """, ["policy.yaml:2:30: defaults.min_run: unknown key 'min_run'; did you mean 'min_runs'?"]),
    ("""\
     version: 1
     metrics:
       latency_median_s:
         direction: lower
         threshold: 0.8
       loss_final: {direction: lower, threshold: 1.1, min_runs: 9}
     """, ["policy.yaml:5:5: metrics.latency_median_s.threshold: 0.8 is not above 1; give how "
           "much worse than the baseline a run may be, e.g. 1.2 (20% worse)",
           "policy.yaml:6:50: metrics.loss_final.min_runs: 9 is more than baseline_runs (5): "
           "the minimum could never be met; use min_runs: 5 or less"]),
    ("""\
     version: 1
     metrics:
       latency_median_s: {direction: lower, threshold: fast}
     """, ["policy.yaml:3:40: metrics.latency_median_s.threshold: 'fast' is not a ratio "
           "above 1 (1.2: 20% worse than the baseline is a violation); e.g. '1.2'"]),
], ids=["direction", "unknown-key", "threshold-and-min-runs", "threshold-not-a-number"])
def test_policy_file_errors_name_the_place(text: str, problems: list[str],
                                           tmp_path: Path) -> None:
    file = tmp_path / "policy.yaml"
    file.write_text(textwrap.dedent(text), encoding="utf-8")
    with pytest.raises(MatrixError) as bad:
        load_policy(file)
    lines = [line.strip().removeprefix(f"{tmp_path}/") for line in str(bad.value).splitlines()
             if not line.endswith(" problems:")]
    assert len(lines) == len(problems), lines
    for line, expected in zip(lines, problems, strict=True):
        assert line.startswith(expected), (line, expected)


def test_since_window_wording() -> None:
    assert hud.to_markdown(hud.build(hud.HudInput(
        timeline=timeline({"cpu-a": "PP"}), policy=Policy(file=None), now=day(5),
        since=dt.timedelta(hours=36)), {}).digest).count("in the last 36 h") == 1
