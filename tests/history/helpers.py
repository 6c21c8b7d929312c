"""Results for history tests, built with the report tests' builders (schema-valid)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from oota.results.model import Result
from tests import forkcli
from tests.conftest import REPO
from tests.unit.test_report import case, make_result, model_test, refresh

MATMUL = "test_device.py::test_matmul"


def result(run_id: str, day: int, *, matmul: str = "passed", torch: str = "2.13.0+cpu",
           vendor: str = "cpu", python: str = "3.11", os_key: str = "debian12",
           host: str = "lab-a", extension: str | None = None,
           requested: tuple[str, ...] = ()) -> dict[str, Any]:
    """One cell's result.json of run ``run_id`` on day ``day`` of November."""
    tests = [case("test_install.py::test_imports", "install"),
             case(MATMUL, "device", matmul, "" if matmul == "passed" else "mismatch 0.5"),
             model_test("gemma")]
    data = make_result(vendor, python=python, os_key=os_key, tests=tests,
                       installed_torch=torch, host={"engine": host, "arch": "x86_64"},
                       extra_packages={"torch_ext": (extension, True)} if extension else None)
    data["run_id"] = run_id
    if requested:
        data["requested"] = list(requested)
    data["started_at"] = f"2026-11-{day:02d}T06:00:00+00:00"
    data["finished_at"] = f"2026-11-{day:02d}T06:30:00+00:00"
    return refresh(data)


def typed(*results: dict[str, Any]) -> list[Result]:
    return [Result.from_json(r) for r in results]


def invoke(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    """`invoke ARGS` as a user runs it, from the checkout (this checkout's oota first)."""
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return forkcli.run([sys.executable, "-m", "invoke", "-r", str(REPO), *args], cwd=cwd,
                       text=True, capture_output=True, timeout=180, check=False,
                       env={**os.environ, "PYTHONPATH": path, **(env or {})})
