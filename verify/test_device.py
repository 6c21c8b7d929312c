"""Device layer: a small computation on the vendor's device, checked against known numbers."""

import pytest

LAYER = "device"


@pytest.fixture(scope="module")
def device(device_type):
    import torch

    if device_type != "cpu":
        module = getattr(torch, device_type, None)
        if module is None or not module.is_available():
            pytest.skip(f"no {device_type} device visible in this container "
                        f"(torch.{device_type}.is_available() is False)")
    return torch.device(device_type)


def test_matmul_known_result(device):
    import torch

    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    b = torch.tensor([[5.0, 6.0], [7.0, 8.0]], device=device)
    result = (a @ b).cpu()
    assert result.tolist() == [[19.0, 22.0], [43.0, 50.0]]


def test_reduction_matches_cpu_reference(device):
    import torch

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 64, generator=gen)
    on_device = x.to(device).sum(dim=0).cpu()
    torch.testing.assert_close(on_device, x.sum(dim=0), rtol=1e-5, atol=1e-5)


def test_device_roundtrip_preserves_values(device):
    import torch

    x = torch.arange(10, dtype=torch.float32)
    assert torch.equal(x.to(device).cpu(), x)
