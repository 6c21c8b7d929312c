"""The judge: whether a device's result of one operator sample is right, and the recorded cases
it judges, so that a verdict made on real hardware can be made again anywhere.

One **case** is one sample of one operator in one dtype: its inputs, the CPU's result, the
device's result and the CPU's result in float64 (the *reference*), plus the rule that judges it
(``oota_rules.Rule``, chosen when the case was made) and the verdict the run gave. The ops
layer (``test_ops.py``) judges every sample through :func:`judge`; it records every failing case
and a sample of the passing ones in ``cases.pt`` beside its results. ``python oota_judge.py
PATH...`` (or ``oota judge PATH``) judges recorded cases again, on any machine with torch and
no accelerator, and prints the same verdicts and messages as the run.

What is compared, output by output (``output``, or ``output[i]`` of several):

* floating and complex outputs by the case's rule (``oota_rules``: PyTorch's where PyTorch
  judges, else against the float64 reference, else the vendor's tolerance);
* index outputs (sort, argsort, topk, kthvalue, mode, max/min/median with a dim, cummax, cummin,
  argmax, argmin): right when the values they select from the input are right, so indices that
  differ only among equal values pass; a device's values must be exactly the input elements
  its indices point at;
* an output whose dtype is a wider float on the device than on the CPU (float32 statistics of
  half-precision norms): compared by value, and the difference is noted, not failed;
* integer and boolean outputs, and plain numbers: equal;
* NaN or infinity where the CPU and the reference are finite fails whatever the rule.

The file format (``cases.pt``, version 1), loadable with ``torch.load(path, weights_only=True)``
(data only: no code runs when it is read)::

    {"format": "oota.cases", "version": 1,
     "recorded": {"device": str, "device_type": str, "torch": str, "by": str, "at": str,
                  "cell": str, "settings": {...}, "note": str},
     "cases": [{"op": str, "dtype": str, "sample": int, "description": str,
                "input": T, "args": [T...], "kwargs": {str: T},
                "cpu": T, "device": T, "reference": T | None,
                "rule": {"kind": "pytorch"|"float64"|"tolerance"|"skip", "atol", "rtol",
                         "multiplier", "floor_ulps", "source"},
                "verdict": {"status": "passed"|"failed"|"skipped", "message": str}}]}

where T is a tensor (on the CPU), None, a bool, int, float, complex or str, a torch.dtype, a
list or tuple of T (named tuples become plain tuples), or a dict; anything else is kept as
``{"repr": text}`` (shown, never run).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oota_rules import FLOAT64, SKIP, Errors, Rule

FORMAT = "oota.cases"
VERSION = 1
CASES_FILE = "cases.pt"
# A recorded case keeps at most this many tensor elements in all (inputs and the three
# results); a larger one keeps its verdict but no tensors, and the replay says so.
RECORD_ELEMENTS = 1 << 20
DESCRIPTION_LIMIT = 160


# -- plain data ---------------------------------------------------------------------------------

def plain(value: Any, copy: bool = True) -> Any:
    """``value`` as data a ``weights_only`` load accepts (see the module docstring): tensors
    detached and on the CPU; with ``copy``, each in storage of its own (views of one storage as
    several dtypes cannot be saved) with conjugate and negative bits resolved, as recorded."""
    import torch

    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu()
        if copy and tensor.layout == torch.strided:
            tensor = tensor.resolve_conj().resolve_neg().clone()
        return tensor
    if value is None or isinstance(value, torch.dtype):
        return value
    for kind in (bool, int, float, complex, str):  # subclasses (numpy's, TorchVersion) as plain
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, torch.Size):
        return tuple(int(x) for x in value)
    if isinstance(value, tuple):
        return tuple(plain(v, copy) for v in value)
    if isinstance(value, list):
        return [plain(v, copy) for v in value]
    if isinstance(value, Mapping):
        return {str(k): plain(v, copy) for k, v in value.items()}
    return {"repr": repr(value)[:DESCRIPTION_LIMIT]}


def leaves(tree: Any) -> list[Any]:
    """The leaves of a plain result, in order (tuples, lists and dict values flattened)."""
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in leaves(item)]
    if isinstance(tree, dict) and "repr" not in tree:
        return [leaf for key in sorted(tree) for leaf in leaves(tree[key])]
    return [tree]


def shape_of(tree: Any) -> Any:
    """The nesting of a plain result without its leaves, to compare two results' structure."""
    if isinstance(tree, (tuple, list)):
        return [shape_of(item) for item in tree]
    if isinstance(tree, dict) and "repr" not in tree:
        return {key: shape_of(tree[key]) for key in sorted(tree)}
    return None


