"""PyTorch/XLA device checks beside the shared device layer: tensors live on the XLA device,
work is traced lazily and runs at a sync, and the default dtype is float32 (no
``XLA_USE_BF16``-style downcast), on the PJRT client ``PJRT_DEVICE`` names.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

LAYER = "device"
PJRT_FILE = Path(__file__).with_name("pjrt.yaml")


@pytest.fixture(scope="module")
def xla(device):
    import torch_xla

    return torch_xla.device()


def test_pjrt_client_is_the_one_asked_for(xla, record_data):
    """PJRT_DEVICE names a client pjrt.yaml declares, and torch_xla runs on that client."""
    import torch_xla.runtime as xr
    import yaml

    declared = yaml.safe_load(PJRT_FILE.read_text())
    asked = os.environ.get("PJRT_DEVICE", "")
    record_data(pjrt_device=asked, device_type=xr.device_type(), device=str(xla),
                declared=sorted(declared))
    assert asked, "PJRT_DEVICE is unset: torch_xla would pick a client by itself"
    assert asked in declared, f"PJRT_DEVICE={asked} is none of pjrt.yaml's {sorted(declared)}"
    assert "unavailable" not in declared[asked], declared[asked]["unavailable"]
    assert xr.device_type() == asked


def test_tensors_are_xla_tensors(xla):
    import torch

    x = torch.arange(6, dtype=torch.float32, device=xla).reshape(2, 3)
    y = (x * 2 + 1).sum(dim=0)
    assert x.device.type == "xla" and y.device.type == "xla"
    assert y.cpu().tolist() == [8.0, 12.0, 16.0]


def test_work_runs_at_the_sync(xla, record_data):
    """Operations only build a graph; torch_xla.sync() compiles and executes it. A sync only
    launches the execution, whose ExecuteTime sample lands when it ends: each count is read
    after wait_device_ops(), or the previous graph's could land while this one is traced."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    def executions() -> int:
        xm.wait_device_ops()
        data = met.metric_data("ExecuteTime")
        return int(data[0]) if data else 0

    x = torch.full((4, 4), 3.0, device=xla)
    torch_xla.sync()
    before = executions()
    y = x @ x + 1
    traced = executions()
    torch_xla.sync()
    after = executions()
    record_data(executions_before=before, after_tracing=traced, after_sync=after)
    assert traced == before, "an operation executed before the sync: not lazy"
    assert after > traced, "torch_xla.sync() executed nothing"
    assert float(y[0, 0].cpu()) == 37.0


def test_default_dtype_is_float32_on_the_device(xla):
    import torch

    x = torch.ones(3, device=xla)
    assert torch.get_default_dtype() == torch.float32 and x.dtype == torch.float32
    # 1 + 2**-20 exists in float32, not in bfloat16: a silent downcast would round it to 1.
    small = (x + 2.0 ** -20).cpu()
    assert small[0].item() == 1.0 + 2.0 ** -20
