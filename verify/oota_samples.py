"""One operator's OpInfo samples on a device, for the ops layer (verify/test_ops.py): made
(on the device, or on the CPU and copied there where the vendor's hook asks), each pair's own
seed, run on the device and synchronised, copied to the CPU, and run on the CPU in float64
for the judge's reference; and how a sample's error reads in a verdict."""

from __future__ import annotations

import zlib
from typing import Any

import oota_hooks
import oota_opinfo
import oota_ops


def run(op: Any, sample: Any) -> Any:
    return sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))


def synchronize(device: Any) -> None:
    import torch

    wait = getattr(getattr(torch, device.type, None), "synchronize", None)
    if callable(wait):
        wait()


def make(op: Any, device: Any, dtype: Any, reference: bool, *,
         requires_grad: bool = False, limit: int | None = None) -> list[Any]:
    """The operator's samples on the device (the first ``limit`` where given): made there, or
    made on the CPU and copied there where the vendor's hook asks so
    (``oota_hooks.samples_on_cpu``); with ``requires_grad`` the copies are leaves of the device
    that require grad as the CPU's did."""
    import torch

    if not oota_hooks.samples_on_cpu(oota_hooks.vendor_hook()):
        return oota_opinfo.samples(op, device, dtype, reference=reference,
                                   requires_grad=requires_grad, limit=limit)
    made = oota_opinfo.samples(op, torch.device("cpu"), dtype, reference=reference,
                               requires_grad=requires_grad, limit=limit)

    def move(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        return t.detach().to(device).requires_grad_(t.requires_grad) if requires_grad \
            else t.to(device)
    return [s.transform(move) for s in made]


def run_on_device(op: Any, sample: Any, device: Any) -> Any:
    """The sample run on the device, and the device synchronised: a lazy backend
    (PyTorch/XLA) compiles and runs its graph there, so its failures surface here."""
    got = run(op, sample)
    synchronize(device)
    return got


def to_float64(value: Any) -> Any:
    """A floating tensor in float64, and a floating dtype argument (cumsum's dtype=float16)
    as float64 (the sample's transform hands both)."""
    import torch

    if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
        return value.to(torch.complex128 if value.is_complex() else torch.float64)
    if isinstance(value, torch.dtype) and (value.is_floating_point or value.is_complex):
        return torch.complex128 if value.is_complex else torch.float64
    return value


def float64_result(op: Any, cpu_sample: Any) -> Any:
    """The sample's result on the CPU in float64 (None where the operator cannot run so)."""
    try:
        return run(op, cpu_sample.transform(to_float64))
    except Exception:  # noqa: BLE001 - no reference: the judge falls back to the tolerance
        return None


def failed_making(exc: Exception) -> oota_ops.Outcome:
    """The outcome of a pair whose samples could not be made."""
    if not_implemented(exc):
        return oota_ops.Outcome(not_implemented=f"making samples: {first_line(exc)}")
    return oota_ops.Outcome(error=f"making samples: {first_line(exc)}")


def not_implemented(exc: Exception) -> bool:
    return isinstance(exc, NotImplementedError) or "not implemented for" in str(exc)


def first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def cpu_copy(sample: Any) -> Any:
    import torch

    return sample.transform(lambda t: t.to("cpu") if isinstance(t, torch.Tensor) else t)


def seed(name: str, dtype_name: str) -> None:
    """The pair's own seed: its samples are the same whichever process makes them, and on
    every run."""
    import torch

    torch.manual_seed(zlib.crc32(f"{name}-{dtype_name}".encode()))