def elements(tree: Any) -> int:
    import torch

    return sum(leaf.numel() for leaf in leaves(tree) if isinstance(leaf, torch.Tensor))


def describe(value: Any) -> str:
    """A sample's inputs in short: ``Tensor[3, 4] float32, dim=1``."""
    import torch

    def short(item: Any) -> str:
        if isinstance(item, torch.Tensor):
            return f"Tensor{list(item.shape)} {str(item.dtype).removeprefix('torch.')}"
        if isinstance(item, (list, tuple)):
            return "(" + ", ".join(short(v) for v in item) + ")"
        if isinstance(item, dict) and "repr" in item:
            return str(item["repr"])
        return repr(item)

    text = ", ".join(short(v) for v in value)
    return text if len(text) <= DESCRIPTION_LIMIT else text[:DESCRIPTION_LIMIT - 1] + "…"


def describe_sample(input_: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    parts = [describe([input_])] + [describe([a]) for a in args]
    parts += [f"{k}={describe([v])}" for k, v in kwargs.items()]
    return describe_join(parts)


def describe_join(parts: Sequence[str]) -> str:
    text = ", ".join(parts)
    return text if len(text) <= DESCRIPTION_LIMIT else text[:DESCRIPTION_LIMIT - 1] + "…"


# -- index outputs --------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class IndexOutput:
    """Where an operator's index output is and along which dimension it selects.

    ``leaf``: the index output's place among the result's leaves; ``values``: the leaf holding
    the values it selects (None: the operator returns indices only); ``dim``: the argument
    position of ``dim`` (its keyword is ``dim``), ``default`` when absent (None: the flattened
    input); ``keepdim``: the argument position of ``keepdim`` (None: the index has the input's
    dimensions); ``multiset``: the values come in no fixed order (topk with sorted=False)."""

    leaf: int
    values: int | None
    dim: int
    default: int | None = -1
    keepdim: int | None = None
    multiset: bool = False


INDEX_OUTPUTS: dict[str, IndexOutput] = {
    "sort": IndexOutput(leaf=1, values=0, dim=0),
    "argsort": IndexOutput(leaf=0, values=None, dim=0),
    "topk": IndexOutput(leaf=1, values=0, dim=1, multiset=True),
    "kthvalue": IndexOutput(leaf=1, values=0, dim=1, keepdim=2),
    "mode": IndexOutput(leaf=1, values=0, dim=0, keepdim=1),
    "max.reduction_with_dim": IndexOutput(leaf=1, values=0, dim=0, keepdim=1),
    "min.reduction_with_dim": IndexOutput(leaf=1, values=0, dim=0, keepdim=1),
    "median": IndexOutput(leaf=1, values=0, dim=0, keepdim=1),
    "nanmedian": IndexOutput(leaf=1, values=0, dim=0, keepdim=1),
    "cummax": IndexOutput(leaf=1, values=0, dim=0),
    "cummin": IndexOutput(leaf=1, values=0, dim=0),
    "argmax": IndexOutput(leaf=0, values=None, dim=0, default=None, keepdim=1),
    "argmin": IndexOutput(leaf=0, values=None, dim=0, default=None, keepdim=1),
}


def _argument(args: Sequence[Any], kwargs: Mapping[str, Any], position: int | None,
              keyword: str, default: Any) -> Any:
    if keyword in kwargs:
        return kwargs[keyword]
    if position is not None and position < len(args):
        return args[position]
    return default


def selected(input_: Any, index: Any, spec: IndexOutput, args: Sequence[Any],
             kwargs: Mapping[str, Any]) -> Any:
    """The input's elements ``index`` points at (an IndexError/RuntimeError when it points
    outside the input)."""
    dim = _argument(args, kwargs, spec.dim, "dim", spec.default)
    if input_.dim() == 0:
        return input_.reshape(1)[index.reshape(-1)].reshape(index.shape)
    if dim is None:
        return input_.reshape(-1)[index.reshape(-1)].reshape(index.shape)
    dim = int(dim) % input_.dim()
    keep = spec.keepdim is None or bool(_argument(args, kwargs, spec.keepdim, "keepdim", False))
    if keep:
        return input_.gather(dim, index)
    return input_.gather(dim, index.unsqueeze(dim)).squeeze(dim)


# -- verdicts --------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """One case's verdict: ``status`` passed / failed / skipped, the message a reader sees, the
    notes (differences that are not failures) and ``ratio``, the worst output's figure over
    what its rule allows (<= 1 passes; None where nothing was measured)."""

    status: str
    message: str
    notes: tuple[str, ...] = ()
    ratio: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message}


class _Failure(Exception):
    """One output is wrong; the message says which and how."""


@dataclass(kw_only=True, slots=True)
class _Outputs:
    """What judging one case's outputs found so far."""

    rule: Rule
    dtype: str
    device_name: str
    notes: list[str] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)


