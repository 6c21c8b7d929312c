"""What the detection benchmark's "devices" share (``detection_variants.py``, the correct ones,
and ``detection_bugs.py``, ``detection_kernel_bugs.py``, the bugs): one operator sample run on the
CPU (:class:`Sample`), the structure of its output, and the parts of a matrix product or a
reduction a variant recomputes.

A variant takes a :class:`Sample` and returns the output a device would give (the structure
of the CPU's output, after the OpInfo's output processing), or None where it does not apply.
"""

from __future__ import annotations

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


def safe(make: Callable[[Sample], Any]) -> Callable[[Sample], Any]:
    """``make`` as a variant: its output shaped like the CPU's, None where it does not apply."""
    def run(sample: Sample) -> Any:
        try:
            out = make(sample)
            return None if out is None else like(out, sample.cpu)
        except Exception:  # noqa: BLE001 - a variant that does not apply to this sample
            return None
    run.__name__ = make.__name__
    return run


def first_float(tree: Any) -> tuple[list[Any], int] | None:
    flat = list(tree) if isinstance(tree, (tuple, list)) else [tree]
    for index, leaf in enumerate(flat):
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point() and \
                leaf.layout == torch.strided:
            return flat, index
    return None


def replace_first_float(tree: Any, change: Callable[[Any], Any | None]) -> Any:
    found = first_float(tree)
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


def reduced_dims(s: Sample) -> list[int] | None:
    """The dims a reduction of REDUCTION_DIMS reduces (None: not one, or all for softmax)."""
    position = REDUCTION_DIMS[s.name]
    dim = s.kwargs.get("dim", s.args[position] if len(s.args) > position else None)
    if not isinstance(s.input, torch.Tensor) or s.input.dim() == 0:
        return None
    if dim is None:
        return None if s.name in ALIGNED else list(range(s.input.dim()))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return [d % s.input.dim() for d in dims]


def gemm_operands(s: Sample) -> tuple[Any, Any, Callable[[Any], Any]] | None:
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


def gemm(s: Sample, least_k: int) -> tuple[Any, Any, Callable[[Any], Any]] | None:
    """:func:`gemm_operands` where K has at least ``least_k`` terms."""
    found = gemm_operands(s)
    if found is None or found[1] is None or found[0].shape[-1] < least_k:
        return None
    return found


def ties_reversed(s: Sample) -> Any:
    """A sort's (or topk's) result with the indices of each run of equal values reversed
    (None where no value repeats)."""
    values, indices = values_indices(s)
    dim = dim_of(s)
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


def dim_of(s: Sample) -> int:
    position = 1 if s.name == "topk" else 0
    dim = s.kwargs.get("dim", s.args[position] if len(s.args) > position else -1)
    return int(dim)


def values_indices(s: Sample) -> tuple[Any, Any]:
    if s.name == "argsort":
        descending = s.kwargs.get("descending", s.args[1] if len(s.args) > 1 else False)
        values = s.input.sort(dim=dim_of(s), descending=bool(descending), stable=True).values
        return values, s.cpu
    return s.cpu[0], s.cpu[1]


def variance_call(s: Sample) -> tuple[list[int], int]:
    """(reduced dims, correction) of a var / std / var_mean sample."""
    args, kwargs = list(s.args), dict(s.kwargs)
    unbiased = kwargs.pop("unbiased", None)
    if args and isinstance(args[0], bool):
        unbiased = args.pop(0)
    dim = kwargs.get("dim", args[0] if args else None)
    if len(args) > 1 and isinstance(args[1], bool):
        unbiased = args[1]
    correction = kwargs.get("correction", 1 if unbiased is None else int(bool(unbiased)))
    rank = s.input.dim()
    dims = list(range(rank)) if dim is None else [d % max(rank, 1) for d in (
        [dim] if isinstance(dim, int) else dim)]
    return dims, int(correction)


def compute_type(dtype: torch.dtype) -> torch.dtype:
    """The type a device computes an operator of ``dtype`` in: float32 for half precision
    (PyTorch's opmath), the dtype itself otherwise."""
    return torch.float32 if dtype in HALF else dtype


def round_each(result: Any, template: Any, change: Callable[[Any, Any], Any]) -> Any:
    """``change(leaf, template_leaf)`` for each strided floating leaf of ``result`` (in the
    template's place), the other leaves as they are."""
    if isinstance(template, torch.Tensor):
        if template.is_floating_point() and template.layout == torch.strided:
            return change(result, template)
        return result
    if isinstance(template, (tuple, list)):
        items = [round_each(r, t, change) for r, t in zip(result, template, strict=True)]
        return tuple(items) if isinstance(template, tuple) else items
    return result


def neighbours(wide: Any, dtype: torch.dtype) -> tuple[Any, Any]:
    """The two numbers of ``dtype`` around each element of the float64 ``wide``, the one
    nearer zero first (both the element where ``dtype`` holds it exactly)."""
    nearest = wide.to(dtype)
    back = nearest.to(torch.float64)
    zero = torch.zeros_like(nearest)
    inward = torch.nextafter(nearest, zero)
    outward = torch.nextafter(nearest, torch.where(nearest < 0, zero - torch.inf, zero + torch.inf))
    beyond = back.abs() > wide.abs()  # rounded away from zero: its inner neighbour is below
    exact = (back == wide) | ~torch.isfinite(back)  # beyond the dtype's range: infinity
    low = torch.where(exact | ~beyond, nearest, inward)
    high = torch.where(exact | beyond, nearest, outward)
    return low, high
