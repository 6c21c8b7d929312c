"""Floating outputs judged against the CPU and against float64: non-finite values, PyTorch's
comparison, and the element rule (each element by its own scale, with room for cancellation,
for a half-precision matrix product's partial roundings and for an ill-conditioned element).
``oota_judge`` calls :func:`judge_floats` for every floating output; the rules' numbers are
``oota_rules``'; rounding bias is ``oota_bias``'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oota_bias import measure_bias
from oota_outputs import Outputs, Wrong, wide
from oota_rules import (
    ADDON_FLOOR_ULPS,
    ADDON_MULTIPLIER,
    CONDITION_ELEMENTS,
    CONDITION_ROUNDINGS,
    FLOAT64,
    FLOATS,
    ILL_CONDITIONED,
    OVERFLOW_FLOOR_ULPS,
    PYTORCH,
    REDUCED_PRECISION_GEMMS,
    Errors,
    partial_roundings,
)

__all__ = ["Wrong", "judge_floats"]


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


def _units(scale: Any, dtype: str) -> Any:
    import torch

    eps, tiny = FLOATS.get(dtype, FLOATS["float32"])
    return torch.clamp(scale * eps, min=eps * tiny)


@dataclass(kw_only=True, slots=True)
class _Elements:
    """One output measured element by element against float64."""

    error: Any  # the device's
    cpu_error: Any  # the CPU's (its second opinions' where larger)
    units: Any  # one ulp of each element's scale
    size: Any  # each element's float64 magnitude
    judged: Any  # elements both finite on the device and in float64
    overflowed: Any  # the CPU not finite, float64 finite
    flushed: Any  # subnormal in float64, zero on the device
    condition: Any  # how far one float32 rounding of every input moves the element (or 0)
    floor_scale: float = 1.0  # a half-precision matrix product's partial roundings
    terms: float = 0.0  # its terms per element

    def allowed(self, numbers: _Numbers) -> Any:
        """Each element's allowance: ``multiplier`` times the CPU's error there (see
        :meth:`_cancelling`) plus ``floor_ulps`` of the element's scale (times
        ``floor_scale``) plus CONDITION_ROUNDINGS times the element's condition."""
        import torch

        cpu = self._cancelling(torch.nan_to_num(self.cpu_error, nan=0.0, posinf=0.0))
        base = numbers.multiplier * cpu + numbers.floor_ulps * self.floor_scale * self.units \
            + CONDITION_ROUNDINGS * self.condition
        return torch.where(self.overflowed, OVERFLOW_FLOOR_ULPS * self.units, base)

    def _cancelling(self, cpu: Any) -> Any:
        """The CPU's error, and where the CPU's own result is off by more than
        ILL_CONDITIONED ulps (a cancellation inside the computation, which a correct kernel
        meets too, its error there as erratic as the CPU's), the largest CPU error of such an
        element no larger than this one: the CPU may be accurate by chance at one element
        and not at the next, but a result as small as this one or smaller was off by that
        much. Never from a larger element, whose error would be an absolute tolerance here."""
        import torch

        ill = self.judged & ~self.overflowed & (cpu > ILL_CONDITIONED * self.units)
        if not bool(ill.any()):
            return cpu
        sizes, order = self.size[ill].sort()
        running = cpu[ill][order].cummax(0).values
        below = torch.searchsorted(sizes, self.size.reshape(-1), right=True) - 1
        pooled = torch.where(below >= 0, running[below.clamp(min=0)], torch.zeros_like(
            below, dtype=cpu.dtype)).reshape(cpu.shape)
        return torch.where(ill, torch.maximum(cpu, pooled), cpu)


def _measure(device: Any, cpu: Any, reference: Any, leaf: int, state: Outputs) -> _Elements:
    import torch

    scale = reference.abs()
    magnitude = state.magnitude(leaf)
    if magnitude is not None and tuple(magnitude.shape) == tuple(scale.shape):
        scale = torch.maximum(scale, torch.nan_to_num(magnitude, nan=0.0, posinf=0.0))
    _, tiny = FLOATS.get(state.dtype, FLOATS["float32"])
    judged = torch.isfinite(reference) & torch.isfinite(device)
    error = (device - reference).abs()
    return _Elements(error=error, cpu_error=(cpu - reference).abs(),
                     units=_units(scale, state.dtype), size=torch.nan_to_num(
                         reference.abs(), nan=0.0, posinf=0.0), judged=judged,
                     overflowed=~torch.isfinite(cpu) & torch.isfinite(reference),
                     flushed=judged & (device == 0) & (reference != 0) &
                     (reference.abs() < tiny), condition=torch.zeros_like(error))


