"""Probe: hostile and mistaken inputs, run from outside, tallied (docs/design/security.md).

Each case runs the real command (``python -m oota TASK ...``, what ``./oota.sh`` and the ``oota``
script run) as a subprocess in its own copy of the checkout's inputs, after damaging one of them
or with a bad flag, an environment that is wrong, or a server on loopback that misbehaves (one
that never answers, drips, answers without end, redirects to ``file:``, or wants a password).
A password, the canary, is put wherever a credential can go. Every command runs with a memory
cap (4 GiB) and a time cap (180 s), and, but for the cases marked ``docker``, with DOCKER_HOST
pointing at nothing: a command that reached Docker before checking its input ends in exit 3.

For every case it tallies: the exit code against the documented one
(docs/reference/exit-codes.md), a traceback, an "internal error", a run that hit a cap (ran
away), the canary in anything the command printed or wrote (the checkout's every file after
it), and, for the cases that start from a lab's results and report, a result file lost or a
report that shows fewer results.

    .venv/bin/python benchmarks/probe_hostile.py [--jobs 2] [--only SUBSTRING] [--json FILE]
        [--record]     # the totals into benchmarks/results/, for the docs

The ``docker`` cases (a registry that stalls, a credential helper that hangs) need a Docker
Engine only to start ``invoke pull``, which talks to the registry before anything reaches the
Engine; without one they are counted as not run. Exit status: 0 when every case ended clean.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import record  # noqa: E402 - beside this file
from hostile_cases import CANARY, CASES, CELLS, Case, result  # noqa: E402 - beside this file

from oota.results.store import save  # noqa: E402
from tests.misbehaving import HTML_FLOOD, misbehaving  # noqa: E402
from tests.unit.test_releases_hostile import good_index, serve  # noqa: E402

INPUTS = ("matrix.yaml", "tasks.py", "vendors", "verify", "schema", "templates", "locks")
MEMORY_CAP = 4 << 30
TIME_CAP_S = 180


# -- servers on loopback -----------------------------------------------------------------------
def raw_server(kind: str) -> contextlib.AbstractContextManager[str]:
    """``host:port`` of a misbehaving server (tests/misbehaving.py) that floods with an index
    page and stays silent for the probe's time cap."""
    return misbehaving(kind, flood=HTML_FLOOD, silent_s=TIME_CAP_S)


@contextlib.contextmanager
def servers() -> Iterator[dict[str, str]]:
    with contextlib.ExitStack() as stack:
        found = {kind: stack.enter_context(raw_server(kind))
                 for kind in ("silent", "drip", "flood", "redirect", "challenge")}
        found["password"] = stack.enter_context(serve(good_index, password="other")).base \
            .removeprefix("http://")
        found["password_ok"] = stack.enter_context(serve(good_index, password=CANARY)).base \
            .removeprefix("http://")
        yield found


# -- running a case ------------------------------------------------------------------------------
@dataclass
class Outcome:
    case: str
    code: int | None
    expected: int
    clean: bool
    traceback: bool = False
    internal: bool = False
    ran_away: bool = False
    secret: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    why: str = ""
    seconds: float = 0.0


def checkout(root: Path) -> None:
    for name in INPUTS:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, root / name)


def lab(root: Path) -> None:
    """A lab's results of two cells and the report written from them."""
    for python, cell in zip(("3.11", "3.13"), CELLS, strict=True):
        save(root / "results" / cell, result(python))
    proc = run(root, ("report", "--no-history"), {})
    if proc.returncode != 0:
        raise RuntimeError(f"the lab's report failed: {proc.stderr}")


def snapshot(root: Path) -> dict[str, int]:
    """Each result file and how many results reports/ shows, for the lost-data check."""
    found = {str(p.relative_to(root)): p.stat().st_size
             for p in (root / "results").rglob("result.json") if p.is_file()}
    report = root / "reports/results.json"
    if report.is_file():
        cells = json.loads(report.read_text())["cells"]
        found["reports: results shown"] = sum(len(c.get("copies") or [c]) for c in cells)
    return found


def memory_cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run(root: Path, args: tuple[str, ...], env: dict[str, str], *,
        denied: bool = False) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(REPO), "DOCKER_HOST": "unix:///nonexistent",
            "PYTHONDONTWRITEBYTECODE": "1", **env}
    full.pop("OOTA_DEBUG", None)
    argv = [sys.executable, "-m", "oota", *args]
    if denied and os.geteuid() == 0:  # root reads any file whatever its mode
        argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *argv]
    return subprocess.run(argv, cwd=root, env=full, capture_output=True, text=True,
                          timeout=TIME_CAP_S, preexec_fn=memory_cap)


def leaks(root: Path, proc: subprocess.CompletedProcess[str]) -> list[str]:
    """Where the canary is: the output, or any file of the checkout (a case's own input files
    that hold it on purpose excepted)."""
    inputs = {"vendors/cpu/vendor.yaml", "matrix.yaml", "h.yaml", "auth.json",
              "bin/docker-credential-probe-talks"}
    found = ["stdout/stderr"] if CANARY in proc.stdout + proc.stderr else []
    for path in root.rglob("*"):
        rel = str(path.relative_to(root))
        if path.is_file() and not path.is_symlink() and rel not in inputs \
                and path.stat().st_size < (256 << 20) and CANARY.encode() in path.read_bytes():
            found.append(rel)
    return found


