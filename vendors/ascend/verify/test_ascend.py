"""Ascend vendor tests: torch_npu pairs with torch, CANN is the cell's, and it computes on an NPU.

Importing torch_npu needs CANN's libraries (the entrypoint sources set_env.sh): without them
the import fails, and that is a failure of the image, not a skip. NPU checks skip, with the
reason, when no NPU is visible.
"""

import importlib.metadata
import os
from pathlib import Path

import pytest
import torch
from oota_suite import skip_without_device
from packaging.version import Version

TOOLKIT_HOME = Path(os.environ.get("ASCEND_TOOLKIT_HOME",
                                   "/usr/local/Ascend/ascend-toolkit/latest"))


@pytest.fixture(scope="module")
def torch_npu():
    import torch_npu as module  # noqa: PLC0415 - the import itself is under test

    return module


@pytest.fixture(scope="module")
def npu(torch_npu) -> torch.device:
    if not torch.npu.is_available():
        skip_without_device("no NPU visible here (torch.npu.is_available() is False): run "
                    "it with the davinci device flags on a host with the Ascend driver")
    return torch.device("npu", 0)


def test_torch_is_the_cpu_build():
    assert torch.version.cuda is None, f"torch {torch.__version__} is a CUDA build"


def test_torch_npu_pairs_with_torch(torch_npu):
    # torch_npu X.Y.Z[.postN] is built for torch X.Y.Z exactly.
    npu_release = Version(importlib.metadata.version("torch-npu")).release[:3]
    assert npu_release == Version(torch.__version__).release[:3], (
        f"torch-npu {importlib.metadata.version('torch-npu')} with torch {torch.__version__}")


def test_cann_version_matches_cell(cell):
    infos = sorted(TOOLKIT_HOME.glob("*/ascend_toolkit_install.info")) \
        + sorted(TOOLKIT_HOME.glob("ascend_toolkit_install.info"))
    if not infos:
        pytest.fail(f"no ascend_toolkit_install.info under {TOOLKIT_HOME}: CANN is not installed")
    fields = dict(line.split("=", 1) for line in infos[0].read_text().splitlines() if "=" in line)
    found = fields.get("version", "").strip()
    assert found.lower().startswith(cell["toolkit_version"].lower()), (
        f"{infos[0]} says CANN {found!r}, the cell promises {cell['toolkit_version']}")


def test_device_count(npu):
    assert torch.npu.device_count() >= 1


def test_matmul_matches_cpu(npu):
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 32, generator=gen), torch.randn(32, 16, generator=gen)
    result = (a.npu() @ b.npu()).cpu()
    torch.testing.assert_close(result, a @ b, rtol=1e-3, atol=1e-3)
