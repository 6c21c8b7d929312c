"""Benchmark: the fleet. One Engine against two, a no-op re-run against a naive loop, and what
one changed cell out of eight costs. Whole commands, as a user runs them, side by side.

Needs root and the first Docker Engine (``./oota.sh`` starts it, and the CPU cell's build makes
the bootstrapped base image). ``setup`` starts two more Engines on loopback TCP (their data in
.oota-cache/bench-fleet/), makes a project of 8 cells of the
small ``fleet`` vendor (tests/fleet_vendor.py) and builds every cell on both Engines once;
``teardown`` stops them and removes all of it (about 20 GB).

Two hosts on one machine: each Engine is a host of one core. Its dockerd runs in a cgroup
cpuset of its own CPU (``--cpus-e1 0 --cpus-e2 1``; tests/engines.CpuSet), and is started with
``--cgroup-parent`` there, so the daemon, its containerd, every build step and every verify
container of that Engine run on that CPU and nowhere else. ``one`` is e1 alone (one host of
one core), ``two`` is e1 and e2 (two hosts of one core each): the cells do not compete for a
core, as on two machines; what they still share is the disk, the memory bus and this
machine's other load, which the output prints (the load average before each run).

    python benchmarks/bench_fleet.py setup
    python benchmarks/bench_fleet.py all [--runs 3]     # A B A B ...; medians and ratios
    python benchmarks/bench_fleet.py pairs [--runs 3]   # one, two, one, two ...: that ratio only
    python benchmarks/bench_fleet.py teardown

The pairs ``all`` alternates (each figure the median of --runs, the ratio taken pair by pair):

  one / two    every cell built (fully cached) and verified again (--rebuild --reverify) on
               one Engine, then on two: the wall ratio two/one
  noop / naive nothing changed: `oota build --all` (each verification holds) against a loop of
               `docker build` (cached) + `docker run IMAGE oota-verify` per cell
  change-one   one cell's matrix entry changed (its sdk becomes a new 8.x): `oota build --all`
               rebuilds and verifies that cell only; the script checks and prints how many

Each step is also a subcommand (``one``, ``two``, ``noop``, ``naive``, ``change-one``), to time
with any outside timer, e.g. ``/usr/bin/time -v python benchmarks/bench_fleet.py noop``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from oota.config.matrix import load_matrix  # noqa: E402 - the repository root is on the path now
from oota.execute.context import stage_context  # noqa: E402
from oota.execute.sources import resolve_sources  # noqa: E402
from oota.plan import plan, select  # noqa: E402
from oota.render import context_files, render_cell  # noqa: E402
from tests import fleet_vendor  # noqa: E402
from tests.engines import DOCKER, ExtraEngine  # noqa: E402

HOME = REPO / ".oota-cache" / "bench-fleet"
STATE = HOME / "engines.json"
PROJECT = HOME / "project"
SDKS = ["1.0", "2.0", "3.0", "4.0", "5.0", "6.0", "7.0", "8.0"]
BASE = "oota/base:debian12"
OOTA = [sys.executable, "-m", "oota", "-r", str(REPO)]
# Every verification does the same work however many run at once: the ops layer's budget is
# wall-clock time, so with one the parallel runs would do less work per cell (fewer operators
# reached) and look faster. 0 s runs the must-pass operators only: a fixed set.
FIXED_WORK = {"OOTA_OPS_BUDGET_S": "0"}


def _urls() -> dict[str, str]:
    if not STATE.is_file():
        sys.exit("run `python benchmarks/bench_fleet.py setup` first")
    return {k: v for k, v in json.loads(STATE.read_text()).items() if isinstance(v, str)}


def _oota_build(hosts: str, results: str, *extra: str) -> list[dict]:
    argv = [*OOTA, "build", "--matrix", str(PROJECT / "matrix.yaml"), "--all",
            "--hosts", str(HOME / hosts), "--results", str(HOME / results), *extra]
    proc = subprocess.run(argv, cwd=HOME, capture_output=True, text=True,
                          env=os.environ | FIXED_WORK)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
    return [json.loads(p.read_text()) for p in (HOME / results).glob("*/result.json")]


def _cpus() -> dict[str, str]:
    """Each Engine's CPU set, as setup made it."""
    data = json.loads(STATE.read_text()) if STATE.is_file() else {}
    return dict(data.get("cpus") or {})


