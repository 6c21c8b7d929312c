"""Host check: does this Docker host have what a vendor's device tests need?

Each vendor's ``host`` section in ``vendor.yaml`` (:class:`oota.config.vendors.HostSpec`) says
how to tell::

    host:
      probe: [nvidia-smi, "--query-gpu=driver_version,name", "--format=csv,noheader"]
      devices: [/dev/kfd, /dev/dri]       # must all exist
      runtime: habana                     # must be registered with the Docker daemon
      driver_min: {"13.0": "580.65.06"}   # toolkit -> minimum driver (the probe's first field)

A vendor whose ``host`` section asks for nothing (CPU) runs anywhere. A cell whose host lacks
the hardware is ``unsupported-here``: it is still built and verified to install level, and its
device tests are reported as unsupported here with the reason, never as passed or failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from oota.config.vendors import Vendor


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
            except InvalidVersion:
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


def describe(check: HostCheck) -> str:
    if check.supported:
        found = f" (driver {check.driver})" if check.driver else ""
        return f"{check.vendor}: hardware available{found}"
    return f"{check.vendor}: unsupported here: " + "; ".join(check.reasons)
