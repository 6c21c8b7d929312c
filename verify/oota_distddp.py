"""The distributed layer's DDP case: a tiny model trained for two SGD steps by
DistributedDataParallel, each rank on its share of one batch, and the same two steps in one
process on the CPU over the whole batch (in the model's dtype and in float64), which DDP's
averaged gradients must reproduce (``test_distributed.py`` judges them with oota_judge)."""

from __future__ import annotations

from typing import Any

SEED = 20261128
PER_RANK, FEATURES, HIDDEN, CLASSES = 4, 6, 8, 3
STEPS = 2
LR = 0.1


def _model(dtype: Any) -> Any:
    import torch

    torch.manual_seed(SEED)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, CLASSES)).to(dtype)


def batch(dtype: Any, world: int) -> tuple[Any, Any]:
    """The whole batch (inputs, labels) on the CPU; rank r trains on the r-th of its equal
    shares (equal, so that DDP's average of the ranks' gradients is the whole batch's)."""
    import torch

    gen = torch.Generator().manual_seed(SEED)
    return (torch.randn(PER_RANK * world, FEATURES, generator=gen).to(dtype),
            torch.randint(0, CLASSES, (PER_RANK * world,), generator=gen))


def _train(model: Any, inputs: Any, labels: Any) -> dict[str, Any]:
    """STEPS SGD steps; each step's loss and gradients, and the weights after the last."""
    import torch

    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses, grads = [], []
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        grads.append({n: p.grad.detach().cpu() for n, p in _named(model)})
        optimizer.step()
        losses.append(loss.detach().cpu())
    return {"losses": losses, "grads": grads,
            "params": {n: p.detach().cpu() for n, p in _named(model)}}


def _named(model: Any) -> list[tuple[str, Any]]:
    # DDP's module is the wrapped one: names without its "module." prefix.
    inner = getattr(model, "module", model)
    return list(inner.named_parameters())


def ddp_run(rank: int, world: int, device: Any, dtype_name: str) -> dict[str, Any]:
    """This rank's two DDP steps on its share of the batch, on ``device``."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    dtype = getattr(torch, dtype_name)
    inputs, labels = batch(dtype, world)
    share = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
    model = DistributedDataParallel(_model(dtype).to(device))
    return _train(model, inputs[share].to(device), labels[share].to(device))


def single_process(dtype: Any, world: int) -> dict[str, Any]:
    """The same steps in one process on the CPU over the whole batch."""
    inputs, labels = batch(dtype, world)
    return _train(_model(dtype), inputs, labels)
