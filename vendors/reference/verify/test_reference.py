"""refdev smoke tests, run inside the image beside the shared verify/ suite."""

import pytest
import torch

torch_refdev = pytest.importorskip("torch_refdev")


def test_backend_is_registered_as_refdev():
    assert torch._C._get_privateuse1_backend_name() == "refdev"
    assert torch.refdev.is_available()
    assert torch.refdev.device_count() >= 1


def test_extension_was_built_against_the_loaded_torch():
    assert torch_refdev.TORCH_BUILT_WITH == torch.__version__
    torch_refdev.check_torch_abi()


def test_tensor_on_refdev_matches_its_cpu_twin():
    cpu = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    dev = cpu.to("refdev")
    assert dev.device.type == "refdev"
    torch.testing.assert_close((dev * 2 + 1).sum(dim=1).cpu(), (cpu * 2 + 1).sum(dim=1))


def test_memory_lives_in_the_backends_own_allocator():
    before = torch.refdev.memory_allocated()
    block = torch.empty(1 << 20, dtype=torch.uint8, device="refdev")
    assert torch.refdev.memory_allocated() >= before + (1 << 20)
    del block
    assert torch.refdev.memory_allocated() == before


def test_mixing_cpu_and_refdev_tensors_is_an_error():
    with pytest.raises(RuntimeError, match="same device|Expected all tensors"):
        torch.ones(2, 2, device="refdev") + torch.ones(2, 2)


def test_torch_compile_matches_eager():
    """torch.compile on the device: what a user of a real accelerator expects to work. refdev
    has no Inductor backend yet; its skips.yaml says so (and until when)."""
    x = torch.linspace(-2, 2, 64, device="refdev")
    compiled = torch.compile(lambda t: torch.sin(t) * 2 + t.square())
    torch.testing.assert_close(compiled(x).cpu(), (torch.sin(x) * 2 + x.square()).cpu())
