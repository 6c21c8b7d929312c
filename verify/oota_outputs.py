"""What judging one case knows and may ask for: the state of its outputs' judgement, and the
case's operator run again on the CPU (:class:`Rerun`) for the magnitudes of sums and products,
for a second opinion on inputs one rounding apart, for the CPU's result computed in float32 (how
a device computes half precision), for the number of terms of a matrix product and for the
condition of an element (how far one float32 rounding of every input moves it). Used by
``oota_floats`` and ``oota_judge``; torch is imported where a function needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oota_cases import leaves, plain, shape_of
from oota_condition import Sensitivity
from oota_rules import BIAS_ARGUMENT, BIAS_SHARE, MAGNITUDE_OPS, MEAN_OPS, Bias, Rule


class Wrong(Exception):
    """One output is wrong; the message says which and how."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Rerun:
    """The case's operator run again on the CPU: ``call(input, args, kwargs)`` returns its
    output (the ops layer's sample with its output processing, or op_db's operator in a
    replay). The judge runs it in float64 on the inputs' absolute values (the magnitudes of
    sums and products) and, for a second opinion, on inputs one rounding apart."""

    call: Callable[[Any, Sequence[Any], Mapping[str, Any]], Any]

    def run(self, case: Mapping[str, Any], change: Callable[[Any], Any],
            wide: bool = False, to: str = "float64") -> Any | None:
        """The output on the case's inputs with ``change`` applied to every floating tensor,
        and with ``wide`` every floating dtype argument (cumsum's ``dtype=torch.float16``)
        made ``to`` too (float64 or float32; None where the operator refuses them)."""
        input_, args, kwargs = _map_floats((case["input"], list(case.get("args") or []),
                                            dict(case.get("kwargs") or {})), change, wide, to)
        try:
            return plain(self.call(input_, args, kwargs), copy=False)
        except Exception:  # noqa: BLE001 - no second run: the judge goes without it
            return None


def _map_floats(tree: Any, change: Callable[[Any], Any], wide: bool = False,
                to: str = "float64") -> Any:
    import torch

    if isinstance(tree, torch.Tensor):
        return change(tree) if (tree.is_floating_point() or tree.is_complex()) else tree
    if wide and isinstance(tree, torch.dtype) and (tree.is_floating_point or tree.is_complex):
        if tree.is_complex:
            return torch.complex128 if to == "float64" else torch.complex64
        return getattr(torch, to)
    if isinstance(tree, tuple):
        return tuple(_map_floats(v, change, wide, to) for v in tree)
    if isinstance(tree, list):
        return [_map_floats(v, change, wide, to) for v in tree]
    if isinstance(tree, dict) and "repr" not in tree:
        return {k: _map_floats(v, change, wide, to) for k, v in tree.items()}
    return tree


def _squared(value: Any) -> Any:
    """A floating input as the magnitude run takes it: its elements' squares in float64 (the
    operator's float coefficients squared too, by :func:`_map_floats`' caller)."""
    import torch

    return value.abs().to(torch.float64) ** 2


def _float64(tensor: Any) -> Any:
    import torch

    return tensor.to(torch.complex128 if tensor.is_complex() else torch.float64)


def _nudged(seed: int) -> Callable[[Any], Any]:
    """Every non-zero floating element moved one unit in the last place of its dtype, up or
    down at random (the same way for the same case): inputs one rounding apart."""
    import torch

    generator = torch.Generator().manual_seed(seed)

    def nudge(tensor: Any) -> Any:
        if tensor.is_complex() or tensor.layout != torch.strided or tensor.numel() == 0:
            return tensor
        wide = tensor.to(torch.float64)
        _, exponent = torch.frexp(wide)
        eps = torch.finfo(tensor.dtype).eps
        tiny = torch.finfo(tensor.dtype).tiny
        step = torch.clamp(torch.ldexp(torch.ones_like(wide), exponent - 1) * eps, min=eps * tiny)
        sign = torch.randint(0, 2, tensor.shape, generator=generator).to(torch.float64) * 2 - 1
        moved = torch.where(wide != 0, wide + sign * step, wide)
        return moved.to(tensor.dtype)

    return nudge


