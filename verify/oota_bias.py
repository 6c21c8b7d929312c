"""Rounding bias: whether a device's results lean one way between the two numbers of the dtype
around each exact value (``oota_rules.Bias`` and ``oota_rules.biased`` hold the numbers).
``oota_floats`` measures each half-precision output here; ``oota_judge`` fails a case whose
outputs, pooled, lean, and ``oota_judge.pooled_bias`` a pair whose samples do.
"""

from __future__ import annotations

from typing import Any

from oota_outputs import Outputs, Wrong
from oota_rules import FLOATS, Bias, biased


def _placed(values: Any, reference: Any, mask: Any, dtype: str) -> Any:
    """Where each of ``values`` sits against the two numbers of ``dtype`` around its float64
    value: its distance in ulps above the one nearer zero, minus 1/2 (negative: toward
    zero; the one nearer zero is -1/2, the other +1/2)."""
    import torch

    eps, _ = FLOATS[dtype]
    exact = reference[mask]
    _, exponent = torch.frexp(exact)
    ulp = torch.ldexp(torch.ones_like(exact), exponent - 1) * eps
    inner = torch.floor(exact.abs() / ulp) * ulp
    return (torch.sign(exact) * values[mask] - inner) / ulp - 0.5


def _signed_ulps(values: Any, reference: Any, mask: Any, dtype: str) -> Any:
    import torch

    eps, _ = FLOATS[dtype]
    _, exponent = torch.frexp(reference[mask])
    ulp = torch.ldexp(torch.ones_like(reference[mask]), exponent - 1) * eps
    return torch.sign(reference[mask]) * (values[mask] - reference[mask]) / ulp


def _bias_of(placed: Any, nearest: Any) -> Bias:
    count = int(placed.numel())
    if not count:
        return Bias(mean=0.0, sd=0.0, elements=0)
    sd = float(placed.std(unbiased=False)) if count > 1 else 0.0
    return Bias(mean=float(placed.mean()), sd=sd, elements=count,
                nearest=float(nearest.mean()))


def measure_bias(device: Any, cpu: Any, reference: Any, native: Any, state: Outputs) -> None:
    """Where one output's results sit between the dtype's numbers, over the elements where
    the dtype had to round float64 and the CPU's own result is within one ulp of it
    (well-conditioned there: what is left is the last rounding); the CPU's and
    round-to-nearest's the same way, for comparison."""
    import torch

    if state.dtype not in FLOATS or native.is_complex() or native.dtype != getattr(
            torch, state.dtype, None):
        return
    _, tiny = FLOATS[state.dtype]
    held = reference.to(native.dtype).to(torch.float64)
    mask = torch.isfinite(reference) & torch.isfinite(device) & torch.isfinite(cpu) & \
        (reference.abs() >= tiny) & (held != reference)
    if not bool(mask.any()):
        return
    kept = _signed_ulps(cpu, reference, mask, state.dtype).abs() <= 1.0
    if not bool(kept.any()):
        return
    nearest = _placed(held, reference, mask, state.dtype)[kept]
    state.device_bias.append(_bias_of(_placed(device, reference, mask, state.dtype)[kept],
                                      nearest))
    state.cpu_bias.append(_bias_of(_placed(cpu, reference, mask, state.dtype)[kept], nearest))


def judge_bias(state: Outputs) -> None:
    """Fail the case when its pooled results lean one way (``oota_rules.biased``)."""
    device, cpu = Bias.pooled(state.device_bias), Bias.pooled(state.cpu_bias)
    if biased(device, cpu):
        raise Wrong(f"the result on {state.device_name} {device.describe()}; the CPU's mean "
                    f"is {cpu.mean:+.2f} ulp")
