"""The "devices" of the detection benchmark (bench_detection.py): correct implementations that
round differently from the CPU (here), and realistic kernel bugs (``detection_bugs.py``,
``detection_kernel_bugs.py``), each a function of one operator sample run on the CPU
(``detection_common.Sample``).

A variant takes a sample and returns the output a device would give (the structure of the
CPU's output, after the OpInfo's output processing), or None where it does not apply.
Correct variants must pass the judge; bugs should fail it. Each correct variant is a kernel
PyTorch ships or documents as acceptable, modelled on the CPU: it never looks at the judge.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import detection_bugs as bugs
import detection_kernel_bugs as kernel_bugs
import torch
from detection_common import (
    ALIGNED,
    GEMM,
    HALF,
    REDUCTION_DIMS,
    Sample,
    compute_type,
    gemm,
    neighbours,
    reduced_dims,
    round_each,
    safe,
    ties_reversed,
    variance_call,
)

__all__ = ["BUGS", "CORRECT", "Sample", "fp64_rounded"]


@safe
def fp64_rounded(s: Sample) -> Any:
    """Computed in float64 and rounded to the dtype once (correctly rounded)."""
    return s.run_in(torch.float64)


@safe
def fp32_accumulation(s: Sample) -> Any:
    """Half precision computed in float32 (accumulation included), rounded once."""
    return s.run_in(torch.float32) if s.dtype in HALF else None


@safe
def reordered(s: Sample) -> Any:
    """A reduction summed in another order: the reduced dims (or K of a matrix product)
    reversed, the same arithmetic in the dtype."""
    if s.name in GEMM:
        return _gemm_permuted(s)
    if s.name not in REDUCTION_DIMS:
        return None
    dims = reduced_dims(s)
    if not dims:
        return None
    out = s.call(s.input.flip(dims))
    return out.flip(dims) if s.name in ALIGNED else out


def _gemm_permuted(s: Sample) -> Any:
    found = gemm(s, 2)
    if found is None:
        return None
    a, b, finish = found
    k = a.shape[-1]
    order = torch.arange(k - 1, -1, -1)
    return finish(torch.matmul(a[..., order], b[..., order, :]))


@safe
def split_k(s: Sample) -> Any:
    """Half-precision GEMM split along K into three partial products, each in the dtype
    (rounded to it), summed in float32: what split-K kernels do."""
    found = gemm(s, 3) if s.dtype in HALF and s.name in GEMM else None
    if found is None:
        return None
    a, b, finish = found
    k = a.shape[-1]
    bounds = [0, k // 3, 2 * k // 3, k]
    total = sum(torch.matmul(a[..., lo:hi], b[..., lo:hi, :]).float()
                for lo, hi in zip(bounds, bounds[1:], strict=False))
    return finish(total).to(s.dtype) if s.name != "addmm" else finish(total.to(s.dtype))


SPLIT_BLOCK = 32  # a common K tile of split-K kernels


@safe
def split_k_in_dtype(s: Sample) -> Any:
    """Half-precision GEMM split along K into blocks of 32 terms, each block's product
    accumulated in float32 and added into the output in the dtype (split-K with atomic adds
    into a half-precision output; PyTorch's default allows such reduced-precision reductions
    in fp16 and bf16 GEMMs): one rounding to the dtype per block."""
    found = gemm(s, 2 * SPLIT_BLOCK) if s.dtype in HALF and s.name in GEMM else None
    if found is None:
        return None
    a, b, finish = found
    out = None
    for lo in range(0, a.shape[-1], SPLIT_BLOCK):
        part = torch.matmul(a[..., lo:lo + SPLIT_BLOCK].float(),
                            b[..., lo:lo + SPLIT_BLOCK, :].float()).to(s.dtype)
        out = part if out is None else (out.float() + part.float()).to(s.dtype)
    return finish(out)


@safe
def refs(s: Sample) -> Any:
    """PyTorch's own Python reference (``torch._refs``): a decomposition into primitives."""
    ref = s.extra.get("ref")
    return None if ref is None else ref(s.input, *s.args, **s.kwargs)


