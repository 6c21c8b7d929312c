"""Blame, flaky failures, the 72-hour rule and the digest, on synthetic histories (pure: no
store)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest

from oota.history.policy import Policy, Rule
from oota.history.records import Inputs
from oota.history.timeline import Timeline, digest, judge
from oota.report import hud
from tests.history.synthetic import BASE, day, metric, timeline

TORCH_BUMP = replace(BASE, torch="2.13.1+cpu")


def test_blame_names_the_first_bad_run_and_what_changed_since_the_last_pass() -> None:
    found = timeline({"cpu-a": "PPPFFF"}, inputs={"cpu-a": {3: TORCH_BUMP}})
    s = judge(found.cells[0])
    failing = s.failing
    assert failing is not None and not failing.flaky
    assert (failing.first.run.key, failing.blame.good.run.key) == ("r004", "r003")
    assert failing.blame.changed == ("torch 2.13.0+cpu -> 2.13.1+cpu",)
    assert failing.blame.line() == (
        "first bad run r004 (2026-11-04 06:00 UTC) after r003 passed (2026-11-03 06:00 UTC): "
        "torch 2.13.0+cpu -> 2.13.1+cpu")
    assert s.last_passed is not None and s.last_passed.run.key == "r003"


def test_the_first_bad_run_is_the_oldest_whose_predecessor_passed() -> None:
    # Broke at r2, fixed at r4, broke again at r6: the current failure is blamed on r6 vs r5.
    s = judge(timeline({"cpu-a": "PFFPPFF"}, inputs={"cpu-a": {5: TORCH_BUMP}}).cells[0])
    assert [(e.first.run.key, e.fixed_by.run.key if e.fixed_by else None)
            for e in s.episodes] == [("r002", "r004"), ("r006", None)]
    assert s.failing is not None and s.failing.blame.good.run.key == "r005"
    assert s.failing.blame.changed == ("torch 2.13.0+cpu -> 2.13.1+cpu",)


def test_skips_neither_end_nor_start_a_failure() -> None:
    s = judge(timeline({"cpu-a": "PPFSF."}).cells[0])
    assert s.failing is not None and s.failing.first.run.key == "r003"
    assert s.last_passed is not None and s.last_passed.run.key == "r002"


def test_a_cell_that_never_passed_blames_its_first_run() -> None:
    s = judge(timeline({"cpu-a": "FF"}).cells[0])
    assert s.last_passed is None and s.failing is not None
    assert s.failing.blame.line().startswith("failing since its first recorded run (r001")


@pytest.mark.parametrize(("marks", "inputs", "flaky"), [
    ("PPFPP", {}, True),
    ("PPFPP", {2: TORCH_BUMP, 3: BASE}, False),       # the failure had other inputs
    ("PPFFP", {}, False),                              # two failures: a regression, fixed
    ("FPP", {}, False),                                # no pass before it
    ("PPF", {}, False),                                # no pass after it (yet)
    ("PPFP", {3: TORCH_BUMP}, False),                  # passed again with other inputs
], ids=["between-identical-passes", "inputs-changed", "two-failures", "no-pass-before",
        "not-over-yet", "fixed-by-a-change"])
def test_a_failure_between_two_passes_with_identical_inputs_is_flaky(
        marks: str, inputs: dict[int, object], flaky: bool) -> None:
    s = judge(timeline({"cpu-a": marks}, inputs={"cpu-a": inputs}).cells[0])  # type: ignore[dict-item]
    assert bool(s.flaky_runs) is flaky
    if flaky:
        assert s.flaky_runs == {3} and s.failing is None


@pytest.mark.parametrize(("now_hours", "overdue"), [(71, False), (72, False), (73, True)])
def test_the_72_hour_rule(now_hours: int, overdue: bool) -> None:
    s = judge(timeline({"cpu-a": "PPF"}).cells[0])  # failing since day 2, 06:00
    now = day(2) + dt.timedelta(hours=now_hours)
    assert s.failing_for(now) == dt.timedelta(hours=now_hours)
    assert s.overdue(now) is overdue


def history() -> Timeline:
    return timeline({
        "cpu-broke": "PPPPPF",
        "cpu-fixed": "PPFFFP",
        "cpu-old": "PFFFFF",
        "cuda-flaky": "PPPPFP",
        "cuda-fine": "PPPPPP",
    }, inputs={"cpu-broke": {5: TORCH_BUMP}})


def test_the_digest_sorts_cells_by_what_happened_since_yesterday() -> None:
    states = [judge(c) for c in history().cells]
    found = digest(states, day(5) + dt.timedelta(hours=1), dt.timedelta(hours=24))
    assert [s.cell.id for s in found.broke] == ["cpu-broke"]
    assert [s.cell.id for s, _ in found.fixed] == ["cpu-fixed"]
    assert [s.cell.id for s in found.overdue] == ["cpu-old"]
    assert [s.cell.id for s, _ in found.flaky] == ["cuda-flaky"]


def test_the_digest_text() -> None:
    page = hud.build(hud.HudInput(timeline=history(), policy=Policy(file=None),
                                  now=day(5) + dt.timedelta(hours=1)), {})
    text = hud.to_markdown(page.digest)
    assert text.startswith("# oota digest, 2026-11-06 07:00 UTC\n")
    assert ("1 cell broke since yesterday:\n- `cpu-broke`: failing since 2026-11-06 06:00, "
            "first bad run `r006` after `r005` passed: `torch 2.13.0+cpu -> 2.13.1+cpu`\n"
            ) in text
    assert ("1 cell fixed since yesterday:\n- `cpu-fixed`: passes again in run `r006`; it had "
            "broken at first bad run `r003` after `r002` passed: no recorded input changed\n"
            ) in text
    assert "1 cell still failing after 72 h:\n- `cpu-old`: failing for 4.0 days" in text
    assert ("1 flaky failure since yesterday (one failed run between two passes with the same "
            "inputs, not a regression):\n- `cuda-flaky`: run `r005`: mismatch 0.5\n") in text
    quiet = hud.build(hud.HudInput(timeline=history(), policy=Policy(file=None),
                                   now=day(30), since=dt.timedelta(days=3)), {})
    later = hud.to_markdown(quiet.digest)
    assert "2 cells still failing after 72 h:\n- `cpu-broke`: failing for 25.0 days" in later
    assert "broke in the last 3 days" not in later and later.endswith("changed\n")


def test_a_flaky_run_is_never_blamed_and_is_marked_on_the_hud() -> None:
    """A run whose only failure passed on its retry (status flaky) starts no failure, so no
    change is blamed for it, even where the inputs changed in that run (torch bumped); the
    HUD marks it ≈ and counts it in its vendor's flaky share."""
    found = timeline({"cpu-a": "PP~PP", "cpu-b": "PPPPP"},
                     inputs={"cpu-a": {2: TORCH_BUMP}})
    s = judge(found.cells[0])
    assert s.failing is None and s.episodes == () and s.last_passed is not None
    page = hud.build(hud.HudInput(timeline=found, policy=Policy(file=None), now=day(5)), {})
    (section,) = page.sections
    row = next(r for r in section.rows if r.id == "cpu-a")
    assert [m.symbol for m in row.marks] == ["✓", "✓", "≈", "✓", "✓"]
    assert row.blame == "" and row.flaky == 1
    assert section.flaky_share == "1 of 10 (10%)"
    assert page.digest.broke == () and "cpu-a" not in hud.to_markdown(page.digest)
    # A failing cell stays blamed on its first failure; a flaky run inside it changes nothing.
    s = judge(timeline({"cpu-a": "PPF~F"}, inputs={"cpu-a": {2: TORCH_BUMP}}).cells[0])
    assert s.failing is not None and s.failing.first.run.key == "r003"


