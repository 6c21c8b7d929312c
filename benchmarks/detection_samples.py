"""The detection benchmark's corpus (bench_detection.py): the operators it judges, their OpInfo
samples, and larger shapes where a bug shows that small samples hide (long sums, saturating
functions, ties, subnormals, signed zeros, large logits and offsets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import detection_variants as variants
import oota_cases
import torch

MAX_INPUT_ELEMENTS = 4000

OPERATORS = (
    # elementwise
    "abs", "acos", "asin", "atan", "cos", "cosh", "sin", "sinh", "tan", "tanh", "exp", "exp2",
    "expm1", "log", "log10", "log1p", "log2", "sqrt", "rsqrt", "reciprocal", "sigmoid", "erf",
    "erfc", "erfinv", "neg", "frac", "nn.functional.gelu", "nn.functional.silu",
    "nn.functional.relu", "nn.functional.elu", "nn.functional.softplus", "nn.functional.mish",
    "nn.functional.hardswish", "nn.functional.logsigmoid", "nn.functional.tanhshrink",
    "lgamma", "nan_to_num", "clamp", "add", "sub", "mul", "div.no_rounding_mode", "pow",
    "atan2", "maximum", "minimum", "hypot", "remainder", "fmod", "lerp", "addcmul", "addcdiv",
    "xlogy",
    # reductions and scans
    "sum", "mean", "prod", "amax", "amin", "max.reduction_with_dim", "min.reduction_with_dim",
    "argmax", "argmin", "var", "std", "var_mean", "logsumexp", "nansum", "linalg.vector_norm",
    "cumsum", "cumprod", "cummax", "median", "mode", "kthvalue",
    # products
    "mm", "bmm", "matmul", "addmm", "addmv", "mv", "dot", "baddbmm", "addbmm", "einsum",
    "nn.functional.linear", "trace", "inner", "outer",
    # networks
    "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.rms_norm",
    "nn.functional.group_norm", "nn.functional.batch_norm", "nn.functional.conv1d",
    "nn.functional.conv2d", "nn.functional.conv_transpose2d", "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d",
    "nn.functional.scaled_dot_product_attention", "nn.functional.cross_entropy",
    "nn.functional.mse_loss", "nn.functional.binary_cross_entropy_with_logits",
    "nn.functional.embedding", "nn.functional.normalize", "nn.functional.cosine_similarity",
    # sorting
    "sort", "argsort", "topk", "msort",
    # indexing
    "where", "index_select", "gather", "scatter_add", "index_add",
    # rounding
    "round",
)
QUICK = ("nn.functional.gelu", "log1p", "mm", "sum", "cumsum", "log_softmax", "softmax",
         "nn.functional.layer_norm", "topk", "sort", "argsort", "argmax", "addmm", "exp",
         "max.reduction_with_dim", "mean", "nn.functional.linear", "erf", "var")



# -- samples ------------------------------------------------------------------------------------

def _processed(op: Any, process: Callable[[Any], Any]) -> Callable[..., Any]:
    def call(input_: Any, *args: Any, **kwargs: Any) -> Any:
        return process(op(input_, *args, **kwargs))
    return call


def elements(tree: Any) -> int:
    """How many tensor elements a result or an argument list holds."""
    return sum(t.numel() for t in oota_cases.leaves(oota_cases.plain(tree, copy=False))
               if isinstance(t, torch.Tensor))


def opinfo_samples(op: Any, name: str, dtype: Any, count: int, refs: dict[str, Any]
                   ) -> Iterator[variants.Sample]:
    """The op's largest ``count`` samples (at most MAX_INPUT_ELEMENTS input elements)."""
    torch.manual_seed(0)
    try:
        made = list(op.sample_inputs("cpu", dtype))
    except Exception:  # noqa: BLE001 - an operator without samples in this dtype
        return
    small = [s for s in made if elements((s.input, s.args, s.kwargs)) <= MAX_INPUT_ELEMENTS]
    small.sort(key=lambda s: -elements((s.input, s.args)))
    for sample in small[:count]:
        call = _processed(op, sample.output_process_fn_grad)
        yield variants.Sample(name=name, op=call, input=sample.input, args=list(sample.args),
                              kwargs=dict(sample.kwargs), dtype=dtype,
                              extra={"ref": refs.get(name), "origin": "OpInfo"})


