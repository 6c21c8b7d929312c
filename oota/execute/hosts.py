"""Host check: does this Docker host have what a vendor's device tests need?

Each vendor's ``host`` section in ``vendor.yaml`` (:class:`oota.config.vendors.HostSpec`) says
how to tell::

    host:
      probe: [nvidia-smi, "--query-gpu=driver_version,name", "--format=csv,noheader"]
      devices: [/dev/kfd, /dev/dri]       # must all exist
      runtime: habana                     # must be registered with the Docker daemon
      driver_min: {"13.0": "580.65.06"}   # toolkit -> minimum driver (the probe's first field)

The check runs on the host that will run the cell. For an engine on this machine (a unix
socket) that is this machine: the device nodes are looked up and the probe runs here. For any
other engine (tcp://, ssh://, a docker context) both happen inside a short-lived container on
that engine: the host's ``/dev`` is bind-mounted read-only to look the nodes up, and the probe
runs in the cell's base image with the vendor's device access, where the vendor's container
runtime provides its tool (the NVIDIA container toolkit mounts ``nvidia-smi``, Habana's runtime
``hl-smi``). The runtimes come from the engine itself either way.

A vendor whose ``host`` section asks for nothing (CPU) runs anywhere. A cell whose host lacks
the hardware is ``unsupported-here``: it is still built and verified to install level, and its
device tests are reported as unsupported here with the reason, never as passed or failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.version import Version

from oota.config.vendors import Vendor
from oota.engine.base import RUN_LABEL, Engine, Mount, RunOutcome, RunRequest
from oota.errors import OotaError
from oota.execute.verify import device_request

# Lists which of its arguments do not exist under the host's /dev mounted at /oota-host/dev.
_MISSING_NODES = 'for d in "$@"; do [ -e "/oota-host$d" ] || echo "missing $d"; done'


@dataclass(frozen=True, kw_only=True, slots=True)
class HostCheck:
    vendor: str
    reasons: tuple[str, ...]             # why the hardware is not usable here (empty: it is)
    facts: dict[str, Any] = field(default_factory=dict)
    driver: str | None = None

    @property
    def supported(self) -> bool:
        return not self.reasons

    def reason_for(self, toolkit: str | None, driver_min: Mapping[str, str]) -> str:
        """Why a cell with this toolkit version cannot use the hardware ('' if it can)."""
        if self.reasons:
            return "; ".join(self.reasons)
        need = driver_min.get(toolkit or "")
        if need and self.driver:
            try:
                if Version(self.driver) < Version(need):
                    return (f"driver {self.driver} is older than {need}, the minimum for "
                            f"toolkit {toolkit}")
            except ValueError:  # InvalidVersion, or more digits than int() reads
                return f"cannot compare driver version '{self.driver}' with {need}"
        return ""


def _probe(argv: tuple[str, ...], timeout_s: int = 30) -> tuple[str | None, str]:
    """Run the probe; (first line of output or None, why it failed)."""
    if not argv:
        return None, ""
    if shutil.which(argv[0]) is None:
        return None, f"{argv[0]} not found on this host"
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, f"{argv[0]} did not answer within {timeout_s} s"
    except OSError as exc:
        return None, f"{argv[0]} could not run: {exc}"
    if proc.returncode != 0:
        first = (proc.stderr or proc.stdout).strip().splitlines()[:1]
        return None, f"{argv[0]} exited with {proc.returncode}" + (f": {first[0]}" if first else "")
    lines = proc.stdout.strip().splitlines()
    return (lines[0] if lines else ""), ""


def check_vendor(vendor: Vendor, docker_facts: dict[str, str] | None) -> HostCheck:
    """Probe this host for ``vendor``'s hardware, driver and container runtime.

    ``docker_facts`` None means the suite runs in place, not in a container: the vendor's
    container runtime is then not needed."""
    spec = vendor.host
    if spec.needs_nothing:
        return HostCheck(vendor=vendor.name, reasons=(), facts={"needs": "nothing"})
    reasons: list[str] = []
    facts: dict[str, Any] = {}
    missing = [d for d in spec.devices if not os.path.exists(d)]
    if missing:
        reasons.append("missing device nodes: " + ", ".join(missing))
    if spec.runtime and docker_facts is not None:
        runtimes = docker_facts.get("runtimes", "").split(",")
        facts["runtimes"] = runtimes
        if spec.runtime not in runtimes:
            reasons.append(f"the Docker daemon has no '{spec.runtime}' runtime "
                           "(register it in /etc/docker/daemon.json)")
    output, why = _probe(spec.probe)
    driver = None
    if why:
        reasons.append(why)
    elif output is not None:
        facts["probe"] = output
        driver = output.split(",")[0].strip() or None
    return HostCheck(vendor=vendor.name, reasons=tuple(reasons), facts=facts, driver=driver)


def check_vendor_in(engine: Engine, vendor: Vendor, docker_facts: dict[str, str],
                    image: str, run_id: str) -> HostCheck:
    """:func:`check_vendor` for an engine on another machine: the device nodes and the probe
    are looked at in containers on that engine (``image``: the cell's base image), so the
    answer is the host's that will run the cell, not this machine's."""
    spec = vendor.host
    if spec.needs_nothing:
        return HostCheck(vendor=vendor.name, reasons=(), facts={"needs": "nothing"})
    host = engine.endpoint.name
    reasons: list[str] = []
    facts: dict[str, Any] = {"checked_on": host}
    labels = {RUN_LABEL: run_id}
    if spec.devices:
        outcome = _run_quietly(engine, RunRequest(
            image=image, command=["sh", "-c", _MISSING_NODES, "sh", *spec.devices],
            mounts=(Mount(source=Path("/dev"), target="/oota-host/dev"),), labels=labels,
            timeout_s=120))
        if isinstance(outcome, str):
            reasons.append(f"could not look for the device nodes on host {host}: {outcome}")
        else:
            missing = [line.split(" ", 1)[1] for line in outcome.output_tail.splitlines()
                       if line.startswith("missing ")]
            if missing:
                reasons.append(f"missing device nodes on host {host}: " + ", ".join(missing))
    if spec.runtime:
        runtimes = docker_facts.get("runtimes", "").split(",")
        facts["runtimes"] = runtimes
        if spec.runtime not in runtimes:
            reasons.append(f"the Docker daemon of host {host} has no '{spec.runtime}' runtime "
                           "(register it in its /etc/docker/daemon.json)")
    driver = None
    if spec.probe and not reasons:  # without its devices the probe's container cannot start
        output, why = _probe_in(engine, device_request(vendor, image, list(spec.probe)),
                                labels, host)
        if why:
            reasons.append(why)
        else:
            facts["probe"] = output
            driver = output.split(",")[0].strip() or None
    return HostCheck(vendor=vendor.name, reasons=tuple(reasons), facts=facts, driver=driver)


def _probe_in(engine: Engine, request: RunRequest, labels: dict[str, str],
              host: str) -> tuple[str, str]:
    """Run the probe in a container; (first line of its output, why it failed)."""
    outcome = _run_quietly(engine, replace(request, labels=labels, timeout_s=120))
    tool = request.command[0]
    if isinstance(outcome, str):
        return "", f"{tool} could not run in a container on host {host}: {outcome}"
    lines = outcome.output_tail.strip().splitlines()
    if outcome.exit_code in (126, 127) or "executable file not found" in outcome.output_tail:
        return "", (f"{tool} not found in a container on host {host} (the vendor's container "
                    "runtime provides it where the hardware is)")
    if "could not select device driver" in outcome.output_tail:
        return "", (f"the Docker daemon of host {host} cannot give containers GPUs (install "
                    "the NVIDIA container toolkit there: `nvidia-ctk runtime configure`)")
    if outcome.exit_code != 0:
        first = f": {lines[-1]}" if lines else ""
        return "", f"{tool} exited with {outcome.exit_code} on host {host}{first}"
    return (lines[0] if lines else ""), ""


def _run_quietly(engine: Engine, request: RunRequest) -> RunOutcome | str:
    """The outcome of a probe container, or why it could not run (one line)."""
    try:
        return engine.run(request)
    except OotaError as exc:
        tail = getattr(exc, "log_tail", "")
        return ((tail or str(exc)).strip().splitlines() or [str(exc)])[-1][:300]


def describe(check: HostCheck) -> str:
    if check.supported:
        found = f" (driver {check.driver})" if check.driver else ""
        return f"{check.vendor}: hardware available{found}"
    return f"{check.vendor}: unsupported here: " + "; ".join(check.reasons)
