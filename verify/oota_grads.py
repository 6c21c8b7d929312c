"""The autograd layer's gradient check: an operator's backward on the device against the CPU's.

As PyTorch's gradient tests make them, each sample of ``op.sample_inputs(device, dtype,
requires_grad=True)`` runs forward on the device and on a CPU copy, and one fixed cotangent per
output that requires grad (normal values from the sample's own seed, made on the CPU and copied
to the device) is propagated back with ``torch.autograd.grad``. Each input's gradient is then
one output of a judge's case (``oota_judge.judge``, the rule the ops layer gives the operator):
the device's gradient against the CPU's, and against the CPU's in float64, element by element.
Where the judge asks for the operator again (the magnitudes of a sum's terms, inputs one
rounding apart), it gets the gradient again (:func:`rerun`): the cotangent travels in the case's
keyword arguments (``COTANGENTS``) so that the judge's changes to the inputs reach it too.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import oota_cases
import oota_judge
import oota_rules
from oota_autograd import Outcome
from oota_samples import first_line, not_implemented, synchronize

COTANGENTS = "oota.cotangents"  # a gradient case's kwargs: the backward's cotangents


def walk(tree: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(path, tensor) of every tensor in ``tree`` (lists, tuples and dicts followed)."""
    import torch

    if isinstance(tree, torch.Tensor):
        yield path, tree
    elif isinstance(tree, (list, tuple)):
        for index, value in enumerate(tree):
            yield from walk(value, f"{path}[{index}]")
    elif isinstance(tree, dict):
        for key, value in tree.items():
            yield from walk(value, f"{path}[{key!r}]" if path else str(key))


def sample_tensors(input_: Any, args: Sequence[Any], kwargs: Mapping[str, Any]
                   ) -> list[tuple[str, Any]]:
    """Every tensor of a sample with the name a reader sees: 'input', 'input[1]' (a tensor
    list), 'args[0]', 'weight' (a keyword argument)."""
    found = list(walk(input_, "input"))
    for index, value in enumerate(args):
        found += walk(value, f"args[{index}]")
    for key, value in kwargs.items():
        if key != COTANGENTS:
            found += walk(value, str(key))
    return found


def needing_grad(sample: Any) -> list[tuple[str, Any]]:
    """The sample's tensors that require grad: the ones the gradients are taken of."""
    return [(path, t) for path, t in sample_tensors(sample.input, sample.args, sample.kwargs)
            if t.requires_grad]


def differentiable(result: Any) -> list[Any]:
    """The outputs that require grad, in order (those a cotangent is propagated from)."""
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(result) if isinstance(t, torch.Tensor) and t.requires_grad]


def cotangents(outputs: Sequence[Any], seed_text: str) -> list[Any]:
    """One fixed cotangent per output: normal values (complex ones for a complex output) from
    the sample's own seed, on the CPU, in the output's dtype."""
    import torch

    generator = torch.Generator().manual_seed(zlib.crc32(seed_text.encode()))
    return [torch.randn(tuple(o.shape), generator=generator, dtype=torch.float64 if not
                        o.is_complex() else torch.complex128).to(o.dtype) for o in outputs]


def _leaf_like(t: Any, device: Any = None, dtype: Any = None) -> Any:
    moved = t.detach().to(device=device or t.device, dtype=dtype or t.dtype)
    return moved.requires_grad_(t.requires_grad)


def cpu_leaves(sample: Any) -> Any:
    """The sample on the CPU: its tensors copied as leaves that require grad as they did."""
    import torch

    return sample.transform(lambda t: _leaf_like(t, torch.device("cpu"))
                            if isinstance(t, torch.Tensor) else t)


