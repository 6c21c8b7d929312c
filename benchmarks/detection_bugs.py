"""The detection benchmark's bug classes on a result as a whole (bench_detection.py): an
approximation swapped in, one wrong element, a dropped or shifted term, a transposed output,
NaN not propagated, half-precision accumulation, rounding toward zero, and ordering bugs. Each
takes a ``detection_common.Sample`` and returns the output a buggy device would give, or None
where the bug does not apply to the sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from detection_common import (
    CUMULATIVE,
    GEMM,
    HALF,
    REDUCTION_DIMS,
    Sample,
    dim_of,
    gemm,
    reduced_dims,
    replace_first_float,
    round_each,
    safe,
    ties_reversed,
)


def _erf_as(x: Any) -> Any:
    """Abramowitz and Stegun 7.1.26: absolute error 1.5e-7, so small results lose their
    relative precision."""
    t = 1.0 / (1.0 + 0.3275911 * x.abs())
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (
        -1.453152027 + t * 1.061405429))))
    return torch.sign(x) * (1 - poly * torch.exp(-x * x))


@safe
def approximation(s: Sample) -> Any:
    """An approximation swapped in: gelu's tanh form where 'none' was asked, log(1 + x) for
    log1p, exp(x) - 1 for expm1, a polynomial erf."""
    x = s.input
    if s.name == "nn.functional.gelu" and s.kwargs.get("approximate", "none") == "none":
        return torch.nn.functional.gelu(x.float(), approximate="tanh")
    if s.name == "log1p":
        return torch.log(1 + x)
    if s.name == "expm1":
        return torch.exp(x) - 1
    if s.name == "erf":
        return _erf_as(x.double()).to(x.dtype) if x.dtype != torch.float32 else _erf_as(x)
    return None


@safe
def wrong_last_element(s: Sample) -> Any:
    """The output's last element 25% too large (the rest right)."""
    def change(t: Any) -> Any | None:
        if t.numel() < 2:
            return None
        out = t.clone().reshape(-1)
        nonzero = (out != 0) & torch.isfinite(out)
        if not bool(nonzero.any()):
            return None
        last = int(nonzero.nonzero()[-1])
        out[last] = out[last] * 1.25
        return out.reshape(t.shape)
    return replace_first_float(s.cpu, change)


@safe
def wrong_small_element(s: Sample) -> Any:
    """The smallest non-zero element of the output 25% too large."""
    def change(t: Any) -> Any | None:
        if t.numel() < 2:
            return None
        out = t.clone().reshape(-1)
        size = torch.where((out != 0) & torch.isfinite(out), out.abs().float(),
                           torch.full_like(out, math.inf, dtype=torch.float32))
        place = int(size.argmin())
        if not math.isfinite(float(size[place])):
            return None
        out[place] = out[place] * 1.25
        return out.reshape(t.shape)
    return replace_first_float(s.cpu, change)


@safe
def dropped_element(s: Sample) -> Any:
    """A reduction or product that drops its last term (the input's last element along the
    reduced dim, or K's last, read as zero)."""
    if s.name in GEMM:
        found = gemm(s, 2)
        if found is None:
            return None
        a, b, finish = found
        a = a.clone()
        a[..., -1] = 0
        return finish(torch.matmul(a.float(), b.float()))
    if s.name in REDUCTION_DIMS or s.name in CUMULATIVE:
        dims = reduced_dims(s) if s.name in REDUCTION_DIMS else [int(s.args[0])
                                                                   if s.args else 0]
        if not isinstance(s.input, torch.Tensor) or s.input.dim() == 0 or not dims:
            return None
        x = s.input.clone().float()
        neutral = 1.0 if s.name in ("prod", "cumprod") else 0.0
        index = [slice(None)] * x.dim()
        for d in dims:
            index[d] = -1
        if s.input.shape[dims[0]] < 2:
            return None
        x[tuple(index)] = neutral
        return s.call(x)
    return None


@safe
def shifted(s: Sample) -> Any:
    """An off-by-one: an exclusive cumulative sum or product, else the output rolled by one
    along its last dim."""
    if s.name in CUMULATIVE and isinstance(s.cpu, torch.Tensor) and s.cpu.dim() >= 1:
        dim = int(s.args[0] if s.args else s.kwargs.get("dim", 0))
        if s.cpu.shape[dim] < 2:
            return None
        first = torch.full_like(s.cpu.narrow(dim, 0, 1), CUMULATIVE[s.name])
        return torch.cat([first, s.cpu.narrow(dim, 0, s.cpu.shape[dim] - 1)], dim=dim)

    def change(t: Any) -> Any | None:
        return t.roll(1, -1) if t.dim() >= 1 and t.shape[-1] >= 2 else None
    return replace_first_float(s.cpu, change)


@safe
def transposed(s: Sample) -> Any:
    """The output's last two dims transposed (a square output written column-major)."""
    def change(t: Any) -> Any | None:
        if t.dim() < 2 or t.shape[-1] != t.shape[-2] or t.shape[-1] < 2:
            return None
        return t.transpose(-1, -2).contiguous()
    return replace_first_float(s.cpu, change)


@safe
def nan_not_propagated(s: Sample) -> Any:
    """NaN in the input treated as zero: the device's output finite where the CPU's is NaN.
    (The sample's input gets one NaN; the CPU's output must show it.)"""
    poisoned = s.extra.get("nan_input")
    if poisoned is None:
        return None
    return s.call(poisoned.nan_to_num(nan=0.0))