def _name(index: int, count: int) -> str:
    return "output" if count == 1 else f"output[{index}]"


def _same_number(got: Any, want: Any) -> bool:
    if isinstance(got, float) and isinstance(want, float) and math.isnan(got) and math.isnan(want):
        return True
    return type(got) is type(want) and got == want


def _wide(tensor: Any) -> Any:
    import torch

    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    return tensor.to(torch.complex128 if tensor.is_complex() else torch.float64)


def _nonfinite_mismatch(device: Any, cpu: Any, reference: Any | None) -> int:
    """Elements where the device is NaN or infinite although the CPU (and the reference,
    where there is one) is finite, or where the CPU is NaN/infinite and the device is not the
    same (nor the reference's value)."""
    import torch

    finite_cpu = torch.isfinite(cpu)
    both = finite_cpu if reference is None else finite_cpu & torch.isfinite(reference)
    bad = both & ~torch.isfinite(device)
    like_cpu = (torch.isnan(device) & torch.isnan(cpu)) | (device == cpu)
    if reference is not None:
        like_cpu |= (torch.isnan(device) & torch.isnan(reference)) | (device == reference)
    bad |= ~finite_cpu & ~like_cpu
    return int(bad.sum())


def _compare_close(device: Any, cpu: Any, atol: float, rtol: float, where: str,
                   state: _Outputs, rule_text: str) -> None:
    """isclose(device, cpu) with NaN equal to NaN, as PyTorch's assertEqual compares."""
    import torch

    close = torch.isclose(device, cpu, atol=atol, rtol=rtol, equal_nan=True)
    if bool(close.all()):
        share = (device - cpu).abs() / (atol + rtol * cpu.abs())
        finite = torch.isfinite(share)
        state.ratios.append(float(share[finite].max()) if bool(finite.any()) else 0.0)
        return
    diff = (device - cpu).abs()[~close]
    rel = diff / cpu.abs()[~close]
    state.ratios.append(math.inf)
    raise _Failure(f"{where} on {state.device_name} differs from the CPU: max abs diff "
                   f"{float(diff.max()):.3g}, max rel diff {float(rel.max()):.3g} "
                   f"({rule_text})")


