"""One rank of the distributed layer (``oota_distributed``): it opens the device as the suite
does, joins the process group on the vendor's backend, and takes every case of the plan in
order, saving what it received; exit 3 when the device cannot be opened here, 4 when a case
raised (its traceback is in the log the pytest process quotes)."""

from __future__ import annotations

import datetime
import faulthandler
import gc
import importlib
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from oota_distddp import ddp_run
from oota_distributed import (
    DEADLINE_VARIABLE,
    FOLDER_VARIABLE,
    SENTINEL,
    Case,
    dtypes_of,
    plan,
    rank_input,
)

HERE = Path(__file__).resolve().parent


def _outputs(case: Case, tensor: Any, world: int) -> list[Any]:
    """The output tensors of ``case``'s collective on the device, each holding SENTINEL (a
    rank that receives nothing keeps it)."""
    import torch

    size = tensor.numel() // world if case.collective == "reduce_scatter" else tensor.numel()
    count = world if case.collective == "all_gather" else 1
    return [torch.full((size,), SENTINEL, dtype=tensor.dtype, device=tensor.device)
            for _ in range(count)]


def _collective(case: Case, rank: int, world: int, device: Any) -> list[Any]:
    """Run ``case``'s collective on this rank's input; its outputs, on the CPU."""
    import torch.distributed as dist

    tensor = rank_input(case, rank, world).to(device)
    outs = _outputs(case, tensor, world)
    if case.collective == "all_reduce":
        dist.all_reduce(tensor)
        outs = [tensor]
    elif case.collective == "broadcast":
        dist.broadcast(tensor, src=world - 1)
        outs = [tensor]
    elif case.collective == "all_gather":
        dist.all_gather(outs, tensor)
    elif case.collective == "reduce_scatter":
        dist.reduce_scatter(outs[0], list(tensor.chunk(world)))
    elif case.collective == "all_to_all":
        dist.all_to_all_single(outs[0], tensor)
    return [out.cpu() for out in outs]


def _step(case: Case, rank: int, world: int, device: Any, spec: dict[str, Any]) -> Any:
    import torch.distributed as dist

    if case.collective == "barrier":
        dist.barrier()
        return []
    if case.collective == "ddp":
        return ddp_run(rank, world, device, str(spec.get("model_dtype") or "float32"))
    return _collective(case, rank, world, device)


def _rank_device(device: Any, rank: int) -> Any:
    import torch

    if device.type == "cpu":
        return device
    module = getattr(torch, device.type)
    count = module.device_count() if hasattr(module, "device_count") else 1
    chosen = torch.device(device.type, rank % max(count, 1))
    if hasattr(module, "set_device"):
        module.set_device(chosen)
    return chosen


def _run(cell: dict[str, Any], device: Any, folder: Path) -> int:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    spec = cell.get("verify") or {}
    dist_spec = spec.get("distributed") or {}
    for name in dist_spec.get("imports") or ():
        importlib.import_module(name)  # a backend that registers itself on this import
    device = _rank_device(device, rank)
    # The group's own timeout lies past the pytest process's deadline, which names the case.
    deadline = float(os.environ.get(DEADLINE_VARIABLE) or 60)
    dist.init_process_group(dist_spec.get("backend"), rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=2 * deadline + 60))
    for case in plan(dist_spec, dtypes_of(spec)):
        (folder / f"rank{rank}.progress.tmp").write_text(str(case.index))
        (folder / f"rank{rank}.progress.tmp").replace(folder / f"rank{rank}.progress")
        try:
            result = _step(case, rank, world, device, spec)
        except Exception:  # noqa: BLE001 - the pytest process quotes it as the case's failure
            print(f"rank {rank} raised in {case.words}:\n{traceback.format_exc()}",
                  file=sys.stderr)
            return 4
        torch.save(result, folder / f"rank{rank}-{case.index}.pt")
        del result
    # DDP's model lives in reference cycles (its hooks), and its reducer holds the process
    # group: collected at interpreter exit, it destroyed gloo's group there, which aborted the
    # rank now and then after every case had passed (a loaded 2-core host, 1 run in 4). Free it
    # while the interpreter is whole, then destroy the group, as PyTorch's shutdown docs ask.
    gc.collect()
    dist.destroy_process_group()
    return 0


def main() -> int:
    faulthandler.enable()
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(HERE))
    from oota_suite import opened_device, read_cell

    cell = read_cell()
    with opened_device(cell) as device:
        if isinstance(device, str):
            print(f"oota distributed rank: {device}", file=sys.stderr)
            return 3
        return _run(cell, device, Path(os.environ[FOLDER_VARIABLE]))


if __name__ == "__main__":
    sys.exit(main())