def test_a_quiet_window_says_so() -> None:
    page = hud.build(hud.HudInput(timeline=timeline({"cpu-a": "PPP"}), policy=Policy(file=None),
                                  now=day(10), since=dt.timedelta(hours=48)), {})
    # 48 h is said as 2 days; 36 h as hours
    assert ("Nothing broke, was fixed or was flaky in the last 2 days (2026-11-09 06:00 UTC), and "
            "no cell has been failing for over 72 h.") in hud.to_markdown(page.digest)


def test_the_hud_rows_marks_and_links() -> None:
    page = hud.build(hud.HudInput(timeline=history(), policy=Policy(file=None), now=day(5),
                                  runs=4), {"cpu-broke": "r006", "cuda-fine": "r001"})
    assert [r.key for r in page.runs] == ["r006", "r005", "r004", "r003"]
    assert [s.vendor for s in page.sections] == ["cpu", "cuda"]
    rows = {r.id: r for s in page.sections for r in s.rows}
    assert [m.symbol for m in rows["cpu-broke"].marks] == ["✗", "✓", "✓", "✓"]
    assert [m.link for m in rows["cpu-broke"].marks] == ["cells/cpu-broke.html", None, None,
                                                         None]
    assert all(m.link is None for m in rows["cuda-fine"].marks)  # r001 is not shown
    assert [m.css for m in rows["cuda-flaky"].marks] == ["passed", "flaky", "passed", "passed"]
    assert rows["cpu-broke"].blame.endswith("torch 2.13.0+cpu -> 2.13.1+cpu")
    assert rows["cpu-old"].overdue and rows["cpu-old"].age == "4.0 days"
    assert rows["cuda-fine"].failing_since == "" and rows["cuda-fine"].last_passed == (
        "2026-11-06 06:00 UTC")


