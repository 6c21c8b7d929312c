"""Gaudi vendor tests: Intel's torch and habana_frameworks pair with the cell's Gaudi software,
and a computation runs on an HPU. HPU checks skip, with the reason, when none is visible."""

import importlib.metadata

import pytest
import torch
from oota_suite import skip_without_device
from packaging.version import Version

PLUGIN = "habana-torch-plugin"


@pytest.fixture(scope="module")
def htcore():
    import habana_frameworks.torch.core as module  # noqa: PLC0415 - the import is under test

    return module


@pytest.fixture(scope="module")
def hpu(htcore) -> torch.device:
    import habana_frameworks.torch.hpu as hthpu  # noqa: PLC0415

    if not hthpu.is_available():
        skip_without_device("no HPU visible here (habana_frameworks.torch.hpu.is_available() "
                    "is False): run it with --runtime=habana on a Gaudi host")
    return torch.device("hpu")


def test_plugin_matches_cell(cell):
    # habana-torch-plugin's version is the Gaudi software release plus its build (1.23.0.695).
    plugin = Version(importlib.metadata.version(PLUGIN))
    assert plugin.release[:3] == Version(cell["toolkit_version"]).release[:3], (
        f"{PLUGIN} {plugin} in an image for Gaudi software {cell['toolkit_version']}")


def test_torch_is_intels_build_for_the_cell(cell, htcore):
    assert Version(torch.__version__).release[:2] == Version(cell["torch"]).release[:2], (
        f"torch {torch.__version__}, the cell promises {cell['torch']}")
    assert torch.version.cuda is None


def test_device_count(hpu):
    import habana_frameworks.torch.hpu as hthpu  # noqa: PLC0415

    assert hthpu.device_count() >= 1


def test_known_result_on_hpu(hpu):
    assert (torch.tensor([2]).to(hpu) * 2).item() == 4


def test_matmul_matches_cpu(hpu):
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 32, generator=gen), torch.randn(32, 16, generator=gen)
    result = (a.to(hpu) @ b.to(hpu)).cpu()
    torch.testing.assert_close(result, a @ b, rtol=1e-3, atol=1e-3)
