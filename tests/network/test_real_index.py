"""release-check against the real PyPI, refereed by pip's own finder and resolver.

Opt-in (``-m network``): it needs https://pypi.org. pip runs with the host's CA bundle but
without the host's pip configuration (no local wheelhouse or file:// indexes), so both sides
look at the same index.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from oota.releases.check import newest_and_previous, torch_release
from oota.releases.facts import Extension
from oota.releases.index import PackageIndex
from oota.releases.onindex import Asked, pair_on_index
from oota.releases.wheels import LINUX_AARCH64, LINUX_X86_64

pytestmark = pytest.mark.network
PYPI = "https://pypi.org"


def pip(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "PIP_INDEX_URL",
                                                            "PIP_EXTRA_INDEX_URL")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return subprocess.run([sys.executable, "-m", "pip", *args, "--index-url", f"{PYPI}/simple"],
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def index() -> PackageIndex:
    return PackageIndex(PYPI)


@pytest.fixture(scope="module")
def newest(index) -> tuple[Version, Version | None]:
    return newest_and_previous(index.releases("torch"))


def test_newest_release_matches_pip_index_versions(index, newest):
    proc = pip("index", "versions", "torch")
    assert proc.returncode == 0, proc.stderr
    latest = re.search(r"^torch \(([^)]+)\)", proc.stdout, re.M)
    available = re.search(r"^Available versions: (.+)$", proc.stdout, re.M)
    assert latest and available, proc.stdout
    assert Version(latest.group(1)) == newest[0]
    # pip lists what this interpreter could install; every one of those is a release for us.
    listed = {Version(v.strip()) for v in available.group(1).split(",")}
    assert listed <= set(index.releases("torch"))
    assert newest[1] in listed


def resolves(requirements: list[str], python: Version, target: Path,
             platform: str = "manylinux_2_28_x86_64") -> subprocess.CompletedProcess:
    """pip's resolver for CPython ``python`` on manylinux x86_64, metadata only (PEP 658):
    the verdict of ``pip download --only-binary=:all: --python-version`` without the 1 GB."""
    return pip("install", "--dry-run", "--ignore-installed", "--target", str(target),
               "--only-binary=:all:", "--python-version", f"{python.major}.{python.minor}",
               "--platform", platform, "--report", "-", "--quiet", *requirements)


def test_torch_wheel_pythons_match_pip(index, newest, tmp_path):
    release = torch_release(index, newest[0])
    assert release.pythons, "no Linux x86_64 CPython wheel found"
    below = Version(f"3.{release.pythons[0].minor - 1}")
    for python in (*release.pythons, below):
        proc = resolves(["--no-deps", f"torch=={newest[0]}"], python, tmp_path / str(python))
        expected = python in release.pythons
        assert (proc.returncode == 0) == expected, (python, proc.stderr[-2000:])
        if expected:
            report = json.loads(proc.stdout)
            names = [item["download_info"]["url"].rsplit("/", 1)[-1] for item in report["install"]]
            assert names[0].startswith(f"torch-{newest[0]}-cp3{python.minor}-")


@pytest.mark.parametrize("platform", [LINUX_X86_64, LINUX_AARCH64], ids=lambda p: p.machine)
def test_torch_npu_gap_matches_pip(index, newest, tmp_path, platform):
    """Our verdict for torch-npu with torch N (from wheel metadata) is pip's verdict, on both
    platforms torch-npu publishes wheels for."""
    python = Version("3.12")
    verdict = pair_on_index(index, Extension(distribution="torch-npu", index="pypi"),
                            "vendors/ascend/vendor.yaml", Asked(
                                torch=newest[0], python=python, platform=platform,
                                known_torch=tuple(index.releases("torch"))))
    ok, detail = verdict.ok, "; ".join(c.sentence for c in verdict.claims)
    proc = resolves(["--no-deps", "torch-npu"], python, tmp_path / "npu",
                    platform=f"manylinux_2_28_{platform.machine}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    npu = json.loads(proc.stdout)["install"][0]["metadata"]
    torch_req = [r for r in npu.get("requires_dist", []) if re.match(r"torch\b(?![-_])", r)]
    admits = all(Requirement(r).specifier.contains(newest[0], prereleases=True) for r in torch_req)
    assert ok == admits, detail
    if not ok:
        assert f"newest {npu['version']} requires torch" in detail
