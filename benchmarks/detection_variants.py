"""The "devices" of the detection benchmark (bench_detection.py): correct implementations that
round differently from the CPU, and realistic kernel bugs, each a function of one operator
sample run on the CPU.

A variant takes a :class:`Sample` and returns the output a device would give (the structure
of the CPU's output, after the OpInfo's output processing), or None where it does not apply.
Correct variants must pass the judge; bugs should fail it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(kw_only=True)
class Sample:
    """One operator sample on the CPU, in the dtype judged, with its outputs."""

    name: str  # op_db's full name
    op: Callable[..., Any]  # op(input, *args, **kwargs), the output processed as PyTorch's test
    input: Any
    args: list[Any]
    kwargs: dict[str, Any]
    dtype: torch.dtype
    cpu: Any = None
    reference: Any = None  # float64
    extra: dict[str, Any] = field(default_factory=dict)

    def call(self, input_: Any, args: list[Any] | None = None,
             kwargs: dict[str, Any] | None = None) -> Any:
        return self.op(input_, *(self.args if args is None else args),
                       **(self.kwargs if kwargs is None else kwargs))

    def cast(self, dtype: torch.dtype) -> tuple[Any, list[Any], dict[str, Any]]:
        def change(t: Any) -> Any:
            return t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
        return _map((self.input, self.args, self.kwargs), change)

    def run_in(self, dtype: torch.dtype) -> Any:
        input_, args, kwargs = self.cast(dtype)
        return self.call(input_, args, kwargs)


def _map(tree: Any, change: Callable[[Any], Any]) -> Any:
    if isinstance(tree, torch.Tensor):
        return change(tree)
    if isinstance(tree, tuple):
        return tuple(_map(v, change) for v in tree)
    if isinstance(tree, list):
        return [_map(v, change) for v in tree]
    if isinstance(tree, dict):
        return {k: _map(v, change) for k, v in tree.items()}
    return tree


def like(result: Any, template: Any) -> Any:
    """``result`` with each floating tensor cast to the dtype of the template's leaf in the
    same place (the device's output dtype is the CPU's); None where the shapes disagree."""
    if isinstance(template, torch.Tensor):
        if not isinstance(result, torch.Tensor) or result.shape != template.shape:
            raise ValueError("shape")
        if template.is_floating_point() or template.is_complex():
            return result.to(template.dtype)
        return result.to(template.dtype) if result.dtype != template.dtype else result
    if isinstance(template, (tuple, list)):
        if not isinstance(result, (tuple, list)) or len(result) != len(template):
            raise ValueError("structure")
        items = [like(r, t) for r, t in zip(result, template, strict=True)]
        return tuple(items) if isinstance(template, tuple) else items
    return result


def _safe(make: Callable[[Sample], Any]) -> Callable[[Sample], Any]:
    def run(sample: Sample) -> Any:
        try:
            out = make(sample)
            return None if out is None else like(out, sample.cpu)
        except Exception:  # noqa: BLE001 - a variant that does not apply to this sample
            return None
    run.__name__ = make.__name__
    return run


def _first_float(tree: Any) -> tuple[list[Any], int] | None:
    flat = list(tree) if isinstance(tree, (tuple, list)) else [tree]
    for index, leaf in enumerate(flat):
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point() and \
                leaf.layout == torch.strided:
            return flat, index
    return None


def _replace_first_float(tree: Any, change: Callable[[Any], Any | None]) -> Any:
    found = _first_float(tree)
    if found is None:
        return None
    flat, index = found
    new = change(flat[index])
    if new is None:
        return None
    flat = list(flat)
    flat[index] = new
    if isinstance(tree, (tuple, list)):
        return type(tree)(flat) if isinstance(tree, tuple) else flat
    return flat[0]


HALF = (torch.float16, torch.bfloat16)
REDUCTION_DIMS = {"sum": 0, "mean": 0, "nansum": 0, "prod": 0, "amax": 0, "amin": 0,
                  "logsumexp": 0, "linalg.vector_norm": 1, "var": 0, "std": 0,
                  "softmax": 0, "log_softmax": 0}
ALIGNED = ("softmax", "log_softmax")  # the output has the input's shape along dim
GEMM = ("mm", "bmm", "matmul", "addmm", "nn.functional.linear")
CUMULATIVE = {"cumsum": 0.0, "cumprod": 1.0}


# -- correct variants ----------------------------------------------------------------------------


@_safe
def fp64_rounded(s: Sample) -> Any:
    """Computed in float64 and rounded to the dtype once (correctly rounded)."""
    return s.run_in(torch.float64)


@_safe
def fp32_accumulation(s: Sample) -> Any:
    """Half precision computed in float32 (accumulation included), rounded once."""
    return s.run_in(torch.float32) if s.dtype in HALF else None


def _reduced_dims(s: Sample) -> list[int] | None:
    position = REDUCTION_DIMS[s.name]
    dim = s.kwargs.get("dim", s.args[position] if len(s.args) > position else None)
    if not isinstance(s.input, torch.Tensor) or s.input.dim() == 0:
        return None
    if dim is None:
        return None if s.name in ALIGNED else list(range(s.input.dim()))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return [d % s.input.dim() for d in dims]


@_safe
def reordered(s: Sample) -> Any:
    """A reduction summed in another order: the reduced dims (or K of a matrix product)
    reversed, the same arithmetic in the dtype."""
    if s.name in GEMM:
        return _gemm_permuted(s)
    if s.name not in REDUCTION_DIMS:
        return None
    dims = _reduced_dims(s)
    if not dims:
        return None
    out = s.call(s.input.flip(dims))
    return out.flip(dims) if s.name in ALIGNED else out


def _gemm_operands(s: Sample) -> tuple[Any, Any, Callable[[Any], Any]] | None:
    """(a, b, finish): the product's two matrices (K last of a, first of b) and what adds
    the rest (addmm's beta * input, linear's bias)."""
    if s.name in ("mm", "bmm"):
        return s.input, s.args[0], lambda p: p
    if s.name == "matmul" and s.input.dim() >= 2 and s.args[0].dim() >= 2:
        return s.input, s.args[0], lambda p: p
    if s.name == "nn.functional.linear" and s.input.dim() >= 1:
        weight = s.args[0]
        bias = s.args[1] if len(s.args) > 1 else s.kwargs.get("bias")
        return s.input, weight.t() if weight.dim() == 2 else None, \
            (lambda p: p if bias is None else p + bias)
    if s.name == "addmm":
        beta, alpha = s.kwargs.get("beta", 1), s.kwargs.get("alpha", 1)
        return s.args[0], s.args[1], lambda p: beta * s.input + alpha * p
    return None


def _gemm(s: Sample, least_k: int) -> tuple[Any, Any, Callable[[Any], Any]] | None:
    """:func:`_gemm_operands` where K has at least ``least_k`` terms."""
    found = _gemm_operands(s)
    if found is None or found[1] is None or found[0].shape[-1] < least_k:
        return None
    return found


def _gemm_permuted(s: Sample) -> Any:
    found = _gemm(s, 2)
    if found is None:
        return None
    a, b, finish = found
    k = a.shape[-1]
    order = torch.arange(k - 1, -1, -1)
    return finish(torch.matmul(a[..., order], b[..., order, :]))


@_safe
def split_k(s: Sample) -> Any:
    """Half-precision GEMM split along K into three partial products, each in the dtype
    (rounded to it), summed in float32: what split-K kernels do."""
    found = _gemm(s, 3) if s.dtype in HALF and s.name in GEMM else None
    if found is None:
        return None
    a, b, finish = found
    k = a.shape[-1]
    bounds = [0, k // 3, 2 * k // 3, k]
    total = sum(torch.matmul(a[..., lo:hi], b[..., lo:hi, :]).float()
                for lo, hi in zip(bounds, bounds[1:], strict=False))
    return finish(total).to(s.dtype) if s.name != "addmm" else finish(total.to(s.dtype))


@_safe
def refs(s: Sample) -> Any:
    """PyTorch's own Python reference (``torch._refs``): a decomposition into primitives."""
    ref = s.extra.get("ref")
    return None if ref is None else ref(s.input, *s.args, **s.kwargs)


