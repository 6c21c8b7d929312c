"""Verify: run the image's own suite (``oota-verify``) with the vendor's device flags and
collect what it wrote. The same command is what a user runs by hand on a pulled image."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oota import __version__
from oota.config.vendors import Vendor
from oota.engine.base import RUN_LABEL, DeviceAccess, Engine, Mount, RunRequest
from oota.plan import Cell
from oota.results.store import now, overall_status, summarize

RESULTS_IN_CONTAINER = "/tmp/oota-results"
# What a verified image carries of its own verification; verify/oota-verify compares with it.
EXPECTED_IN_IMAGE = "/opt/oota/expected.json"
UNSUPPORTED_PREFIX = "unsupported-here: "  # how the suite marks a skip the host check caused


@dataclass(kw_only=True, slots=True)
class VerifyOutcome:
    tests: list[dict[str, Any]] = field(default_factory=list)
    installed: dict[str, Any] = field(default_factory=dict)
    image: dict[str, Any] = field(default_factory=dict)
    problem: str = ""
    log_tail: str = ""
    skips: dict[str, Any] = field(default_factory=dict)


def verify_image(engine: Engine, cell: Cell, image: str, folder: Path, *, run_id: str,
                 layers: tuple[str, ...] = (), timeout_s: int = 1800,
                 unsupported: str = "") -> VerifyOutcome:
    """Run the image's suite. ``unsupported`` (the host check's reason) drops the vendor's device
    flags, which would stop the container from starting, and tells the suite why."""
    outcome = VerifyOutcome(image={"tag": image})
    if engine.image_labels(image) is None:
        outcome.problem = f"image {image} not found; build it first (invoke build --cell {cell.id})"
        return outcome
    outcome.image.update(id=None, digest=engine.image_digest(image))
    command = ["oota-verify", "--out", RESULTS_IN_CONTAINER]
    if layers:
        command += ["--layer", ",".join(layers)]
    collected = folder / "verify"
    for stale in ("tests.json", "junit.xml", "installed.json"):
        (collected / stale).unlink(missing_ok=True)
    run = engine.run(dataclasses.replace(
        device_request(cell.vendor, image, command, unsupported),
        labels={RUN_LABEL: run_id, "oota.cell": cell.id}, collect=RESULTS_IN_CONTAINER,
        collect_to=collected, log_path=folder / "verify.log", timeout_s=timeout_s))
    outcome.log_tail = run.output_tail
    tests_file = collected / "tests.json"
    if not tests_file.exists():
        why = "timed out" if run.timed_out else f"exited with {run.exit_code}"
        outcome.problem = f"the verify suite wrote no results ({why})"
        return outcome
    data = json.loads(tests_file.read_text())
    outcome.tests = [_test_entry(t) for t in data.get("tests", [])]
    outcome.skips = data.get("skips") or {}
    installed = collected / "installed.json"
    if installed.exists():
        outcome.installed = json.loads(installed.read_text())
    failed = [t for t in outcome.tests if t["status"] in ("failed", "error")]
    if failed:
        first = failed[0]
        outcome.problem = (f"{len(failed)} of {len(outcome.tests)} tests failed; first: "
                           f"{first['id']}: {(first.get('message') or '').partition(chr(10))[0]}")
    elif run.exit_code != 0:
        outcome.problem = f"oota-verify exited with {run.exit_code} although no test failed"
    elif not outcome.tests:
        outcome.problem = "the verify suite ran no test"
    return outcome


def device_request(vendor: Vendor, image: str, command: list[str],
                   unsupported: str = "") -> RunRequest:
    """A run of ``image`` with the vendor's device access (``host`` and ``run`` of its
    vendor.yaml). Where the host lacks the hardware (``unsupported``, the host check's reason)
    the container gets no device access, which would stop it from starting, and the suite is
    told why instead."""
    if unsupported:
        return RunRequest(image=image, command=command,
                          env={"OOTA_UNSUPPORTED_HERE": unsupported})
    run, host = vendor.run, vendor.host
    device = DeviceAccess(gpus=run.gpus, devices=host.devices, group_add=run.group_add,
                          ipc=run.ipc, runtime=host.runtime, cap_add=run.cap_add,
                          security_opt=run.security_opt, network=run.network,
                          shm_size=run.shm_size)
    mounts = tuple(Mount(source=Path(m.source), target=m.target, read_only=m.read_only)
                   for m in run.mounts)
    return RunRequest(image=image, command=command, env=dict(run.env), mounts=mounts,
                      device=device if device != DeviceAccess() else None)


def _test_entry(raw: dict[str, Any]) -> dict[str, Any]:
    entry = {"id": str(raw["id"]), "layer": str(raw.get("layer", "vendor")),
             "status": raw.get("status", "error"), "duration_s": float(raw.get("duration_s", 0.0))}
    message = str(raw.get("message") or "")
    if entry["status"] == "skipped" and message.startswith(UNSUPPORTED_PREFIX):
        entry["status"] = "unsupported-here"
        message = message.removeprefix(UNSUPPORTED_PREFIX)
    if message:
        entry["message"] = message
    if raw.get("data"):
        entry["data"] = raw["data"]
    return entry


def expected_results(cell: Cell, tests: list[dict[str, Any]], installed: dict[str, Any],
                     host: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The verification an image carries: every test's outcome and the host it ran on (no
    host name), in the shape ``oota-verify`` reads back (format ``oota.expected/v1``)."""
    check = host.get("vendor_check") or {}
    return {
        "schema": "oota.expected/v1",
        "cell": cell.id,
        "status": overall_status(tests, {}),
        "summary": summarize(tests, {}),
        "verified_at": now(),
        "verified_by": f"oota {__version__}",
        "run_id": run_id,
        "torch": (installed.get("torch") or {}).get("version"),
        "host": {key: host.get(key) for key in ("arch", "kernel", "os", "docker_server")}
        | {"hardware": bool(check.get("supported")), "reasons": check.get("reasons") or []},
        "tests": [{k: t[k] for k in ("id", "layer", "status", "message") if k in t}
                  for t in tests],
    }
