"""Benchmark: what each layer of the in-image suite costs, in built images, side by side.

For each IMAGE (default: the CPU vendor's and the reference vendor's default cells, as
``./oota.sh build`` tags them) and each layer of the suite (``oota/vocab.py`` LAYERS, the
``skips`` check aside: it runs with every layer), a fresh container runs
``oota-verify --layer LAYER`` with this checkout's ``verify/`` mounted over the image's, on one
worker process and on two (``OOTA_OPS_WORKERS``; only the ops layer has workers, the others
run once). The layers' budgets are those of a default verification (each layer's own default)
unless ``--budget 0`` asks for the must-run sets only, as the Docker tests run them; given once
per image (``--budget default --budget 0``), each applies to the image in the same place. Each
figure is the median of ``--runs`` runs, runs interleaved layer by layer, with the container's
whole life counted (starting Python and importing torch included), and the whole suite
(every layer at once) beside them: a layer's share of a verification is its run less the
import a whole run shares.

    .venv/bin/python benchmarks/bench_layers.py [--runs 3] [--budget 0|default ...]
        [--image IMAGE ...] [--layer compile,all] [--checkout-cell] [--record]

``--checkout-cell`` mounts this checkout's cell.json of the image's cell
(``images/<vendor>/<cell>/cell.json``) over the image's, so that a layer the vendor's data
claims since the image was built runs as claimed.

``--cold-inductor`` runs each layer a second time, interleaved, with Inductor's cache empty
(``TORCHINDUCTOR_CACHE_DIR`` set to an empty folder: oota-verify then seeds no cache), so that
the vector-ISA probes the image's build compiled (verify/oota_isacache.py) are compiled in the
run again, as before the images carried them: the row says "cold Inductor cache".
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_ops_layer import docker_cli, suite  # noqa: E402 - beside this file

from oota.vocab import LAYERS  # noqa: E402

IMAGES = ("oota/cpu:cpu-torch2.13.0-py3.11-debian12",
          "oota/reference:reference-torch2.13.0-py3.11-debian12")
BUDGETS = ("OOTA_OPS_BUDGET_S", "OOTA_MODULES_BUDGET_S", "OOTA_OPTIMIZERS_BUDGET_S",
           "OOTA_AUTOGRAD_BUDGET_S", "OOTA_COMPILE_BUDGET_S")
ALL = "all"
# Layers joined by GROUP are measured as one verification of those layers: the suite as it was
# before a set of layers came is measured beside the whole one ("install+compat+device+ops+
# models+workload,all"), their ratio on one machine in one run.
GROUP = "+"
COLD = "cold Inductor cache"


def checkout_cell(image: str) -> Path:
    """This checkout's cell.json of ``image`` (``oota/cpu:cpu-torch...`` -> images/cpu/...)."""
    repository, _, cell = image.rpartition(":")
    return REPO / "images" / repository.rpartition("/")[2] / cell / "cell.json"


def run_once(image: str, verify: Path, layer: str, workers: int, budget: str | None,
             out: Path, cell: Path | None = None,
             cold: bool = False) -> tuple[float, dict[str, int]]:
    """Seconds one ``oota-verify --layer LAYER`` takes, and its tests' statuses counted;
    ``cold``: with Inductor's cache empty, the image's probes unused."""
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o777)
    env = ["-e", f"OOTA_OPS_WORKERS={workers}", "-e", "OOTA_RECORD_EVERY=0"]
    if cold:
        env += ["-e", "TORCHINDUCTOR_CACHE_DIR=/tmp/oota-bench-cold-inductor"]
    if budget is not None:
        env += [x for name in BUDGETS for x in ("-e", f"{name}={budget}")]
    chosen = [] if layer == ALL else ["--layer", layer.replace(GROUP, ",")]
    if cell is not None:
        env += ["-v", f"{cell}:/opt/oota/cell.json:ro"]
    argv = [docker_cli(), "run", "--rm", "--init", "-v", f"{verify}:/opt/oota/verify:ro",
            "-v", f"{out}:/results", *env, image, "oota-verify", *chosen, "--out",
            "/results", "-q"]
    started = time.perf_counter()
    subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    counts: dict[str, int] = {}
    try:
        tests = json.loads((out / "tests.json").read_text())["tests"]
    except (OSError, ValueError, KeyError):
        return seconds, {"no results": 1}
    for test in tests:
        if layer == ALL or test["layer"] in layer.split(GROUP):
            counts[test["status"]] = counts.get(test["status"], 0) + 1
    return seconds, counts


