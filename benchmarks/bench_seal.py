"""Benchmark: what putting the verification into the image costs, next to the verification.

Alternates, in one process (A B A B ...), on an image that is already built (by default the
CPU vendor's default cell: run `invoke build --vendor=cpu` first):

  A  verify the image (oota-verify in a container) and seal it (/opt/oota/expected.json layer)
  B  verify the image only

and prints the median wall time of each, their ratio, the seal step alone, and the size of the
file the sealed layer adds. Resealing replaces the layer: the image does not grow run to run.

    .venv/bin/python benchmarks/bench_seal.py [--runs 5] [--vendor cpu]
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.docker import DockerEngine
from oota.execute.build import BuildOptions
from oota.execute.fleet import Station, run_on_stations
from oota.execute.verify import EXPECTED_IN_IMAGE
from oota.plan import plan, select

REPO = Path(__file__).resolve().parents[1]


def timed_run(engine, matrix, cells, results: Path, *, seal: bool) -> float:
    # --layer with every layer runs the same tests but skips sealing (only whole runs seal).
    layers = () if seal else ("install", "compat", "device", "models", "vendor")
    options = BuildOptions(results_dir=results, layers=layers)
    started = time.perf_counter()
    station = Station("", engine, cache=matrix.root / ".oota-cache")
    out = run_on_stations(matrix, cells, [station], Console(io.StringIO(), live=False),
                          options, build=False).results
    took = time.perf_counter() - started
    assert out[0].status in ("passed", "unsupported-here"), out[0].message
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--vendor", default="cpu")
    args = parser.parse_args()
    matrix = load_matrix(REPO / "matrix.yaml")
    cells = select(matrix, plan(matrix, [args.vendor]))[:1]
    engine = DockerEngine()
    tag = BuildOptions(results_dir=Path(".")).tag_for(cells[0])
    with tempfile.TemporaryDirectory() as tmp:
        timed_run(engine, matrix, cells, Path(tmp) / "warm", seal=True)  # warm-up
        with_seal, without = [], []
        for i in range(args.runs):
            with_seal.append(timed_run(engine, matrix, cells, Path(tmp) / f"a{i}", seal=True))
            without.append(timed_run(engine, matrix, cells, Path(tmp) / f"b{i}", seal=False))
    # The seal step alone, resealing with the image's own results (so the image ends as it was).
    expected = engine.read_file(tag, EXPECTED_IN_IMAGE)
    labels = {k: v for k, v in (engine.image_labels(tag) or {}).items()
              if k in ("oota.verified", "oota.verified-at")}
    seal_only = []
    for _ in range(args.runs):
        started = time.perf_counter()
        engine.seal(tag, {EXPECTED_IN_IMAGE: expected}, labels)
        seal_only.append(time.perf_counter() - started)
    a, b = statistics.median(with_seal), statistics.median(without)
    print(f"{cells[0].id}, {args.runs} runs each, alternating")
    print(f"A verify + seal  median {a:.2f} s (min {min(with_seal):.2f}, max {max(with_seal):.2f})")
    print(f"B verify only    median {b:.2f} s (min {min(without):.2f}, max {max(without):.2f})")
    print(f"A/B {a / b:.3f};  seal alone median {statistics.median(seal_only):.2f} s;  "
          f"the sealed file {len(expected)} bytes")


if __name__ == "__main__":
    main()
