"""Fixtures and the result recorder of the in-image verification suite.

Every test belongs to a layer (install, compat, device, models): a module sets
``LAYER = "..."``; vendor modules default to ``vendor``. ``OOTA_VERIFY_LAYERS`` (comma list)
selects layers. Each test's outcome is written to ``$OOTA_VERIFY_OUT/tests.json``.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import pytest

CELL_FILE = Path(os.environ.get("OOTA_CELL_FILE", "/opt/oota/cell.json"))


def _layer_of(item: pytest.Item) -> str:
    return getattr(item.module, "LAYER", "vendor")


def pytest_collection_modifyitems(config, items):
    wanted = {x.strip() for x in os.environ.get("OOTA_VERIFY_LAYERS", "").split(",") if x.strip()}
    if not wanted:
        return
    keep = [i for i in items if _layer_of(i) in wanted]
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep


@pytest.fixture(scope="session")
def cell() -> dict:
    if not CELL_FILE.exists():
        pytest.fail(f"{CELL_FILE} is missing: this is not an oota image (set OOTA_CELL_FILE)")
    return json.loads(CELL_FILE.read_text())


@pytest.fixture(scope="session")
def device_type(cell) -> str:
    return cell["device"]


class _Recorder:
    def __init__(self, out: Path):
        self.out = out
        self.tests: dict[str, dict] = {}
        self.started = time.time()

    def pytest_runtest_logreport(self, report):
        entry = self.tests.setdefault(report.nodeid, {
            "id": report.nodeid, "layer": getattr(report, "oota_layer", "vendor"),
            "status": "passed", "duration_s": 0.0, "message": ""})
        entry["duration_s"] = round(entry["duration_s"] + report.duration, 4)
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            entry.update(status="skipped", message=reason.removeprefix("Skipped: "))
        elif report.failed:
            status = "failed" if report.when == "call" else "error"
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash else str(report.longrepr)
            entry.update(status=status, message=message[:2000])

    def pytest_sessionfinish(self, session, exitstatus):
        counts: dict[str, int] = {}
        for test in self.tests.values():
            counts[test["status"]] = counts.get(test["status"], 0) + 1
        data = {"python": platform.python_version(), "tests": list(self.tests.values()),
                "counts": counts, "duration_s": round(time.time() - self.started, 3),
                "exit_status": int(exitstatus)}
        tmp = self.out / "tests.json.tmp"
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.out / "tests.json")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().oota_layer = _layer_of(item)


def pytest_configure(config):
    out = os.environ.get("OOTA_VERIFY_OUT")
    if out:
        config.pluginmanager.register(_Recorder(Path(out)), "oota-recorder")
