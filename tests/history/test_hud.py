"""The HUD as a user gets it: the store's bulk reading (SQLite and PostgreSQL), `invoke report`
writing hud.html and hud.md beside index.html, `invoke history digest`, and the cases where no
HUD is written (and why, on stderr)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from oota.history.location import locate
from oota.history.policy import Policy
from oota.history.records import run_record
from oota.history.store import append, open_store, read_timeline
from oota.history.timeline import LayerCount
from oota.report import hud
from tests.history.helpers import MATMUL, invoke, typed
from tests.history.synthetic import result_at
from tests.history.test_commands import closed_port
from tests.unit.test_report import write_results

CELL = "cpu-torch2.13.0-py3.11-debian12"
NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def ago(hours: float) -> dt.datetime:
    return NOW - dt.timedelta(hours=hours)


def add(url: str, *results: dict[str, Any], origin: str = "verify") -> None:
    append(open_store(locate(url, {}, Path.cwd())),
           run_record(typed(*results), origin, None))  # type: ignore[arg-type]


def broken_history(url: str) -> None:
    """Six daily runs of one cell: passes; torch 2.13.1 breaks matmul 2 days ago; still failing.
    A second cell is flaky once (a failure between two passes, same inputs)."""
    for i, hours in enumerate((120, 96, 72, 48, 24, 1)):
        torch = "2.13.1+cpu" if hours <= 48 else "2.13.0+cpu"
        add(url, result_at(f"run-{i}", ago(hours), matmul="failed" if hours <= 48 else "passed",
                           torch=torch, latency=1.5 if hours == 1 else 1.0),
            result_at(f"run-{i}", ago(hours), python="3.13", os_key="debian13",
                      matmul="failed" if hours == 24 else "passed"))


def test_the_timeline_is_read_in_bulk(history_url: str) -> None:
    broken_history(history_url)
    add(history_url, result_at("run-5", ago(1), host="lab-b", matmul="passed"), origin="merge")
    found = read_timeline(open_store(locate(history_url, {}, Path.cwd())))
    assert [r.key for r in found.runs] == [f"run-{i}" for i in range(6)] + ["run-5"]
    assert [r.origin for r in found.runs][-2:] == ["verify", "merge"]
    cells = {c.cell.id: c for c in found.cells}
    assert set(cells) == {CELL, "cpu-torch2.13.0-py3.13-debian13"}
    broken = cells[CELL]
    assert "".join(o.status[0] for o in broken.outcomes) == "pppfffp"
    assert broken.outcomes[3].inputs.torch == "2.13.1+cpu"
    [latency, p90] = [m for m in found.metrics if m.cell_id == CELL]
    assert (latency.name, p90.name) == ("latency_median_s", "latency_p90_s")
    assert [p.value for p in latency.points] == [1.0] * 5 + [1.5]
    assert all(p.good for p in latency.points) and latency.host == "lab-a"


def test_report_writes_the_hud_beside_the_index(history_url: str, tmp_path: Path) -> None:
    broken_history(history_url)
    current = write_results(tmp_path / "results", [
        result_at("run-5", ago(1), matmul="failed", torch="2.13.1+cpu")])
    out = invoke("report", "--results", str(current), "--out", str(tmp_path / "reports"),
                 "--history", history_url)
    assert out.returncode == 0, out.stderr
    assert "/hud.html, " in out.stdout and "/hud.md: 1 cells" in out.stdout
    page = (tmp_path / "reports" / "hud.html").read_text(encoding="utf-8")
    assert ("blame: first bad run run-3 (" in page and "after run-2 passed (" in page
            and "torch 2.13.0+cpu -&gt; 2.13.1+cpu" in page)
    assert f'<a href="cells/{CELL}.html">✗</a>' in page  # run-5's results are the report's
    assert page.count(f'href="cells/{CELL}.html"') == 1
    assert 'class="m flaky"' in page and "1 flaky run(s)" in page
    assert "latency_median_s <b>suspicious</b>" in page  # one slow run only: not flagged yet
    assert len(page.encode()) < 200_000
    index = (tmp_path / "reports" / "index.html").read_text(encoding="utf-8")
    assert '<a href="hud.html">HUD: the history</a>' in index
    digest = (tmp_path / "reports" / "hud.md").read_text(encoding="utf-8")
    assert "1 flaky failure since yesterday" in digest
    assert "- `cpu-torch2.13.0-py3.13-debian13`: run `run-4`" in digest
    assert f"`{CELL}`" not in digest and "broke" not in digest  # it broke 2 days ago


def test_history_digest_prints_the_window(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    broken_history(url)
    out = invoke("history", "digest", "--since", "3d", "--history", url)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# oota digest, ")
    assert ("1 cell broke in the last 3 days:\n"
            f"- `{CELL}`: failing since ") in out.stdout
    assert "first bad run `run-3` after `run-2` passed: `torch 2.13.0+cpu -> 2.13.1+cpu`" \
        in out.stdout
    yesterday = invoke("history", "digest", "--history", url)
    assert "broke" not in yesterday.stdout and "1 flaky failure since yesterday" \
        in yesterday.stdout


def test_a_latency_regression_is_flagged_after_two_runs_not_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    for i in range(5):
        add(url, result_at(f"run-{i}", ago(200 - i * 24), latency=1.0))
    add(url, result_at("run-5", ago(48), latency=1.4))
    one = invoke("history", "digest", "--since", "30d", "--history", url)
    assert "workload regression" not in one.stdout, one.stdout
    add(url, result_at("run-6", ago(24), latency=1.4))
    two = invoke("history", "digest", "--since", "30d", "--history", url)
    assert ("2 workload regressions (the last two runs past the policy's threshold):\n"
            f"- `{CELL}`: tiny latency\\_median\\_s 1.40x its "
            "baseline\n") in two.stdout


def test_a_compile_speedup_regression_is_flagged_like_a_workload_one(tmp_path: Path) -> None:
    """The compile layer's speedup per model is a figure the policy judges (higher is better):
    two runs at 0.8 of a 1.2 baseline are a regression; its compile time stays steady."""
    url = f"sqlite:///{tmp_path / 'h.db'}"
    for i in range(5):
        add(url, result_at(f"run-{i}", ago(200 - i * 24), speedup=1.2))
    for i, hours in ((5, 48), (6, 24)):
        add(url, result_at(f"run-{i}", ago(hours), speedup=0.8))
    digest = invoke("history", "digest", "--since", "30d", "--history", url)
    assert f"- `{CELL}`: inductor-llama speedup 0.67x its baseline" in digest.stdout


def test_report_merge_appends_first_so_the_hud_shows_the_merged_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    add(url, result_at("run-0", ago(30)))
    merged = write_results(tmp_path / "a", [result_at("run-1", ago(2), matmul="failed")])
    out = invoke("report", "--merge", str(merged), "--out", str(tmp_path / "reports"),
                 "--history", url)
    assert out.returncode == 0, out.stderr
    assert "(merge, 1 cell(s) added)" in out.stderr
    page = (tmp_path / "reports" / "hud.html").read_text(encoding="utf-8")
    assert "2 runs in the history" in page and f'<a href="cells/{CELL}.html">✗</a>' in page


def test_no_hud_without_a_history_and_why(tmp_path: Path) -> None:
    current = write_results(tmp_path / "results", [result_at("run-1", ago(1))])
    reports = tmp_path / "reports"
    missing = tmp_path / "none.db"
    out = invoke("report", "--results", str(current), "--out", str(reports),
                 "--history", f"sqlite:///{missing}")
    assert out.returncode == 0, out.stderr
    assert f"no HUD: the history sqlite:///{missing} holds no run yet" in out.stderr
    assert not missing.exists() and not (reports / "hud.html").exists()
    assert "hud.html" not in out.stdout and (reports / "index.html").is_file()
    assert "hud.html" not in (reports / "index.html").read_text(encoding="utf-8")
    off = invoke("report", "--results", str(current), "--out", str(reports), "--no-history")
    assert off.returncode == 0 and "HUD" not in off.stderr
    gone = f"postgresql://oota:s3cret@127.0.0.1:{closed_port()}/history"
    down = invoke("report", "--results", str(current), "--out", str(reports), "--history", gone)
    assert down.returncode == 0, down.stderr
    assert "no HUD: history postgresql+psycopg://oota:***@127.0.0.1:" in down.stderr
    assert "cannot be opened" in down.stderr and "s3cret" not in down.stderr


@pytest.mark.parametrize(("args", "says"), [
    (("report", "--hud-runs", "0"), "--hud-runs '0' is not a number of runs"),
    (("history", "digest", "--since", "1y"), "--since '1y' is not a window; give hours, days "
                                             "or weeks"),
    (("history", "query", "--since", "24h"), "--since applies to `history digest`"),
    (("history", "digest", "--vendor", "cpu"), "--vendor applies to `history query`; "
                                               "`history digest` takes --since"),
], ids=["hud-runs", "since", "since-on-query", "vendor-on-digest"])
def test_hud_flags_are_checked(args: tuple[str, ...], says: str, tmp_path: Path) -> None:
    out = invoke(*args, "--history", f"sqlite:///{tmp_path / 'h.db'}")
    assert out.returncode == 2 and says in out.stderr, out.stderr


def test_the_hud_shows_the_last_n_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    for i in range(5):
        add(url, result_at(f"run-{i}", ago(100 - i)))
    current = write_results(tmp_path / "results", [result_at("run-4", ago(96))])
    out = invoke("report", "--results", str(current), "--out", str(tmp_path / "reports"),
                 "--history", url, "--hud-runs", "3")
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "reports" / "hud.html").read_text(encoding="utf-8")
    assert "5 runs in the history; the last 3 shown" in page
    assert page.count('class="m passed"') == 3
    assert MATMUL not in page


def test_a_bad_policy_file_is_bad_input_naming_its_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    add(url, result_at("run-0", ago(3)))
    (tmp_path / "history-policy.yaml").write_text(
        "version: 1\nmetrics:\n  latency_median_s: {direction: lower, treshold: 1.2}\n",
        encoding="utf-8")
    out = invoke("history", "digest", "--history", url, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "history-policy.yaml:3:" in out.stderr and "did you mean 'threshold'?" in out.stderr
    assert "Traceback" not in out.stderr


def test_report_and_history_take_matrix_and_find_its_history(tmp_path: Path) -> None:
    """`--matrix PATH` as every task that reads the project takes it: history.db beside it."""
    project = tmp_path / "lab"
    project.mkdir()
    add(f"sqlite:///{project / 'history.db'}", result_at("run-0", ago(2), matmul="failed"))
    digest = invoke("history", "digest", "--since", "1w", "--matrix",
                    str(project / "matrix.yaml"), cwd=tmp_path)
    assert digest.returncode == 0, digest.stderr
    assert "1 cell broke in the last week" in digest.stdout
    current = write_results(tmp_path / "results", [result_at("run-0", ago(2))])
    out = invoke("report", "--results", str(current), "--out", str(tmp_path / "reports"),
                 "--matrix", str(project / "matrix.yaml"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "reports" / "hud.html").is_file()


def test_the_hud_gives_each_vendors_flaky_share_per_layer(history_url: str) -> None:
    """Of a vendor's tests that ran in the shown runs, the flaky ones per layer (issue: the flaky
    share per vendor and per layer in the HUD), read from the store in one query: a device test
    flaky in one run of three is 1 of 3 in the device layer, the install layer's 0 of 3."""
    for i, hours in enumerate((72, 48, 24)):
        add(history_url, result_at(f"run-{i}", ago(hours),
                                   matmul="flaky" if hours == 48 else "passed"))
    page = hud.build(hud.HudInput(timeline=read_timeline(open_store(
        locate(history_url, {}, Path.cwd()))), policy=Policy(file=None), now=NOW), {})
    (section,) = page.sections
    assert section.flaky_by_layer == (LayerCount("install", 0, 3), LayerCount("device", 1, 3),
                                      LayerCount("models", 0, 3))
    shown = hud.build(hud.HudInput(timeline=read_timeline(open_store(
        locate(history_url, {}, Path.cwd()))), policy=Policy(file=None), now=NOW, runs=1), {})
    assert shown.sections[0].flaky_by_layer == (  # the shown run only
        LayerCount("install", 0, 1), LayerCount("device", 0, 1), LayerCount("models", 0, 1))
    html = hud.to_html(page)
    assert ('Flaky per layer, of its tests that ran in these runs: <span>install 0 of 3</span> · '
            '<span class="flaky">device 1 of 3 (33.3%)</span> · <span>models 0 of 3</span>'
            ) in html
