"""How ill-conditioned an element of a case's result is: how far its float64 value moves when
every floating input moves by one float32 rounding (``oota_rules.CONDITION_ROUNDINGS`` says
how many such moves a correct kernel may make). By derivatives, never by finite differences:
a rounding's effect is first order, and a finite step across a discontinuity (round() at a
half-way input, floor() at an integer) would make a jump look like a condition.

Two measures, both from PyTorch's autograd on the operator run again in float64:

* :meth:`Sensitivity.estimate`, every element at once: forward mode, every input moved by its
  float32 ulp with a random sign (two draws, the larger): exact for an elementwise function of
  one input, and for others a lower bound of
* :meth:`Sensitivity.exact`, one element at a time: reverse mode, the sum over the inputs of
  |d element / d input| x the input's float32 ulp, the first-order change when every input
  moves by one rounding in the direction that moves the element most (the componentwise
  condition number at that input, in units of the element).

Either is None where the operator has no derivative there (integer results, an operator
autograd does not cover); the judge then goes without it. torch is imported where needed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oota_cases import leaves

Call = Callable[[Any, list[Any], dict[str, Any]], Any]
Mapper = Callable[[Any, Callable[[Any], Any]], Any]
DRAWS = 2


def float32_ulp(tensor: Any) -> Any:
    """One unit in the last place of float32 at each element (the smallest subnormal's at
    zero)."""
    import torch

    _, exponent = torch.frexp(tensor)
    eps, tiny = torch.finfo(torch.float32).eps, torch.finfo(torch.float32).tiny
    return torch.clamp(torch.ldexp(torch.ones_like(tensor), exponent - 1) * eps,
                       min=eps * tiny)


def _finite(tensor: Any) -> Any:
    """A derivative that is not finite (0 x inf where another element is singular, or this
    one) says nothing of a rounding's effect: it counts as none."""
    import torch

    return torch.nan_to_num(tensor, nan=0.0, posinf=0.0, neginf=0.0)


@dataclass(kw_only=True, slots=True)
class Sensitivity:
    """The case's operator (``call``) on its inputs (``case``), which ``floats`` maps: every
    floating tensor changed, floating dtype arguments made float64."""

    call: Call
    case: Mapping[str, Any]
    floats: Mapper
    seed: int = 0
    _estimates: list[Any] | None = None
    _graph: tuple[list[Any], list[Any], list[Any]] | None = None
    _tried: set[str] = field(default_factory=set)

    def _arguments(self, change: Callable[[Any], Any]) -> Any:
        return self.floats((self.case["input"], list(self.case.get("args") or []),
                            dict(self.case.get("kwargs") or {})), change)

    def estimate(self, leaf: int) -> Any | None:
        """Every element's change, by forward mode (see the module docstring)."""
        if "forward" not in self._tried:
            self._tried.add("forward")
            draws = [self._forward(self.seed + draw) for draw in range(DRAWS)]
            if all(d is not None for d in draws):
                self._estimates = [_larger(parts) for parts in zip(*draws, strict=True)]
        found = self._estimates
        return found[leaf] if found is not None and leaf < len(found) else None

    def _forward(self, seed: int) -> list[Any] | None:
        import torch
        import torch.autograd.forward_ad as forward

        generator = torch.Generator().manual_seed(seed)

        def dual(tensor: Any) -> Any:
            if tensor.is_complex() or tensor.layout != torch.strided:
                return tensor
            wide = tensor.detach().to(torch.float64)
            sign = torch.randint(0, 2, wide.shape, generator=generator).to(wide.dtype) * 2 - 1
            return forward.make_dual(wide, sign * float32_ulp(wide))
        try:
            with forward.dual_level():
                input_, args, kwargs = self._arguments(dual)
                out = self.call(input_, args, kwargs)
                found = []
                for part in leaves(out):
                    tangent = forward.unpack_dual(part).tangent if isinstance(
                        part, torch.Tensor) else None
                    found.append(None if tangent is None else _finite(tangent).abs().detach())
                return found
        except Exception:  # noqa: BLE001 - no forward derivative: the judge goes without it
            return None

    def exact(self, leaf: int, position: int) -> float | None:
        """Element ``position`` (of output ``leaf``, flattened): its change, by reverse mode
        (see the module docstring)."""
        import torch

        graph = self._backward()
        if graph is None or leaf >= len(graph[0]):
            return None
        outputs, inputs, units = graph
        output = outputs[leaf]
        if not isinstance(output, torch.Tensor) or not output.requires_grad or \
                position >= output.numel():
            return None
        try:
            grads = torch.autograd.grad(output.reshape(-1)[position], inputs,
                                        retain_graph=True, allow_unused=True)
        except RuntimeError:
            return None
        return float(sum(float((_finite(g).abs() * u).sum())
                         for g, u in zip(grads, units, strict=True) if g is not None))

    def _backward(self) -> tuple[list[Any], list[Any], list[Any]] | None:
        """The operator run in float64 on inputs that carry gradients: its outputs, the
        inputs, and each input's float32 ulp (the graph is kept for several elements)."""
        import torch

        if "backward" in self._tried:
            return self._graph
        self._tried.add("backward")
        inputs: list[Any] = []

        def track(tensor: Any) -> Any:
            if tensor.is_complex() or tensor.layout != torch.strided:
                return tensor
            wide = tensor.detach().to(torch.float64).requires_grad_(True)
            inputs.append(wide)
            return wide
        try:
            with torch.enable_grad():
                input_, args, kwargs = self._arguments(track)
                out = self.call(input_, args, kwargs)
        except Exception:  # noqa: BLE001 - no derivative: the judge goes without it
            return None
        if inputs:
            self._graph = (leaves(out), inputs, [float32_ulp(x.detach()) for x in inputs])
        return self._graph


def _larger(parts: tuple[Any, ...]) -> Any:
    import torch

    if any(p is None for p in parts):
        return None
    found = parts[0]
    for part in parts[1:]:
        found = torch.maximum(found, part) if found.shape == part.shape else None
        if found is None:
            return None
    return found
