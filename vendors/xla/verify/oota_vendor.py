"""PyTorch/XLA's verify hook (verify/oota_hooks.py loads it before the suite uses the device).

* ``torch.xla``: torch_xla registers no device module, so the suite's device calls
  (``is_available``, ``device_count``, ``synchronize``) are given one here, on torch_xla's
  runtime API. ``synchronize()`` cuts the lazy graph (``torch_xla.sync()``) and waits for the
  device: XLA traces operations and compiles and runs them only at a sync or a transfer, so a
  lowering failure surfaces there.
* ``fallback_counts()``: torch_xla counts every aten operator it has no lowering for and runs
  on the CPU as an ``aten::NAME`` counter (``torch_xla.debug.metrics``).
* ``device_metrics()``: compilations and compile seconds, executions and their seconds.
* ``SAMPLES_ON_CPU``: the ops layer makes OpInfo samples on the CPU and copies them here.
* The fault switch ``OOTA_XLA_WRONG_OP`` (an aten operator, ``tanh`` or ``mul.Tensor``):
  that operator gets a wrong kernel on the XLA dispatch key through ``torch.library`` (the
  result is computed on the CPU and 1 is added to it; booleans are negated), so a suite that
  compares XLA with the CPU must report that operator failed, in every dtype. Unset, nothing
  is registered.
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable
from typing import Any

import torch
import torch_xla
import torch_xla.backends
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.runtime as xr
from torch.utils._pytree import tree_leaves, tree_map

WRONG_VARIABLE = "OOTA_XLA_WRONG_OP"
# Samples made on the CPU and copied here (verify/oota_hooks.py): made on the XLA device, each
# random input would be traced off the generator's seed chain and compile a graph of its own.
SAMPLES_ON_CPU = True
FALLBACK_PREFIX = "aten::"
_libraries: list[Any] = []  # registrations live as long as their Library objects


def _is_available() -> bool:
    try:
        return xr.global_runtime_device_count() > 0
    except RuntimeError:
        return False


def _device_count() -> int:
    return int(xr.global_runtime_device_count())


def _synchronize(device: Any = None) -> None:
    torch_xla.sync()
    xm.wait_device_ops()


def _device_module() -> types.ModuleType:
    module = types.ModuleType("torch.xla", "torch_xla's runtime, as the suite's device module")
    module.is_available = _is_available  # type: ignore[attr-defined]
    module.device_count = _device_count  # type: ignore[attr-defined]
    module.synchronize = _synchronize  # type: ignore[attr-defined]
    return module


def fallback_counts() -> dict[str, int]:
    """{aten operator: calls} run on the CPU by torch_xla's fallback, since the start."""
    return {name.removeprefix(FALLBACK_PREFIX): int(met.counter_value(name) or 0)
            for name in met.counter_names() if name.startswith(FALLBACK_PREFIX)}


def _metric(name: str) -> tuple[float, float]:
    data = met.metric_data(name)
    return (float(data[0]), float(data[1]) / 1e9) if data else (0.0, 0.0)


def device_metrics() -> dict[str, float]:
    compiles, compile_s = _metric("CompileTime")
    executions, execute_s = _metric("ExecuteTime")
    return {"compiles": compiles, "compile_s": compile_s, "executions": executions,
            "execute_s": execute_s}


def _wrong(value: Any) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    return ~value if value.dtype == torch.bool else value + 1


def _wrong_kernel(op: Callable[..., Any]) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        device = next(a.device for a in tree_leaves((args, kwargs))
                      if isinstance(a, torch.Tensor))
        host = tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, (args, kwargs))
        result = op(*host[0], **host[1])
        return tree_map(lambda x: _wrong(x).to(device) if isinstance(x, torch.Tensor) else x,
                        result)
    return kernel


def install_wrong(name: str) -> None:
    """Give aten operator ``name`` (``packet`` or ``packet.overload``) a wrong XLA kernel."""
    packet, _, overload = name.partition(".")
    try:
        op = getattr(getattr(torch.ops.aten, packet), overload or "default")
    except AttributeError:
        raise ValueError(f"{WRONG_VARIABLE}={name!r}: no aten operator of that name "
                         "(e.g. tanh, mul.Tensor)") from None
    library = torch.library.Library("aten", "IMPL")
    library.impl(name, _wrong_kernel(op), "XLA")
    _libraries.append(library)


# Matmuls in full float32, as the suite asks of every device (torch's own setting does not
# reach XLA, whose TPUs would otherwise multiply float32 in bfloat16 passes).
torch_xla.backends.set_mat_mul_precision("highest")
if not hasattr(torch, "xla"):
    torch._register_device_module("xla", _device_module())
if os.environ.get(WRONG_VARIABLE, "").strip():
    install_wrong(os.environ[WRONG_VARIABLE].strip())
