"""Index outputs (sort, argsort, topk, kthvalue, mode, max/min/median with a dim, cummax, cummin,
argmax, argmin): where an operator's index output is, and the input elements it selects, so
that the judge compares what indices point at rather than the indices themselves, except where
PyTorch documents which of equal values an index points at (``IndexOutput.first``) or the call
asks for a stable order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexOutput:
    """Where an operator's index output is and along which dimension it selects.

    ``leaf``: the index output's place among the result's leaves; ``values``: the leaf holding
    the values it selects (None: the operator returns indices only); ``dim``: the argument
    position of ``dim`` (its keyword is ``dim``), ``default`` when absent (None: the flattened
    input); ``keepdim``: the argument position of ``keepdim`` (None: the index has the input's
    dimensions); ``multiset``: the values come in no fixed order (topk with sorted=False);
    ``first``: PyTorch documents which of equal values the index points at, the first (argmax,
    argmin, max and min with a dim), so the indices are exactly the CPU's. Where it leaves
    that open (sort and argsort without stable=True, topk, kthvalue, median, nanmedian, mode,
    cummax, cummin), any of the equal values is right."""

    leaf: int
    values: int | None
    dim: int
    default: int | None = -1
    keepdim: int | None = None
    multiset: bool = False
    first: bool = False


INDEX_OUTPUTS: dict[str, IndexOutput] = {
    "sort": IndexOutput(leaf=1, values=0, dim=0),
    "argsort": IndexOutput(leaf=0, values=None, dim=0),
    "topk": IndexOutput(leaf=1, values=0, dim=1, multiset=True),
    "kthvalue": IndexOutput(leaf=1, values=0, dim=1, keepdim=2),
    "mode": IndexOutput(leaf=1, values=0, dim=0, keepdim=1),
    "max.reduction_with_dim": IndexOutput(leaf=1, values=0, dim=0, keepdim=1, first=True),
    "min.reduction_with_dim": IndexOutput(leaf=1, values=0, dim=0, keepdim=1, first=True),
    "median": IndexOutput(leaf=1, values=0, dim=0, keepdim=1),
    "nanmedian": IndexOutput(leaf=1, values=0, dim=0, keepdim=1),
    "cummax": IndexOutput(leaf=1, values=0, dim=0),
    "cummin": IndexOutput(leaf=1, values=0, dim=0),
    "argmax": IndexOutput(leaf=0, values=None, dim=0, default=None, keepdim=1, first=True),
    "argmin": IndexOutput(leaf=0, values=None, dim=0, default=None, keepdim=1, first=True),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Ordering:
    """What an operator promises about the order of its values and indices: ``descending``
    values, and with ``stable`` equal values in input order (their indices the CPU's)."""

    descending: bool
    stable: bool
    why: str  # the call that asks for it, in words


def ordering(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Ordering | None:
    """The order ``op`` called with these arguments promises (None: no order, as for
    ``topk(sorted=False)`` or kthvalue)."""
    if op in ("sort", "argsort"):
        descending = bool(argument_of(args, kwargs, 1, "descending", False))
        stable = bool(argument_of(args, kwargs, 2 if op == "argsort" else None, "stable",
                                  False))
        return Ordering(descending=descending, stable=stable,
                        why=f"{op}({'stable=True' if stable else 'descending=True'})"
                        if stable or descending else op)
    if op == "topk" and bool(argument_of(args, kwargs, 3, "sorted", True)):
        largest = bool(argument_of(args, kwargs, 2, "largest", True))
        return Ordering(descending=largest, stable=False, why="topk(sorted=True)")
    return None


def argument_of(args: Sequence[Any], kwargs: Mapping[str, Any], position: int | None,
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
    dim = argument_of(args, kwargs, spec.dim, "dim", spec.default)
    if input_.dim() == 0:
        return input_.reshape(1)[index.reshape(-1)].reshape(index.shape)
    if dim is None:
        return input_.reshape(-1)[index.reshape(-1)].reshape(index.shape)
    dim = int(dim) % input_.dim()
    keep = spec.keepdim is None or bool(argument_of(args, kwargs, spec.keepdim, "keepdim", False))
    if keep:
        return input_.gather(dim, index)
    return input_.gather(dim, index.unsqueeze(dim)).squeeze(dim)
