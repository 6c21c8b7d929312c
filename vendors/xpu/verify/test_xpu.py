"""Intel XPU vendor tests: the image holds PyTorch's XPU build, without the retired
intel-extension-for-pytorch, and it computes on an Intel GPU. GPU checks skip, with the
reason, when none is visible."""

import importlib.util

import pytest
import torch
from oota_suite import skip_without_device
from packaging.version import Version


@pytest.fixture(scope="module")
def xpu() -> torch.device:
    if not torch.xpu.is_available():
        skip_without_device("no XPU device visible here (torch.xpu.is_available() is "
                    "False): run it with --device /dev/dri on a host with the Intel GPU driver")
    return torch.device("xpu", 0)


def test_torch_is_an_xpu_build():
    assert Version(torch.__version__).local == "xpu", torch.__version__
    assert torch.xpu._is_compiled(), f"torch {torch.__version__} was built without XPU"
    assert torch.version.cuda is None and torch.version.hip is None


def test_oneapi_version_is_recorded():
    # The SYCL/oneAPI compiler version the wheel was built with, e.g. "20250101".
    assert getattr(torch.version, "xpu", None), "torch.version.xpu is empty"


def test_retired_extension_is_absent(cell):
    # intel-extension-for-pytorch stopped at 2.8.0 (torch 2.8); with newer torch it breaks imports.
    # A nightly cell (torch from a channel) is newer than any release: the rule applies too.
    if cell.get("channel") or Version(cell["torch"]) >= Version("2.9"):
        assert importlib.util.find_spec("intel_extension_for_pytorch") is None


def test_device_count(xpu):
    assert torch.xpu.device_count() >= 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_matmul_matches_cpu(xpu, dtype):
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 32, generator=gen), torch.randn(32, 16, generator=gen)
    result = (a.to(xpu, dtype) @ b.to(xpu, dtype)).cpu()
    rtol, atol = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (5e-2, 2.5e-1)}[dtype]
    torch.testing.assert_close(result, (a @ b).to(dtype), rtol=rtol, atol=atol)
