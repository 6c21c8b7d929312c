"""ROCm vendor tests: the image holds the ROCm build the cell promises, and it computes on an
AMD GPU (torch's "cuda" device). GPU checks skip, with the reason, when none is visible."""

import pytest
import torch
from oota_suite import skip_without_device
from packaging.version import Version


@pytest.fixture(scope="module")
def gpu() -> torch.device:
    if not torch.cuda.is_available():
        skip_without_device("no ROCm device visible here (torch.cuda.is_available() is "
                    "False): run it with --device=/dev/kfd --device=/dev/dri on an AMD GPU host")
    return torch.device("cuda", 0)


def test_torch_is_a_rocm_build():
    assert torch.version.hip is not None, f"torch {torch.__version__} is not a ROCm build"
    assert torch.version.cuda is None, f"torch {torch.__version__} is a CUDA build"


def test_rocm_version_matches_cell(cell):
    # torch.version.hip reads like "7.2.26015-abcdef"; the cell names major.minor.
    hip = Version(torch.version.hip.split("-")[0])
    wanted = Version(cell["toolkit_version"])
    assert hip.release[:2] == wanted.release[:2], (
        f"torch {torch.__version__} is built for HIP {torch.version.hip}, the cell promises "
        f"ROCm {wanted}")


def test_local_version_names_rocm(cell):
    assert Version(torch.__version__).local == f"rocm{cell['toolkit_version']}", torch.__version__


def test_device_count(gpu):
    assert torch.cuda.device_count() >= 1


def test_device_is_amd(gpu):
    assert torch.cuda.get_device_properties(gpu).gcnArchName, "no gfx architecture reported"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
def test_matmul_matches_cpu(gpu, dtype):
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 32, generator=gen), torch.randn(32, 16, generator=gen)
    result = (a.to(gpu, dtype) @ b.to(gpu, dtype)).cpu()
    rtol, atol = {torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 5e-2)}[dtype]
    torch.testing.assert_close(result, (a @ b).to(dtype), rtol=rtol, atol=atol)