def _compare_float64(device: Any, cpu: Any, reference: Any, where: str,
                     state: _Outputs) -> None:
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
        raise _Failure(f"{where} on {state.device_name}: {errors.message(state.rule, state.dtype)}")


def _judge_floats(device: Any, cpu: Any, reference: Any | None, where: str,
                  state: _Outputs) -> None:
    if state.rule.kind != FLOAT64:
        reference = None  # PyTorch's rule and a tolerance compare with the CPU alone
    bad = _nonfinite_mismatch(device, cpu, reference)
    if bad:
        state.ratios.append(math.inf)
        raise _Failure(f"{where} on {state.device_name}: {bad} element(s) NaN or infinite "
                       "where the CPU's are finite, or finite where the CPU's are not")
    rule = state.rule
    if rule.kind == FLOAT64 and reference is not None:
        _compare_float64(device, cpu, reference, where, state)
        return
    if rule.kind == FLOAT64:  # no float64 reference for this output: the vendor's tolerance
        text = rule.describe_tolerance()
        state.notes.append(f"{where}: no float64 reference, compared with {text}")
        _compare_close(device, cpu, rule.atol, rule.rtol, where, state, text)
        return
    _compare_close(device, cpu, rule.atol, rule.rtol, where, state, rule.describe())


def _accumulation(device: Any, cpu: Any, where: str, state: _Outputs) -> bool:
    """Whether the two dtypes differ only as an accumulation type: both floating (or both
    complex), the device's the wider. Noted; the values are compared."""
    if device.dtype == cpu.dtype:
        return True
    same_kind = (device.is_floating_point() and cpu.is_floating_point()) or (
        device.is_complex() and cpu.is_complex())
    if same_kind and device.element_size() > cpu.element_size():
        state.notes.append(f"{where} is {str(device.dtype).removeprefix('torch.')} on "
                           f"{state.device_name} and {str(cpu.dtype).removeprefix('torch.')} on "
                           "the CPU (an accumulation type): compared by value")
        return True
    return False


def _judge_tensor(device: Any, cpu: Any, reference: Any, where: str, state: _Outputs) -> None:
    import torch

    if not isinstance(device, torch.Tensor):
        raise _Failure(f"{where} is a {type(device).__name__} on {state.device_name}, a tensor "
                       "on the CPU")
    if tuple(device.shape) != tuple(cpu.shape):
        raise _Failure(f"{where} has shape {list(device.shape)} on {state.device_name}, "
                       f"{list(cpu.shape)} on the CPU")
    if not _accumulation(device, cpu, where, state):
        raise _Failure(f"{where} is {str(device.dtype).removeprefix('torch.')} on "
                       f"{state.device_name}, {str(cpu.dtype).removeprefix('torch.')} on the CPU")
    if cpu.is_floating_point() or cpu.is_complex():
        wide = (torch.float64, torch.complex128)
        ref = reference if isinstance(reference, torch.Tensor) and tuple(
            reference.shape) == tuple(cpu.shape) and reference.dtype in wide else None
        _judge_floats(_wide(device), _wide(cpu), None if ref is None else _wide(ref), where,
                      state)
        return
    if not torch.equal(device.to_dense() if device.layout != torch.strided else device,
                       cpu.to_dense() if cpu.layout != torch.strided else cpu):
        differ = int((device != cpu).sum()) if device.layout == torch.strided else "some"
        raise _Failure(f"{where} on {state.device_name} differs from the CPU in {differ} of "
                       f"{cpu.numel()} elements ({str(cpu.dtype).removeprefix('torch.')}: "
                       "compared exactly)")