def _beyond(found: _Elements, numbers: _Numbers) -> Any:
    return found.judged & ~found.flushed & (found.error > found.allowed(numbers))


def _second_opinions(found: _Elements, reference: Any, leaf: int, state: Outputs,
                     numbers: _Numbers) -> None:
    """What a correct kernel may do that the first look did not count: the CPU's error on
    inputs one rounding apart, the CPU's own float32 computation of a half-precision result
    rounded to the dtype (how a device computes it), and a half-precision matrix product's
    partial sums rounded to the dtype (``oota_rules.REDUCED_PRECISION_GEMMS``)."""
    import torch

    opinions = []
    second = state.second(leaf)
    if second is not None and tuple(second[0].shape) == tuple(reference.shape):
        opinions.append((wide(second[0]) - wide(second[1])).abs())
    opmath = state.opmath(leaf)
    if opmath is not None and tuple(opmath.shape) == tuple(reference.shape):
        rounded = opmath.to(getattr(torch, state.dtype))
        opinions.append((wide(rounded) - reference).abs())
    for opinion in opinions:
        found.cpu_error = torch.maximum(found.cpu_error, torch.nan_to_num(
            opinion, nan=0.0, posinf=0.0))
    op = state.case["op"] if state.case is not None else ""
    if not numbers.addon and state.dtype in ("float16", "bfloat16") and \
            op in REDUCED_PRECISION_GEMMS:
        terms = state.terms(leaf)
        if terms is not None and terms.numel():
            found.terms = float(terms.abs().max())
            found.floor_scale = partial_roundings(found.terms)


def _conditioned(found: _Elements, leaf: int, state: Outputs, numbers: _Numbers) -> None:
    """The elements still beyond their allowance allowed their condition
    (``oota_condition``): every element's estimate, then the exact measure at the worst of
    those still beyond, at most CONDITION_ELEMENTS of them, stopping at the first that stays
    beyond (the case fails there whatever the others do)."""
    import torch

    sensitivity = state.sensitivity()
    if sensitivity is None:
        return
    estimate = sensitivity.estimate(leaf)
    if estimate is not None and tuple(estimate.shape) == tuple(found.error.shape):
        found.condition = torch.maximum(found.condition, estimate.to(found.error.dtype))
    beyond = _beyond(found, numbers).reshape(-1)
    ratio = torch.where(beyond, found.error.reshape(-1) / found.allowed(numbers).reshape(-1),
                        torch.zeros_like(beyond, dtype=found.error.dtype))
    condition = found.condition.reshape(-1).clone()
    for position in ratio.argsort(descending=True)[:CONDITION_ELEMENTS].tolist():
        if not bool(beyond[position]):
            break
        value = sensitivity.exact(leaf, position)
        if value is None:
            break
        condition[position] = max(float(condition[position]), value)
        found.condition = condition.reshape(found.error.shape)
        if bool(_beyond(found, numbers).reshape(-1)[position]):
            break


def _elementwise(device: Any, cpu: Any, reference: Any, leaf: int, where: str,
                 state: Outputs, numbers: _Numbers) -> None:
    import torch

    found = _measure(device, cpu, reference, leaf, state)
    if bool(_beyond(found, numbers).any()):
        _second_opinions(found, reference, leaf, state, numbers)
    if bool(_beyond(found, numbers).any()):
        _conditioned(found, leaf, state, numbers)
    considered = found.judged & ~found.flushed
    allowed = found.allowed(numbers)
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
    partial = f" x {found.floor_scale:.3g} (partial sums of {found.terms:g} terms rounded to " \
        f"the dtype)" if found.floor_scale != 1.0 else ""
    condition = float(at(found.condition))
    conditioned = f" + {CONDITION_ROUNDINGS:g}x its condition {condition:.3g} (the change one " \
        "float32 rounding of every input makes there)" if condition else ""
    return (f"{where} on {state.device_name}: {head}element{_position(worst, device.shape)} is "
            f"{text(value)} where float64 gives {text(ref)} and the CPU {text(own)} (error "
            f"{err:.3g}{relative}; the CPU's {float(at(found.cpu_error)):.3g}); allowed "
            f"{float(at(allowed)):.3g}: {numbers.multiplier:g}x the CPU's error there + "
            f"{numbers.floor_ulps:g} ulp of {float(at(found.units)) / eps:.3g} ({state.dtype})"
            f"{partial}{conditioned}; {int(over.sum())} of {over.numel()} element(s) beyond "
            f"({numbers.source})")


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
            measure_bias(device, cpu, reference, native, state)
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
            source="oota's float64 check beside PyTorch's rule",
            addon=True))