def measure(image: str, verify: Path, layers: list[str], runs: int, budget: str | None,
            tmp: Path, cell: Path | None = None, cold: bool = False) -> list[list[object]]:
    """One row per layer × workers (× Inductor's cache seeded and cold, with ``cold``): image,
    layer, workers, median seconds, runs, tests."""
    times: dict[tuple[str, int], list[float]] = {}
    counts: dict[tuple[str, int], dict[str, int]] = {}
    plan = [(layer, workers, variant, f"{layer} ({variant})" if variant else layer)
            for layer in layers
            for workers in ((1, 2) if ALL == layer or "ops" in layer.split(GROUP) else (1,))
            for variant in ("", COLD)[:2 if cold else 1]]
    for i in range(runs):
        for layer, workers, variant, label in plan:
            seconds, found = run_once(image, verify, layer, workers, budget,
                                      tmp / f"{layer}-{workers}-{bool(variant)}-{i}", cell,
                                      cold=bool(variant))
            times.setdefault((label, workers), []).append(seconds)
            counts[(label, workers)] = found
            print(f"{image} {label} x{workers}: {seconds:.1f} s {found}", file=sys.stderr)
    return [[image.split(":")[-1], label, workers, round(statistics.median(times[label, workers]),
                                                        1), runs,
             ", ".join(f"{n} {s}" for s, n in sorted(counts[label, workers].items()))]
            for _, workers, _, label in plan]


def budgets(images: list[str], given: list[str]) -> list[tuple[str, str | None]]:
    """Each image with its budget (None: each layer's default): one ``--budget`` for all, or
    one per image in order."""
    if len(given) not in (0, 1, len(images)):
        raise SystemExit(f"--budget: give one, or one per image ({len(images)}), not "
                         f"{len(given)}")
    chosen = given * len(images) if len(given) == 1 else given or ["default"] * len(images)
    return [(image, None if budget == "default" else budget)
            for image, budget in zip(images, chosen, strict=True)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", action="append", help="an image to measure (repeatable)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", action="append", default=[],
                        help="every layer's budget in seconds (0: the must-run sets only; "
                        "'default': each layer's own), once for all images or once per image")
    parser.add_argument("--layer", default="",
                        help="comma list of layers to measure, 'all' a whole verification, "
                             "LAYER+LAYER one verification of those layers together "
                             "(default: every layer and 'all')")
    parser.add_argument("--checkout-cell", action="store_true",
                        help="run with this checkout's cell.json of each image's cell")
    parser.add_argument("--cold-inductor", action="store_true",
                        help="each layer also with Inductor's cache empty (the image's "
                             "vector-ISA probes compiled in the run again)")
    parser.add_argument("--record", action="store_true",
                        help="write the table into benchmarks/results/ for the docs")
    args = parser.parse_args()
    layers = ([x.strip() for x in args.layer.split(",") if x.strip()] if args.layer
              else [*(layer for layer in LAYERS if layer != "skips"), ALL])
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="oota-bench-layers-") as tmp:
        verify = suite(REPO, Path(tmp) / "verify")
        for image, budget in budgets(args.image or list(IMAGES), args.budget):
            cell = checkout_cell(image) if args.checkout_cell else None
            rows += measure(image, verify, layers, args.runs, budget, Path(tmp) / "out", cell,
                            args.cold_inductor)
    for row in rows:
        print("  ".join(str(c) for c in row))
    if args.record:
        import record

        record.write("bench_layers.py", title="What each layer of the suite costs",
                     what=("oota-verify --layer LAYER in a fresh container of each image "
                           "(the container's whole life: Python, torch and the layer), "
                           "median of the runs; 'all' is a whole verification; budgets: "
                           + "; ".join(f"{image.split(':')[-1]}: " + (
                               f"{budget} s each" if budget is not None else
                               "each layer's default") for image, budget in budgets(
                                   args.image or list(IMAGES), args.budget))),
                     columns=[("image", ""), ("layer", ""), ("workers", ""), ("median", "s"),
                              ("runs", ""), ("tests", "")],
                     rows=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
