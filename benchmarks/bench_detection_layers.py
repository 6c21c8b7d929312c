"""What the layers beyond single kernels catch: the detection benchmark's classes of the
runtime, autograd, modules and optimizers layers, each one of refdev's fault switches.

``bench_detection.py`` judges single kernels computed on the CPU; the bugs here live where no
single kernel shows them (a gradient, an optimizer's step, a stream, the allocator), so each
class is a fault the reference backend has a switch for (vendors/reference/ext/README.md),
run through the suite in the reference image: one fresh container per fault runs
``oota-verify --layer runtime,autograd,modules,optimizers`` with the switch set and this
checkout's verify/ mounted over the image's, at budgets of 0 s (the must-run entries, as the
Docker tests run them). A clean refdev run and a clean CPU run beside them count the false
alarms. Each row: the layers that failed tests (failed or error) and how many, the tests the
run held, the first failure and its message, and the run's seconds (the container's life).

    .venv/bin/python benchmarks/bench_detection_layers.py --reference IMAGE --cpu IMAGE
        [--record]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_ops_layer import docker_cli, suite  # noqa: E402 - beside this file

LAYERS = ("runtime", "autograd", "modules", "optimizers")
BUDGETS = ("OOTA_OPS_BUDGET_S", "OOTA_AUTOGRAD_BUDGET_S", "OOTA_MODULES_BUDGET_S",
           "OOTA_OPTIMIZERS_BUDGET_S")
# (bug class, refdev's switch, its value); the value the Docker tests use where they use one.
FAULTS = (
    ("wrong gradient", "REFDEV_WRONG_OP", "tanh_backward"),
    ("optimizer step skips a parameter group", "REFDEV_SKIP_PARAM_GROUP", "1"),
    ("foreach path drops the last tensor", "REFDEV_FOREACH_DROP_LAST", "_foreach_addcdiv_"),
    ("stream wait orders nothing", "REFDEV_STREAM_NOWAIT", "1"),
    ("allocator leaks", "REFDEV_LEAK_ALLOC", "1"),
)
BAD = ("failed", "error")
MESSAGE_CHARS = 240


def verify(image: str, suite_dir: Path, environment: dict[str, str],
           out: Path) -> tuple[float, list[dict[str, object]]]:
    """Seconds one ``oota-verify --layer LAYERS`` takes in a fresh container of ``image``, and
    its tests (none where it wrote no tests.json)."""
    out.mkdir(parents=True)
    out.chmod(0o777)  # the image's user writes the results
    env = [x for name, value in {**{b: "0" for b in BUDGETS}, **environment}.items()
           for x in ("-e", f"{name}={value}")]
    argv = [docker_cli(), "run", "--rm", "--init", "-v", f"{suite_dir}:/opt/oota/verify:ro",
            "-v", f"{out}:/results", *env, image, "oota-verify", "--layer", ",".join(LAYERS),
            "--out", "/results", "-q"]
    started = time.perf_counter()
    subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    try:
        tests: list[dict[str, object]] = json.loads((out / "tests.json").read_text())["tests"]
    except (OSError, ValueError, KeyError):
        tests = []
    return seconds, tests


def row(what: str, switch: str, image: str, seconds: float,
        tests: list[dict[str, object]]) -> list[object]:
    """bug class, switch, image, caught by (layer: failures), failures, tests, the first
    failure, its message's first line, seconds."""
    ours = [t for t in tests if t.get("layer") in LAYERS]
    bad = [t for t in ours if t.get("status") in BAD]
    by_layer = {layer: sum(t.get("layer") == layer for t in bad) for layer in LAYERS}
    caught = ", ".join(f"{layer} ({n})" for layer, n in by_layer.items() if n)
    first = bad[0] if bad else {}
    message = str(first.get("message") or "").strip().removeprefix("Failed: ")
    return [what, switch, image.rpartition("/")[2].partition(":")[0],
            caught or ("no results" if not tests else "none"), len(bad), len(ours),
            str(first.get("id") or "–"), message.splitlines()[0][:MESSAGE_CHARS] if message
            else "–", round(seconds, 1)]


def measure(reference: str, cpu: str, tmp: Path) -> list[list[object]]:
    suite_dir = suite(REPO, tmp / "verify")
    runs = [("none (clean)", "", cpu, {}), ("none (clean)", "", reference, {}),
            *((what, f"{name}={value}", reference, {name: value})
              for what, name, value in FAULTS)]
    rows = []
    for i, (what, switch, image, environment) in enumerate(runs):
        seconds, tests = verify(image, suite_dir, environment, tmp / f"out-{i}")
        rows.append(row(what, switch, image, seconds, tests))
        print("  ".join(str(c) for c in rows[-1]), file=sys.stderr)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", default="oota/reference:reference-torch2.13.0-py3.11-"
                        "debian12", help="the reference vendor's image (refdev)")
    parser.add_argument("--cpu", default="oota/cpu:cpu-torch2.13.0-py3.11-debian12",
                        help="the CPU vendor's image (its clean run)")
    parser.add_argument("--record", action="store_true",
                        help="write the table into benchmarks/results/ for the docs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oota-bench-detection-layers-") as tmp:
        rows = measure(args.reference, args.cpu, Path(tmp))
    for found in rows:
        print("  ".join(str(c) for c in found))
    if args.record:
        import record

        record.write(
            "bench_detection_layers.py",
            title="What the layers beyond single kernels catch: refdev's faults",
            what=("oota-verify --layer " + ",".join(LAYERS) + " in a fresh container of the "
                  "reference image per fault (refdev's switch set), and clean runs of the CPU "
                  "and reference images for false alarms; budgets of 0 s (the must-run "
                  "entries); 'failures': tests of those layers failed or in error"),
            columns=[("bug class", ""), ("switch", ""), ("image", ""), ("caught by", ""),
                     ("failures", ""), ("tests", ""), ("first failure", ""), ("message", ""),
                     ("run", "s")],
            rows=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
