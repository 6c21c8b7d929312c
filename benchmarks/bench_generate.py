"""Benchmark: how planning + rendering + fingerprinting scales with the matrix.

Runs, side by side in one process and alternating (A B A B ...), the repository's matrix and a
synthetic one with ``--scale`` times as many torch versions per vendor, and prints per-cell time
(median of the runs) and peak Python memory (tracemalloc) for each, plus their ratio. Per-cell
cost should stay flat as the matrix grows: `invoke generate --check` runs in CI on every change.

    .venv/bin/python benchmarks/bench_generate.py [--runs 5] [--scale 10] [--record]

``--record`` also writes the table to benchmarks/results/ (benchmarks/record.py).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import record
import yaml

from oota.config.matrix import load_matrix
from oota.plan import plan
from oota.render import context_files, fingerprint, render_all

REPO = Path(__file__).resolve().parents[1]


def scaled_copy(dest: Path, scale: int) -> Path:
    for name in ("vendors", "verify", "templates/dockerfile", "locks"):
        shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    data = yaml.safe_load((REPO / "matrix.yaml").read_text())
    for vendor in data["vendors"].values():
        torches = vendor.get("torch", [])
        # A pinned release ({release, pinned}) or a channel ({channel: nightly}) stays one entry.
        vendor["torch"] = [f"{t}.post{i}" if i else t for t in torches if isinstance(t, str)
                           for i in range(scale)] + [t for t in torches if not isinstance(t, str)]
        vendor.pop("default", None)
    (dest / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return dest / "matrix.yaml"


def one_run(matrix_file: Path) -> tuple[int, float, int]:
    tracemalloc.start()
    t0 = time.perf_counter()
    matrix = load_matrix(matrix_file)
    cells = plan(matrix)
    for item in render_all(matrix, cells):
        fingerprint(context_files(matrix, item))
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return len(cells), seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--record", action="store_true", help="write benchmarks/results/")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        variants = {"repo": REPO / "matrix.yaml",
                    f"x{args.scale}": scaled_copy(Path(tmp), args.scale)}
        one_run(variants["repo"])  # warm-up: imports, file cache
        samples: dict[str, list[tuple[int, float, int]]] = {k: [] for k in variants}
        for _ in range(args.runs):
            for name, path in variants.items():
                samples[name].append(one_run(path))
    rows = {}
    for name, runs in samples.items():
        cells = runs[0][0]
        per_cell = statistics.median(s / c for c, s, _ in runs) * 1000
        peak = statistics.median(p for _, _, p in runs) / 2**20
        rows[name] = (cells, per_cell, peak)
        print(f"{name:>5}: {cells:5d} cells  {per_cell:7.2f} ms/cell (median of {args.runs})  "
              f"peak {peak:6.1f} MiB")
    (a, b) = rows.values()
    print(f"ratio x{args.scale}/repo: {b[1] / a[1]:.2f} per-cell time, "
          f"{b[2] / a[2]:.2f} peak memory for {b[0] / a[0]:.1f}x the cells")
    if args.record:
        record.write(
            "bench_generate.py", title="Planning, rendering and fingerprinting the matrix",
            what="the repository's matrix and one with --scale times as many torch versions per "
                 "vendor, alternating in one process: time per cell (median of the runs) and "
                 "peak Python memory (tracemalloc). Per-cell cost should stay flat as the matrix "
                 "grows.",
            columns=[("matrix", ""), ("cells", ""), ("per cell", "ms"), ("peak", "MiB")],
            rows=[[name, cells, round(ms, 2), round(peak, 1)]
                  for name, (cells, ms, peak) in rows.items()],
            notes=[f"Ratio x{args.scale}/repo: {b[1] / a[1]:.2f} per-cell time, "
                   f"{b[2] / a[2]:.2f} peak memory for {b[0] / a[0]:.1f}x the cells; "
                   f"{args.runs} runs each."])


if __name__ == "__main__":
    main()
