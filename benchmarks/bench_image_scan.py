"""Benchmark: searching every layer of an image for a secret, the two ways the Docker tests can.

Alternates, in one process (A B A B ...), on an image that is already built (by default the
CPU vendor's default cell: run `./oota.sh build --vendor=cpu` first):

  A  ``docker save`` streamed through tarfile, each member searched (the Engine tars the image)
  B  the image's overlay2 layer folders read file by file, plus its config and history
     (tests/image_scan.py; B falls back to A on an Engine that stores layers otherwise)

and prints, for each, the median wall time and the median CPU time of the whole machine
(cgroup cpuacct: the Engine's work included, which the searching process alone does not see),
with the ratios A/B of the medians.

    .venv/bin/python benchmarks/bench_image_scan.py [--runs 5] [--image TAG] [--record]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import record

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests import image_scan  # noqa: E402 - the helper the tests use, from the checkout

IMAGE = "oota/cpu:cpu-torch2.13.0-py3.11-debian12"
NEEDLE = b"oota-bench-needle-nowhere"
MACHINE_CPU = Path("/sys/fs/cgroup/cpuacct/cpuacct.usage")   # cgroup v1; v2 below
MACHINE_CPU_V2 = Path("/sys/fs/cgroup/cpu.stat")


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has used (every process, the Engine's included)."""
    if MACHINE_CPU.is_file():
        return int(MACHINE_CPU.read_text()) / 1e9
    for line in MACHINE_CPU_V2.read_text().splitlines():
        if line.startswith("usage_usec "):
            return int(line.split()[1]) / 1e6
    raise SystemExit("no cgroup CPU accounting here (cpuacct.usage or cpu.stat)")


def timed(scan: Callable[[], list[str]]) -> tuple[float, float]:
    cpu, wall = machine_cpu_s(), time.perf_counter()
    assert scan() == [], "the needle was found: pick another"
    return time.perf_counter() - wall, machine_cpu_s() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--image", default=IMAGE)
    parser.add_argument("--record", action="store_true", help="write benchmarks/results/")
    args = parser.parse_args()
    ways = {"docker save, streamed": lambda: image_scan.saved_members_holding(
                args.image, (NEEDLE,)),
            "overlay2 layer folders": lambda: image_scan.holding(args.image, [NEEDLE])}
    if image_scan.layer_folders(args.image) is None:
        raise SystemExit(f"{args.image}: the Engine keeps no overlay2 folders this process "
                         "reads; both ways would be docker save")
    for scan in ways.values():
        timed(scan)   # warm-up: the page cache holds the image's files for both
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for _ in range(args.runs):
        for name, scan in ways.items():
            figures[name].append(timed(scan))
    medians = {name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
               for name, runs in figures.items()}
    (a_wall, a_cpu), (b_wall, b_cpu) = medians.values()
    rows: list[list[record.Cell]] = [[name, round(w, 2), round(c, 2)]
                                     for name, (w, c) in medians.items()]
    rows.append(["A/B", round(a_wall / b_wall, 2), round(a_cpu / b_cpu, 2)])
    for row in rows:
        print(f"{row[0]:<26} {row[1]:>8} {row[2]:>8}")
    if args.record:
        record.write("bench_image_scan.py", title="Searching an image's layers for a secret",
                     what=f"{args.image}, every layer and the config searched for bytes found "
                          f"nowhere; medians of {args.runs} runs each, alternated",
                     columns=[("way", ""), ("wall", "s"), ("machine CPU", "s")], rows=rows)


if __name__ == "__main__":
    main()