@dataclass(kw_only=True, slots=True)
class Outputs:
    """What judging one case's outputs found so far, and the runs it may still ask for."""

    rule: Rule
    dtype: str
    device_name: str
    case: Mapping[str, Any] | None = None
    rerun: Rerun | None = None
    elementwise: bool = True  # the models layer judges whole results (the rule's maxima)
    subnormals: str = "note"  # "keep": a subnormal result flushed to zero fails
    notes: list[str] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    device_bias: list[Bias] = field(default_factory=list)
    cpu_bias: list[Bias] = field(default_factory=list)
    _magnitudes: list[Any] | None = None
    _second: tuple[list[Any], list[Any]] | None = None
    _opmath: list[Any] | None = None
    _terms: list[Any] | None = None
    _sensitivity: Sensitivity | None = None
    _tried: set[str] = field(default_factory=set)

    def magnitude(self, leaf: int) -> Any | None:
        """The float64 magnitude of output ``leaf`` before cancellation (sums and products,
        and the affine bias of normalisations), or None."""
        if "magnitude" not in self._tried:
            self._tried.add("magnitude")
            if self.rerun is not None and self.case is not None:
                if self.case["op"] in MAGNITUDE_OPS:
                    self._magnitudes = self._of_squares()
                elif self.case["op"] in BIAS_ARGUMENT:
                    self._magnitudes = self._without_bias()
        return _leaf_at(self._magnitudes, leaf)

    def _of_squares(self) -> list[Any] | None:
        assert self.rerun is not None and self.case is not None
        squared = {**self.case, "args": [_square_number(a) for a in self.case.get("args") or []],
                   "kwargs": {k: _square_number(v) for k, v in
                              (self.case.get("kwargs") or {}).items()}}
        found = self.rerun.run(squared, _squared, wide=True)
        return None if found is None else [_root(leaf, self._averaged(leaf))
                                           for leaf in leaves(found)]

    def _without_bias(self) -> list[Any] | None:
        """Half the larger of |the output without the bias| and |the bias|, for the first
        output (``oota_rules.BIAS_SHARE``)."""
        import torch

        assert self.rerun is not None and self.case is not None
        position = BIAS_ARGUMENT[self.case["op"]]
        args, kwargs = list(self.case.get("args") or []), dict(self.case.get("kwargs") or {})
        if "bias" in kwargs:
            kwargs["bias"] = None
        elif position < len(args):
            args[position] = None
        else:
            return None
        wide = self.rerun.run(self.case, _float64, wide=True)
        bare = self.rerun.run({**self.case, "args": args, "kwargs": kwargs}, _float64,
                              wide=True)
        if wide is None or bare is None or shape_of(wide) != shape_of(bare):
            return None
        first, without = leaves(wide)[0], leaves(bare)[0]
        if not isinstance(first, torch.Tensor) or not isinstance(without, torch.Tensor) or \
                first.shape != without.shape:
            return None
        return [BIAS_SHARE * torch.maximum(without.abs(), (first - without).abs())]

    def _averaged(self, leaf: Any) -> float:
        """How many input elements one output element averages (1 for a sum)."""
        import torch

        input_ = self.case["input"] if self.case is not None else None
        if self.case is None or self.case["op"] not in MEAN_OPS or not isinstance(
                input_, torch.Tensor) or not isinstance(leaf, torch.Tensor) or not leaf.numel():
            return 1.0
        return max(input_.numel() / leaf.numel(), 1.0)

    def second(self, leaf: int) -> tuple[Any, Any] | None:
        """The CPU's result and the float64 result on inputs one rounding apart."""

        if "second" not in self._tried:
            self._tried.add("second")
            if self.rerun is not None and self.case is not None:
                seed = int(self.case.get("sample") or 0) + 7919
                nudge = _nudged(seed)
                moved = _map_floats((self.case["input"], list(self.case.get("args") or []),
                                     dict(self.case.get("kwargs") or {})), nudge)
                moved_case = {**self.case, "input": moved[0], "args": moved[1],
                              "kwargs": moved[2]}
                cpu = self.rerun.run(moved_case, lambda t: t)
                ref = self.rerun.run(moved_case, _float64, wide=True)
                if cpu is not None and ref is not None and shape_of(cpu) == shape_of(ref):
                    self._second = (leaves(cpu), leaves(ref))
        if self._second is None:
            return None
        cpu_leaf, ref_leaf = _leaf_at(self._second[0], leaf), _leaf_at(self._second[1], leaf)
        return None if cpu_leaf is None or ref_leaf is None else (cpu_leaf, ref_leaf)


    def opmath(self, leaf: int) -> Any | None:
        """The CPU's result on the case's inputs computed in float32 (the type a device
        computes half precision in), for a half-precision case."""
        if "opmath" not in self._tried:
            self._tried.add("opmath")
            if self.rerun is not None and self.case is not None and \
                    self.dtype in ("float16", "bfloat16"):
                found = self.rerun.run(self.case, _float32, wide=True, to="float32")
                self._opmath = None if found is None else leaves(found)
        return _leaf_at(self._opmath, leaf)

    def terms(self, leaf: int) -> Any | None:
        """How many terms make each element of a sum of products: the operator run on inputs
        of ones, its number arguments (addmm's alpha and beta) 1 too."""
        if "terms" not in self._tried:
            self._tried.add("terms")
            if self.rerun is not None and self.case is not None:
                ones = {**self.case, "args": [_one(a) for a in self.case.get("args") or []],
                        "kwargs": {k: _one(v) for k, v in
                                   (self.case.get("kwargs") or {}).items()}}
                found = self.rerun.run(ones, _ones, wide=True)
                self._terms = None if found is None else leaves(found)
        return _leaf_at(self._terms, leaf)

    def sensitivity(self) -> Sensitivity | None:
        """The case's operator, for how far one float32 rounding of every input moves an
        element (``oota_condition``)."""
        if self._sensitivity is None and self.rerun is not None and self.case is not None:
            self._sensitivity = Sensitivity(
                call=self.rerun.call, case=self.case, seed=int(self.case.get("sample") or 0),
                floats=lambda tree, change: _map_floats(tree, change, True))
        return self._sensitivity


def _float32(tensor: Any) -> Any:
    import torch

    return tensor.to(torch.complex64 if tensor.is_complex() else torch.float32)


def _ones(tensor: Any) -> Any:
    import torch

    return torch.ones_like(tensor, dtype=torch.complex128 if tensor.is_complex()
                           else torch.float64)


def _one(value: Any) -> Any:
    return 1.0 if isinstance(value, float) else value


def _square_number(value: Any) -> Any:
    return value * value if isinstance(value, float) else value


def _root(leaf: Any, terms: float) -> Any:
    import torch

    if isinstance(leaf, torch.Tensor) and (leaf.is_floating_point() or leaf.is_complex()):
        return (wide(leaf).abs() / terms).sqrt()
    return leaf


def _leaf_at(found: list[Any] | None, leaf: int) -> Any | None:
    import torch

    if found is None or leaf >= len(found) or not isinstance(found[leaf], torch.Tensor):
        return None
    return found[leaf]


def wide(tensor: Any) -> Any:
    import torch

    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    return tensor.to(torch.complex128 if tensor.is_complex() else torch.float64)