def setup(cpus: dict[str, str]) -> None:
    HOME.mkdir(parents=True, exist_ok=True)
    urls = {}
    for index in (1, 2):
        engine = ExtraEngine(HOME / f"e{index}", index, cpus=cpus[f"e{index}"]).start()
        engine.load_from_first(BASE)
        urls[f"e{index}"] = engine.url
        (HOME / f"e{index}.pid").write_text(str(engine.proc.pid if engine.proc else 0))
    STATE.write_text(json.dumps({**urls, "cpus": cpus}))
    fleet_vendor.make_project(PROJECT, SDKS)
    fleet_vendor.hosts_file(HOME, {"e1": urls["e1"]}).rename(HOME / "one.yaml")
    fleet_vendor.hosts_file(HOME, urls).rename(HOME / "two.yaml")
    fleet_vendor.hosts_file(HOME, {"e2": urls["e2"]}).rename(HOME / "other.yaml")
    for hosts in ("one.yaml", "other.yaml"):   # every cell built once on each Engine
        _oota_build(hosts, f"warm-{hosts}")
    _stage_naive_contexts()
    print(f"ready: {urls}")


def _stage_naive_contexts() -> None:
    """The build context of each cell, as oota stages it, for the naive loop to build from."""
    matrix = load_matrix(PROJECT / "matrix.yaml")
    sources = resolve_sources(vendor_index="", index_url=None, find_links=(),
                              use_host_config=True)
    for cell in select(matrix, plan(matrix, [fleet_vendor.NAME]), everything=True):
        folder = HOME / "naive" / cell.id
        folder.mkdir(parents=True, exist_ok=True)
        stage_context(folder, context_files(matrix, render_cell(matrix, cell)), sources, None)


def teardown() -> None:
    """Stop both Engines and remove everything setup made (their data is many GB)."""
    cpus = _cpus()
    for index in (1, 2):
        pid_file = HOME / f"e{index}.pid"
        if pid_file.is_file():
            pid = pid_file.read_text().strip()
            subprocess.run(["kill", pid], capture_output=True)
            for _ in range(60):   # gone before its cgroup and folders are removed
                if not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.5)
        ExtraEngine(HOME / f"e{index}", index, cpus=cpus.get(f"e{index}")).remove()
    shutil.rmtree(HOME, ignore_errors=True)


def one() -> None:
    _oota_build("one.yaml", "results-one", "--rebuild", "--reverify")


def two() -> None:
    _oota_build("two.yaml", "results-two", "--rebuild", "--reverify")


def noop() -> None:
    results = _oota_build("one.yaml", "results-noop")
    reverified = [r["cell"]["id"] for r in results
                  if "reused" not in r["stages"]["verify"].get("detail", {})]
    if reverified and (HOME / "results-noop" / ".warm").exists():
        sys.exit(f"a no-op re-run verified {reverified}")
    (HOME / "results-noop" / ".warm").touch()


