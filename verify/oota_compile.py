"""The compile layer's plan and arithmetic: which cases run (from cell.json's
``verify.compile``), what is not claimed and why, the speedup of compiled over eager runs, and
what Dynamo's counters say about graph breaks and recompiles.

Standard library only (numbers and mappings in, numbers and text out), so oota's unit tests
check it without torch; verify/test_compile.py compiles and runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# torch.compile's modes ("default" is mode=None).
MODES = ("default", "reduce-overhead", "max-autotune")
# The features a vendor claims beside its backends (verify.compile.<key>: true).
FEATURES = ("export", "aot_inductor")
# The operators compiled one by one (OpInfo names of PyTorch's op_db), and a fused chain of
# them, which runs whatever the time budget (OOTA_COMPILE_BUDGET_S): pointwise, reduction and
# matrix operators, the three kinds Inductor generates code for.
OPS = ("mul", "sum", "matmul", "nn.functional.gelu", "softmax", "nn.functional.layer_norm",
       "nn.functional.silu", "add")
FUSED = "fused.mlp"  # layer_norm(gelu(x @ w + b)) * x: one graph Inductor fuses
BUDGET_VARIABLE = "OOTA_COMPILE_BUDGET_S"
DEFAULT_BUDGET_S = 30.0
HALF = ("float16", "bfloat16")
SPEC_KEY = "verify.compile in vendor.yaml"


@dataclass(frozen=True, kw_only=True, slots=True)
class Claims:
    """What the vendor claims of torch.compile (cell.json ``verify.compile``)."""

    backends: tuple[str, ...] = ()
    modes: tuple[str, ...] = ("default",)
    models: tuple[str, ...] = ()
    export: bool = False
    aot_inductor: bool = False
    not_claimed: Mapping[str, str] | None = None
    timed_runs: int = 10

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Claims:
        data = spec.get("compile") or {}
        return cls(backends=tuple(data.get("backends") or ()),
                   modes=tuple(data.get("modes") or ("default",)),
                   models=tuple(data.get("models") or ()),
                   export=bool(data.get("export")), aot_inductor=bool(data.get("aot_inductor")),
                   not_claimed=dict(data.get("not_claimed") or {}),
                   timed_runs=int(data.get("timed_runs") or 10))

    def unclaimed(self, declared: bool) -> list[tuple[str, str]]:
        """(name, why) of each backend or other capability the vendor says it leaves out
        (``not_claimed``), or of torch.compile itself where it claims no backend. Modes and
        features have tests of their own, which say :meth:`why_not` themselves."""
        why = dict(self.not_claimed or {})
        if not declared or not self.backends:
            reasons = "; ".join(f"{k}: {v}" for k, v in why.items())
            return [("torch.compile", f"the vendor claims no torch.compile backend ({SPEC_KEY})"
                     + (f": {reasons}" if reasons else ""))]
        return sorted((k, v) for k, v in why.items() if k not in MODES and k not in FEATURES)

    def claims(self, name: str) -> bool:
        """Whether a mode (default, reduce-overhead, max-autotune) or a feature (export,
        aot_inductor) is claimed."""
        return name in self.modes if name in MODES else bool(getattr(self, name))

    def why_not(self, name: str) -> str:
        """Why a mode or feature is not claimed: the vendor's reason, or that it claims it
        nowhere."""
        key = "modes" if name in MODES else name
        return (self.not_claimed or {}).get(name) or (
            f"the vendor does not claim it ({SPEC_KEY}: {key})")


def dtypes(vendor_dtypes: Sequence[str]) -> list[str]:
    """float32 and the vendor's half dtypes (float16, bfloat16) where it lists them."""
    return ["float32", *[d for d in HALF if d in vendor_dtypes]]


def speedup(eager: Sequence[float], compiled: Sequence[float]) -> dict[str, Any]:
    """The speedup of compiled over eager (ratio of the medians) and each run's spread (the
    range of its timings over its median), from seconds of repeated timed runs."""
    eager_median, compiled_median = statistics.median(eager), statistics.median(compiled)
    return {"eager_median_s": eager_median, "compiled_median_s": compiled_median,
            "speedup": eager_median / compiled_median if compiled_median > 0 else None,
            "eager_spread": _spread(eager, eager_median),
            "compiled_spread": _spread(compiled, compiled_median), "timed_runs": len(compiled)}


def _spread(seconds: Sequence[float], median: float) -> float | None:
    return (max(seconds) - min(seconds)) / median if median > 0 else None


def graph_breaks(counter: Mapping[str, int]) -> dict[str, Any]:
    """Dynamo's ``counters['graph_break']`` (reason -> count) as a count and the reasons,
    each on one line and at most 200 characters."""
    reasons = [" ".join(str(r).split())[:200] for r in counter]
    return {"graph_breaks": sum(int(n) for n in counter.values()), "break_reasons": reasons[:5]}


def first_lines(error: BaseException, lines: int = 4) -> str:
    """The first lines of an error's message, for a failure that must name what broke."""
    text = str(error).strip().splitlines()
    shown = "\n".join(text[:lines])
    return f"{type(error).__name__}: {shown}" + (" ..." if len(text) > lines else "")