@safe
def tie_permutation(s: Sample) -> Any:
    """A sort that orders equal values differently (where no stable order was asked)."""
    if s.name not in ("sort", "argsort", "topk") or s.kwargs.get("stable"):
        return None
    if s.name == "argsort" and len(s.args) > 2 and s.args[2]:
        return None
    return ties_reversed(s)


def _generator(s: Sample) -> torch.Generator:
    """The same random choices for the same sample in every run."""
    return torch.Generator().manual_seed(zlib.crc32(f"{s.name}/{s.dtype}".encode()))


@safe
def faithful_at_random(s: Sample) -> Any:
    """Faithfully rounded: each element one of the two numbers of the dtype around its
    float64 value, either with even chance (a math library within one ulp, with no
    preference of direction)."""
    generator = _generator(s)

    def faithful(wide: Any, template: Any) -> Any:
        low, high = neighbours(wide.to(torch.float64), template.dtype)
        pick = torch.rand(wide.shape, generator=generator) < 0.5
        return torch.where(pick, low, high)
    return round_each(s.run_in(torch.float64), s.cpu, faithful)


MATH = frozenset({
    "acos", "asin", "atan", "cos", "cosh", "sin", "sinh", "tan", "tanh", "exp", "exp2",
    "expm1", "log", "log10", "log1p", "log2", "sqrt", "rsqrt", "reciprocal", "sigmoid", "erf",
    "erfc", "erfinv", "lgamma", "pow", "atan2", "hypot", "nn.functional.gelu",
    "nn.functional.silu", "nn.functional.elu", "nn.functional.softplus", "nn.functional.mish",
    "nn.functional.logsigmoid", "nn.functional.tanhshrink"})
MATH_ULPS = 2  # CUDA's single-precision sinf, expf, logf, erff, ...: within 2 ulp


@safe
def math_library(s: Sample) -> Any:
    """An elementwise function from a float32 math library accurate to 2 ulp (CUDA's
    documented bound for most single-precision functions): the float64 value rounded to
    float32 and moved by up to 2 ulp at random, then rounded to the dtype."""
    if s.name not in MATH:
        return None
    generator = _generator(s)

    def library(wide: Any, template: Any) -> Any:
        moved = wide.to(torch.float32)
        for _ in range(MATH_ULPS):
            step = torch.randint(-1, 2, moved.shape, generator=generator)
            toward = torch.where(step < 0, -torch.inf, torch.inf)
            moved = torch.where(step == 0, moved, torch.nextafter(moved, toward))
        return moved.to(template.dtype)
    return round_each(s.run_in(torch.float64), s.cpu, library)


def _separate(s: Sample, kind: torch.dtype) -> Any:
    """a + b * c with each operation rounded to ``kind`` (no fused multiply-add)."""
    def at(t: Any) -> Any:
        return t.to(kind) if isinstance(t, torch.Tensor) else t
    value = s.kwargs.get("value", 1)
    if s.name in ("addcmul", "addcdiv"):
        first, second = at(s.args[0]), at(s.args[1])
        term = first * second if s.name == "addcmul" else first / second
        return at(s.input) + (term * value if value != 1 else term)
    if s.name == "lerp":
        end, weight = at(s.args[0]), at(s.args[1] if len(s.args) > 1 else s.kwargs["weight"])
        return at(s.input) + weight * (end - at(s.input))
    if s.name == "addmm":
        beta, alpha = s.kwargs.get("beta", 1), s.kwargs.get("alpha", 1)
        product = torch.matmul(at(s.args[0]), at(s.args[1]))
        return (at(s.input) * beta if beta != 1 else at(s.input)) + (
            product * alpha if alpha != 1 else product)
    return None


