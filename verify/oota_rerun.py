"""Flaky told from broken: each failed test run once more, in a fresh process.

A test that failed (an operator × dtype pair, a module, a model, any test of the suite) is run
again by a new pytest process over the failed tests' ids, after the run. One that passes there
is ``flaky`` (oota_vocab.FLAKY: never a pass, never a failure of the cell), its entry keeping
both attempts (``data.attempts``); one that fails again stays failed, with the retry's message
in its attempts. A fresh process, not a second call in this one: a fault that a process keeps
(a device left in a bad state, a cache, a leaked allocation) must not decide the retry.

After a crash (a test whose process was killed by a signal, as the ops layer's workers report
it, or a retry process that ended without a result), a short probe in its own process asks
the device for a small computation. Where it fails, the tests that failed after the crash
failed with the device's state, not (or not only) the stack: they become ``error`` (the
environment's fault) and say so; where it passes, they stay as judged.

``OOTA_RERUN_LIMIT`` caps how many failed tests are retried (default 25; 0: none), so that a
broken stack with hundreds of failures does not run twice; those past the cap stay failed and
the run says how many were not retried. The retry process has ``OOTA_RERUN`` set: it records,
it never retries again.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oota_expected import UNEXPECTED
from oota_journal import ended
from oota_vocab import FLAKY

RERUN_VARIABLE = "OOTA_RERUN"
LIMIT_VARIABLE = "OOTA_RERUN_LIMIT"
DEFAULT_LIMIT = 25
RERUN_TIMEOUT_S = 1800
PROBE_TIMEOUT_S = 120
HERE = Path(__file__).resolve().parent
# How a crash shows in a message: a process killed by a signal, as the ops layer's workers
# and a retry process word it (oota_journal.ended).
CRASH = re.compile(r"killed by SIG[A-Z0-9]+")
# The probe: the suite's own way of opening the device, then a sum the CPU knows (36.0).
PROBE = """
import oota_suite, torch
with oota_suite.opened_device(oota_suite.read_cell()) as device:
    if isinstance(device, str):
        raise SystemExit(device)
    total = float((torch.arange(8, dtype=torch.float32, device=device) + 1).sum().cpu())
    if total != 36.0:
        raise SystemExit(f"arange(8) + 1 summed to {total} on {device}, not 36.0")
"""


@dataclass(frozen=True)
class Attempt:
    """One process's outcomes of the retried tests: by id, or why it gave none."""

    outcomes: dict[str, dict[str, Any]]
    problem: str = ""


def retry_wanted(environ: Any = os.environ) -> int:
    """How many failed tests this run retries (0 in a retry process itself)."""
    if environ.get(RERUN_VARIABLE):
        return 0
    text = str(environ.get(LIMIT_VARIABLE, "")).strip()
    return int(text) if text.isdigit() else DEFAULT_LIMIT


def rerun(tests: list[dict[str, Any]], rootdir: Path, environ: Any = os.environ
          ) -> dict[str, Any]:
    """Retry the failed ``tests`` (entries of tests.json, changed in place) in a fresh process;
    the run's summary of it (``retries`` in tests.json)."""
    limit = retry_wanted(environ)
    # A strict expected failure that passed (oota_expected) failed for passing: not retried.
    failed = [t for t in tests if t.get("status") == "failed"
              and not str(t.get("message") or "").startswith(UNEXPECTED)]
    if not failed or not limit:
        return {}
    chosen = failed[:limit]
    attempt = _attempts(chosen, rootdir, environ)
    for test in chosen:
        _judge(test, attempt)
    summary: dict[str, Any] = {
        "retried": len(chosen), "not_retried": len(failed) - len(chosen),
        "flaky": [t["id"] for t in chosen if t["status"] == FLAKY]}
    if attempt.problem:
        summary["problem"] = attempt.problem
    crash = first_crash(tests, attempt)
    if crash is not None:
        summary["health"] = _after_crash(tests, crash, environ)
    return summary


