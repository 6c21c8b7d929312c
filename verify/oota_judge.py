"""The judge: whether a device's result of one operator sample is right.

One **case** is one sample of one operator in one dtype: its inputs, the CPU's result, the
device's result and the CPU's result in float64 (the *reference*), and the rule that judges it
(``oota_rules.Rule``). The ops layer (``test_ops.py``) judges every sample through
:func:`judge` and records failing cases and a sample of the passing ones (``oota_cases``);
``oota_replay.py`` judges recordings again on any machine with torch.

What is compared, output by output (``output``, or ``output[i]`` of several):

* floating and complex outputs by the case's rule (``oota_rules``): PyTorch's ``atol``/``rtol``
  where PyTorch judges the pair, then, where a float64 reference exists, **element by
  element against float64**: each element's error may be at most ``multiplier`` times the
  CPU's error at that element plus ``floor_ulps`` units in the last place of that element's
  own scale: its float64 value, or for sums and products (``oota_rules.MAGNITUDE_OPS``) the
  root-sum-square of its terms, whichever is larger (room for cancellation). An element beyond
  that is looked at once more: against the CPU's error on inputs one rounding apart and (half
  precision) the CPU's own float32 computation rounded to the dtype, with a half-precision
  matrix product's partial sums rounded to the dtype once per 16 terms, and then with its
  condition (how far one float32 rounding of every input moves it). Where PyTorch judges, this
  check uses wider numbers (``ADDON_*``) and says so: it fails only where the device is
  materially worse than the CPU at some element;
* the **rounding bias** of half-precision results: where they sit between the two numbers of
  the dtype around each float64 value (``oota_rules.Bias``, ``oota_bias``);
* index outputs (sort, argsort, topk, ...): right when the values they select from the input
  are the CPU's; ``stable=True`` keeps equal values in input order, and argmax, argmin and
  max/min with a dim point at the first of equal values, exactly as the CPU does;
  ``topk(sorted=True)`` and ``sort`` return their values in order;
* an output that is a wider float on the device (float32 statistics of half-precision norms):
  compared by value, and noted;
* integer and boolean outputs, and plain numbers: equal;
* NaN or infinity where the CPU and the reference are finite fails; where the CPU overflows and
  float64 does not, the device is judged against float64 alone;
* results flushed to zero where float64 is subnormal are noted (or fail, where the vendor's
  data keeps subnormals).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from oota_bias import judge_bias
from oota_cases import RECORD_ELEMENTS, Verdict, leaves, shape_of
from oota_floats import judge_floats
from oota_indices import INDEX_OUTPUTS, IndexOutput, argument_of, ordering, selected
from oota_outputs import Outputs, Rerun, Wrong, wide
from oota_rules import FLOAT64, SKIP, Bias, Rule, biased

__all__ = ["Rerun", "identical", "judge", "judge_named", "pooled_bias", "tf32_reason"]


def _name(index: int, count: int) -> str:
    return "output" if count == 1 else f"output[{index}]"


def _same_number(got: Any, want: Any) -> bool:
    if isinstance(got, float) and isinstance(want, float) and math.isnan(got) and math.isnan(want):
        return True
    return type(got) is type(want) and got == want


def _accumulation(device: Any, cpu: Any, where: str, state: Outputs) -> bool:
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


def _judge_tensor(device: Any, cpu: Any, reference: Any, leaf: int, where: str,
                  state: Outputs) -> None:
    import torch

    if not isinstance(device, torch.Tensor):
        raise Wrong(f"{where} is a {type(device).__name__} on {state.device_name}, a tensor "
                    "on the CPU")
    if tuple(device.shape) != tuple(cpu.shape):
        raise Wrong(f"{where} has shape {list(device.shape)} on {state.device_name}, "
                    f"{list(cpu.shape)} on the CPU")
    if not _accumulation(device, cpu, where, state):
        raise Wrong(f"{where} is {str(device.dtype).removeprefix('torch.')} on "
                    f"{state.device_name}, {str(cpu.dtype).removeprefix('torch.')} on the CPU")
    if cpu.is_floating_point() or cpu.is_complex():
        wide_types = (torch.float64, torch.complex128)
        ref = reference if isinstance(reference, torch.Tensor) and tuple(
            reference.shape) == tuple(cpu.shape) and reference.dtype in wide_types else None
        judge_floats(wide(device), wide(cpu), None if ref is None else wide(ref), leaf,
                     where, state, native=device if device.dtype == cpu.dtype else None)
        return
    if not torch.equal(device.to_dense() if device.layout != torch.strided else device,
                       cpu.to_dense() if cpu.layout != torch.strided else cpu):
        differ = int((device != cpu).sum()) if device.layout == torch.strided else "some"
        raise Wrong(f"{where} on {state.device_name} differs from the CPU in {differ} of "
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


def _judge_leaf(device: Any, cpu: Any, reference: Any, leaf: int, where: str,
                state: Outputs) -> None:
    import torch

    if isinstance(cpu, torch.Tensor):
        _judge_tensor(device, cpu, reference, leaf, where, state)
    elif isinstance(cpu, float) and isinstance(device, float):
        judge_floats(torch.tensor(device, dtype=torch.float64),
                     torch.tensor(cpu, dtype=torch.float64),
                     torch.tensor(reference, dtype=torch.float64)
                     if isinstance(reference, float) else None, leaf, where, state)
    elif not _same_number(device, cpu):
        raise Wrong(f"{where} is {device!r} on {state.device_name}, {cpu!r} on the CPU")


# -- index outputs and order ----------------------------------------------------------------


def _equal_with_nan(a: Any, b: Any) -> bool:
    import torch

    return torch.equal(a.nan_to_num(), b.nan_to_num()) and torch.equal(a.isnan(), b.isnan())


def _in_order(values: Any, dim: int, descending: bool) -> bool:
    """Whether ``values`` are sorted along ``dim`` (NaN last ascending, first descending, as
    torch.sort puts it)."""
    if values.dim() == 0 or values.numel() == 0:
        return True
    again = values.sort(dim=dim, descending=descending, stable=True).values
    return _equal_with_nan(again, values)


def _check_order(case: Mapping[str, Any], spec: IndexOutput, device: list[Any], count: int,
                 state: Outputs) -> None:
    """``sort`` and ``topk(sorted=True)`` return their values in order."""
    import torch

    asked = ordering(case["op"], case.get("args") or [], case.get("kwargs") or {})
    if asked is None or spec.values is None:
        return
    values = device[spec.values]
    if not isinstance(values, torch.Tensor):
        return
    dim = argument_of(case.get("args") or [], case.get("kwargs") or {}, spec.dim, "dim",
                      spec.default)
    dim = -1 if dim is None else int(dim)
    if not _in_order(values, dim, asked.descending):
        raise Wrong(f"{_name(spec.values, count)} on {state.device_name} is not in "
                    f"{'descending' if asked.descending else 'ascending'} order along dim "
                    f"{dim}, though {asked.why} asks for it")


def _judge_indices(case: Mapping[str, Any], spec: IndexOutput, device: list[Any],
                   cpu: list[Any], state: Outputs) -> None:
    """The index output: the device's indices select the values the CPU's select, and the
    device's values are exactly the elements its indices select; a stable sort's indices are
    the CPU's."""
    import torch

    count = len(cpu)
    where = _name(spec.leaf, count)
    input_, args, kwargs = case["input"], case.get("args") or [], case.get("kwargs") or {}
    asked = ordering(case["op"], args, kwargs)
    try:
        mine = selected(input_, device[spec.leaf], spec, args, kwargs)
        theirs = selected(input_, cpu[spec.leaf], spec, args, kwargs)
    except (IndexError, RuntimeError) as exc:
        raise Wrong(f"{where} on {state.device_name} points outside the input: "
                    f"{str(exc).splitlines()[0][:200]}") from None
    if spec.values is not None:
        values = device[spec.values]
        if not _equal_with_nan(mine, values.to(mine.dtype)):
            raise Wrong(f"{where} on {state.device_name} does not select "
                        f"{_name(spec.values, count)}: the input's elements at those "
                        "indices are not the values returned")
    multiset = spec.multiset and asked is None
    if multiset:
        mine, theirs = mine.sort(dim=-1).values, theirs.sort(dim=-1).values
    if not _equal_with_nan(mine, theirs):
        raise Wrong(f"{where} on {state.device_name} selects other values than the CPU's "
                    f"indices: {int((mine != theirs).sum())} of {mine.numel()} differ")
    if torch.equal(device[spec.leaf], cpu[spec.leaf]):
        return
    differ = int((device[spec.leaf] != cpu[spec.leaf]).sum())
    if asked is not None and asked.stable:
        raise Wrong(f"{where} on {state.device_name}: stable=True, but equal values are not "
                    f"in their input order: {differ} of {cpu[spec.leaf].numel()} indices "
                    "differ from the CPU's")
    if spec.first:
        raise Wrong(f"{where} on {state.device_name}: {differ} of {cpu[spec.leaf].numel()} "
                    f"indices point at another of equal values than the CPU's, where "
                    f"{case['op'].split('.')[0]} returns the first of them (PyTorch's "
                    "documentation; its tests compare these indices exactly)")
    state.notes.append(f"{where}: indices differ from the CPU's only among equal values"
                       if not multiset else f"{where}: the same elements as the CPU's, in "
                       "another order (sorted=False)")


