"""Floating outputs judged against the CPU and against float64: non-finite values, PyTorch's
comparison, the element rule (each element by its own scale, with room for cancellation) and
rounding bias. ``oota_judge`` calls :func:`judge_floats` for every floating output; the rules'
numbers are ``oota_rules``'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oota_outputs import Outputs, wide
from oota_rules import (
    ADDON_FLOOR_ULPS,
    ADDON_MULTIPLIER,
    ADDON_TENSOR_ULPS,
    FLOAT64,
    FLOATS,
    ILL_CONDITIONED,
    OVERFLOW_FLOOR_ULPS,
    PYTORCH,
    Bias,
    Errors,
    biased,
)


class Wrong(Exception):
    """One output is wrong; the message says which and how."""


def _position(flat_index: int, shape: Sequence[int]) -> str:
    if not shape:
        return ""
    place = []
    for size in reversed(list(shape)):
        place.append(flat_index % size)
        flat_index //= size
    return " [" + ", ".join(str(p) for p in reversed(place)) + "]"


# -- non-finite values ------------------------------------------------------------------------


def _nonfinite(device: Any, cpu: Any, reference: Any | None, where: str,
               state: Outputs) -> None:
    """NaN and infinity: the device's must be where the CPU's are, except where the CPU
    overflows and float64 does not (there the device may be finite, judged against float64)."""
    import torch

    finite_cpu = torch.isfinite(cpu)
    finite_ref = torch.ones_like(finite_cpu) if reference is None else torch.isfinite(reference)
    like_cpu = (torch.isnan(device) & torch.isnan(cpu)) | (device == cpu)
    bad = finite_cpu & finite_ref & ~torch.isfinite(device)
    bad |= ~finite_cpu & ~finite_ref & ~like_cpu
    if reference is not None:
        like_ref = (torch.isnan(device) & torch.isnan(reference)) | (device == reference)
        bad |= finite_cpu & ~finite_ref & ~like_ref & ~torch.isfinite(device)
        overflowed = ~finite_cpu & finite_ref
        bad |= overflowed & ~torch.isfinite(device) & ~like_cpu
        if bool((overflowed & like_cpu).any()):
            state.notes.append(f"{where}: {int((overflowed & like_cpu).sum())} element(s) "
                               "overflow on the device as on the CPU, where float64 does not")
    count = int(bad.sum())
    if count:
        state.ratios.append(math.inf)
        raise Wrong(f"{where} on {state.device_name}: {count} element(s) NaN or infinite "
                    "where the CPU's (or float64's) are finite, or not the CPU's where "
                    "both are NaN or infinite")


# -- PyTorch's rule and tolerances --------------------------------------------------------------


def _compare_close(device: Any, cpu: Any, atol: float, rtol: float, where: str,
                   state: Outputs, rule_text: str, mask: Any | None = None) -> None:
    """isclose(device, cpu) with NaN equal to NaN, as PyTorch's assertEqual compares (over
    ``mask`` where given: the elements the CPU did not overflow)."""
    import torch

    close = torch.isclose(device, cpu, atol=atol, rtol=rtol, equal_nan=True)
    if mask is not None:
        close |= ~mask
    if bool(close.all()):
        share = (device - cpu).abs() / (atol + rtol * cpu.abs())
        finite = torch.isfinite(share) & (mask if mask is not None else True)
        state.ratios.append(float(share[finite].max()) if bool(finite.any()) else 0.0)
        return
    diff = (device - cpu).abs()[~close]
    rel = diff / cpu.abs()[~close]
    state.ratios.append(math.inf)
    raise Wrong(f"{where} on {state.device_name} differs from the CPU: max abs diff "
                f"{float(diff.max()):.3g}, max rel diff {float(rel.max()):.3g} "
                f"({rule_text})")


# -- element by element against float64 -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class _Numbers:
    multiplier: float
    floor_ulps: float
    source: str
    addon: bool  # PyTorch's rule passed: this check fails only a material difference
    tensor_ulps: float = 0.0  # a floor in ulps of the result's root-mean-square magnitude


def _units(scale: Any, dtype: str) -> Any:
    import torch

    eps, tiny = FLOATS.get(dtype, FLOATS["float32"])
    return torch.clamp(scale * eps, min=eps * tiny)


@dataclass(kw_only=True, slots=True)
class _Elements:
    """One output measured element by element against float64."""

    error: Any  # the device's
    cpu_error: Any  # the CPU's (its second opinion's where larger)
    units: Any  # one ulp of each element's scale
    judged: Any  # elements both finite on the device and in float64
    overflowed: Any  # the CPU not finite, float64 finite
    flushed: Any  # subnormal in float64, zero on the device

    def allowed(self, numbers: _Numbers, rms_unit: float) -> Any:
        """Each element's allowance: ``multiplier`` times the CPU's error there (or, where the
        CPU's own result is ill-conditioned, beyond ILL_CONDITIONED ulps, the largest such
        error of the output: the cancellation a correct kernel meets there too) plus
        ``floor_ulps`` of the element's scale."""
        import torch

        cpu = torch.nan_to_num(self.cpu_error, nan=0.0, posinf=0.0)
        ill = self.judged & ~self.overflowed & (cpu > ILL_CONDITIONED * self.units)
        pooled = float(cpu[ill].max()) if bool(ill.any()) else 0.0
        cpu = torch.where(ill, torch.clamp(cpu, min=pooled), cpu)
        base = numbers.multiplier * cpu + numbers.floor_ulps * self.units + \
            numbers.tensor_ulps * rms_unit
        return torch.where(self.overflowed, OVERFLOW_FLOOR_ULPS * self.units, base)


