"""PyTorch/XLA vendor checks: what fell back to the CPU and what compiling cost, as figures.

An operator without an XLA lowering runs on the CPU through torch_xla's fallback, counted as
``aten::NAME`` in ``torch_xla.debug.metrics``; the ops layer reports such pairs as run on the
CPU. Each new shape compiles once (PJRT CPU: milliseconds each), after which the cached
executable runs.
"""

from __future__ import annotations

LAYER = "vendor"


def test_fallback_is_counted(device, record_data):
    """nonzero has no lowering (its output's shape depends on the data): it must show as a
    fallback, or the ops layer could not tell the device's work from the CPU's."""
    import oota_vendor
    import torch

    before = oota_vendor.fallback_counts()
    torch.tensor([0.0, 1.0, 0.0, 2.0], device=device).nonzero().cpu()
    after = oota_vendor.fallback_counts()
    record_data(fallbacks=after)
    assert after.get("nonzero", 0) > before.get("nonzero", 0), after


def test_a_lowered_op_does_not_fall_back(device):
    import oota_vendor
    import torch

    before = oota_vendor.fallback_counts()
    (torch.linspace(-1, 1, 8, device=device).tanh() * 3).cpu()
    assert oota_vendor.fallback_counts() == before


def test_compiles_once_per_shape(device, record_data):
    import oota_vendor
    import torch
    import torch_xla

    def step(n: int) -> None:
        (torch.ones(n, n, device=device) @ torch.ones(n, n, device=device)).sum().cpu()
        torch_xla.sync()

    first = oota_vendor.device_metrics()
    step(37)
    second = oota_vendor.device_metrics()
    step(37)
    third = oota_vendor.device_metrics()
    record_data(first_compile_s=second["compile_s"] - first["compile_s"],
                compiles_first=second["compiles"] - first["compiles"],
                compiles_again=third["compiles"] - second["compiles"])
    assert second["compiles"] > first["compiles"], "a new shape compiled nothing"
    assert third["compiles"] == second["compiles"], "the same shape compiled again"