def _sequential_sum(x: Any, dtype: torch.dtype) -> Any:
    """The last dim summed one element at a time, rounding to ``dtype`` after each add."""
    acc = torch.zeros(x.shape[:-1], dtype=dtype)
    for k in range(x.shape[-1]):
        acc = (acc.float() + x[..., k].float()).to(dtype)
    return acc


@safe
def half_accumulation(s: Sample) -> Any:
    """A half-precision reduction accumulated in the half dtype itself: sums, means, matrix
    products, and log_softmax's / softmax's denominator."""
    if s.dtype not in HALF or not isinstance(s.input, torch.Tensor) or s.input.dim() == 0:
        return None
    if s.name in ("sum", "mean") and not s.kwargs.get("dtype"):
        dims = reduced_dims(s)
        if not dims or s.input.numel() < 4:
            return None
        keep = bool(s.kwargs.get("keepdim", s.args[1] if len(s.args) > 1 else False))
        rest = [d for d in range(s.input.dim()) if d not in dims]
        x = s.input.permute(*rest, *dims).reshape(*[s.input.shape[d] for d in rest], -1)
        total = _sequential_sum(x, s.dtype)
        if s.name == "mean":
            total = (total.float() / x.shape[-1]).to(s.dtype)
        if keep:
            for d in sorted(dims):
                total = total.unsqueeze(d)
        return total
    if s.name in ("softmax", "log_softmax"):
        dim = reduced_dims(s)
        if not dim or s.kwargs.get("dtype"):
            return None
        x = s.input.float().movedim(dim[0], -1)
        shifted_x = x - x.amax(-1, keepdim=True)
        total = _sequential_sum(shifted_x.exp(), s.dtype).float().unsqueeze(-1)
        out = shifted_x - total.log() if s.name == "log_softmax" else shifted_x.exp() / total
        return out.movedim(-1, dim[0])
    if s.name in GEMM:
        found = gemm(s, 4)
        if found is None:
            return None
        a, b, finish = found
        products = a.unsqueeze(-1).float() * b.unsqueeze(-3).float()  # [..., m, k, n]
        return finish(_sequential_sum(products.movedim(-2, -1), s.dtype))
    return None


def _toward_zero(x: Any, dtype: torch.dtype) -> Any:
    """``x`` (float32 or float64) rounded toward zero to ``dtype``."""
    nearest = x.to(dtype)
    wide = nearest.to(x.dtype)
    too_far = (wide.abs() > x.abs()) & torch.isfinite(x)
    if dtype == torch.float32:
        smaller = torch.nextafter(nearest, torch.zeros_like(nearest))
    else:
        bits = nearest.view(torch.int16)
        smaller = torch.where(nearest != 0, bits - 1, bits).view(dtype)
    return torch.where(too_far, smaller, nearest)


@safe
def biased_rounding(s: Sample) -> Any:
    """Every output computed in a wider type and rounded toward zero instead of to nearest."""
    wide = torch.float64 if s.dtype == torch.float32 else torch.float32
    return round_each(s.run_in(wide), s.cpu,
                      lambda result, template: _toward_zero(result.to(wide), template.dtype))


@safe
def unsorted_topk(s: Sample) -> Any:
    """topk(sorted=True) that returns its k values (and indices) in reverse order."""
    if s.name != "topk" or not (s.args[3] if len(s.args) > 3 else s.kwargs.get("sorted", True)):
        return None
    values, indices = s.cpu
    dim = dim_of(s)
    if values.dim() == 0 or values.shape[dim] < 2:
        return None
    return (values.flip(dim), indices.flip(dim))


@safe
def unstable_sort(s: Sample) -> Any:
    """sort / argsort(stable=True) that orders equal values differently."""
    stable = s.kwargs.get("stable") or (s.name == "argsort" and len(s.args) > 2 and s.args[2])
    if s.name not in ("sort", "argsort") or not stable:
        return None
    return ties_reversed(s)


@safe
def wrong_index(s: Sample) -> Any:
    """An index output pointing at an element of another value (argmax, sort, topk, ...)."""
    if s.name not in ("argmax", "argmin", "max.reduction_with_dim", "min.reduction_with_dim",
                      "sort", "argsort", "topk", "kthvalue", "mode", "median", "cummax"):
        return None
    flat = list(s.cpu) if isinstance(s.cpu, tuple) else [s.cpu]
    position = 0 if s.name in ("argmax", "argmin", "argsort") else 1
    index = flat[position].clone().reshape(-1)
    source = s.input.reshape(-1)
    if index.numel() == 0 or source.numel() < 2:
        return None
    dim_size = s.input.shape[dim_of(s)] if s.input.dim() and s.name not in (
        "argmax", "argmin") else source.numel()
    if s.name in ("argmax", "argmin") and "dim" not in s.kwargs and not s.args:
        choices = range(source.numel())
        current = source[int(index[0])]
        pick = next((c for c in choices if source[c] != current), None)
    else:
        pick = (int(index[0]) + 1) % dim_size if dim_size > 1 else None
    if pick is None:
        return None
    index[0] = pick
    flat[position] = index.reshape(flat[position].shape)
    return tuple(flat) if isinstance(s.cpu, tuple) else flat[0]


BUGS: dict[str, Callable[[Sample], Any]] = {
    "approximation swapped in": approximation,
    "last element 25% off": wrong_last_element,
    "smallest element 25% off": wrong_small_element,
    "last term dropped": dropped_element,
    "shifted by one": shifted,
    "output transposed": transposed,
    "NaN not propagated": nan_not_propagated,
    "half-precision accumulation": half_accumulation,
    "biased rounding (toward zero)": biased_rounding,
    "topk(sorted=True) out of order": unsorted_topk,
    "stable sort reorders ties": unstable_sort,
    "index points at another value": wrong_index,
}