def naive() -> None:
    """What a script without oota does for each cell: build (cached), then run the suite."""
    url = _urls()["e1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
    env["DOCKER_BUILDKIT"] = "1"
    cli = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else DOCKER
    for folder in sorted((HOME / "naive").iterdir()):
        tag = f"naive/fleet:{folder.name}"
        subprocess.run([cli, "-H", url, "build", "-q", "--target", "runtime",
                        "--build-arg", f"BASE_IMAGE={BASE}",
                        "--secret", f"id=pipconf,src={folder / 'pip.conf'}",
                        "-t", tag, str(folder / "context")],
                       check=True, capture_output=True, env=env)
        subprocess.run([cli, "-H", url, "run", "--rm",
                        *(f"--env={k}={v}" for k, v in FIXED_WORK.items()), tag, "oota-verify",
                        "-q"],
                       check=True, capture_output=True, env=env)


def change_one() -> int:
    """Change the last cell's matrix entry to a version no run has had (its sdk becomes 8.<the
    clock's seconds>) and re-run; returns how many cells were built or verified (exactly that
    one; the other seven must reuse theirs)."""
    matrix = PROJECT / "matrix.yaml"
    last = f"8.{int(time.time())}"
    fleet_vendor.set_sdks(matrix, [*SDKS[:-1], last])
    results = _oota_build("one.yaml", "results-noop")
    now_cells = {fleet_vendor.cell_id(s) for s in [*SDKS[:-1], last]}
    worked = [r["cell"]["id"] for r in results if r["cell"]["id"] in now_cells
              and "reused" not in r["stages"]["verify"].get("detail", {})]
    if worked != [fleet_vendor.cell_id(last)]:
        sys.exit(f"one changed cell, but these were built or verified: {worked}")
    return len(worked)


LOADS: list[float] = []   # this machine's 1-minute load average before each timed run


def _timed(step) -> float:
    LOADS.append(float(Path("/proc/loadavg").read_text().split()[0]))
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def _line(name: str, times: list[float]) -> str:
    return (f"{name:<11} median {statistics.median(times):7.2f} s  "
            f"(min {min(times):.2f}, max {max(times):.2f})")


def run_all(runs: int) -> None:
    noop()  # warm: every verification of results-noop holds from now on
    figures: dict[str, list[float]] = {k: [] for k in ("one", "two", "noop", "naive", "change")}
    for _ in range(runs):
        figures["one"].append(_timed(one))
        figures["two"].append(_timed(two))
        figures["noop"].append(_timed(noop))
        figures["naive"].append(_timed(naive))
        figures["change"].append(_timed(change_one))
    pairs = {"two/one": [b / a for a, b in zip(figures["one"], figures["two"], strict=True)],
             "noop/naive": [a / b for a, b in zip(figures["noop"], figures["naive"],
                                                   strict=True)]}
    cpus = _cpus()
    print(f"{len(SDKS)} cells of the fleet vendor, {runs} runs each, alternating; one = e1 on "
          f"CPU {cpus.get('e1', 'all')}, two = it and e2 on CPU {cpus.get('e2', 'all')}; load "
          f"average before the runs: median {statistics.median(LOADS):.2f} "
          f"(min {min(LOADS):.2f}, max {max(LOADS):.2f}) on {os.cpu_count()} CPUs")
    for name, times in figures.items():
        print(_line(name, times))
    for name, ratios in pairs.items():
        print(f"{name:<11} median {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
    print("change-one: 1 cell built and verified, 7 reused, in every run")


def run_pairs(runs: int) -> None:
    """Only the two-hosts figure: one, two, one, two ... (each pair's ratio, and medians)."""
    times: dict[str, list[float]] = {"one": [], "two": []}
    for _ in range(runs):
        times["one"].append(_timed(one))
        times["two"].append(_timed(two))
    ratios = [b / a for a, b in zip(times["one"], times["two"], strict=True)]
    cpus = _cpus()
    print(f"{len(SDKS)} cells, {runs} pairs; one = e1 on CPU {cpus.get('e1', 'all')}, two = it "
          f"and e2 on CPU {cpus.get('e2', 'all')}; load average before the runs: median "
          f"{statistics.median(LOADS):.2f} (min {min(LOADS):.2f}, max {max(LOADS):.2f}) on "
          f"{os.cpu_count()} CPUs")
    for name, found in times.items():
        print(_line(name, found) + "  runs: " + ", ".join(f"{t:.1f}" for t in found))
    print(f"two/one     median {statistics.median(ratios):.3f} (pairs: "
          + ", ".join(f"{r:.3f}" for r in ratios) + ")")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("setup", "teardown", "all", "pairs", "one", "two",
                                         "noop", "naive", "change-one"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cpus-e1", default="0", help="setup: e1's CPU set (default 0)")
    parser.add_argument("--cpus-e2", default="1", help="setup: e2's CPU set (default 1)")
    args = parser.parse_args()
    steps = {"teardown": teardown, "one": one, "two": two, "noop": noop,
             "naive": naive, "change-one": change_one}
    if args.step == "all":
        run_all(args.runs)
    elif args.step == "pairs":
        run_pairs(args.runs)
    elif args.step == "setup":
        setup({"e1": args.cpus_e1, "e2": args.cpus_e2})
    else:
        steps[args.step]()


if __name__ == "__main__":
    main()