def _identical_leaf(device: Any, cpu: Any) -> bool:
    import torch

    if not isinstance(cpu, torch.Tensor):
        return _same_number(device, cpu)
    if not isinstance(device, torch.Tensor) or device.dtype != cpu.dtype or \
            device.shape != cpu.shape or device.layout != cpu.layout:
        return False
    if device.layout != torch.strided:
        device, cpu = device.to_dense(), cpu.to_dense()
    if device.is_floating_point() or device.is_complex():
        return bool(((device == cpu) | (torch.isnan(device) & torch.isnan(cpu))).all())
    return torch.equal(device, cpu)


def identical(device: Any, cpu: Any) -> bool:
    """Whether two results are the same, element for element (NaN where NaN): then every rule
    passes them, and the float64 reference is not needed."""
    if shape_of(device) != shape_of(cpu):
        return False
    return all(_identical_leaf(d, c) for d, c in zip(leaves(device), leaves(cpu), strict=True))


def _judge_leaf(device: Any, cpu: Any, reference: Any, where: str, state: _Outputs) -> None:
    import torch

    if isinstance(cpu, torch.Tensor):
        _judge_tensor(device, cpu, reference, where, state)
    elif isinstance(cpu, float) and isinstance(device, float):
        _judge_floats(torch.tensor(device, dtype=torch.float64),
                      torch.tensor(cpu, dtype=torch.float64),
                      torch.tensor(reference, dtype=torch.float64)
                      if isinstance(reference, float) else None, where, state)
    elif not _same_number(device, cpu):
        raise _Failure(f"{where} is {device!r} on {state.device_name}, {cpu!r} on the CPU")


def _judge_indices(case: Mapping[str, Any], spec: IndexOutput, device: list[Any],
                   cpu: list[Any], state: _Outputs) -> None:
    """The index output: the device's indices select the values the CPU's select, and the
    device's values are exactly the elements its indices select."""
    import torch

    count = len(cpu)
    where = _name(spec.leaf, count)
    input_, args, kwargs = case["input"], case.get("args") or [], case.get("kwargs") or {}
    try:
        mine = selected(input_, device[spec.leaf], spec, args, kwargs)
        theirs = selected(input_, cpu[spec.leaf], spec, args, kwargs)
    except (IndexError, RuntimeError) as exc:
        raise _Failure(f"{where} on {state.device_name} points outside the input: "
                       f"{str(exc).splitlines()[0][:200]}") from None
    if spec.values is not None:
        values = device[spec.values]
        if not torch.equal(mine.nan_to_num(), values.to(mine.dtype).nan_to_num()) or not \
                torch.equal(mine.isnan(), values.isnan()):
            raise _Failure(f"{where} on {state.device_name} does not select "
                           f"{_name(spec.values, count)}: the input's elements at those "
                           "indices are not the values returned")
    if spec.multiset:
        mine, theirs = mine.sort(dim=-1).values, theirs.sort(dim=-1).values
    same = torch.equal(mine.nan_to_num(), theirs.nan_to_num()) and torch.equal(
        mine.isnan(), theirs.isnan())
    if not same:
        raise _Failure(f"{where} on {state.device_name} selects other values than the CPU's "
                       f"indices: {int((mine != theirs).sum())} of {mine.numel()} differ")
    if not torch.equal(device[spec.leaf], cpu[spec.leaf]):
        state.notes.append(f"{where}: indices differ from the CPU's only among equal values")


def _judge_outputs(case: Mapping[str, Any], state: _Outputs) -> None:
    device, cpu = case["device"], case["cpu"]
    if shape_of(device) != shape_of(cpu):
        raise _Failure(f"the result on {state.device_name} is shaped {shape_of(device)}, on "
                       f"the CPU {shape_of(cpu)}")
    dev, want = leaves(device), leaves(cpu)
    ref_tree = case.get("reference")
    refs = leaves(ref_tree) if ref_tree is not None and shape_of(ref_tree) == shape_of(
        cpu) else [None] * len(want)
    spec = INDEX_OUTPUTS.get(case["op"])
    if spec is not None and spec.leaf >= len(want):
        spec = None  # median without dim returns the value alone
    for index, (got, expected, ref) in enumerate(zip(dev, want, refs, strict=True)):
        if spec is not None and index == spec.leaf:
            continue
        if spec is not None and spec.multiset and index == spec.values:
            got, expected = _sorted_last(got, case, spec), _sorted_last(expected, case, spec)
            ref = _sorted_last(ref, case, spec) if ref is not None else None
        _judge_leaf(got, expected, ref, _name(index, len(want)), state)
    if spec is not None:
        _judge_indices(case, spec, dev, want, state)