def probe(case: Case, work: Path, urls: dict[str, str], engine: bool) -> Outcome | None:
    if case.docker and not engine:
        return None
    root = work / case.id / "checkout"
    root.mkdir(parents=True)
    checkout(root)
    if case.lab:
        lab(root)
    if case.damage:
        case.damage(root)
    before = snapshot(root) if case.lab else {}
    env = {k: v.format(root=root, **urls) for k, v in case.env}
    if case.docker:  # the Engine the probe itself found
        env.setdefault("DOCKER_HOST", os.environ.get("DOCKER_HOST",
                                                     "unix:///var/run/docker.sock"))
    args = tuple(a.format(**urls) if "{" in a else a for a in case.args)
    started = time.monotonic()
    try:
        proc = run(root, args, env, denied=case.denied)
    except subprocess.TimeoutExpired:
        return Outcome(case.id, None, case.code, False, ran_away=True,
                       why=f"ran past {TIME_CAP_S} s", seconds=TIME_CAP_S)
    took = time.monotonic() - started
    out = proc.stdout + proc.stderr
    outcome = Outcome(case.id, proc.returncode, case.code, False, seconds=round(took, 1),
                      traceback="Traceback" in out, internal="internal error" in out,
                      ran_away=proc.returncode < 0 or "MemoryError" in out)
    outcome.secret = leaks(root, proc)
    if case.lab:
        after = snapshot(root)
        outcome.lost = [k for k, v in before.items() if k not in after or (
            k.startswith("reports") and after[k] < v)]
    reasons = []
    if proc.returncode != case.code:
        reasons.append(f"exit {proc.returncode}, expected {case.code}")
    if case.says and case.says not in out:
        reasons.append(f"does not say {case.says!r}")
    extra = case.check(root, proc) if case.check and proc.returncode == case.code else ""
    reasons += [extra] if extra else []
    outcome.why = "; ".join(reasons) + (f" [{(proc.stderr.strip().splitlines() or [''])[-1][:160]}]"
                                        if reasons else "")
    outcome.clean = not (reasons or outcome.traceback or outcome.internal or outcome.ran_away
                         or outcome.secret or outcome.lost)
    return outcome


def engine_answers() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="", help="run the cases whose id holds this")
    parser.add_argument("--json", default="", help="also write every outcome to this file")
    parser.add_argument("--record", action="store_true",
                        help="write the totals to benchmarks/results/ (benchmarks/record.py)")
    args = parser.parse_args()
    cases = [c for c in CASES if args.only in c.id]
    engine = engine_answers()
    with tempfile.TemporaryDirectory(prefix="oota-probe-") as tmp, servers() as urls, \
            ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda c: probe(c, Path(tmp), urls, engine), cases))
        subprocess.run(["chmod", "-R", "u+rwX", tmp], check=False)
    ran = [r for r in results if r is not None]
    for outcome in ran:
        mark = "clean" if outcome.clean else "NOT CLEAN"
        print(f"{mark:>9}  exit {outcome.code!s:>4}  {outcome.seconds:6.1f} s  {outcome.case}"
              + (f"  -- {outcome.why}" if outcome.why else "")
              + (f"  secret in {outcome.secret}" if outcome.secret else "")
              + (f"  lost {outcome.lost}" if outcome.lost else ""))
    totals = {"inputs tried": len(ran), "not run (no Docker Engine)": len(results) - len(ran),
              "clean exits": sum(o.clean for o in ran),
              "tracebacks": sum(o.traceback for o in ran),
              "internal errors": sum(o.internal for o in ran),
              "ran away (time or memory cap)": sum(o.ran_away for o in ran),
              "secrets found": sum(bool(o.secret) for o in ran),
              "data lost": sum(bool(o.lost) for o in ran)}
    print()
    for name, value in totals.items():
        print(f"{name:>30}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps({"totals": totals, "cases": [
            o.__dict__ for o in ran]}, indent=2))
    if args.record:
        record.write(
            "probe_hostile.py", title="Hostile and mistaken input",
            what="hostile and mistaken inputs run from outside, each as a subprocess (`python -m "
                 f"oota TASK ...`) with a {MEMORY_CAP >> 30} GiB memory cap and a {TIME_CAP_S} s "
                 "time cap, in its own copy of the checkout; each exit code checked against the "
                 "documented one, and the output and files searched for tracebacks, \"internal "
                 "error\", the canary password, and any result lost or report shrunk.",
            columns=[("", ""), ("count", "")], rows=[[k, v] for k, v in totals.items()],
            notes=[f"{args.jobs} cases at once" + (f"; only the cases whose id holds "
                                                     f"{args.only!r}" if args.only else "") + "."])
    sys.exit(0 if totals["clean exits"] == len(ran) else 1)


if __name__ == "__main__":
    main()
