"""The suite's recorder: each test's outcome in ``$OOTA_VERIFY_OUT/tests.json``.

A test's entry (id, layer, status, duration, message, the data a test records) is written to
the journal when the test ends (oota_journal: a crash of the process keeps what ended before
it), then, at the session's end, after the failed tests' retries (oota_rerun) and the folding
of the entries a layer's budget left unrun (oota_budget), to tests.json with the counts, the
skip list's state and the retries, replaced atomically.
"""

from __future__ import annotations

import faulthandler
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import oota_budget
import oota_expected
import oota_rerun
import pytest
from oota_journal import CRASH_FILE, RESUME_VARIABLE, Journal
from oota_rerun import RERUN_VARIABLE
from oota_suite import SKIPS_KEY, STATUS_KEY, layer_of
from oota_vocab import BAD, LAYERS


class Recorder:
    """Each test's entry, kept in the journal as it ends and written to tests.json at the
    session's end; on a resume (``OOTA_VERIFY_RESUME``), the journal's entries first."""

    def __init__(self, out: Path, config: pytest.Config):
        self.out = out
        self.config = config
        self.tests: dict[str, dict] = {}
        self.journal = Journal(out)
        started_at = None
        if os.environ.get(RESUME_VARIABLE):
            started_at, entries, _ = self.journal.read()
            self.tests = {entry["id"]: entry for entry in entries}
        self.started = started_at or self.journal.begin()

    def pytest_sessionstart(self, session):
        """The fatal error's stack of a crash goes to a file oota-verify reads (after pytest's
        own faulthandler set stderr, at configure)."""
        if not os.environ.get(RERUN_VARIABLE):
            self._crash = (self.out / CRASH_FILE).open("w")
            faulthandler.enable(self._crash, all_threads=False)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        """On a resume, the tests the journal holds (ended, or crashed) are not run again."""
        done = [i for i in items if i.nodeid in self.tests]
        if done:
            config.hook.pytest_deselected(items=done)
            items[:] = [i for i in items if i.nodeid not in self.tests]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.journal.started(item.nodeid, layer_of(item))

    def pytest_runtest_logfinish(self, nodeid, location):
        if nodeid in self.tests:
            self.journal.ended(self.tests[nodeid])

    def pytest_runtest_logreport(self, report):
        entry = self.tests.setdefault(report.nodeid, {
            "id": report.nodeid, "layer": getattr(report, "oota_layer", "vendor"),
            "status": "passed", "duration_s": 0.0, "message": ""})
        entry["duration_s"] = round(entry["duration_s"] + report.duration, 4)
        for name, value in report.user_properties:
            if name == "oota.data" and report.when == "call":
                entry.setdefault("data", {}).update(value)
        if self._expected(report, entry):
            return
        if report.skipped:
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            entry.update(status="skipped", message=reason.removeprefix("Skipped: "))
        elif report.failed:
            status = "failed" if report.when == "call" else "error"
            status = dict(report.user_properties).get(STATUS_KEY, status)
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash else str(report.longrepr)
            entry.update(status=status, message=message[:2000])

    def _expected(self, report: pytest.TestReport, entry: dict[str, Any]) -> bool:
        """Whether ``report`` is of an expected failure of the skip list, recorded here."""
        state = self.config.stash.get(SKIPS_KEY, None)
        listed = state.expecting.get(report.nodeid) if state else None
        found = oota_expected.outcome(report, listed) if state and listed else None
        if state is None or listed is None or found is None:
            return False
        entry.update(status=found[0], message=found[1])
        if found[1].startswith(oota_expected.UNEXPECTED):
            state.unexpected.append(listed["id"])
        return True

    def pytest_sessionfinish(self, session, exitstatus):
        # Each failed test once more, in a fresh process: passed there is flaky (oota_rerun).
        tests = list(self.tests.values())
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and os.environ.get(
                RESUME_VARIABLE) and tests:
            # Resumed after a crash in the last test: nothing left to run, the run is whole.
            exitstatus = session.exitstatus = pytest.ExitCode.OK
        finished = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        retries = oota_rerun.rerun(tests, Path(session.config.rootpath)) if finished else {}
        if retries.get("flaky") and not any(t["status"] in BAD for t in tests) \
                and exitstatus == pytest.ExitCode.TESTS_FAILED:
            session.exitstatus = pytest.ExitCode.OK  # what failed passed on its retry
        elif any(t["status"] in BAD for t in tests) and exitstatus == pytest.ExitCode.OK:
            # A resumed run (oota_journal): what failed before the crash fails this run too.
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        say_retries(session.config, retries)
        # The entries a layer's time budget left unrun become one entry per test (oota_budget).
        tests = oota_budget.fold_unrun(tests)
        counts: dict[str, int] = {}
        for test in tests:
            counts[test["status"]] = counts.get(test["status"], 0) + 1
        state = self.config.stash.get(SKIPS_KEY, None)
        wanted = os.environ.get("OOTA_VERIFY_LAYERS", "")
        data = {"python": platform.python_version(), "tests": tests,
                "counts": counts, "duration_s": round(time.time() - self.started, 3),
                "exit_status": int(session.exitstatus), "retries": retries,
                "layers": [x.strip() for x in wanted.split(",") if x.strip()] or list(LAYERS),
                "skips": state.to_json() if state else {"entries": [], "expired": [],
                                                         "unmatched": []}}
        tmp = self.out / "tests.json.tmp"
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.out / "tests.json")


def say_retries(config: pytest.Config, retries: dict[str, Any]) -> None:
    """A line in the run's log (verify.log) on what the retries found."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if not retries or reporter is None:
        return
    flaky = retries["flaky"]
    line = (f"oota: {retries['retried']} failed tests run again in a fresh process: "
            f"{len(flaky)} passed there, flaky ({', '.join(flaky[:5]) or 'none'})")
    if retries["not_retried"]:
        line += f"; {retries['not_retried']} not retried ({oota_rerun.LIMIT_VARIABLE})"
    health = retries.get("health")
    if health and not health["healthy"]:
        line += (f"; the device failed its health probe after the crash in {health['after']}: "
                 f"{len(health['errors'])} later failures are the device's state (error)")
    reporter.write_line(line)