def _attempts(chosen: list[dict[str, Any]], rootdir: Path, environ: Any) -> Attempt:
    """The retries: a test whose failure was a crash in a process of its own (it may crash
    again, which must not cost the others their retry), the others together in one."""
    crashed = [t["id"] for t in chosen if CRASH.search(str(t.get("message") or ""))]
    groups = [[i] for i in crashed] + [[t["id"] for t in chosen if t["id"] not in crashed]]
    outcomes: dict[str, dict[str, Any]] = {}
    problems = []
    for ids in filter(None, groups):
        attempt = run_again(ids, rootdir, environ)
        outcomes.update(attempt.outcomes)
        problems += [attempt.problem] if attempt.problem else []
    return Attempt(outcomes, "; ".join(problems))


def run_again(ids: list[str], rootdir: Path, environ: Any = os.environ) -> Attempt:
    """The outcomes of ``ids`` in a new pytest process (the ops layer judging in it: no
    worker processes), or why it gave none."""
    with tempfile.TemporaryDirectory(prefix="oota-rerun-") as out:
        env = {**environ, RERUN_VARIABLE: "1", "OOTA_VERIFY_OUT": out, "OOTA_OPS_WORKERS": "0",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE),
                                                            environ.get("PYTHONPATH", "")]))}
        argv = [sys.executable, "-m", "pytest", *ids, "-p", "oota_suite", "-p",
                "no:cacheprovider", "--rootdir", str(rootdir), "-c", str(HERE / "pytest.ini"),
                "-q", "--no-header"]
        try:
            done = subprocess.run(argv, cwd=rootdir, env=env, capture_output=True, text=True,
                                  timeout=RERUN_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return Attempt({}, f"the retry process ran past {RERUN_TIMEOUT_S} s")
        found = Path(out) / "tests.json"
        if not found.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            return Attempt({}, f"the retry process ({ended(done.returncode)}) gave no "
                               f"result: {' | '.join(tail) or 'no output'}")
        tests = json.loads(found.read_text()).get("tests", [])
    return Attempt({t["id"]: t for t in tests})


def _judge(test: dict[str, Any], attempt: Attempt) -> None:
    """``test`` flaky where its retry passed; failed, with both attempts kept, elsewhere."""
    second = attempt.outcomes.get(test["id"])
    first = {k: test.get(k) for k in ("status", "message", "duration_s")}
    again = ({k: second.get(k) for k in ("status", "message", "duration_s")} if second
             else {"status": "not run", "message": attempt.problem or "the retry did not run it"})
    test.setdefault("data", {})["attempts"] = [first, again]
    if again["status"] == "passed":
        test.update(status=FLAKY, message="failed, then passed when run again in a fresh "
                                          f"process; the failure: {first['message']}"[:2000])


def first_crash(tests: list[dict[str, Any]], attempt: Attempt) -> int | None:
    """The index of the first test whose failure was a crash, else (the retry process itself
    crashed) the first retried test's; None when nothing crashed."""
    for i, test in enumerate(tests):
        attempts = (test.get("data") or {}).get("attempts") or [test]
        if CRASH.search(str(attempts[0].get("message") or "")):
            return i
    if CRASH.search(attempt.problem):
        return next((i for i, t in enumerate(tests) if (t.get("data") or {}).get("attempts")),
                    None)
    return None


def _after_crash(tests: list[dict[str, Any]], crash: int, environ: Any) -> dict[str, Any]:
    """Probe the device; where it fails, the failures after the crash are the device's."""
    healthy, detail = probe(environ)
    health = {"after": tests[crash]["id"], "healthy": healthy, "detail": detail}
    if healthy:
        return health
    why = (f"the device failed its health probe after the crash in {tests[crash]['id']} "
           f"({detail}): this failure is the device's state, not a verdict on the stack")
    later = [t for t in tests[crash + 1:] if t.get("status") == "failed"]
    for test in later:
        test.update(status="error", message=f"{why}; the failure: {test.get('message')}"[:2000])
    health["errors"] = [t["id"] for t in later]
    return health


def probe(environ: Any = os.environ) -> tuple[bool, str]:
    """Whether a fresh process computes a small sum on the device right, and what it said."""
    env = {**environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(HERE), environ.get("PYTHONPATH", "")]))}
    try:
        done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                              text=True, timeout=PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return False, f"no answer within {PROBE_TIMEOUT_S} s"
    if done.returncode == 0:
        return True, "arange(8) + 1 summed to 36.0 on the device"
    lines = (done.stderr or done.stdout).strip().splitlines()
    return False, f"exit {done.returncode}: {lines[-1] if lines else 'no output'}"