@pytest.mark.parametrize(("text", "hours"), [("24h", 24), ("3d", 72), (" 90h ", 90),
                                             ("1w", 168), ("2w", 336)])
def test_since_windows(text: str, hours: int) -> None:
    assert hud.parse_since(text) == dt.timedelta(hours=hours)


@pytest.mark.parametrize("text", ["", "0h", "24", "1y", "0w", "-3d", "1.5h"])
def test_bad_since_windows(text: str) -> None:
    with pytest.raises(ValueError):
        hud.parse_since(text)


def test_a_changed_pin_is_named_by_its_requirement_lines() -> None:
    before = Inputs(fingerprint="sha256:a", requested=("torch==2.13.0+cpu", "numpy>=1.26,<3",
                                                       "pytest>=8,<10"))
    after = Inputs(fingerprint="sha256:b", requested=("torch==2.12.0+cpu", "numpy>=1.26,<3",
                                                      "timm==1.0.9"))
    assert after.differences(before) == [
        "fingerprint sha256:a -> sha256:b", "requirement pytest>=8,<10 -> -",
        "requirement - -> timm==1.0.9", "requirement torch==2.13.0+cpu -> torch==2.12.0+cpu"]


def test_what_a_stopped_build_never_resolved_is_not_blamed() -> None:
    good = Inputs(torch="2.13.0+cpu", torch_git="cf30153", base="oota/base:debian12",
                  fingerprint="sha256:a", extensions=(("numpy", "2.4.6"), ("torch", "2.13.0")),
                  requested=("torch==2.13.0+cpu",))
    stopped = Inputs(fingerprint="sha256:b", requested=("torch==2.12.0+cpu",))
    assert stopped.differences(good) == [
        "fingerprint sha256:a -> sha256:b", "requirement torch==2.13.0+cpu -> torch==2.12.0+cpu"]


def _workload_page(runs: int, *, failed_tests: tuple[str, ...] = ()) -> hud.HudPage:
    """One cell with ``runs`` runs of a workload test: a latency that moves, the policy's
    latency rule, and two settings (never changing) beside it."""
    base = timeline({"cpu-a": "P" * runs})
    heads = base.runs
    figures = (metric("cpu-a", [1.0 + i / 10 for i in range(runs)], heads),
               metric("cpu-a", [0.5] * runs, heads, name="latency_p90_s"),
               metric("cpu-a", [20.0] * runs, heads, name="train_steps"),
               metric("cpu-a", [1e-4] * runs, heads, name="loss_atol"))
    cells = base.cells
    if failed_tests:
        last = replace(cells[0].outcomes[-1], status="failed", failed_tests=failed_tests)
        cells = (replace(cells[0], outcomes=(*cells[0].outcomes[:-1], last)),)
    rule = Rule(metric="latency_median_s", direction="lower", threshold=1.2, baseline_runs=5,
                min_runs=3)
    return hud.build(hud.HudInput(timeline=replace(base, metrics=figures, cells=cells),
                                  policy=Policy(file="p.yaml", rules=(rule,)),
                                  now=day(runs)), {})


def test_after_one_run_the_hud_shows_figures_not_empty_charts() -> None:
    [row] = _workload_page(1).sections[0].rows
    assert row.trends == ()
    assert [(r.label, r.value, r.runs, r.verdict) for r in row.readings] == [
        ("tiny latency_median_s", "1", 1, "insufficient data")]
    assert row.steady == "latency_p90_s 0.5; train_steps 20; loss_atol 0.0001"
    html = hud.to_html(_workload_page(1))
    assert "<svg" not in html and "tiny latency_median_s 1 <small>(1 run; insufficient" in html
    assert "unchanged in every run: latency_p90_s 0.5; train_steps 20" in html


def test_with_enough_runs_only_measured_figures_are_charted() -> None:
    [row] = _workload_page(3).sections[0].rows
    assert [t.label for t in row.trends] == ["tiny latency_median_s"]
    assert row.readings == () and "train_steps 20" in row.steady
    assert hud.to_html(_workload_page(3)).count("<svg") == 1


def test_the_failing_tests_and_the_time_of_day_are_on_the_page() -> None:
    failed = tuple(f"test_ops.py::test_op_matches_cpu[op{i}-float32]" for i in range(14))
    page = _workload_page(2, failed_tests=failed)
    [row] = page.sections[0].rows
    assert row.failing_tests == failed[:12] and row.more_failing == 2
    html = hud.to_html(page)
    assert "failing now: <code>test_ops.py::test_op_matches_cpu[op0-float32]</code>" in html
    assert " and 2 more</p>" in html
    assert ">11-02 06:00</th>" in html and "1 cell: <span class=\"bad\">1 failing" in html
    digest = hud.to_markdown(page.digest)
    assert "; failing: `test_ops.py::test_op_matches_cpu[op0-float32]`" in digest
    assert "and 2 more" in digest
