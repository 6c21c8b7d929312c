"""The compile layer's data (``verify.compile`` in vendor.yaml): the torch.compile backends and
modes a vendor claims on its device, and what it leaves out with a reason.

Parsed after the schema checked the section (schema/vendor-v1.json), so every key here has its
type; shipped in cell.json with every default filled in (verify/test_compile.py reads it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# torch.compile's modes (torch.compile's ``mode``; "default" is mode=None).
MODES = ("default", "reduce-overhead", "max-autotune")


def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True, kw_only=True, slots=True)
class CompileSpec:
    """What the compile layer runs (verify/test_compile.py) and what the vendor claims."""

    backends: tuple[str, ...]            # Dynamo backends claimed on the device, by name
    modes: tuple[str, ...] = ("default",)
    models: tuple[str, ...] = ()         # empty: the first of verify.models
    export: bool = False                 # torch.export on the device
    aot_inductor: bool = False           # an AOTInductor package built, loaded and run there
    compiler: bool = False               # the runtime image carries a C++ compiler (Inductor CPU)
    not_claimed: Mapping[str, str] = field(default_factory=_empty)  # name -> why
    timed_runs: int = 10

    def to_json(self, default_models: tuple[str, ...]) -> dict[str, Any]:
        """The cell.json form, every default filled in (``default_models``: verify.models)."""
        return {"backends": list(self.backends), "modes": list(self.modes),
                "models": list(self.models or default_models[:1]), "export": self.export,
                "aot_inductor": self.aot_inductor, "compiler": self.compiler,
                "not_claimed": dict(self.not_claimed), "timed_runs": self.timed_runs}


def compile_spec(data: Mapping[str, Any] | None) -> CompileSpec | None:
    """``verify.compile`` as a CompileSpec (None where the vendor gives none)."""
    if data is None:
        return None
    flags = {k: bool(data[k]) for k in ("export", "aot_inductor", "compiler") if k in data}
    return CompileSpec(
        backends=tuple(str(b) for b in data["backends"]),
        modes=tuple(str(m) for m in data.get("modes", ("default",))),
        models=tuple(str(m) for m in data.get("models", ())), **flags,
        not_claimed=MappingProxyType({str(k): str(v) for k, v in
                                      (data.get("not_claimed") or {}).items()}),
        timed_runs=int(data.get("timed_runs", 10)))
