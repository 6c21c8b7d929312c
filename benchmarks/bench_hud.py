"""Benchmark: `invoke report`'s HUD over a year of history.

Builds a synthetic history of 365 daily runs x 50 cells (5 vendors; breakages blamed on a
torch bump, flaky failures, two workload metrics per cell) in a temporary SQLite file, and a
results folder with the last run's results, then times, each over several runs:

  hud     the HUD alone: reading the history (one query per table), judging every cell and
          metric, rendering hud.html and hud.md
  report  the whole report with its HUD, in process (what `invoke report` does after startup)
  invoke  `invoke report --history ...` as a user runs it (a new process each time)

and prints the median and spread of each, the HUD's peak Python memory (tracemalloc), the
peak resident memory of `invoke report`'s process, and the size of hud.html (the goal: under
5 s, and the page under 2 MB).

    .venv/bin/python benchmarks/bench_hud.py [--runs 5] [--days 365] [--cells 50] [--record]

``--record`` also writes the figures to benchmarks/results/ (benchmarks/record.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import record

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from oota.api.history import History  # noqa: E402 - the repository root is on the path now
from oota.api.reports import report_with_history  # noqa: E402
from oota.history.location import locate  # noqa: E402
from oota.history.policy import policy_at  # noqa: E402
from oota.history.records import CellRecord, Figure, Inputs, RunRecord  # noqa: E402
from oota.history.store import append, open_store, read_timeline  # noqa: E402
from oota.report import hud  # noqa: E402
from oota.results.model import CellRef, TestOutcome  # noqa: E402
from tests.unit.test_report import make_result, write_results  # noqa: E402

VENDORS = ("cpu", "cuda", "rocm", "xpu", "npu")
WORKLOAD = "test_workload.py::test_inference[tiny]"
# The last daily run is this morning's (`invoke report` judges ages against the clock).
TODAY = dt.datetime.now(dt.timezone.utc).replace(hour=6, minute=0, second=0, microsecond=0)


def cells(count: int) -> list[CellRef]:
    per = -(-count // len(VENDORS))
    return [CellRef(id=f"{v}-torch2.13.0-py3.{11 + i % 3}-os{i}", vendor=v, os=f"os{i}",
                    python=f"3.{11 + i % 3}", torch="2.13.0", toolkit=None,
                    toolkit_version=None, fingerprint=f"fp-{v}-{i}")
            for v in VENDORS for i in range(per)][:count]


def start(days: int) -> dt.datetime:
    return TODAY - dt.timedelta(days=days - 1)


def cell_run(ref: CellRef, when: str, rng: random.Random, broken: bool) -> CellRecord:
    flaky = not broken and rng.random() < 0.02
    status = "failed" if broken or flaky else "passed"
    torch = "2.13.1" if broken else "2.13.0"
    latency = 0.010 * (1.4 if broken else 1.0) * rng.uniform(0.95, 1.05)
    tests = (TestOutcome(id="test_device.py::test_matmul", layer="device", status=status,
                         duration_s=0.2, message="mismatch" if status == "failed" else ""),
             TestOutcome(id="test_install.py::test_imports", layer="install", status="passed",
                         duration_s=0.1),
             TestOutcome(id=WORKLOAD, layer="workload", status="passed", duration_s=1.0))
    return CellRecord(
        cell=ref, status=status, message="", host="lab-a", engine="lab-a", engine_id=None,
        hostname=None,
        started_at=when, finished_at=when, image_tag=None, image_id=None, image_digest=None,
        base_ref="oota/base", tests=tests,
        inputs=Inputs(torch=torch, base="oota/base", fingerprint=ref.fingerprint,
                      host="lab-a", suite="0.1.0"),
        figures=(Figure(test_id=WORKLOAD, name="latency_median_s", number=latency),
                 Figure(test_id=WORKLOAD, name="train_steps_per_s", number=1 / latency)))


def build_history(url: str, days: int, count: int) -> None:
    rng = random.Random(12)
    refs = cells(count)
    # A few cells break for a few days now and then (a torch bump), and two are broken now.
    broken = {(ref.id, d) for ref in refs[::7] for start in rng.sample(range(days), 3)
              for d in range(start, min(start + rng.randint(1, 5), days))}
    broken |= {(ref.id, d) for ref in refs[:2] for d in range(days - 4, days)}
    store = open_store(locate(url, {}, REPO))
    for day in range(days):
        when = (start(days) + dt.timedelta(days=day)).isoformat()
        run = tuple(cell_run(ref, when, rng, (ref.id, day) in broken) for ref in refs)
        append(store, RunRecord(key=f"daily-{day:03d}", origin="verify", started_at=when,
                                finished_at=when, oota_version="0.1.0", git_revision=None,
                                hosts=("lab-a",), cells=run))


def current_results(folder: Path, count: int, days: int) -> Path:
    results = []
    for ref in cells(count):
        data = make_result(ref.vendor)
        data["cell"] = {**data["cell"], "id": ref.id, "os": ref.os, "python": ref.python}
        data["run_id"] = f"daily-{days - 1:03d}"
        results.append(data)
    return write_results(folder, results, logs=False)


def median_of(runs: int, work: object) -> list[float]:
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        work()  # type: ignore[operator]
        took.append(time.perf_counter() - started)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--cells", type=int, default=50)
    parser.add_argument("--record", action="store_true", help="write benchmarks/results/")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        url = f"sqlite:///{root / 'history.db'}"
        started = time.perf_counter()
        build_history(url, args.days, args.cells)
        print(f"history: {args.days} runs x {args.cells} cells built in "
              f"{time.perf_counter() - started:.1f} s "
              f"({(root / 'history.db').stat().st_size / 2**20:.1f} MiB)")
        results = current_results(root / "results", args.cells, args.days)
        location = locate(url, {}, REPO)
        now = dt.datetime.now(dt.timezone.utc)

        def hud_only() -> None:
            store = open_store(location)
            source = hud.HudInput(timeline=read_timeline(store), policy=policy_at(REPO), now=now)
            page = hud.build(source, {})
            hud.to_html(page)
            hud.to_markdown(page.digest, page.regressions)

        def whole_report() -> None:
            target = History(location=None, origin="merge", root=REPO)
            report_with_history(str(results), str(root / "reports"), None, merge=None,
                                    formats=None, artifact_url=None, env={}, target=target,
                                    shown=location, hud_runs=hud.DEFAULT_RUNS)

        def invoke_report() -> None:
            proc = subprocess.run(
                [sys.executable, "-m", "invoke", "-r", str(REPO), "report", "--results",
                 str(results), "--out", str(root / "reports"), "--history", url],
                cwd=REPO, capture_output=True, text=True, check=False,
                env={**os.environ, "PYTHONPATH": str(REPO)})
            assert proc.returncode == 0 and "hud.html" in proc.stdout, proc.stderr

        hud_only()  # warm-up: imports, templates
        timings = {"hud": median_of(args.runs, hud_only),
                   "report": median_of(args.runs, whole_report),
                   "invoke": median_of(args.runs, invoke_report)}
        tracemalloc.start()
        hud_only()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
        size = (root / "reports" / "hud.html").stat().st_size
        digest = (root / "reports" / "hud.md").read_text(encoding="utf-8")
    print(f"{args.runs} runs each; the HUD shows the last {hud.DEFAULT_RUNS} runs")
    for name, took in timings.items():
        print(f"{name:<7} median {statistics.median(took):.2f} s "
              f"(min {min(took):.2f}, max {max(took):.2f})")
    print(f"HUD peak Python memory {peak / 2**20:.1f} MiB; `invoke report` peak RSS "
          f"{child_rss / 2**10:.0f} MiB; hud.html {size / 2**20:.2f} MiB "
          f"({'under' if size < 2 * 2**20 else 'OVER'} 2 MiB)")
    print("hud.md begins: " + " | ".join(digest.splitlines()[2:4]))
    if args.record:
        steps = {"hud": "the HUD alone: read, judge, render hud.html and hud.md",
                 "report": "the whole report with its HUD, in process",
                 "invoke": "`invoke report --history ...`, a new process each time"}
        record.write(
            "bench_hud.py", title="The HUD over a year of history",
            what=f"a synthetic history of {args.days} daily runs x {args.cells} cells (breakages, "
                 "flaky failures, two workload metrics per cell) in SQLite; each step timed "
                 f"{args.runs} times. The goal: under 5 s, and hud.html under 2 MiB.",
            columns=[("step", ""), ("median", "s"), ("min", "s"), ("max", "s")],
            rows=[[steps[name], round(statistics.median(took), 2), round(min(took), 2),
                   round(max(took), 2)] for name, took in timings.items()],
            notes=[f"The HUD's peak Python memory {peak / 2**20:.1f} MiB; `invoke report`'s "
                   f"peak resident memory {child_rss / 2**10:.0f} MiB; hud.html "
                   f"{size / 2**20:.2f} MiB."])


if __name__ == "__main__":
    main()
