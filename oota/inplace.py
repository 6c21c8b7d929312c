"""Verify in place: run the same suites against the current Python environment, no Docker.

For bare-metal installs and for GPU machines that have a PyTorch build but no Docker Engine:
``invoke verify --here --vendor=cuda`` picks the vendor's cell that matches the running
Python and torch (or describes the environment as an ad-hoc cell when none matches), writes
its ``cell.json`` to a temporary file, runs ``verify/oota-verify`` with this interpreter, and
records the result like any other cell (``results/<vendor>-here-.../result.json``).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from packaging.version import Version

from oota import __version__
from oota.build import now
from oota.errors import EnvironmentProblem
from oota.hosts import check_vendor
from oota.matrix import Matrix
from oota.plan import Cell, plan
from oota.render import cell_manifest, context_files, fingerprint, render_cell
from oota.results import overall_status, save, summarize


def probe_python(python: str) -> tuple[Version, Version]:
    """(Python version, torch version) of the interpreter that will run the suite."""
    code = ("import sys, importlib.metadata as m; print('%d.%d' % sys.version_info[:2]); "
            "print(m.version('torch'))")
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot run {python}: {exc}") from None
    if proc.returncode != 0:
        raise EnvironmentProblem(f"torch is not installed for {python} "
                                 "(install it there, or verify in a container): "
                                 + proc.stderr.strip().splitlines()[-1:][0] if proc.stderr else "")
    py, torch = proc.stdout.split()
    return Version(py), Version(torch)


def matching_cell(matrix: Matrix, vendor: str, python: str) -> tuple[Cell | None, Version, Version]:
    py, torch = probe_python(python)
    for cell in plan(matrix, [vendor]):
        if cell.python.release[:2] == py.release[:2] and cell.torch.release == torch.release:
            return cell, py, torch
    return None, py, torch


def manifest_here(matrix: Matrix, vendor: str, python: str) -> tuple[dict[str, Any], str, str]:
    """(cell.json content, cell id, fingerprint) for the environment of ``python``."""
    cell, py, torch = matching_cell(matrix, vendor, python)
    if cell is not None:
        rendered = render_cell(matrix, cell)
        manifest = cell_manifest(cell)
        manifest["id"] = cell.id
        return manifest, f"{cell.id}-here", fingerprint(context_files(matrix, rendered))
    cells = plan(matrix, [vendor])
    if not cells:
        raise EnvironmentProblem(f"vendor {vendor} has no cells in {matrix.file}")
    template = cells[0]
    manifest = cell_manifest(template)
    pyver = ".".join(str(p) for p in py.release[:2])
    release = ".".join(str(p) for p in torch.release)
    manifest.update(python=pyver, torch=release, os="host",
                    id=f"{vendor}-torch{release}-py{pyver}-host")
    digest = "sha256:" + __import__("hashlib").sha256(
        json.dumps(manifest, sort_keys=True).encode()).hexdigest()
    return manifest, f"{manifest['id']}-here", digest


def verify_here(matrix: Matrix, vendor: str, results_dir: Path, *,
                layers: tuple[str, ...] = (), python: str = sys.executable) -> dict[str, Any]:
    manifest, cell_id, digest = manifest_here(matrix, vendor, python)
    folder = results_dir / cell_id
    out = folder / "verify"
    out.mkdir(parents=True, exist_ok=True)
    started = now()
    check = check_vendor(matrix.vendors[vendor].vendor, {})
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(manifest, fh)
    env = {**os.environ, "OOTA_CELL_FILE": fh.name,
           "OOTA_VENDOR_VERIFY": str(matrix.vendors[vendor].vendor.folder / "verify")}
    if not check.supported:
        env["OOTA_UNSUPPORTED_HERE"] = "; ".join(check.reasons)
    argv = [python, str(matrix.root / "verify" / "oota-verify"), "--out", str(out)]
    if layers:
        argv += ["--layer", ",".join(layers)]
    try:
        with (folder / "verify.log").open("w") as log:
            proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                  timeout=3600)
    finally:
        os.unlink(fh.name)
    return _result(manifest, digest, out, proc.returncode, started, check)


def _result(manifest: dict[str, Any], digest: str, out: Path, code: int, started: str,
            check) -> dict[str, Any]:
    from oota.verify import _test_entry

    tests_file = out / "tests.json"
    data = json.loads(tests_file.read_text()) if tests_file.exists() else {}
    tests = [_test_entry(t) for t in data.get("tests", [])]
    stage = {"status": "passed" if tests and code == 0 else "failed", "duration_s":
             float(data.get("duration_s", 0.0)), "log": "verify.log"}
    if stage["status"] == "failed":
        stage["message"] = (f"oota-verify exited with {code}" if tests else
                            "the verify suite wrote no results")
    stages = {"verify": stage}
    installed = out / "installed.json"
    result: dict[str, Any] = {
        "schema": "oota.result/v1",
        "cell": {k: manifest.get(k) for k in ("id", "vendor", "os", "python", "torch",
                                              "toolkit", "toolkit_version")}
        | {"fingerprint": digest},
        "stages": stages, "tests": tests,
        "host": {"mode": "in place (no container)", "python": sys.executable,
                 "machine": platform.machine(), "kernel": platform.release(),
                 "vendor_check": {"supported": check.supported, "reasons": list(check.reasons),
                                  **check.facts}},
        "toolkit": {"name": "oota", "version": __version__},
        "image": {"tag": "(none: verified in place)"},
        "started_at": started, "finished_at": now(),
    }
    result["cell"]["id"] = manifest["id"] + "-here"
    if installed.exists():
        result["installed"] = json.loads(installed.read_text())
    if data.get("skips"):
        result["skips"] = data["skips"]
    result["status"] = overall_status(tests, stages)
    result["summary"] = summarize(tests, stages)
    save(out.parent, result)
    return result
