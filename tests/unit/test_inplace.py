"""verify --here: which cell an interpreter is an instance of, probed for real in a subprocess.

The interpreter is this one, started through a wrapper whose PYTHONPATH holds a stand-in torch
distribution (version metadata and ``torch.version.cuda`` only): enough for the probe, which
imports nothing else.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from oota.config.matrix import load_matrix
from oota.errors import EnvironmentProblem
from oota.execute.inplace import manifest_here, matching_cell, probe_python

REPO = Path(__file__).resolve().parents[2]
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def interpreter(tmp_path: Path, torch: str | None, cuda: str | None = None) -> str:
    site = tmp_path / "site"
    if torch is not None:
        (site / "torch").mkdir(parents=True)
        (site / "torch" / "__init__.py").write_text(f"__version__ = {torch!r}\n")
        (site / "torch" / "version.py").write_text(f"cuda = {cuda!r}\n")
        public = torch.split("+")[0]
        info = site / f"torch-{public}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {public}\n")
    wrapper = tmp_path / "python"
    # -S: no site-packages, so the stand-in is the only torch the probe can find.
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" -S "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(REPO / "matrix.yaml")


def test_probe_reads_python_torch_and_toolkit(tmp_path):
    env = probe_python(interpreter(tmp_path, "2.14.1+cu130", "13.0"), "torch.version.cuda")
    assert (str(env.python), str(env.torch), env.toolkit) == (PY, "2.14.1", "13.0")


def test_probe_without_torch_says_how_to_fix(tmp_path):
    with pytest.raises(EnvironmentProblem, match="torch is not installed for .*--python"):
        probe_python(interpreter(tmp_path, None))


@pytest.mark.skipif(PY != "3.11", reason="the repo's CUDA 2.14.1 cells on Debian 12 are py3.11")
@pytest.mark.parametrize("cuda", ["12.6", "13.0", "13.2"])
def test_the_cell_with_the_same_cuda_is_chosen(tmp_path, matrix, cuda):
    """torch 2.14.1 exists for three CUDA versions: the interpreter's own one decides."""
    cell, _ = matching_cell(matrix, "cuda", interpreter(tmp_path, f"2.14.1+cu{cuda}", cuda))
    assert cell is not None and cell.id == f"cuda-torch2.14.1-cu{cuda}-py3.11-debian12"


def test_an_environment_of_no_cell_is_described_as_it_is(tmp_path, matrix):
    manifest, cell_id, digest = manifest_here(
        matrix, "cuda", interpreter(tmp_path, "2.11.0+cu130", "13.0"))
    assert cell_id == f"cuda-torch2.11.0-cu13.0-py{PY}-host-here"
    assert (manifest["torch"], manifest["python"], manifest["toolkit_version"]) == \
        ("2.11.0", PY, "13.0")
    assert manifest["os"] == "host" and digest.startswith("sha256:")
    # The vendor's checks and data still apply: the device, its dtypes and models.
    assert manifest["device"] == "cuda" and "llama" in manifest["verify"]["models"]


def test_an_environment_without_the_toolkit_is_a_cell_without_one(tmp_path, matrix):
    """CPU torch checked as CUDA: described as it is (no cuXY in the id, no toolkit version),
    so the CUDA checks fail for the right reason instead of the probe crashing."""
    manifest, cell_id, _ = manifest_here(matrix, "cuda", interpreter(tmp_path, "2.13.0+cpu"))
    assert cell_id == f"cuda-torch2.13.0-py{PY}-host-here"
    assert manifest["toolkit_version"] is None and manifest["index_url"] == ""