def float64_leaves(sample: Any) -> Any:
    """The sample in float64 (complex128) as leaves, floating dtype arguments too."""
    import torch

    def wide(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
            return _leaf_like(value, dtype=torch.complex128 if value.is_complex()
                              else torch.float64)
        if isinstance(value, torch.dtype) and (value.is_floating_point or value.is_complex):
            return torch.complex128 if value.is_complex else torch.float64
        return value
    return sample.transform(wide)


@dataclass
class Backward:
    """One run of a sample forward and back: its outputs that require grad, the cotangents
    propagated from them, and its gradients by input path (None: unused)."""

    outputs: list[Any]
    cots: list[Any] = field(default_factory=list)
    grads: dict[str, Any] = field(default_factory=dict)


def backward(op: Any, sample: Any, cots: Sequence[Any] | None = None,
             seed_text: str = "") -> Backward:
    """The sample run forward (its output processing applied) and back from ``cots`` (made
    from ``seed_text`` when None); an Exception where either raises."""
    import torch

    result = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
    outputs = differentiable(result)
    wanted = needing_grad(sample)
    if not outputs or not wanted:
        return Backward(outputs=outputs)
    cots = list(cots) if cots is not None else cotangents(outputs, seed_text)
    if len(cots) != len(outputs):
        raise ValueError(f"{len(outputs)} outputs require grad, {len(cots)} cotangents given")
    grads = torch.autograd.grad(outputs, [t for _, t in wanted],
                                [c.to(device=o.device, dtype=o.dtype)
                                 for c, o in zip(cots, outputs, strict=True)],
                                allow_unused=True)
    return Backward(outputs=outputs, cots=cots,
                    grads={p: g for (p, _), g in zip(wanted, grads, strict=True)})


def rerun(op: Any, paths: Sequence[str], path: str, process: Any) -> oota_judge.Rerun:
    """The judge's second runs of one gradient case: the gradient of ``path`` at the inputs
    the judge chooses, from the cotangents in the case's kwargs (changed as the inputs are)."""
    import torch

    def call(input_: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        rest = {k: v for k, v in kwargs.items() if k != COTANGENTS}
        with torch.enable_grad():
            leaves = _as_leaves((input_, list(args), rest), set(paths))
            sample_input, sample_args, sample_kwargs = leaves
            result = process(op(sample_input, *sample_args, **sample_kwargs))
            outputs = differentiable(result)
            wanted = dict(sample_tensors(sample_input, sample_args, sample_kwargs))[path]
            cots = kwargs[COTANGENTS]
            return torch.autograd.grad(outputs, [wanted], [c.to(o.dtype) for c, o in zip(
                cots, outputs, strict=True)], allow_unused=True)[0]
    return oota_judge.Rerun(call=call)


def _as_leaves(tree: Any, paths: set[str], path: str = "") -> Any:
    """(input, args, kwargs) with the tensors at ``paths`` made leaves that require grad."""
    import torch

    if not path:
        input_, args, kwargs = tree
        return (_as_leaves(input_, paths, "input"),
                [_as_leaves(a, paths, f"args[{i}]") for i, a in enumerate(args)],
                {k: _as_leaves(v, paths, str(k)) for k, v in kwargs.items()})
    if isinstance(tree, torch.Tensor):
        return tree.detach().requires_grad_(path in paths)
    if isinstance(tree, (list, tuple)):
        return type(tree)(_as_leaves(v, paths, f"{path}[{i}]") for i, v in enumerate(tree))
    if isinstance(tree, dict):
        return {k: _as_leaves(v, paths, f"{path}[{k!r}]") for k, v in tree.items()}
    return tree


# -- one pair ---------------------------------------------------------------------------------

@dataclass
class Judged:
    """One pair's gradient check: its outcome, the judge's verdicts (pooled for bias)."""

    outcome: Outcome
    verdicts: list[oota_cases.Verdict] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Pair:
    """What judging one operator × dtype needs: the operator and its names, the rule, the
    device and what watches its runs (``oota_hooks.Coverage.watch``)."""

    op: Any
    name: str
    dtype: str
    device: Any
    rule: oota_rules.Rule
    watch: Any

    def seed_text(self, index: int) -> str:
        return f"{self.name}-{self.dtype}-{index}"


def judge_pair(pair: Pair, made: Sequence[Any]) -> Judged:
    """The device's gradients of each sample against the CPU's, until one is wrong."""
    judged = Judged(Outcome(samples=len(made)))
    counts = {"ran": 0, "unchecked": 0, "cpu_errors": 0}
    refused, worst = "", 0.0
    for index, sample in enumerate(made):
        cpu_sample = cpu_leaves(sample)
        try:
            want = backward(pair.op, cpu_sample, seed_text=pair.seed_text(index))
        except Exception as exc:  # noqa: BLE001 - a sample the CPU refuses has nothing to compare
            counts["cpu_errors"] += 1
            refused = refused or f"sample {index}: {first_line(exc)}"
            continue
        if not want.grads:
            counts["unchecked"] += 1
            continue
        cots = want.cots
        try:
            got = pair.watch(lambda: _device_backward(pair, sample, cots))  # noqa: B023
        except Exception as exc:  # noqa: BLE001 - the device's failure is the finding
            return Judged(_device_failure(exc, len(made), counts["ran"], index))
        counts["ran"] += 1
        failure, ratio = _judge_sample(pair, index, cpu_sample, cots, want, got, judged)
        if failure:
            return Judged(Outcome(samples=len(made), failure=failure, **counts))
        worst = max(worst, ratio)
    pooled = oota_judge.pooled_bias(judged.verdicts, pair.rule, pair.device.type)
    if pooled:
        return Judged(Outcome(samples=len(made), refused=refused, failure=(
            f"the gradients of {pair.name} ({pair.dtype}): {pooled}"), **counts))
    return Judged(Outcome(samples=len(made), refused=refused, passed=(
        f"within {pair.rule.describe()} (the worst gradient uses {worst:.2g} of it)"),
        **counts), judged.verdicts)


def _device_backward(pair: Pair, sample: Any, cots: Sequence[Any]) -> Backward:
    got = backward(pair.op, sample, cots)
    synchronize(pair.device)
    return got


def _device_failure(exc: Exception, samples: int, ran: int, index: int) -> Outcome:
    if not_implemented(exc):
        return Outcome(samples=samples, ran=ran, not_implemented=f"sample {index}: "
                       f"{first_line(exc)}")
    return Outcome(samples=samples, ran=ran,
                   error=f"sample {index}: {first_line(exc)} (the CPU ran it)")


def _judge_sample(pair: Pair, index: int, cpu_sample: Any, cots: Sequence[Any],
                  want: Backward, got: Backward, judged: Judged) -> tuple[str, float]:
    """The first wrong gradient of one sample ('' when all are right) and the largest share
    of the rule's allowance one used."""
    where = f"{pair.name} ({pair.dtype}): sample {index}"
    if len(got.outputs) != len(want.outputs):
        return (f"{where}: {len(got.outputs)} outputs require grad on {pair.device.type}, "
                f"{len(want.outputs)} on the CPU"), 0.0
    reference: Backward | None = None
    worst = 0.0
    for path, cpu_grad in want.grads.items():
        device_grad = got.grads.get(path)
        mismatch = _presence(path, cpu_grad, device_grad, pair.device)
        if mismatch:
            return f"{where}: {mismatch}", 0.0
        if cpu_grad is None:
            continue
        if reference is None and not oota_judge.identical(
                oota_cases.plain(device_grad, copy=False), oota_cases.plain(cpu_grad, copy=False)):
            reference = _float64(pair, cpu_sample, cots)
        ref = reference.grads.get(path) if reference is not None else None
        verdict = _judge_gradient(pair, index, path, cpu_sample, cots, cpu_grad, device_grad,
                                  ref)
        if verdict.status == "failed":
            message = _worded(verdict.message, path, pair, index, cpu_sample)
            if "element [" not in message:  # PyTorch's rule names the largest difference only
                message += _worst_element(device_grad, cpu_grad, pair.device.type)
            return message, 0.0
        judged.verdicts.append(verdict)
        worst = max(worst, verdict.ratio or 0.0)
    return "", worst


def _presence(path: str, cpu_grad: Any, device_grad: Any, device: Any) -> str:
    """Why a gradient's presence or place is wrong ('' when it is not)."""
    if (cpu_grad is None) != (device_grad is None):
        side = "the CPU" if cpu_grad is None else device.type
        return f"the gradient of {path} is None on {side} only"
    if device_grad is not None and device_grad.device.type != device.type:
        return (f"the gradient of {path} is on {device_grad.device}, not on {device.type} "
                "where its input is")
    return ""


def _float64(pair: Pair, cpu_sample: Any, cots: Sequence[Any]) -> Backward | None:
    """The sample's gradients on the CPU in float64 (None where it cannot run so)."""
    import torch

    wide = [c.to(torch.complex128 if c.is_complex() else torch.float64) for c in cots]
    try:
        return backward(pair.op, float64_leaves(cpu_sample), wide)
    except Exception:  # noqa: BLE001 - no reference: the judge falls back to the tolerance
        return None


def _judge_gradient(pair: Pair, index: int, path: str, cpu_sample: Any, cots: Sequence[Any],
                    cpu_grad: Any, device_grad: Any, reference: Any) -> oota_cases.Verdict:
    paths = [p for p, _ in needing_grad(cpu_sample)]
    case = oota_cases.make_case(
        op=pair.name, dtype=pair.dtype, sample=index, input_=cpu_sample.input,
        args=cpu_sample.args, kwargs={**cpu_sample.kwargs, COTANGENTS: list(cots)},
        cpu=cpu_grad, device=device_grad, reference=reference, rule=pair.rule,
        device_type=pair.device.type, copy=False)
    case["description"] = _description(cpu_sample)
    return oota_judge.judge(case, pair.device.type, rerun=rerun(
        pair.op, paths, path, cpu_sample.output_process_fn_grad))


def _worst_element(device_grad: Any, cpu_grad: Any, device_name: str) -> str:
    """Where the device's gradient differs most from the CPU's: '' where the two cannot be
    compared element by element."""
    import torch

    got, want = device_grad.detach().cpu(), cpu_grad.detach().cpu()
    if got.shape != want.shape or got.layout != torch.strided or not got.numel() or \
            got.dtype != want.dtype:
        return ""
    wide = torch.complex128 if got.is_complex() else torch.float64
    a, b = got.to(wide), want.to(wide)
    gap = torch.where(torch.isnan(a) != torch.isnan(b), torch.full_like(a.real, math.inf),
                      (a - b).abs().nan_to_num(nan=0.0))
    flat = int(gap.reshape(-1).argmax())
    position = [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(got.shape))]
    at = f"element {position}" if position else "its one element"
    return (f"; the largest difference is at {at}: {a.reshape(-1)[flat].item():.6g} on "
            f"{device_name}, {b.reshape(-1)[flat].item():.6g} on the CPU")


def _description(cpu_sample: Any) -> str:
    return oota_cases.describe_sample(cpu_sample.input, cpu_sample.args, cpu_sample.kwargs)


def _worded(message: str, path: str, pair: Pair, index: int, cpu_sample: Any) -> str:
    """The judge's message about the gradient of ``path``, which it calls 'output': its head
    is the case's (oota_judge.judge)."""
    head = f"{pair.name} ({pair.dtype}): sample {index} ({_description(cpu_sample)}): "
    if message.startswith(head + "output"):
        return f"{head}the gradient of {path}{message.removeprefix(head + 'output')}"
    return f"{head}the gradient of {path}: {message.removeprefix(head)}"


def run_only(op: Any, name: str, dtype: str, watch: Any, made: Sequence[Any]) -> Outcome:
    """The CPU vendor: the backward of each sample runs (its device is the CPU: nothing to
    compare with); a sample that raises is its device's refusal, the first one kept."""
    ran, unchecked, refused = 0, 0, []
    for index, sample in enumerate(made):
        try:
            done = watch(lambda: backward(op, sample,  # noqa: B023
                                          seed_text=f"{name}-{dtype}-{index}"))  # noqa: B023
        except Exception as exc:  # noqa: BLE001 - the CPU's refusal is the finding
            refused.append(f"sample {index}: {first_line(exc)}")
            continue
        ran += bool(done.grads)
        unchecked += not done.grads
    return Outcome(samples=len(made), ran=ran, unchecked=unchecked, cpu_errors=len(refused),
                   refused=(refused or [""])[0], cpu_only=True)
