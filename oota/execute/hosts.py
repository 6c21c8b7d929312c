"""Host check: does this Docker host have what a vendor's device tests need?

Each vendor's ``host`` section in ``vendor.yaml`` (:class:`oota.config.vendors.HostSpec`) says
how to tell::

    host:
      probe: [nvidia-smi, "--query-gpu=driver_version,name", "--format=csv,noheader"]
      devices: [/dev/kfd, /dev/dri]       # must all exist
      runtime: habana                     # must be registered with the Docker daemon
      driver:                             # the probe's first field against the vendor's rules
        name: NVIDIA driver
        rules: [{toolkit: "13", min: "580", scope: family}, {toolkit: "13.2", min: "595.45.04"}]

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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.version import Version

from oota.config.vendorhost import FAMILY, RELEASE, DriverSpec
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

    def for_cell(self, toolkit: str | None, vendor: Vendor) -> DriverVerdict:
        """Whether a cell with this toolkit version can use the hardware here, by the
        vendor's published driver rules (:func:`driver_verdict`)."""
        if self.reasons:
            return DriverVerdict(reason="; ".join(self.reasons))
        name = vendor.toolkit.name if vendor.toolkit else "toolkit"
        return driver_verdict(self.driver, toolkit, vendor.host.driver, name)


@dataclass(frozen=True, kw_only=True, slots=True)
class DriverVerdict:
    reason: str = ""                     # why the cell cannot use the hardware ('' it can)
    note: str = ""                       # what the vendor's rules say of this driver
    facts: dict[str, Any] = field(default_factory=dict)


def driver_verdict(driver: str | None, toolkit: str | None, spec: DriverSpec,
                   toolkit_name: str = "toolkit") -> DriverVerdict:
    """The host's driver against the vendor's rules for ``toolkit``.

    The floor is the most specific ``family`` rule covering the toolkit (NVIDIA's
    minor-version compatibility: every CUDA 13.x runs on a driver >= 580), else the rule of
    the toolkit release itself; below it the hardware is unsupported here. The ``release``
    rules of that toolkit (13.2: 595.45.04, its update 13.2.1: 595.58.03) are shown beside
    it; a driver between the floor and them runs, with the family rule's note (its documented
    limits)."""
    if not driver or not toolkit:
        return DriverVerdict()
    related = [r for r in spec.rules if r.covers(toolkit) or _extends(r.toolkit, toolkit)]
    covering = [r for r in related if r.covers(toolkit)]
    family = [r for r in covering if r.scope == FAMILY]
    floor = max(family or covering, key=lambda r: len(r.toolkit.split(".")), default=None)
    if floor is None:
        why = f"no published minimum {spec.name} for {toolkit_name} {toolkit} is checked"
        return DriverVerdict(note=f"{why}: {spec.unverified}" if spec.unverified else "")
    own = [r for r in related if r is not floor and r.scope == RELEASE]
    facts = {"driver": driver, "minimum": floor.minimum, "minimum_for": floor.toolkit,
             "release_minimums": {r.toolkit: r.minimum for r in own}}
    try:
        have = Version(driver)
        below_floor = have < Version(floor.minimum)
        below = [r for r in own if have < Version(r.minimum)]
    except ValueError:  # InvalidVersion, or more digits than int() reads
        return DriverVerdict(reason=f"cannot compare {spec.name} version '{driver}' with "
                             f"{floor.minimum}", facts=facts)
    covers = f"{toolkit_name} {floor.toolkit}" + (".x" if floor.scope == FAMILY else "")
    shown = "; ".join(f"{r.toolkit}: {r.minimum}" for r in own)
    if below_floor:
        return DriverVerdict(reason=f"{spec.name} {driver} is older than {floor.minimum}, the "
                             f"minimum for {covers}" + (f" (the releases' own: {shown})"
                                                       if shown else ""), facts=facts)
    if not below:
        return DriverVerdict(facts=facts)
    note = (f"{spec.name} {driver} is below {toolkit_name} {toolkit}'s own minimum ({shown}) "
            f"and runs it on the {covers} minimum {floor.minimum}"
            + (f": {floor.note}" if floor.note else ""))
    return DriverVerdict(note=note, facts=facts | {"note": note})


def _extends(rule: str, toolkit: str) -> bool:
    """Is ``rule`` an update of ``toolkit`` (13.2.1 of 13.2)?"""
    mine, theirs = rule.split("."), toolkit.split(".")
    return len(mine) > len(theirs) and mine[:len(theirs)] == theirs


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