@_safe
def tie_permutation(s: Sample) -> Any:
    """A sort that orders equal values differently (where no stable order was asked)."""
    if s.name not in ("sort", "argsort", "topk") or s.kwargs.get("stable"):
        return None
    if s.name == "argsort" and len(s.args) > 2 and s.args[2]:
        return None
    return _ties_reversed(s)


def _ties_reversed(s: Sample) -> Any:
    values, indices = _values_indices(s)
    dim = _dim_of(s)
    if values is None or values.dim() == 0 or values.shape[dim] < 2:
        return None
    moved_v = values.movedim(dim, -1).contiguous()
    moved_i = indices.movedim(dim, -1).contiguous().clone()
    flat_v, flat_i = moved_v.reshape(-1, moved_v.shape[-1]), moved_i.reshape(-1, moved_i.shape[-1])
    changed = False
    for row in range(flat_v.shape[0]):
        start = 0
        line = flat_v[row].tolist()
        for end in range(1, len(line) + 1):
            if end == len(line) or line[end] != line[start]:
                if end - start > 1:
                    flat_i[row, start:end] = flat_i[row, start:end].flip(0)
                    changed = True
                start = end
    if not changed:
        return None
    new_i = flat_i.reshape(moved_i.shape).movedim(-1, dim)
    return new_i if s.name == "argsort" else type(s.cpu)((values, new_i)) \
        if isinstance(s.cpu, tuple) else (values, new_i)


def _dim_of(s: Sample) -> int:
    position = 1 if s.name == "topk" else 0
    dim = s.kwargs.get("dim", s.args[position] if len(s.args) > position else -1)
    return int(dim)


