"""CUDA vendor tests: the image holds the CUDA build the cell promises, and it computes on a GPU.

Install-level checks run everywhere; the GPU checks skip, with the reason, when no GPU is
visible (no NVIDIA driver on the host, or the container was started without ``--gpus all``).
"""

import pytest
import torch
from oota_suite import skip_without_device


@pytest.fixture(scope="module")
def gpu() -> torch.device:
    if not torch.cuda.is_available():
        skip_without_device("no CUDA device visible here (torch.cuda.is_available() is "
                    "False): run it with --gpus all on a host with an NVIDIA driver")
    return torch.device("cuda", 0)


def test_torch_is_a_cuda_build():
    assert torch.version.cuda is not None, f"torch {torch.__version__} is not a CUDA build"
    assert torch.version.hip is None, f"torch {torch.__version__} is a ROCm build"


def test_cuda_version_matches_cell(cell):
    assert torch.version.cuda == cell["toolkit_version"], (
        f"torch {torch.__version__} is built for CUDA {torch.version.cuda}, the cell promises "
        f"CUDA {cell['toolkit_version']} (index {cell['index_url']})")


def test_cudnn_is_bundled():
    # The version of the cuDNN library torch loads; needs no GPU.
    version = torch.backends.cudnn.version()
    assert isinstance(version, int) and version > 0, version


def test_device_count(gpu):
    assert torch.cuda.device_count() >= 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16],
                         ids=["float32", "float16", "bfloat16"])
def test_matmul_matches_cpu(gpu, dtype):
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 32, generator=gen), torch.randn(32, 16, generator=gen)
    expected = (a @ b).to(dtype)
    result = (a.to(gpu, dtype) @ b.to(gpu, dtype)).cpu()
    # Products of 32 terms rounded to dtype: compare at the dtype's own tolerance, scaled by K.
    rtol, atol = {torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 5e-2),
                  torch.bfloat16: (5e-2, 2.5e-1)}[dtype]
    torch.testing.assert_close(result, expected, rtol=rtol, atol=atol)
