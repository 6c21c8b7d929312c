"""The shared suite takes every vendor fact from vendor data: a fictional vendor, added as one
folder with its own driver library, reaches the compat layer and the ops layer through its
cell.json and nothing else.

The compat layer is run for real (verify/test_compat.py under pytest) against a stand-in torch
distribution whose native library is a real ELF file linked against the vendor's driver
library, built here with gcc and left off the loader's path, as on a host without the card.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from oota.config.matrix import load_matrix
from oota.plan import plan
from oota.render import cell_manifest
from tests.conftest import write_vendor_project

REPO = Path(__file__).resolve().parents[2]
MATRIX = """\
version: 1
os:
  debian12:
    image: debian:bookworm-slim
    python: ["3.11"]
vendors:
  acme:
    os: [debian12]
    python: ["3.11"]
    torch: ["2.13.0"]
"""
ACME = """\
    name: acme
    device: acme
    requirements: ["torch=={torch}"]
    host:
      devices: [/dev/acme0]
      driver_libraries: ["libacme_drv.so*"]
    """


def acme_manifest(tmp_path: Path) -> dict[str, object]:
    matrix = load_matrix(write_vendor_project(tmp_path / "project", MATRIX, {"acme": ACME}))
    [cell] = plan(matrix)
    return cell_manifest(cell)


def test_the_vendor_folder_alone_sets_its_driver_libraries_and_compared_device(
        tmp_path: Path) -> None:
    manifest = acme_manifest(tmp_path)
    assert manifest["driver_libraries"] == ["libacme_drv.so*"]
    # No compare_as in its vendor.yaml: the ops layer takes PyTorch's decisions for its device.
    assert manifest["verify"]["compare_as"] == "acme"  # type: ignore[index]


def stand_in_torch(root: Path) -> Path:
    """site-packages with a 'torch' whose one native library needs libacme_drv.so.1."""
    drv, site = root / "drv", root / "site"
    (site / "torch" / "lib").mkdir(parents=True)
    (site / "torch-2.13.0.dist-info").mkdir()
    drv.mkdir()
    (drv / "d.c").write_text("int acme_drv(void) { return 1; }\n")
    (root / "t.c").write_text("int acme_drv(void);\nint t(void) { return acme_drv(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(drv / "libacme_drv.so.1"),
                    "-Wl,-soname,libacme_drv.so.1", str(drv / "d.c")], check=True)
    (drv / "libacme_drv.so").symlink_to("libacme_drv.so.1")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(site / "torch/lib/libtorch_acme.so"),
                    str(root / "t.c"), f"-L{drv}", "-lacme_drv"], check=True)
    (site / "torch" / "__init__.py").write_text("")
    info = site / "torch-2.13.0.dist-info"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n")
    (info / "RECORD").write_text("torch/__init__.py,,\ntorch/lib/libtorch_acme.so,,\n"
                                 "torch-2.13.0.dist-info/METADATA,,\n")
    return site


def run_compat(tmp_path: Path, manifest: dict[str, object]) -> subprocess.CompletedProcess[str]:
    cell_file = tmp_path / "cell.json"
    cell_file.write_text(json.dumps(manifest))
    env = {**os.environ, "OOTA_CELL_FILE": str(cell_file), "PYTHONPATH": str(tmp_path / "site"),
           "OOTA_UNSUPPORTED_HERE": "no acme card on this host"}
    return subprocess.run([sys.executable, "-m", "pytest",
                           "test_compat.py::test_torch_native_modules_load", "-rs", "-q",
                           "-p", "no:cacheprovider"], cwd=REPO / "verify", env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the ELF files")
def test_its_driver_library_is_reported_as_the_hosts_not_as_a_broken_torch(
        tmp_path: Path) -> None:
    stand_in_torch(tmp_path)
    manifest = acme_manifest(tmp_path)
    outcome = run_compat(tmp_path, manifest)
    assert "1 skipped" in outcome.stdout, outcome.stdout
    assert "unsupported-here: libtorch_acme.so need the host's driver libraries (no acme card " \
           "on this host)" in outcome.stdout
    # Another vendor's driver libraries do not excuse it: the missing library is a failure.
    manifest["driver_libraries"] = ["libcuda.so*", "libnvidia-*.so*"]
    outcome = run_compat(tmp_path, manifest)
    assert "1 failed" in outcome.stdout and "libacme_drv.so.1" in outcome.stdout, outcome.stdout