def _normal(*shape: int, scale: float = 1.0, seed: int = 0) -> Any:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def _signed_zeros(count: int, seed: int = 0) -> Any:
    """Every other element zero, of either sign, the rest normal."""
    values = _normal(count, seed=seed)
    zeros = torch.where(values > 0, 0.0, -0.0)
    return torch.where(torch.arange(count) % 2 == 0, zeros, values)


def _ties(*shape: int, values: int = 32, seed: int = 0) -> Any:
    return torch.randint(0, values, shape, generator=torch.Generator().manual_seed(seed)).float()


# (op_db name, a function of the dtype giving input, args, kwargs)
LARGE: tuple[tuple[str, Callable[[Any], tuple[Any, list[Any], dict[str, Any]]]], ...] = (
    ("mm", lambda d: (_normal(64, 512).to(d), [_normal(512, 48, seed=1).to(d)], {})),
    ("matmul", lambda d: (_normal(4, 32, 256).to(d), [_normal(256, 32, seed=1).to(d)], {})),
    ("addmm", lambda d: (_normal(48).to(d), [_normal(64, 512, seed=1).to(d),
                                             _normal(512, 48, seed=2).to(d)], {})),
    ("nn.functional.linear", lambda d: (_normal(64, 512).to(d), [
        _normal(64, 512, seed=1).to(d), _normal(64, seed=2).to(d)], {})),
    ("bmm", lambda d: (_normal(8, 32, 128).to(d), [_normal(8, 128, 32, seed=1).to(d)], {})),
    ("sum", lambda d: (_normal(4096).to(d), [], {})),
    ("sum", lambda d: (_normal(64, 1024).to(d), [], {"dim": 1})),
    ("mean", lambda d: (_normal(64, 1024).to(d), [], {"dim": -1})),
    ("cumsum", lambda d: (_normal(4096).to(d), [0], {})),
    ("log_softmax", lambda d: (_normal(32, 1000, scale=3).to(d), [-1], {})),
    ("softmax", lambda d: (_normal(32, 1000, scale=3).to(d), [-1], {})),
    ("nn.functional.layer_norm", lambda d: (_normal(32, 1024).to(d), [(1024,)], {
        "weight": _normal(1024, seed=1).to(d), "bias": _normal(1024, seed=2).to(d)})),
    ("nn.functional.gelu", lambda d: (_normal(4096, scale=3).to(d), [], {})),
    ("nn.functional.silu", lambda d: (_normal(4096, scale=3).to(d), [], {})),
    ("exp", lambda d: (_normal(4096, scale=3).to(d), [], {})),
    ("tanh", lambda d: (_normal(4096, scale=2).to(d), [], {})),
    ("sigmoid", lambda d: (_normal(4096, scale=3).to(d), [], {})),
    ("log1p", lambda d: (_normal(4096, scale=0.01).to(d), [], {})),
    ("expm1", lambda d: (_normal(4096, scale=0.01).to(d), [], {})),
    ("erf", lambda d: (_normal(4096, scale=0.5).to(d), [], {})),
    ("sort", lambda d: (_ties(64, 64).to(d), [], {"dim": -1, "stable": True})),
    ("sort", lambda d: (_ties(64, 64).to(d), [], {"dim": -1})),
    ("argsort", lambda d: (_ties(64, 64).to(d), [], {"dim": -1, "stable": True})),
    ("topk", lambda d: (_normal(16, 256).to(d), [32, -1], {})),
    ("max.reduction_with_dim", lambda d: (_ties(64, 256).to(d), [1], {})),
    ("linalg.vector_norm", lambda d: (_normal(4096).to(d), [], {})),
    ("nn.functional.conv2d", lambda d: (_normal(2, 16, 16, 16).to(d), [
        _normal(16, 16, 3, 3, seed=1).to(d)], {})),
    # The CPU overflows in float32 where float64 does not: a correct device returns the
    # finite value.
    ("linalg.vector_norm", lambda d: (_normal(64, scale=2e19).to(d), [], {})),
    ("nn.functional.mse_loss", lambda d: (_normal(64, scale=1e19).to(d), [
        _normal(64, scale=1e19, seed=1).to(d)], {})),
    # Added 2026-11-28 with the kernel bug classes, before the judge's rules of that day:
    # a long K (split-K in 32 blocks), saturating and cancelling functions, ties and rows of
    # one sign for extreme reductions, padding, a large mean, large logits, half-way cases,
    # signed zeros, subnormal inputs and results.
    ("mm", lambda d: (_normal(16, 1024).to(d), [_normal(1024, 16, seed=1).to(d)], {})),
    ("erf", lambda d: (_normal(4096, scale=2).to(d), [], {})),
    ("erfc", lambda d: (_normal(4096, scale=3).to(d), [], {})),
    ("sinh", lambda d: (_normal(4096, scale=0.01).to(d), [], {})),
    ("nn.functional.softplus", lambda d: (_normal(4096, scale=20).to(d), [], {})),
    ("nn.functional.logsigmoid", lambda d: (_normal(4096, scale=20).to(d), [], {})),
    ("argmax", lambda d: (_ties(64, 256).to(d), [1], {})),
    ("argmin", lambda d: (_ties(4096).to(d), [], {})),
    ("min.reduction_with_dim", lambda d: (_ties(64, 256).to(d), [1], {})),
    ("amax", lambda d: (_normal(256, 4).to(d), [1], {})),
    ("max.reduction_with_dim", lambda d: (_normal(256, 4).to(d), [1], {})),
    ("nn.functional.avg_pool2d", lambda d: (_normal(2, 8, 16, 16).to(d), [3, 2, 1], {})),
    ("var", lambda d: ((_normal(64, 1024) + 100).to(d), [], {"dim": 1})),
    ("std", lambda d: ((_normal(64, 1024) + 100).to(d), [], {"dim": 1})),
    ("nn.functional.layer_norm", lambda d: ((_normal(32, 1024) + 100).to(d), [(1024,)], {})),
    ("softmax", lambda d: (_normal(32, 1000, scale=40).to(d), [-1], {})),
    ("log_softmax", lambda d: (_normal(32, 1000, scale=40).to(d), [-1], {})),
    ("round", lambda d: ((_ties(4096) / 2 - 8).to(d), [], {})),
    ("atan2", lambda d: (_signed_zeros(4096).to(d), [-_normal(4096, seed=1).abs().to(d)], {})),
    ("div.no_rounding_mode", lambda d: (torch.ones(256, dtype=d), [
        _signed_zeros(256).to(d)], {})),
    ("mul", lambda d: ((_normal(4096) * 4 * torch.finfo(d).tiny).to(d), [
        (_normal(4096, seed=1) * 4096).to(d)], {})),
    ("mul", lambda d: ((_normal(4096) * 2 * torch.finfo(d).tiny ** 0.5).to(d), [
        (_normal(4096, seed=1) * 2 * torch.finfo(d).tiny ** 0.5).to(d)], {})),
)


def large_samples(ops: dict[str, Any], dtype: Any, refs: dict[str, Any], wanted: set[str]
                  ) -> Iterator[variants.Sample]:
    for name, make in LARGE:
        if name not in wanted or name not in ops:
            continue
        input_, args, kwargs = make(dtype)
        yield variants.Sample(name=name, op=ops[name], input=input_, args=args, kwargs=kwargs,
                              dtype=dtype, extra={"ref": refs.get(name), "origin": "large"})


def python_refs() -> dict[str, Any]:
    from torch.testing._internal.common_methods_invocations import python_ref_db

    found = {}
    for ref in python_ref_db:
        variant = getattr(ref, "torch_opinfo_variant_name", "")
        name = f"{ref.torch_opinfo_name}.{variant}" if variant else ref.torch_opinfo_name
        found.setdefault(name, ref.op)
    return found


