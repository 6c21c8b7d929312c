"""Verify in place: run the same suites against the current Python environment, no Docker.

For bare-metal installs and for GPU machines that have a PyTorch build but no Docker Engine:
``invoke verify --here --vendor=cuda`` picks the vendor's cell that matches the running
Python and torch (or describes the environment as an ad-hoc cell when none matches), writes
its ``cell.json`` to a temporary file, runs ``verify/oota-verify`` with this interpreter, and
records the result like any other cell (``results/<vendor>-here-.../result.json``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from oota.config.matrix import Matrix, OsSpec
from oota.errors import EnvironmentProblem
from oota.execute.hosts import HostCheck, check_vendor
from oota.execute.issueskips import known_for
from oota.plan import Cell, plan
from oota.project import CACHE
from oota.render import cell_manifest, context_files, fingerprint, render_cell
from oota.resources import shipped
from oota.results.assemble import SuiteOutput, assemble, cell_ref, now, read_suite_output
from oota.results.jsonfields import ResultFormatError, json_object
from oota.results.model import Host, Image, Result, Stage, VendorCheck
from oota.results.store import CASES_FILE, keep_recording, save

logger = logging.getLogger("oota.verify")

PROBE = shipped("verify") / "oota_probe.py"


@dataclass(frozen=True, kw_only=True, slots=True)
class Environment:
    """What the interpreter under test has: its Python, torch and toolkit versions."""

    python: Version
    torch: Version
    toolkit: str | None        # as torch reports it (torch.version.cuda ...), None if it has none


def probe_python(python: str, toolkit_path: str | None = None) -> Environment:
    """Ask the interpreter that will run the suite for its Python, torch and toolkit versions
    (verify/oota_probe.py; the vendor's toolkit path, e.g. torch.version.cuda, is argv)."""
    proc = _run_python(python, [str(PROBE), toolkit_path or ""], timeout=300)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise EnvironmentProblem(f"torch is not installed for {python} (install it there, pass "
                                 f"--python with an interpreter that has it, or verify in a "
                                 f"container): {last}")
    py, torch, toolkit = (proc.stdout.splitlines() + ["", "", ""])[:3]
    try:
        return Environment(python=Version(py), torch=Version(torch), toolkit=toolkit or None)
    except ValueError:  # e.g. --python /bin/echo: it ran, but it is no Python
        raise EnvironmentProblem(f"{python} does not answer like a Python interpreter (its "
                                 f"versions read {py!r} and {torch!r}); pass --python with the "
                                 "path of one") from None


def _release(text: str) -> tuple[int, ...]:
    """(7, 2, 41133) of '7.2.41133-dd7f95766' (HIP), (13, 0) of '13.0' (CUDA)."""
    match = re.match(r"\d+(?:\.\d+)*", text.strip())
    return tuple(int(x) for x in match.group(0).split(".")) if match else ()


def _fits(cell: Cell, env: Environment) -> bool:
    # A channel's cell (torch None) is any build of that channel: a dev release.
    torch_fits = env.torch.is_devrelease if cell.torch is None \
        else cell.torch.release == env.torch.release
    if cell.python.release[:2] != env.python.release[:2] or not torch_fits:
        return False
    if cell.toolkit is None:
        return True
    want = cell.toolkit.release
    return env.toolkit is not None and _release(env.toolkit)[:len(want)] == want


def matching_cell(matrix: Matrix, vendor: str, python: str) -> tuple[Cell | None, Environment]:
    """The vendor's cell this interpreter is an instance of (Python, torch and toolkit)."""
    env = probe_python(python, matrix.vendors[vendor].vendor.verify.toolkit_version)
    return next((c for c in plan(matrix, [vendor]) if _fits(c, env)), None), env


def _run_python(python: str, args: list[str], *, timeout: float
                ) -> subprocess.CompletedProcess[str]:
    """Run the interpreter under test (``--python``); one that cannot start or does not answer
    is an environment problem, said in one line."""
    try:
        return subprocess.run([python, *args], capture_output=True, text=True, timeout=timeout)
    except OSError as exc:  # missing, a folder, not executable, not a program
        raise EnvironmentProblem(f"cannot run {python}: {exc.strerror or exc}; pass --python "
                                 "with the path of a Python interpreter") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{python} did not answer within {timeout:.0f}s") from None


def check_suite_runs(python: str) -> None:
    """The suite needs pytest and packaging in the interpreter under test; say so up front."""
    proc = _run_python(python, ["-c", "import pytest, packaging"], timeout=120)
    if proc.returncode != 0:
        raise EnvironmentProblem(
            f"{python} cannot run the verify suite: "
            f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}; install it there with "
            f"`{python} -m pip install pytest packaging`")


