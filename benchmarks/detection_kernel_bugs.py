"""The detection benchmark's bug classes inside a kernel (bench_detection.py): a wrong tie rule,
a wrong reduction identity, a pooling divisor, strides ignored, a norm's epsilon in the wrong
place, naive formulas, softmax without its shift, one-pass variance, round-half-away, the sign
of zero lost, a last-ulp bias, a flipped convolution kernel and subnormal inputs read as zero.
Each takes a ``detection_common.Sample`` and returns the output a buggy device would give, or
None where the bug does not apply to the sample.

These classes were written before the judge's rules of 2026-11-28 and were not tuned to them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from detection_common import (
    Sample,
    compute_type,
    reduced_dims,
    round_each,
    safe,
    variance_call,
)

FIRST_OF_TIES = ("argmax", "argmin", "max.reduction_with_dim", "min.reduction_with_dim")


def _dim_argument(s: Sample) -> Any:
    return s.kwargs.get("dim", s.args[0] if s.args else None)


@safe
def last_of_ties(s: Sample) -> Any:
    """argmax, argmin, max(dim) and min(dim) returning the last of equal extremes, where
    PyTorch documents the first."""
    if s.name not in FIRST_OF_TIES or not isinstance(s.input, torch.Tensor) or \
            s.input.numel() < 2:
        return None
    dim = _dim_argument(s)
    if dim is None:  # argmax over the flattened input
        flat = s.input.reshape(-1)
        index = flat.numel() - 1 - s.op(flat.flip(0))
        return index.reshape(s.cpu.shape)
    dim = int(dim) % max(s.input.dim(), 1)
    out = s.call(s.input.flip(dim))
    size = s.input.shape[dim] if s.input.dim() else 1
    if isinstance(out, torch.Tensor):
        return size - 1 - out
    return type(s.cpu)((out[0], size - 1 - out[1]))


MAX_LIKE = {"amax": True, "max.reduction_with_dim": True, "max.reduction_no_dim": True,
            "argmax": True, "amin": False, "min.reduction_with_dim": False,
            "min.reduction_no_dim": False, "argmin": False}


@safe
def zero_identity(s: Sample) -> Any:
    """A max (min) reduction started from 0 instead of -inf (+inf): a row of negative
    (positive) values reduces to 0, and its index to 0."""
    if s.name not in MAX_LIKE or not isinstance(s.input, torch.Tensor) or s.input.numel() == 0:
        return None
    larger = MAX_LIKE[s.name]
    clip: Callable[[Any], Any] = (lambda v: v.clamp(min=0)) if larger else \
        (lambda v: v.clamp(max=0))
    if s.name in ("amax", "amin", "max.reduction_no_dim", "min.reduction_no_dim"):
        return clip(s.cpu)
    if s.name in ("argmax", "argmin"):
        dim, keep = _dim_argument(s), bool(s.kwargs.get("keepdim", False))
        values = (s.input.amax if larger else s.input.amin)(
            dim=dim, keepdim=keep) if dim is not None else \
            (s.input.max() if larger else s.input.min()).reshape(s.cpu.shape)
        return torch.where(clip(values) != values, torch.zeros_like(s.cpu), s.cpu)
    values, indices = s.cpu
    moved = clip(values) != values
    return type(s.cpu)((clip(values), torch.where(moved, torch.zeros_like(indices), indices)))


POOLS = ("nn.functional.avg_pool1d", "nn.functional.avg_pool2d", "nn.functional.avg_pool3d")
COUNT_INCLUDE_PAD = 4  # its position after the input: kernel, stride, padding, ceil_mode


@safe
def pooling_divisor(s: Sample) -> Any:
    """Average pooling that counts the padding in its divisor where it was asked not to, or
    the reverse (count_include_pad ignored): wrong at the border windows."""
    if s.name not in POOLS:
        return None
    args, kwargs = list(s.args), dict(s.kwargs)
    if len(args) > COUNT_INCLUDE_PAD:
        args[COUNT_INCLUDE_PAD] = not args[COUNT_INCLUDE_PAD]
    else:
        kwargs["count_include_pad"] = not kwargs.get("count_include_pad", True)
    return s.call(s.input, args, kwargs)


@safe
def strides_ignored(s: Sample) -> Any:
    """A kernel that reads its input in memory order, ignoring strides: given a transposed
    view (the input's last two dims swapped in memory), it computes on the storage."""
    x = s.input
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.shape[-1] < 2 or x.shape[-2] < 2:
        return None
    return s.call(x.mT.contiguous().reshape(x.shape))


def _normalised(x: Any, dims: list[int], eps: float, rms: bool) -> Any:
    """x normalised over ``dims`` with eps added to the standard deviation, not to the
    variance: x / (sqrt(mean x^2) + eps) or (x - mean) / (sqrt(var) + eps)."""
    if rms:
        return x / (x.pow(2).mean(dims, keepdim=True).sqrt() + eps)
    centred = x - x.mean(dims, keepdim=True)
    return centred / (centred.pow(2).mean(dims, keepdim=True).sqrt() + eps)


@safe
def eps_outside_sqrt(s: Sample) -> Any:
    """layer_norm, rms_norm and group_norm adding their epsilon outside the square root."""
    kind = compute_type(s.dtype)
    x, args, kwargs = s.input.to(kind), list(s.args), s.kwargs
    if s.name in ("nn.functional.layer_norm", "nn.functional.rms_norm"):
        rms = s.name.endswith("rms_norm")
        shape = args[0] if isinstance(args[0], (tuple, list)) else (args[0],)
        weight = args[1] if len(args) > 1 else kwargs.get("weight")
        bias = None if rms else args[2] if len(args) > 2 else kwargs.get("bias")
        eps = kwargs.get("eps")
        eps = (torch.finfo(s.dtype).eps if rms else 1e-5) if eps is None else eps
        out = _normalised(x, list(range(x.dim() - len(shape), x.dim())), eps, rms)
    elif s.name == "nn.functional.group_norm":
        groups, eps = int(args[0]), kwargs.get("eps", 1e-5)
        weight, bias = kwargs.get("weight"), kwargs.get("bias")
        grouped = x.reshape(x.shape[0], groups, -1)
        out = _normalised(grouped, [-1], eps, False).reshape(x.shape)
        shape = (x.shape[1],) + (1,) * (x.dim() - 2)
        weight = None if weight is None else weight.reshape(shape)
        bias = None if bias is None else bias.reshape(shape)
    else:
        return None
    out = out if weight is None else out * weight.to(kind)
    return (out if bias is None else out + bias.to(kind)).to(s.dtype)


def _naive(name: str, x: Any, s: Sample) -> Any:
    """The textbook formula of an elementwise function, without its care near cancellation
    or overflow."""
    if name == "tanh":
        grown = torch.exp(2 * x)
        return (grown - 1) / (grown + 1)
    if name == "sinh":
        return (torch.exp(x) - torch.exp(-x)) / 2
    if name == "erfc":
        return 1 - torch.erf(x)
    if name == "nn.functional.softplus":
        beta = s.kwargs.get("beta", s.args[0] if s.args else 1)
        return torch.log(1 + torch.exp(beta * x)) / beta
    if name == "nn.functional.logsigmoid":
        return torch.log(torch.sigmoid(x))
    if name == "nn.functional.mish":
        return x * torch.tanh(torch.log(1 + torch.exp(x)))
    if name == "log_softmax":
        return torch.log(torch.softmax(x, *s.args, **s.kwargs))
    if name == "pow" and isinstance(x, torch.Tensor) and bool((x > 0).all()):
        exponent = s.args[0]
        exponent = exponent.to(x.dtype) if isinstance(exponent, torch.Tensor) else exponent
        return torch.exp(exponent * torch.log(x))
    return None


@safe
def naive_formula(s: Sample) -> Any:
    """tanh as (e^2x - 1) / (e^2x + 1), sinh as (e^x - e^-x) / 2, erfc as 1 - erf,
    softplus as log(1 + e^x), logsigmoid as log(sigmoid), mish with that softplus,
    log_softmax as log(softmax), pow as exp(y log x): computed in the type the device computes
    in, rounded to the dtype."""
    if not isinstance(s.input, torch.Tensor):
        return None
    out = _naive(s.name, s.input.to(compute_type(s.dtype)), s)
    return None if out is None else out.to(s.dtype)


@safe
def softmax_unshifted(s: Sample) -> Any:
    """softmax and log_softmax without subtracting the maximum first: exp overflows for
    logits above 88 (float32)."""
    if s.name not in ("softmax", "log_softmax") or s.kwargs.get("dtype") is not None:
        return None
    dims = reduced_dims(s)
    if not dims:
        return None
    x = s.input.to(compute_type(s.dtype))
    total = torch.exp(x).sum(dims[0], keepdim=True)
    out = x - total.log() if s.name == "log_softmax" else torch.exp(x) / total
    return out.to(s.dtype)


@safe
def one_pass_variance(s: Sample) -> Any:
    """var, std and var_mean as (sum x^2 - (sum x)^2 / n) / (n - correction) in one pass
    (cancellation where the mean is large against the spread), in the type the device
    computes in."""
    if s.name not in ("var", "std", "var_mean") or s.input.numel() < 2:
        return None
    dims, correction = variance_call(s)
    x = s.input.to(compute_type(s.dtype))
    count = math.prod(s.input.shape[d] for d in dims)
    var = ((x * x).sum(dims) - x.sum(dims) ** 2 / count) / max(count - correction, 0)
    shape = (s.cpu[0] if isinstance(s.cpu, tuple) else s.cpu).shape
    if s.name == "var_mean":
        return (var.reshape(shape).to(s.dtype), x.mean(dims).reshape(shape).to(s.dtype))
    out = var.clamp(min=0).sqrt() if s.name == "std" else var
    return out.reshape(shape).to(s.dtype)


@safe
def round_half_away(s: Sample) -> Any:
    """round() taking half-way cases away from zero where PyTorch rounds them to even."""
    if s.name != "round" or s.kwargs.get("decimals") or not isinstance(s.input, torch.Tensor):
        return None
    x = s.input.to(torch.float64)
    return (torch.sign(x) * torch.floor(x.abs() + 0.5)).to(s.dtype)


def _has_negative_zero(tree: Any) -> bool:
    found = [t for t in ([tree.input, *tree.args] if isinstance(tree, Sample) else [tree])
             if isinstance(t, torch.Tensor) and t.is_floating_point()]
    return any(bool(((t == 0) & torch.signbit(t)).any()) for t in found)


@safe
def negative_zero_lost(s: Sample) -> Any:
    """-0.0 read as +0.0 in the inputs (atan2(-0, -1) is -pi, 1 / -0 is -inf)."""
    if not _has_negative_zero(s):
        return None

    def plus(t: Any) -> Any:
        return t + 0.0 if isinstance(t, torch.Tensor) and t.is_floating_point() else t
    return s.call(plus(s.input), [plus(a) for a in s.args],
                  {k: plus(v) for k, v in s.kwargs.items()})


@safe
def last_ulp_away(s: Sample) -> Any:
    """Every element one ulp away from zero: the correctly rounded result moved to its outer
    neighbour (a constant off by its last bit)."""
    def away(wide: Any, template: Any) -> Any:
        nearest = wide.to(torch.float64).to(template.dtype)
        outward = torch.where(nearest < 0, -torch.inf, torch.inf).to(template.dtype)
        return torch.where(nearest == 0, nearest, torch.nextafter(nearest, outward))
    return round_each(s.run_in(torch.float64), s.cpu, away)


CONVOLUTIONS = ("nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d",
                "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
                "nn.functional.conv_transpose3d")


@safe
def kernel_flipped(s: Sample) -> Any:
    """A convolution that flips its kernel (convolution where PyTorch cross-correlates)."""
    if s.name not in CONVOLUTIONS or not s.args or not isinstance(s.args[0], torch.Tensor):
        return None
    weight = s.args[0]
    flipped = weight.flip(list(range(2, weight.dim())))
    return s.call(s.input, [flipped, *s.args[1:]])


@safe
def subnormal_inputs_zero(s: Sample) -> Any:
    """Subnormal inputs read as zero and subnormal results written as zero (a device in
    denormals-are-zero mode): wrong where a subnormal input makes a normal result."""
    def flush(t: Any) -> Any:
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return t
        return torch.where(t.abs() < torch.finfo(t.dtype).tiny, t * 0, t)
    inputs = [s.input, *s.args]
    if not any(isinstance(t, torch.Tensor) and t.is_floating_point() and bool(
            ((t != 0) & (t.abs() < torch.finfo(t.dtype).tiny)).any()) for t in inputs):
        return None
    out = s.call(flush(s.input), [flush(a) for a in s.args])
    return round_each(out, s.cpu, lambda result, _: flush(result))


BUGS: dict[str, Callable[[Sample], Any]] = {
    "last of equal extremes returned": last_of_ties,
    "max/min started from 0": zero_identity,
    "pooling divisor counts the padding": pooling_divisor,
    "strides ignored (transposed input)": strides_ignored,
    "norm's eps outside the square root": eps_outside_sqrt,
    "naive formula (cancellation, overflow)": naive_formula,
    "softmax without the max shift": softmax_unshifted,
    "one-pass variance": one_pass_variance,
    "round() half away from zero": round_half_away,
    "-0 read as +0": negative_zero_lost,
    "every element one ulp away from zero": last_ulp_away,
    "convolution kernel flipped": kernel_flipped,
    "subnormal inputs read as zero": subnormal_inputs_zero,
}