def _values_indices(s: Sample) -> tuple[Any, Any]:
    if s.name == "argsort":
        descending = s.kwargs.get("descending", s.args[1] if len(s.args) > 1 else False)
        values = s.input.sort(dim=_dim_of(s), descending=bool(descending), stable=True).values
        return values, s.cpu
    return s.cpu[0], s.cpu[1]


# -- bugs ----------------------------------------------------------------------------------------


def _erf_as(x: Any) -> Any:
    """Abramowitz and Stegun 7.1.26: absolute error 1.5e-7, so small results lose their
    relative precision."""
    t = 1.0 / (1.0 + 0.3275911 * x.abs())
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (
        -1.453152027 + t * 1.061405429))))
    return torch.sign(x) * (1 - poly * torch.exp(-x * x))


@_safe
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


@_safe
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
    return _replace_first_float(s.cpu, change)


@_safe
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
    return _replace_first_float(s.cpu, change)


@_safe
def dropped_element(s: Sample) -> Any:
    """A reduction or product that drops its last term (the input's last element along the
    reduced dim, or K's last, read as zero)."""
    if s.name in GEMM:
        found = _gemm(s, 2)
        if found is None:
            return None
        a, b, finish = found
        a = a.clone()
        a[..., -1] = 0
        return finish(torch.matmul(a.float(), b.float()))
    if s.name in REDUCTION_DIMS or s.name in CUMULATIVE:
        dims = _reduced_dims(s) if s.name in REDUCTION_DIMS else [int(s.args[0])
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


@_safe
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
    return _replace_first_float(s.cpu, change)


@_safe
def transposed(s: Sample) -> Any:
    """The output's last two dims transposed (a square output written column-major)."""
    def change(t: Any) -> Any | None:
        if t.dim() < 2 or t.shape[-1] != t.shape[-2] or t.shape[-1] < 2:
            return None
        return t.transpose(-1, -2).contiguous()
    return _replace_first_float(s.cpu, change)


@_safe
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


@_safe
def half_accumulation(s: Sample) -> Any:
    """A half-precision reduction accumulated in the half dtype itself: sums, means, matrix
    products, and log_softmax's / softmax's denominator."""
    if s.dtype not in HALF or not isinstance(s.input, torch.Tensor) or s.input.dim() == 0:
        return None
    if s.name in ("sum", "mean") and not s.kwargs.get("dtype"):
        dims = _reduced_dims(s)
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
        dim = _reduced_dims(s)
        if not dim or s.kwargs.get("dtype"):
            return None
        x = s.input.float().movedim(dim[0], -1)
        shifted_x = x - x.amax(-1, keepdim=True)
        total = _sequential_sum(shifted_x.exp(), s.dtype).float().unsqueeze(-1)
        out = shifted_x - total.log() if s.name == "log_softmax" else shifted_x.exp() / total
        return out.movedim(-1, dim[0])
    if s.name in GEMM:
        found = _gemm(s, 4)
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


@_safe
def biased_rounding(s: Sample) -> Any:
    """Every output computed in a wider type and rounded toward zero instead of to nearest."""
    wide = torch.float64 if s.dtype == torch.float32 else torch.float32
    out = s.run_in(wide)

    def round_each(result: Any, template: Any) -> Any:
        if isinstance(template, torch.Tensor):
            if template.is_floating_point() and template.layout == torch.strided:
                return _toward_zero(result.to(wide), template.dtype)
            return result
        return type(template)(round_each(r, t) for r, t in zip(result, template, strict=True))
    return round_each(out, s.cpu)


@_safe
def unsorted_topk(s: Sample) -> Any:
    """topk(sorted=True) that returns its k values (and indices) in reverse order."""
    if s.name != "topk" or not (s.args[3] if len(s.args) > 3 else s.kwargs.get("sorted", True)):
        return None
    values, indices = s.cpu
    dim = _dim_of(s)
    if values.dim() == 0 or values.shape[dim] < 2:
        return None
    return (values.flip(dim), indices.flip(dim))


@_safe
def unstable_sort(s: Sample) -> Any:
    """sort / argsort(stable=True) that orders equal values differently."""
    stable = s.kwargs.get("stable") or (s.name == "argsort" and len(s.args) > 2 and s.args[2])
    if s.name not in ("sort", "argsort") or not stable:
        return None
    return _ties_reversed(s)


@_safe
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
    dim_size = s.input.shape[_dim_of(s)] if s.input.dim() and s.name not in (
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


CORRECT: dict[str, Callable[[Sample], Any]] = {
    "float64, rounded once": fp64_rounded,
    "float32 accumulation (half dtypes)": fp32_accumulation,
    "reordered reduction / K": reordered,
    "split-K half GEMM": split_k,
    "torch._refs decomposition": refs,
    "tie permutation in sorts": tie_permutation,
}

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