def _judge_outputs(case: Mapping[str, Any], state: Outputs) -> None:
    device, cpu = case["device"], case["cpu"]
    if shape_of(device) != shape_of(cpu):
        raise Wrong(f"the result on {state.device_name} is shaped {shape_of(device)}, on "
                    f"the CPU {shape_of(cpu)}")
    dev, want = leaves(device), leaves(cpu)
    ref_tree = case.get("reference")
    refs = leaves(ref_tree) if ref_tree is not None and shape_of(ref_tree) == shape_of(
        cpu) else [None] * len(want)
    spec = INDEX_OUTPUTS.get(case["op"])
    if spec is not None and spec.leaf >= len(want):
        spec = None  # median without dim returns the value alone
    if spec is not None:
        _check_order(case, spec, dev, len(want), state)
    for index, (got, expected, ref) in enumerate(zip(dev, want, refs, strict=True)):
        if spec is not None and index == spec.leaf:
            continue
        multiset = spec is not None and spec.multiset and index == spec.values and ordering(
            case["op"], case.get("args") or [], case.get("kwargs") or {}) is None
        if multiset and spec is not None:
            got, expected = _sorted_last(got, case, spec), _sorted_last(expected, case, spec)
            ref = _sorted_last(ref, case, spec) if ref is not None else None
        _judge_leaf(got, expected, ref, index, _name(index, len(want)), state)
    if spec is not None:
        _judge_indices(case, spec, dev, want, state)
    judge_bias(state)