def _sorted_last(values: Any, case: Mapping[str, Any], spec: IndexOutput) -> Any:
    """Values in no fixed order, sorted along the operator's dim (compared as multisets)."""
    import torch

    if not isinstance(values, torch.Tensor) or values.dim() == 0:
        return values
    dim = _argument(case.get("args") or [], case.get("kwargs") or {}, spec.dim, "dim",
                    spec.default)
    return values.sort(dim=int(dim) if dim is not None else -1).values


def tf32_reason(op: str, dtype: str, settings: Mapping[str, Any]) -> str:
    """Why a float32 failure may be TF32's, when the case was made with it allowed."""
    if dtype not in ("float32", "complex64"):
        return ""
    if settings.get("cudnn_allow_tf32") and "conv" in op:
        return ("made with cuDNN's TF32 allowed (PyTorch's default), which rounds a float32 "
                "convolution's inputs to a 10-bit mantissa; oota's suite turns TF32 off")
    if settings.get("matmul_allow_tf32") and any(w in op for w in ("mm", "matmul", "linear",
                                                                   "einsum", "bmm")):
        return ("made with TF32 matrix products allowed, which round float32 inputs to a "
                "10-bit mantissa; oota's suite turns TF32 off")
    return ""


def _verdict(head: str, state: _Outputs, judged: Callable[[], None],
             tf32: str = "") -> Verdict:
    """Run ``judged`` (which raises _Failure on a wrong output) and word the verdict."""
    try:
        judged()
    except _Failure as failure:
        notes = "".join(f"; {n}" for n in [*state.notes, *([tf32] if tf32 else [])])
        return Verdict(status="failed", message=f"{head}: {failure}{notes}",
                       notes=tuple(state.notes), ratio=max(state.ratios, default=math.inf))
    worst = max(state.ratios, default=0.0)
    notes = "".join(f"; {n}" for n in state.notes)
    return Verdict(status="passed", message=f"{head}: within {state.rule.describe()} (the "
                   f"worst output uses {worst:.2g} of it){notes}",
                   notes=tuple(state.notes), ratio=worst)


def judge(case: Mapping[str, Any], device_name: str = "",
          settings: Mapping[str, Any] | None = None) -> Verdict:
    """The verdict on one case (see the module docstring). The message begins with the
    operator, dtype and sample, as the ops layer reports it; ``settings`` are the recording's
    (TF32 allowed or not) and name a failure's likely cause."""
    head = (f"{case['op']} ({case['dtype']}): sample {case['sample']} "
            f"({case.get('description', '')})")
    rule = Rule.from_json(case["rule"])
    if rule.kind == SKIP:
        return Verdict(status="skipped", message=f"{case['op']} ({case['dtype']}): {rule.source}")
    if case.get("truncated"):
        return Verdict(status="skipped", message=f"{head}: recorded without its tensors (more "
                       f"than {RECORD_ELEMENTS} elements); nothing to judge again")
    if identical(case["device"], case["cpu"]):
        return Verdict(status="passed", message=f"{head}: identical to the CPU's result", ratio=0)
    state = _Outputs(rule=rule, dtype=str(case["dtype"]),
                     device_name=device_name or str(case.get("device_type") or "the device"))
    tf32 = tf32_reason(str(case["op"]), state.dtype, settings or {})
    return _verdict(head, state, lambda: _judge_outputs(case, state), tf32)