def manifest_here(matrix: Matrix, vendor: str, python: str) -> tuple[dict[str, Any], str, str]:
    """(cell.json content, cell id, fingerprint) for the environment of ``python``.

    An environment that is one of the vendor's cells is verified against that cell. Any other
    (another torch, Python or toolkit) is described as an ad-hoc cell of what it really has,
    with the vendor's checks and data; its id ends in ``-host``."""
    cell, env = matching_cell(matrix, vendor, python)
    if cell is not None:
        rendered = render_cell(matrix, cell)
        manifest = cell_manifest(cell)
        return manifest, f"{cell.id}-here", fingerprint(context_files(matrix, rendered))
    cells = plan(matrix, [vendor])
    if not cells:
        raise EnvironmentProblem(f"vendor {vendor} has no cells in {matrix.file}")
    here = ad_hoc_cell(cells[0], env)
    manifest = cell_manifest(here)
    digest = "sha256:" + hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
    return manifest, f"{here.id}-here", digest


HOST = OsSpec(key="host", image="", python=(), bootstrap=None)


def ad_hoc_cell(template: Cell, env: Environment) -> Cell:
    """The vendor's cell for what ``env`` really has: its Python, torch and toolkit on the
    'host' OS (id ``cuda-torch2.11.0-cu13.0-py3.12-host``); the vendor's checks are the same."""
    toolkit = None
    if template.vendor.toolkit and env.toolkit:
        toolkit = Version(".".join(map(str, _release(env.toolkit)[:2])) or "0")
    return dataclasses.replace(template, os=HOST, python=env.python,  # the probe's X.Y
                               torch=Version(env.torch.base_version), toolkit=toolkit)


def verify_here(matrix: Matrix, vendor: str, results_dir: Path, *,
                layers: tuple[str, ...] = (), python: str = sys.executable,
                hold: Callable[[], None] = lambda: None) -> Result:
    """Run the vendor's suites with ``python``; ``hold`` is called once it is known to run
    them, before anything is written into ``results_dir``."""
    check_suite_runs(python)
    manifest, cell_id, digest = manifest_here(matrix, vendor, python)
    hold()
    folder = results_dir / cell_id
    out = folder / "verify"
    out.mkdir(parents=True, exist_ok=True)
    (out / CASES_FILE).unlink(missing_ok=True)
    started = now()
    check = check_vendor(matrix.vendors[vendor].vendor, None)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(manifest, fh)
    env = {**os.environ, "OOTA_CELL_FILE": fh.name,
           "OOTA_VENDOR_VERIFY": str(matrix.vendors[vendor].vendor.folder / "verify")}
    if not check.supported:
        env["OOTA_UNSUPPORTED_HERE"] = "; ".join(check.reasons)
    known = known_for(matrix.vendors[vendor].vendor, matrix.root / CACHE)
    for line in (known.note, *known.problems):
        if line:
            logger.info("%s", line)
    env.update(known.variable())
    argv = [python, str(matrix.verify_dir / "oota-verify"), "--out", str(out)]
    if layers:
        argv += ["--layer", ",".join(layers)]
    try:
        with (folder / "verify.log").open("w") as log:
            proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                  timeout=3600)
    finally:
        os.unlink(fh.name)
    keep_recording(out, folder)
    result = _result(manifest, digest, out, proc.returncode, started, check, python)
    save(folder, result)
    return result


def _read_suite(out: Path) -> tuple[SuiteOutput, str]:
    """What the suite wrote, and why it cannot be used ('' when it can)."""
    try:
        return read_suite_output(out), ""
    except ResultFormatError as exc:
        return SuiteOutput(), f"the verify suite wrote unreadable results: {exc}"


def _result(manifest: dict[str, Any], digest: str, out: Path, code: int, started: str,
            check: HostCheck, python: str) -> Result:
    """The result of an in-place run; ``python`` is the interpreter the suite ran with."""
    suite, unreadable = _read_suite(out)
    ok = bool(suite.tests) and code == 0
    message = unreadable or ("" if ok else f"oota-verify exited with {code}" if suite.tests
                             else "the verify suite wrote no results")
    stage = Stage(status="passed" if ok else "failed", duration_s=suite.duration_s,
                  message=message, log="verify.log")
    host = Host(facts={"mode": "in place (no container)", "python": python,
                       "machine": platform.machine(), "kernel": platform.release()},
                vendor_check=VendorCheck(supported=check.supported, reasons=tuple(check.reasons),
                                         facts=json_object(check.facts, "vendor_check")))
    coordinates = {k: manifest.get(k) for k in ("vendor", "os", "python", "torch", "toolkit",
                                                "toolkit_version")}
    return assemble(
        cell=cell_ref(coordinates, id=f"{manifest['id']}-here", fingerprint=digest),
        stages={"verify": stage}, tests=suite.tests, host=host, started_at=started,
        image=Image(tag="(none: verified in place)"), installed=suite.installed,
        skips=suite.skips)