def _sorted_last(values: Any, case: Mapping[str, Any], spec: IndexOutput) -> Any:
    """Values in no fixed order, sorted along the operator's dim (compared as multisets)."""
    import torch

    if not isinstance(values, torch.Tensor) or values.dim() == 0:
        return values
    dim = argument_of(case.get("args") or [], case.get("kwargs") or {}, spec.dim, "dim",
                      spec.default)
    return values.sort(dim=int(dim) if dim is not None else -1).values


# -- verdicts ----------------------------------------------------------------------------------


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


def _verdict(head: str, state: Outputs, judged: Callable[[], None],
             tf32: str = "") -> Verdict:
    """Run ``judged`` (which raises Wrong on a wrong output) and word the verdict."""
    try:
        judged()
    except Wrong as failure:
        notes = "".join(f"; {n}" for n in [*state.notes, *([tf32] if tf32 else [])])
        return Verdict(status="failed", message=f"{head}: {failure}{notes}",
                       notes=tuple(state.notes), ratio=max(state.ratios, default=math.inf))
    worst = max(state.ratios, default=0.0)
    notes = "".join(f"; {n}" for n in state.notes)
    bias = (Bias.pooled(state.device_bias), Bias.pooled(state.cpu_bias)) \
        if state.device_bias else None
    return Verdict(status="passed", message=f"{head}: within {state.rule.describe()} (the "
                   f"worst output uses {worst:.2g} of it){notes}",
                   notes=tuple(state.notes), ratio=worst, bias=bias)


def pooled_bias(verdicts: Sequence[Verdict], rule: Rule, device_name: str) -> str:
    """Why the passing samples of one operator × dtype, pooled, round with a bias ('' when
    they do not): each sample may be too small to show it alone. Only where oota's float64
    rule judges: in float32, which PyTorch judges, a correct GPU's own math library (CUDA's
    rsqrtf and log10f, within 2 ulp) leans one way by as much as rounding toward zero."""
    found = [v.bias for v in verdicts if v.status == "passed" and v.bias is not None]
    if len(found) < 2 or rule.kind != FLOAT64:
        return ""
    device = Bias.pooled([d for d, _ in found])
    cpu = Bias.pooled([c for _, c in found])
    if not biased(device, cpu):
        return ""
    return (f"pooled over {len(found)} samples, the results on {device_name} "
            f"{device.describe()}; the CPU's mean is {cpu.mean:+.2f} ulp")


def judge(case: Mapping[str, Any], device_name: str = "",
          settings: Mapping[str, Any] | None = None, *, rerun: Rerun | None = None,
          subnormals: str = "note") -> Verdict:
    """The verdict on one case (see the module docstring). The message begins with the
    operator, dtype and sample, as the ops layer reports it; ``settings`` are the recording's
    (TF32 allowed or not) and name a failure's likely cause; ``rerun`` runs the operator again
    where the judge wants the magnitudes of a sum or a second opinion."""
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
    state = Outputs(rule=rule, dtype=str(case["dtype"]), case=case, rerun=rerun,
                     subnormals=subnormals,
                     device_name=device_name or str(case.get("device_type") or "the device"))
    tf32 = tf32_reason(str(case["op"]), state.dtype, settings or {})
    return _verdict(head, state, lambda: _judge_outputs(case, state), tf32)


def judge_named(named: Sequence[tuple[str, Any, Any, Any]], *, rule: Rule, dtype: str,
                device_name: str, head: str) -> Verdict:
    """The verdict on named results that are not an operator's (a model's logits, loss and
    weights): each ``(name, device, cpu, reference)`` judged by the rule on whole results."""
    state = Outputs(rule=rule, dtype=dtype, device_name=device_name, elementwise=False)

    def each() -> None:
        for index, (where, got, want, reference) in enumerate(named):
            _judge_leaf(got, want, reference, index, where, state)

    return _verdict(head, state, each)