def judge_named(named: Sequence[tuple[str, Any, Any, Any]], *, rule: Rule, dtype: str,
                device_name: str, head: str) -> Verdict:
    """The verdict on named results that are not an operator's (a model's logits, loss and
    weights): each ``(name, device, cpu, reference)`` judged like an operator's output."""
    state = _Outputs(rule=rule, dtype=dtype, device_name=device_name)

    def each() -> None:
        for where, got, want, reference in named:
            _judge_leaf(got, want, reference, where, state)

    return _verdict(head, state, each)


# -- recordings -----------------------------------------------------------------------------------

class RecordingError(ValueError):
    """A file is not a recording this judge reads; the message says which file and why."""


TENSOR_PARTS = ("input", "args", "kwargs", "cpu", "device", "reference")


def make_case(*, op: str, dtype: str, sample: int, input_: Any, args: Sequence[Any],
              kwargs: Mapping[str, Any], cpu: Any, device: Any, reference: Any,
              rule: Rule, device_type: str, copy: bool = True) -> dict[str, Any]:
    """A case of plain data (see the module docstring), its verdict still to be given.
    Without ``copy`` its tensors may share storage with the run's: judge it, then
    :func:`finish` it to record it."""
    case: dict[str, Any] = {
        "op": op, "dtype": dtype, "sample": sample, "device_type": device_type,
        "description": describe_sample(input_, args, kwargs),
        "input": plain(input_, copy), "args": list(plain(tuple(args), copy)),
        "kwargs": plain(dict(kwargs), copy), "cpu": plain(cpu, copy),
        "device": plain(device, copy),
        "reference": None if reference is None else plain(reference, copy),
        "rule": rule.to_json()}
    return case


def case_elements(case: Mapping[str, Any]) -> int:
    return sum(elements(case[p]) for p in TENSOR_PARTS)


def shrink(case: dict[str, Any]) -> dict[str, Any]:
    """The case as it is recorded: without its tensors when they are too many to keep."""
    if case_elements(case) <= RECORD_ELEMENTS:
        return case
    return {**{k: v for k, v in case.items() if k not in TENSOR_PARTS}, "truncated": True,
            **{p: None for p in TENSOR_PARTS}}


def finish(case: Mapping[str, Any], verdict: Verdict) -> dict[str, Any]:
    """The case as a run records it: its tensors copied, shrunk if too large, its verdict."""
    copied = {k: (plain(v) if k in TENSOR_PARTS else v) for k, v in case.items()}
    return {**shrink(copied), "verdict": verdict.to_json()}


