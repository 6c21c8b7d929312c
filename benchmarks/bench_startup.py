"""Benchmark: how long a command line takes from start to exit, against another revision.

Every command (``oota --version``, ``oota matrix``, ``oota --list``) first loads the tasks and
the table of flags; the tests start such command lines hundreds of times. This runs each
command as a subprocess, alternating this checkout (A) and a git revision (B, a temporary
worktree, default ``HEAD~1``) run by run (A B A B ...), and prints the median wall time of
each and the median of the pairwise ratios A/B, with the interpreter's bare start-up
(``python -c pass``) as the floor.

    .venv/bin/python benchmarks/bench_startup.py [--against REV] [--runs 10] [--record]

``--record`` also writes the table to benchmarks/results/ (benchmarks/record.py), which the
docs' performance page renders.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import record

REPO = Path(__file__).resolve().parents[1]
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "oota --version": ["-m", "oota", "--version"],
    "oota matrix --vendor cpu": ["-m", "oota", "matrix", "--vendor", "cpu"],
    "oota --list": ["-m", "oota", "--list"],
}


def wall(root: Path, args: list[str]) -> float:
    """Seconds one command line takes with the project at ``root`` (its oota and tasks.py)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    argv = [sys.executable, *args]
    if args[:2] == ["-m", "oota"]:
        argv[3:3] = ["-r", str(root)]
    started = time.perf_counter()
    subprocess.run(argv, cwd=root, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="HEAD~1", help="git revision B (default HEAD~1)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--record", action="store_true", help="write benchmarks/results/")
    args = parser.parse_args()
    rows: list[list[record.Cell]] = []
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "b"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet",
                        str(other), args.against], check=True)
        try:
            print(f"A: this checkout; B: {args.against}; {args.runs} runs each, alternating")
            print(f"{'command':28} {'A median s':>11} {'B median s':>11} {'A/B median':>11}")
            for name, argv in COMMANDS.items():
                wall(REPO, argv), wall(other, argv)   # warm-up: the page cache, .pyc files
                pairs = [(wall(REPO, argv), wall(other, argv)) for _ in range(args.runs)]
                a = statistics.median(p[0] for p in pairs)
                b = statistics.median(p[1] for p in pairs)
                ratio = statistics.median(p[0] / p[1] for p in pairs)
                print(f"{name:28} {a:11.3f} {b:11.3f} {ratio:11.2f}")
                rows.append([name, round(a, 3), round(b, 3), round(ratio, 2)])
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(other)], check=False)
    if args.record:
        record.write("bench_startup.py", title="Start-up of a command line",
                     what="each command line run as a subprocess, this checkout (A) and a git "
                          "revision (B) alternating run by run; medians, and the median of the "
                          "pairwise ratios A/B. `python -c pass` is the interpreter's floor.",
                     columns=[("command", ""), ("A median", "s"), (f"B ({args.against}) median",
                                                                    "s"), ("A/B", "")],
                     rows=rows, notes=[f"{args.runs} runs each, alternating."])


if __name__ == "__main__":
    main()