def _measure(device: Any, cpu: Any, reference: Any, leaf: int, state: Outputs) -> _Elements:
    import torch

    scale = reference.abs()
    magnitude = state.magnitude(leaf)
    if magnitude is not None and tuple(magnitude.shape) == tuple(scale.shape):
        scale = torch.maximum(scale, torch.nan_to_num(magnitude, nan=0.0, posinf=0.0))
    _, tiny = FLOATS.get(state.dtype, FLOATS["float32"])
    judged = torch.isfinite(reference) & torch.isfinite(device)
    return _Elements(error=(device - reference).abs(), cpu_error=(cpu - reference).abs(),
                     units=_units(scale, state.dtype), judged=judged,
                     overflowed=~torch.isfinite(cpu) & torch.isfinite(reference),
                     flushed=judged & (device == 0) & (reference != 0) &
                     (reference.abs() < tiny))


def _rms_unit(reference: Any, dtype: str) -> float:
    import torch

    finite = reference[torch.isfinite(reference)].abs()
    if not finite.numel():
        return 0.0
    return float(_units(finite.pow(2).mean().sqrt(), dtype))


def _elementwise(device: Any, cpu: Any, reference: Any, leaf: int, where: str,
                 state: Outputs, numbers: _Numbers) -> None:
    import torch

    found = _measure(device, cpu, reference, leaf, state)
    rms_unit = _rms_unit(reference, state.dtype) if numbers.tensor_ulps else 0.0
    considered = found.judged & ~found.flushed
    allowed = found.allowed(numbers, rms_unit)
    over = considered & (found.error > allowed)
    if bool(over.any()):
        second = state.second(leaf)
        if second is not None and tuple(second[0].shape) == tuple(cpu.shape):
            cpu2, ref2 = wide(second[0]), wide(second[1])
            found.cpu_error = torch.maximum(found.cpu_error, torch.nan_to_num(
                (cpu2 - ref2).abs(), nan=0.0, posinf=0.0))
            allowed = found.allowed(numbers, rms_unit)
            over = considered & (found.error > allowed)
    share = torch.where(considered, found.error / allowed, torch.zeros_like(found.error))
    state.ratios.append(float(share.max()) if share.numel() else 0.0)
    if bool(found.flushed.any()):
        _flushed(int(found.flushed.sum()), where, state)
    if bool(over.any()):
        raise Wrong(_element_message(device, cpu, reference, found, allowed, over, share,
                                     where, state, numbers))


def _flushed(count: int, where: str, state: Outputs) -> None:
    text = (f"{where}: {count} subnormal result(s) flushed to zero on {state.device_name} "
            "(float64 gives a value below the dtype's smallest normal)")
    if state.subnormals == "keep":
        state.ratios.append(math.inf)
        raise Wrong(f"{text}; the vendor's data says subnormals are kept")
    state.notes.append(text)


def _element_message(device: Any, cpu: Any, reference: Any, found: _Elements,
                     allowed: Any, over: Any, share: Any, where: str, state: Outputs,
                     numbers: _Numbers) -> str:
    import torch

    worst = int(torch.where(over, share, torch.zeros_like(share)).reshape(-1).argmax())

    def at(tensor: Any) -> Any:
        return tensor.reshape(-1)[worst]

    def text(value: complex) -> str:
        return f"{value.real:.6g}" if value.imag == 0 else f"{value:.6g}"

    value, ref, own = complex(at(device)), complex(at(reference)), complex(at(cpu))
    err = float(at(found.error))
    eps, _ = FLOATS.get(state.dtype, FLOATS["float32"])
    relative = f", {err / abs(ref):.3g} of the element" if ref else ""
    head = "passes PyTorch's rule but is materially worse than the CPU at an element: " \
        if numbers.addon else ""
    tensor = f" + {numbers.tensor_ulps:g} ulp of the result's RMS" if numbers.tensor_ulps else ""
    return (f"{where} on {state.device_name}: {head}element{_position(worst, device.shape)} is "
            f"{text(value)} where float64 gives {text(ref)} and the CPU {text(own)} (error "
            f"{err:.3g}{relative}; the CPU's {float(at(found.cpu_error)):.3g}); allowed "
            f"{float(at(allowed)):.3g}: {numbers.multiplier:g}x the CPU's error there + "
            f"{numbers.floor_ulps:g} ulp of {float(at(found.units)) / eps:.3g} ({state.dtype})"
            f"{tensor}; {int(over.sum())} of {over.numel()} element(s) beyond ({numbers.source})")


