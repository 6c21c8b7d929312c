"""Benchmark: a test's command line in a fresh interpreter against one forked by tests/forkcli.py.

The unit and history tests start some three hundred ``python -m oota`` / ``python -m invoke``
command lines. This runs each command below both ways, alternating (fresh, forked, fresh, ...),
and prints each way's median CPU seconds (user + system of the command's process: a fresh
interpreter's from its rusage, a forked one's from the server's reaped children) and wall
seconds, and the median of the pairwise ratios forked/fresh. The server's own start (its
imports, once per pytest process) is printed apart.

    .venv/bin/python benchmarks/bench_forkcli.py [--runs 10] [--record]

``--record`` also writes the table to benchmarks/results/ (benchmarks/record.py), which the
docs' performance page renders.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import record

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import forkcli  # noqa: E402 - after the checkout is on the path

ENV = {**os.environ, "PYTHONPATH": str(REPO), "DOCKER_HOST": "unix:///nonexistent"}
HISTORY = "sqlite:////nonexistent/history.db"
COMMANDS = {
    "oota --version": ["oota", "--version"],
    "oota build --vendor nosuch (bad input)": ["oota", "build", "--vendor", "nosuch"],
    "oota matrix --vendor cpu": ["oota", "matrix", "--vendor", "cpu"],
    "oota report --results (none there)": ["oota", "report", "--results", "/nonexistent"],
    "invoke history query": ["invoke", "-r", str(REPO), "history", "query", "--test", "x",
                             "--history", HISTORY],
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _reaped_cpu(pid: int) -> float:
    """CPU seconds of the reaped children of process ``pid`` (the server's forks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def fresh(args: list[str]) -> tuple[float, float]:
    before, started = _children_cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", *args], cwd=REPO, env=ENV, capture_output=True,
                   text=True, timeout=120, check=False)
    return _children_cpu() - before, time.perf_counter() - started


def forked(args: list[str], server: int) -> tuple[float, float]:
    before, started = _reaped_cpu(server), time.perf_counter()
    forkcli.run([sys.executable, "-m", *args], cwd=REPO, env=ENV, capture_output=True,
                text=True, timeout=120, check=False)
    return _reaped_cpu(server) - before, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--record", action="store_true", help="write benchmarks/results/")
    args = parser.parse_args()
    started = time.perf_counter()
    forkcli.run([sys.executable, "-m", "oota", "--version"], cwd=REPO, env=ENV,
                capture_output=True, check=True)
    first = time.perf_counter() - started
    (server,) = forkcli._servers.values()
    rows: list[list[record.Cell]] = []
    print(f"{'command':40} {'fresh cpu':>9} {'forked cpu':>10} {'cpu ratio':>9} "
          f"{'fresh wall':>10} {'forked wall':>11}")
    for name, argv in COMMANDS.items():
        fresh(argv), forked(argv, server.proc.pid)   # warm-up: the page cache
        pairs = [(fresh(argv), forked(argv, server.proc.pid)) for _ in range(args.runs)]
        row = [statistics.median(p[0][0] for p in pairs),
               statistics.median(p[1][0] for p in pairs),
               statistics.median(p[1][0] / p[0][0] for p in pairs),
               statistics.median(p[0][1] for p in pairs),
               statistics.median(p[1][1] for p in pairs)]
        print(f"{name:40} {row[0]:9.3f} {row[1]:10.3f} {row[2]:9.2f} {row[3]:10.3f} "
              f"{row[4]:11.3f}")
        rows.append([name, *(round(x, 3) for x in row)])
    print(f"the server's start (its imports), once per pytest process: {first:.2f} s wall")
    if args.record:
        record.write("bench_forkcli.py", title="A test's command line, fresh or forked",
                     what="each command line as the unit tests start it: in a fresh interpreter "
                          "(subprocess.run) and forked by tests/forkcli.py from a server that "
                          "imported oota once, alternating run by run; medians of each way's "
                          "CPU seconds (the command's process) and wall seconds, and the median "
                          "of the pairwise CPU ratios forked/fresh.",
                     columns=[("command", ""), ("fresh CPU", "s"), ("forked CPU", "s"),
                              ("forked/fresh CPU", ""), ("fresh wall", "s"),
                              ("forked wall", "s")],
                     rows=rows,
                     notes=[f"{args.runs} runs each, alternating. The server's start, once "
                            f"per pytest process: {first:.2f} s of wall time."])


if __name__ == "__main__":
    main()