def recording(cases: Iterable[Mapping[str, Any]], **recorded: Any) -> dict[str, Any]:
    header = {"at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              **plain(recorded)}
    return {"format": FORMAT, "version": VERSION, "recorded": header, "cases": list(cases)}


def save(path: Path, data: Mapping[str, Any]) -> None:
    """Write a recording atomically (a reader never sees half a file), once it is known to
    load back as data only: a RecordingError otherwise, and nothing is written."""
    import torch

    tmp = path.with_name(path.name + ".tmp")
    torch.save(dict(data), tmp)
    try:
        load(tmp)
    except RecordingError as exc:
        tmp.unlink(missing_ok=True)
        raise RecordingError(f"{path}: not written, it would not load back: {exc}") from None
    tmp.replace(path)


def load(path: Path) -> dict[str, Any]:
    """A recording, read as data only (``weights_only=True``); RecordingError if it is not
    one this judge reads."""
    import pickle

    import torch

    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RecordingError(f"{path}: not a recording that loads as data only "
                             f"(torch.load with weights_only=True: {first[:120]})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordingError(f"{path}: not an oota recording (no format '{FORMAT}')")
    if data.get("version") != VERSION:
        raise RecordingError(f"{path}: recording version {data.get('version')!r}; this judge "
                             f"reads version {VERSION}")
    if not isinstance(data.get("cases"), list):
        raise RecordingError(f"{path}: 'cases' is not a list")
    return data


# -- sampling which passing cases a run records ----------------------------------------------------

def keep_passing(op: str, dtype: str, every: int) -> bool:
    """Whether a run records the passing case of ``op`` × ``dtype``: one pair in ``every``,
    the same pairs on every run and machine (a stable hash of the names, not Python's
    randomised one)."""
    import zlib

    return every > 0 and zlib.crc32(f"{op}-{dtype}".encode()) % every == 0


# -- the command line ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class Replayed:
    """One recorded case judged again: what the recording says and what the judge says now."""

    file: str
    op: str
    dtype: str
    sample: int
    recorded: Mapping[str, Any]
    verdict: Verdict

    @property
    def moved(self) -> bool:
        return (self.recorded.get("status"), self.recorded.get("message")) != (
            self.verdict.status, self.verdict.message)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "op": self.op, "dtype": self.dtype, "sample": self.sample,
                "status": self.verdict.status, "message": self.verdict.message,
                "notes": list(self.verdict.notes), "ratio": self.verdict.ratio,
                "recorded": dict(self.recorded), "moved": self.moved}


def replay(paths: Sequence[Path], on_case: Callable[[Replayed], None] | None = None
           ) -> list[Replayed]:
    out: list[Replayed] = []
    for path in paths:
        data = load(path)
        recorded = data.get("recorded") or {}
        device, settings = str(recorded.get("device_type") or ""), recorded.get("settings")
        for index, case in enumerate(data["cases"]):
            try:
                got = Replayed(file=str(path), op=case["op"], dtype=case["dtype"],
                               sample=int(case["sample"]), recorded=case.get("verdict") or {},
                               verdict=judge(case, device, settings))
            except (KeyError, TypeError, ValueError) as exc:  # RuleError is a ValueError
                raise RecordingError(f"{path}: case {index} is not a case this judge reads: "
                                     f"{type(exc).__name__}: {exc}") from None
            out.append(got)
            if on_case:
                on_case(got)
    return out


def _recordings(args: Sequence[str]) -> list[Path]:
    """The files named, and every ``*.pt`` under the folders named (sorted)."""
    paths: list[Path] = []
    for arg in args:
        path = Path(arg)
        paths += sorted(path.rglob("*.pt")) if path.is_dir() else [path]
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="oota_judge.py", description=(
        "Judge recorded cases again and print each verdict. Exit 0: none failed; 1: a case "
        "failed (or, with --check, a verdict moved from the recorded one); 2: a file is not "
        "a recording."))
    parser.add_argument("paths", nargs="+", help="recordings (cases.pt) or folders of them")
    parser.add_argument("--json", action="store_true", help="one JSON object per case")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a verdict or message differs from the recorded one")
    parser.add_argument("--quiet", action="store_true", help="print failed and moved only")
    args = parser.parse_args(argv)

    def show(got: Replayed) -> None:
        if args.json:
            print(json.dumps(got.to_json()), flush=True)
        elif not args.quiet or got.verdict.status == "failed" or got.moved:
            moved = f"  [recorded: {got.recorded.get('status')}]" if got.moved else ""
            print(f"{got.verdict.status.upper():8} {got.verdict.message}{moved}", flush=True)

    try:
        results = replay(_recordings(args.paths), show)
    except RecordingError as exc:
        print(f"oota_judge: {exc}", file=sys.stderr)
        return 2
    counts = {s: sum(r.verdict.status == s for r in results)
              for s in ("passed", "failed", "skipped")}
    moved = sum(r.moved for r in results)
    print(f"{len(results)} cases: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped; {moved} verdict(s) differ from the recording",
          file=sys.stderr)
    return 1 if counts["failed"] or (args.check and moved) else 0


if __name__ == "__main__":
    sys.exit(main())
