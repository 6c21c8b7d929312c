"""The host side of a vendor (``host:`` and ``run:`` in vendor.yaml): how oota tells whether a
host has the hardware (a probe, device nodes, a container runtime, the published driver
minimums: :mod:`oota.execute.hosts`), what a verify container given the device holds, and how
a verify container reaches the device (data the engine turns into ``docker create`` options).
Built from a ``vendor.yaml`` already checked against its schema (:mod:`oota.config.vendors`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from oota.config.provenance import Provenance, Source, provenance_of


def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


FAMILY = "family"    # a floor for every toolkit release it prefixes (CUDA 13.x: driver 580)
RELEASE = "release"  # one toolkit release's own minimum, shown beside the family's floor


@dataclass(frozen=True, kw_only=True, slots=True)
class DriverRule:
    """One row of ``host.driver.rules``: the minimum host driver for the toolkit releases
    ``toolkit`` prefixes ('13' covers 13.x, '13.2' that release and its updates)."""

    toolkit: str
    minimum: str
    scope: str = RELEASE
    note: str = ""                   # the documented limits of running on this minimum
    provenance: Provenance = field(default_factory=Provenance)

    def covers(self, toolkit: str) -> bool:
        mine, theirs = self.toolkit.split("."), toolkit.split(".")
        return theirs[:len(mine)] == mine


@dataclass(frozen=True, kw_only=True, slots=True)
class DriverSpec:
    """What the vendor publishes about its host driver (``host.driver``): the minimum per
    toolkit family and release (see oota/execute/hosts.py), or why no rule is checked."""

    name: str = "driver"
    rules: tuple[DriverRule, ...] = ()
    unverified: str = ""             # why no published table backs a rule ('' when one does)


@dataclass(frozen=True, kw_only=True, slots=True)
class HostSpec:
    """How to tell whether a host has the hardware (``host:``; see oota/execute/hosts.py)."""

    probe: tuple[str, ...] = ()          # argv; its first output line starts with the driver
    devices: tuple[str, ...] = ()        # device nodes that must exist; passed to containers
    # What a container given the device sees (glob patterns); default: devices.
    container_devices: tuple[str, ...] = ()
    runtime: str | None = None           # a container runtime the daemon must know; used too
    driver: DriverSpec = field(default_factory=DriverSpec)
    driver_libraries: tuple[str, ...] = ()   # fnmatch patterns of the host driver's libraries

    @property
    def needs_nothing(self) -> bool:
        return not (self.probe or self.devices or self.runtime)

    @property
    def in_container(self) -> tuple[str, ...]:
        """The device nodes (glob patterns) a verify container given the device holds."""
        return self.container_devices or self.devices


@dataclass(frozen=True, kw_only=True, slots=True)
class HostMount:
    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSpec:
    """How a verify container reaches the device (``run:``), besides ``host.devices`` and
    ``host.runtime``, which it gets as well. Data, turned into engine options by the engine."""

    gpus: str | None = None              # "all" or a count, through the NVIDIA toolkit
    group_add: tuple[str, ...] = ()
    ipc: str | None = None
    cap_add: tuple[str, ...] = ()
    security_opt: tuple[str, ...] = ()
    network: str | None = None
    shm_size: str | None = None
    env: Mapping[str, str] = field(default_factory=_empty)
    mounts: tuple[HostMount, ...] = ()
    pass_env: tuple[str, ...] = ()       # oota's own variables the container gets, when set


def host_spec(data: dict[str, Any], sources: Mapping[str, Source]) -> HostSpec:
    return HostSpec(probe=tuple(data.get("probe", ())), devices=tuple(data.get("devices", ())),
                    container_devices=tuple(data.get("container_devices", ())),
                    runtime=data.get("runtime"), driver=_driver(data, sources),
                    driver_libraries=tuple(data.get("driver_libraries", ())))


def _driver(host: dict[str, Any], sources: Mapping[str, Source]) -> DriverSpec:
    """``host.driver``; an older file's ``host.driver_min`` (toolkit -> minimum) reads as
    release rules, each the floor of its own toolkit release."""
    data = host.get("driver") or {}
    rules = [DriverRule(toolkit=str(r["toolkit"]), minimum=str(r["min"]),
                        scope=r.get("scope", RELEASE), note=r.get("note", ""),
                        provenance=provenance_of(r, sources))
             for r in data.get("rules", ())]
    rules += [DriverRule(toolkit=str(t), minimum=str(m))
              for t, m in host.get("driver_min", {}).items()]
    return DriverSpec(name=data.get("name", "driver"), rules=tuple(rules),
                      unverified=data.get("unverified", ""))


def run_spec(data: dict[str, Any]) -> RunSpec:
    gpus = data.get("gpus")
    return RunSpec(
        gpus=None if gpus is None else str(gpus), group_add=tuple(data.get("group_add", ())),
        ipc=data.get("ipc"), cap_add=tuple(data.get("cap_add", ())),
        security_opt=tuple(data.get("security_opt", ())), network=data.get("network"),
        shm_size=data.get("shm_size"), env=MappingProxyType(dict(data.get("env", {}))),
        mounts=tuple(HostMount(source=m["source"], target=m.get("target", m["source"]),
                               read_only=m.get("read_only", True))
                     for m in data.get("mounts", ())),
        pass_env=tuple(data.get("pass_env", ())))