@safe
def separate_roundings(s: Sample) -> Any:
    """a + b * c computed as two roundings where the CPU may fuse them (or the reverse):
    addcmul, addcdiv, lerp's textbook start + weight * (end - start), addmm's product and
    then the sum, in the type the device computes in, rounded once more to the dtype."""
    if s.name not in ("addcmul", "addcdiv", "lerp", "addmm"):
        return None
    out = _separate(s, compute_type(s.dtype))
    return None if out is None else out.to(s.dtype)


@safe
def flush_to_zero(s: Sample) -> Any:
    """Subnormal results flushed to zero (their sign kept), the rest the CPU's: what a
    device in flush-to-zero mode returns."""
    def flush(out: Any, template: Any) -> Any:
        tiny = torch.finfo(template.dtype).tiny
        return torch.where(out.abs() < tiny, out * 0, out)
    return round_each(s.cpu, s.cpu, flush)


ONLINE_BLOCK = 32


@safe
def online_softmax(s: Sample) -> Any:
    """softmax and log_softmax in one pass over blocks of 32, with a running maximum and a
    running sum rescaled when the maximum grows (FlashAttention's online softmax), in
    float32."""
    if s.name not in ("softmax", "log_softmax") or s.kwargs.get("dtype") is not None:
        return None
    dims = reduced_dims(s)
    if not dims or not isinstance(s.input, torch.Tensor):
        return None
    x = s.input.to(compute_type(s.dtype)).movedim(dims[0], -1)
    top = torch.full(x.shape[:-1], -torch.inf)
    total = torch.zeros(x.shape[:-1])
    for lo in range(0, x.shape[-1], ONLINE_BLOCK):
        block = x[..., lo:lo + ONLINE_BLOCK]
        grown = torch.maximum(top, block.amax(-1))
        total = total * torch.exp(top - grown) + torch.exp(block - grown[..., None]).sum(-1)
        top = grown
    shifted = x - top[..., None]
    out = shifted - total.log()[..., None] if s.name == "log_softmax" else \
        shifted.exp() / total[..., None]
    return out.movedim(-1, dims[0]).to(s.dtype)


@safe
def welford(s: Sample) -> Any:
    """var, std and var_mean by Welford's one-pass update in float32 (CUDA's reduction),
    where the CPU takes two passes."""
    if s.name not in ("var", "std", "var_mean") or s.input.numel() == 0:
        return None
    dims, correction = variance_call(s)
    rest = [d for d in range(s.input.dim()) if d not in dims]
    x = s.input.permute(*rest, *dims).reshape(*[s.input.shape[d] for d in rest], -1)
    x = x.to(compute_type(s.dtype))
    mean, second = torch.zeros(x.shape[:-1]), torch.zeros(x.shape[:-1])
    for k in range(x.shape[-1]):
        delta = x[..., k] - mean
        mean = mean + delta / (k + 1)
        second = second + delta * (x[..., k] - mean)
    var = second / max(x.shape[-1] - correction, 0)
    shape = (s.cpu[0] if isinstance(s.cpu, tuple) else s.cpu).shape
    if s.name == "var_mean":
        return (var.reshape(shape).to(s.dtype), mean.reshape(shape).to(s.dtype))
    return (var.sqrt() if s.name == "std" else var).reshape(shape).to(s.dtype)


CORRECT: dict[str, Callable[[Sample], Any]] = {
    "float64, rounded once": fp64_rounded,
    "float32 accumulation (half dtypes)": fp32_accumulation,
    "reordered reduction / K": reordered,
    "split-K half GEMM": split_k,
    "torch._refs decomposition": refs,
    "tie permutation in sorts": tie_permutation,
    "faithful rounding at random": faithful_at_random,
    "split-K accumulated in the dtype": split_k_in_dtype,
    "math library within 2 ulp": math_library,
    "separate roundings (no FMA)": separate_roundings,
    "subnormal results flushed": flush_to_zero,
    "online softmax": online_softmax,
    "Welford variance": welford,
}

BUGS: dict[str, Callable[[Sample], Any]] = {**bugs.BUGS, **kernel_bugs.BUGS}
