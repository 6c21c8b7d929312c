"""Benchmark: the ops layer's wall time in a built image, two variants side by side.

Each run is ``oota-verify --layer ops`` in a fresh container of IMAGE (default: the reference
vendor's default cell, refdev, as ``./oota.sh build --vendor=reference`` tags it), the
suite's ``verify/`` mounted over the image's own. Variant A is this checkout's suite; variant B
is either a git revision's suite (``--against REV``: what a change to the judge costs, the
same number of workers in both) or this checkout's suite on one worker (``--workers N``: A on
N worker processes, B on one). Runs alternate A B A B, and the script prints each variant's
median, the median of the pairwise ratios A/B and whether the two gave the same results (every
test's id, status and message).

    .venv/bin/python benchmarks/bench_ops_layer.py --against HEAD~1 --budget 0 [--runs 3]
    .venv/bin/python benchmarks/bench_ops_layer.py --workers 2 --budget 100000 [--runs 2]

``--budget 0`` runs the must-pass operators only; ``--budget 100000`` the whole op_db.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_IMAGE = "oota/reference:reference-torch2.13.0-py3.11-debian12"


def docker_cli() -> str:
    """The BuildKit-capable CLI the setup installs, else whatever ``docker`` is on PATH."""
    return "/usr/bin/docker" if Path("/usr/bin/docker").exists() else "docker"


def suite(root: Path, into: Path) -> Path:
    """A checkout's verify/ as an image holds it: with oota's vocabulary beside it (the build
    context adds oota/vocab.py as oota_vocab.py)."""
    shutil.copytree(root / "verify", into, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(root / "oota" / "vocab.py", into / "oota_vocab.py")
    for path in [into, *into.rglob("*")]:  # readable by the image's user, scripts runnable
        path.chmod(path.stat().st_mode | (0o755 if path.is_dir() else 0o644))
    return into


def run_once(image: str, verify: Path, budget: str, workers: int, out: Path) -> float:
    """Seconds one ops layer takes (the container's whole life); its tests.json in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o777)
    argv = [docker_cli(), "run", "--rm", "-v", f"{verify}:/opt/oota/verify:ro",
            "-v", f"{out}:/results", "-e", f"OOTA_OPS_BUDGET_S={budget}",
            "-e", f"OOTA_OPS_WORKERS={workers}", "-e", "OOTA_RECORD_EVERY=0", image,
            "oota-verify", "--layer", "ops", "--out", "/results", "-q"]
    started = time.perf_counter()
    subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def outcomes(out: Path) -> list[tuple[str, str, str]]:
    data = json.loads((out / "tests.json").read_text())
    return [(t["id"], t["status"], t["message"]) for t in data["tests"]]


def _record(args: argparse.Namespace, b_name: str, b_workers: int, a_times: list[float],
            b_times: list[float], ratio: float, same: bool) -> None:
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    import record

    what = "against " + args.against if args.against else f"{args.workers} workers against 1"
    record.write(
        f"bench_ops_layer-{'judge' if args.against else 'workers'}.py",
        title=f"The ops layer in {args.image}, {what}",
        what=(f"oota-verify --layer ops with OOTA_OPS_BUDGET_S={args.budget} (0: the must-pass "
              "operators; 100000: the whole op_db), the suite's verify/ mounted over the "
              "image's, runs alternating; same tests and verdicts: " + ("yes" if same else "no")),
        columns=[("variant", ""), ("workers", ""), ("median", "s"), ("runs", "")],
        rows=[["A: this checkout", args.workers, round(statistics.median(a_times), 1),
               len(a_times)],
              [f"B: {b_name}", b_workers, round(statistics.median(b_times), 1), len(b_times)],
              ["A/B, median of pairwise ratios", None, round(ratio, 2), None]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--against", help="git revision B whose verify/ to compare with")
    parser.add_argument("--workers", type=int, default=1,
                        help="A's worker processes (B: one, unless --against is given)")
    parser.add_argument("--budget", default="0", help="OOTA_OPS_BUDGET_S for both")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--record", action="store_true",
                        help="also write the figures to benchmarks/results/ (the docs render it)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        mine = suite(REPO, work / "a-verify")
        if args.against:
            theirs = work / "b"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet",
                            str(theirs), args.against], check=True)
            b_verify, b_workers = suite(theirs, work / "b-verify"), args.workers
        else:
            theirs, b_verify, b_workers = None, mine, 1
        try:
            a_times, b_times = [], []
            for run in range(args.runs):
                a_times.append(run_once(args.image, mine, args.budget, args.workers,
                                        work / f"a{run}"))
                b_times.append(run_once(args.image, b_verify, args.budget, b_workers,
                                        work / f"b{run}"))
            same = outcomes(work / "a0") == outcomes(work / "b0")
            ratio = statistics.median(a / b for a, b in zip(a_times, b_times, strict=True))
            b_name = args.against or "this checkout, 1 worker"
            print(f"image {args.image}, OOTA_OPS_BUDGET_S={args.budget}, {args.runs} runs each")
            print(f"A (this checkout, {args.workers} worker(s)): median "
                  f"{statistics.median(a_times):.1f} s  {[round(t, 1) for t in a_times]}")
            print(f"B ({b_name}, {b_workers} worker(s)): median {statistics.median(b_times):.1f} s"
                  f"  {[round(t, 1) for t in b_times]}")
            print(f"A/B median ratio {ratio:.2f}; same tests and verdicts: {same}")
            if args.record:
                _record(args, b_name, b_workers, a_times, b_times, ratio, same)
        finally:
            if theirs is not None:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                                str(theirs)], check=False)


if __name__ == "__main__":
    main()
