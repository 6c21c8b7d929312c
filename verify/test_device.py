"""Device layer: the vendor's device allocates, copies and computes like the CPU reference.

Every dtype the vendor declares (cell.json ``verify.dtypes``) goes through host->device->host
and device->device copies, a matmul (floating dtypes) and reductions, compared with the same
computation on the CPU within the vendor's per-dtype tolerance (``verify.tolerances``).
For the CPU vendor the device is the reference: the comparison is trivial and recorded as such.
"""

from __future__ import annotations

import os

import pytest

LAYER = "device"
SEED = 1234


def _dtype(name: str):
    import torch

    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        pytest.fail(f"verify.dtypes names '{name}', which is not a torch dtype")
    return dtype


def _sample(dtype, *shape):
    """Deterministic CPU data; small integers for integer dtypes, [-1, 1) for floating ones."""
    import torch

    gen = torch.Generator().manual_seed(SEED)
    if dtype.is_floating_point:
        return (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype)
    return torch.randint(-8, 8, shape, generator=gen, dtype=torch.int64).to(dtype)


def _max_abs_diff(a, b) -> float:
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0


def test_device_visible(cell, device_seen, record_data, record_status):
    """The positive evidence every device-facing layer rests on: this container's torch uses
    the vendor's device. Where the host lacks the hardware the test is unsupported here; where
    the host has it (or the vendor needs none) and the container cannot use it, it fails with
    the reason and what to check, as an error where the host gave the container no access to
    the device (none of the vendor's device nodes is in it). Never a skip, never a pass."""
    from oota_suite import Unseen, skip_without_device

    unsupported = os.environ.get("OOTA_UNSUPPORTED_HERE")
    if isinstance(device_seen, Unseen):
        record_data(visible=False, host_cause=device_seen.host_cause,
                    device_nodes=list(cell.get("device_nodes") or ()))
        if unsupported:
            skip_without_device(device_seen.reason)
        if device_seen.host_cause:
            record_status("error")
        pytest.fail(device_seen.advice(cell), pytrace=False)
    import torch

    assert device_seen.type == cell["device"], (
        f"the suite opened {device_seen}, the cell's device is {cell['device']}")
    # Seen is not enough: a small computation on the device, copied back, is the evidence.
    x = torch.arange(8, dtype=torch.float32, device=device_seen)
    y = (x * 2 + 1).cpu()
    record_data(visible=True, device=str(x.device))
    assert x.device.type == cell["device"], f"a tensor made on {device_seen} is on {x.device}"
    assert y.tolist() == [2.0 * i + 1 for i in range(8)], f"2x+1 on the device gave {y.tolist()}"


def test_device_count(device, device_module, record_data):
    count = device_module.device_count() if hasattr(device_module, "device_count") else None
    record_data(device=str(device), count=count)
    assert count is None or count >= 1, f"torch.{device.type}.device_count() is {count}"


def test_allocation(device, device_module, record_data):
    import torch

    x = torch.empty(1 << 20, dtype=torch.float32, device=device)  # 4 MiB
    x.fill_(2.0)
    allocated = (device_module.memory_allocated()
                 if hasattr(device_module, "memory_allocated") else None)
    record_data(bytes_requested=x.numel() * x.element_size(), memory_allocated=allocated)
    assert x.device.type == device.type
    assert float(x.sum().cpu()) == 2.0 * (1 << 20)
    assert allocated is None or allocated >= x.numel() * x.element_size()


def test_copies_preserve_values(device, dtype_name, record_data):
    import torch

    dtype = _dtype(dtype_name)
    host = _sample(dtype, 33, 17)
    on_device = host.to(device)                      # host -> device
    other = torch.empty_like(on_device).copy_(on_device)  # device -> device
    cloned = on_device.clone()
    record_data(dtype=dtype_name, trivial=device.type == "cpu")
    assert on_device.dtype == dtype and on_device.device.type == device.type
    assert torch.equal(other.cpu(), host)             # device -> host
    assert torch.equal(cloned.cpu(), host)


def test_matmul_matches_cpu(device, dtype_name, tolerance, record_data):
    import torch

    dtype = _dtype(dtype_name)
    if not dtype.is_floating_point:
        pytest.skip(f"matmul is checked for floating dtypes; {dtype_name} goes through the "
                    "copy and reduction checks")
    a, b = _sample(dtype, 48, 32), _sample(dtype, 32, 40).flip(0)
    reference = a @ b
    result = (a.to(device) @ b.to(device)).cpu()
    diff = _max_abs_diff(result, reference)
    record_data(dtype=dtype_name, max_abs_diff=diff, trivial=device.type == "cpu",
                **tolerance(dtype_name))
    torch.testing.assert_close(result, reference, **tolerance(dtype_name))


def test_reduction_matches_cpu(device, dtype_name, tolerance, record_data):
    import torch

    dtype = _dtype(dtype_name)
    x = _sample(dtype, 64, 48)
    on_device = x.to(device)
    pairs = [(on_device.sum(dim=0).cpu(), x.sum(dim=0)),
             (on_device.amax(dim=1).cpu(), x.amax(dim=1))]
    if dtype.is_floating_point:
        pairs.append((on_device.mean(dim=1).cpu(), x.mean(dim=1)))
    diff = max(_max_abs_diff(got, want) for got, want in pairs)
    record_data(dtype=dtype_name, max_abs_diff=diff, trivial=device.type == "cpu",
                **tolerance(dtype_name))
    for got, want in pairs:
        torch.testing.assert_close(got, want, **tolerance(dtype_name))


def test_matmul_known_result(device):
    import torch

    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    b = torch.tensor([[5.0, 6.0], [7.0, 8.0]], device=device)
    assert (a @ b).cpu().tolist() == [[19.0, 22.0], [43.0, 50.0]]


def test_synchronize(device, device_module):
    import torch

    if not hasattr(device_module, "synchronize"):
        pytest.skip(f"torch.{device.type} has no synchronize()")
    x = torch.ones(256, 256, device=device)
    y = x @ x
    device_module.synchronize()
    assert float(y[0, 0].cpu()) == 256.0
