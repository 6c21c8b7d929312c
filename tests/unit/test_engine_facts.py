"""What the tests read of an Engine holds on every Engine of this environment.

Docker's inspect output differs between Engine versions: Debian's docker.io 20.10.24 lists only
the subnet in the ``bridge`` network's ``IPAM.Config`` (no ``Gateway``), newer Engines list both.
The tests reach the host from a container through ``tests.engines.host_address`` (the bridge
interface's own address, from the kernel); nothing reads the version-dependent key directly.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest

from tests.engines import ExtraEngine, bridge_interface, host_address

REPO = Path(__file__).resolve().parents[2]

# One Engine's inspect output of `bridge`, and the same network as docker.io 20.10.24 shows it.
WITH_GATEWAY = {"IPAM": {"Config": [{"Subnet": "172.17.0.0/16", "Gateway": "172.17.0.1"}]},
                "Options": {"com.docker.network.bridge.name": "lo"}}
WITHOUT_GATEWAY = {"IPAM": {"Config": [{"Subnet": "172.17.0.0/16"}]},
                   "Options": {"com.docker.network.bridge.name": "lo"}}


@pytest.mark.parametrize("network", [WITH_GATEWAY, WITHOUT_GATEWAY],
                         ids=["gateway-listed", "subnet-only"])
def test_the_host_address_comes_from_the_bridge_interface(network: dict[str, object]) -> None:
    # "lo" stands in for docker0: every machine has it, with 127.0.0.1/8.
    assert host_address(network) == ipaddress.IPv4Interface("127.0.0.1/8")


def test_a_bridge_without_options_is_docker0() -> None:
    assert bridge_interface({"IPAM": {"Config": [{"Subnet": "10.0.0.0/16"}]}}) == "docker0"


def test_each_extra_engine_gets_its_own_slice_of_the_bridge_subnet(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OOTA_TEST_ENGINE_BASE", raising=False)
    network = ipaddress.IPv4Network("172.17.0.0/16")
    slices = [ExtraEngine(tmp_path, index).slice_of(network) for index in range(64)]
    assert slices[0] == "172.17.128.0/23" and slices[5] == "172.17.138.0/23"
    assert len(set(slices)) == 64
    small = ExtraEngine(tmp_path, 1).slice_of(ipaddress.IPv4Network("192.168.0.0/16"))
    assert small == "192.168.130.0/23"
    monkeypatch.setenv("OOTA_TEST_ENGINE_BASE", "16")
    assert ExtraEngine(tmp_path, 0).slice_of(network) == "172.17.160.0/23"


def test_no_code_reads_the_gateway_key_of_an_engines_inspect_output() -> None:
    pattern = re.compile(r"""\[\s*["']Gateway["']\s*\]""")
    found = [f"{path.relative_to(REPO)}:{number}"
             for folder in ("oota", "tests", "benchmarks", "verify", "scripts")
             for path in sorted((REPO / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert not found, ("IPAM's Gateway is missing on some Engines (docker.io 20.10.24); use "
                       f"tests.engines.host_address: {', '.join(found)}")