def _tensor_level(device: Any, cpu: Any, reference: Any, where: str, state: Outputs) -> None:
    """The float64 rule on whole results (the models layer): the largest elementwise errors."""
    import torch

    mask = torch.isfinite(reference) & torch.isfinite(cpu)
    if not bool(mask.any()):
        state.ratios.append(0.0)
        return
    errors = Errors(device=float((device - reference).abs()[mask].max()),
                    cpu=float((cpu - reference).abs()[mask].max()),
                    scale=float(reference.abs()[mask].max()))
    ratio = errors.ratio(state.rule, state.dtype)
    state.ratios.append(ratio)
    if ratio > 1:
        raise Wrong(f"{where} on {state.device_name}: {errors.message(state.rule, state.dtype)}")


# -- rounding bias ---------------------------------------------------------------------------------


def _signed_ulps(values: Any, reference: Any, mask: Any, dtype: str) -> Any:
    import torch

    eps, _ = FLOATS[dtype]
    _, exponent = torch.frexp(reference[mask])
    ulp = torch.ldexp(torch.ones_like(reference[mask]), exponent - 1) * eps
    return torch.sign(reference[mask]) * (values[mask] - reference[mask]) / ulp


def _bias_of(errors: Any) -> Bias:
    count = int(errors.numel())
    if not count:
        return Bias(mean=0.0, sd=0.0, elements=0)
    mean = float(errors.mean())
    sd = float(errors.std(unbiased=False)) if count > 1 else 0.0
    return Bias(mean=mean, sd=sd, elements=count)


def _measure_bias(device: Any, cpu: Any, reference: Any, native: Any, state: Outputs) -> None:
    """The signed rounding errors of one output, over the elements where the dtype had to
    round float64 and the CPU's own result is within one ulp of it (well-conditioned there:
    what is left is the last rounding)."""
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
    cpu_errors = _signed_ulps(cpu, reference, mask, state.dtype)
    errors = _signed_ulps(device, reference, mask, state.dtype)
    kept = cpu_errors.abs() <= 1.0
    errors, cpu_errors = errors[kept], cpu_errors[kept]
    if not errors.numel():
        return
    state.device_bias.append(_bias_of(errors))
    state.cpu_bias.append(_bias_of(cpu_errors))


def judge_bias(state: Outputs) -> None:
    """Fail the case when its pooled rounding errors lean one way (``oota_rules.biased``)."""
    device, cpu = Bias.pooled(state.device_bias), Bias.pooled(state.cpu_bias)
    if biased(device, cpu):
        raise Wrong(f"the result on {state.device_name} {device.describe()}; the CPU's mean "
                    f"is {cpu.mean:+.2f} ulp")


# -- one floating output ------------------------------------------------------------------


def judge_floats(device: Any, cpu: Any, reference: Any | None, leaf: int, where: str,
                  state: Outputs, native: Any | None = None) -> None:
    import torch

    rule = state.rule
    if rule.kind not in (FLOAT64, PYTORCH):
        reference = None  # a vendor's tolerance compares with the CPU alone
    _nonfinite(device, cpu, reference, where, state)
    if rule.kind == FLOAT64 and reference is not None:
        if not state.elementwise:
            _tensor_level(device, cpu, reference, where, state)
            return
        _elementwise(device, cpu, reference, leaf, where, state, _Numbers(
            multiplier=rule.multiplier, floor_ulps=rule.floor_ulps, source=rule.source,
            addon=False))
        if native is not None:
            _measure_bias(device, cpu, reference, native, state)
        return
    if rule.kind == FLOAT64:  # no float64 reference for this output: the vendor's tolerance
        text = rule.describe_tolerance()
        state.notes.append(f"{where}: no float64 reference, compared with {text}")
        _compare_close(device, cpu, rule.atol, rule.rtol, where, state, text)
        return
    mask = None if reference is None else ~(~torch.isfinite(cpu) & torch.isfinite(reference))
    _compare_close(device, cpu, rule.atol, rule.rtol, where, state, rule.describe(), mask)
    if rule.kind == PYTORCH and reference is not None and state.elementwise:
        _elementwise(device, cpu, reference, leaf, where, state, _Numbers(
            multiplier=ADDON_MULTIPLIER, floor_ulps=ADDON_FLOOR_ULPS,
            tensor_ulps=ADDON_TENSOR_ULPS, source="oota's float64 check beside PyTorch's rule",
            addon=True))


