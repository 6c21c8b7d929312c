"""A vendor's verify hook: the optional ``oota_vendor.py`` of its verify folder
(``vendors/<name>/verify/``, in an image ``/opt/oota/vendor-verify``, in a checkout the folder
``OOTA_VENDOR_VERIFY`` names), loaded once per process, when the suite first needs the device.

Everything in it is optional:

* importing it may give the suite what the backend lacks (PyTorch/XLA has no ``torch.xla``
  module: its hook registers one) and apply the vendor's fault switches;
* ``fallback_counts() -> Mapping[str, int]``: per aten operator, how many calls the backend has
  run on the CPU instead of the device since the process started (PyTorch/XLA: torch_xla's
  ``aten::`` counters; refdev: its host fallback's). The ops layer reads it before and after
  each sample's device run: a pair that called any ran on the CPU, and is reported so. Every
  vendor, with a hook or without, also has the dispatcher's view (``oota_dispatch.py``: which
  operators its dispatch key serves with its own kernel, its boxed fallback, or nothing); the
  counters add what the dispatcher cannot know (a kernel that is itself a host fallback, the
  calls of a composite);
* ``device_metrics() -> Mapping[str, float]``: cumulative figures of the backend (compilations,
  compile seconds, ...), recorded per operator × dtype as their growth over the pair;
* ``SAMPLES_ON_CPU = True``: the ops layer makes each operator's samples on the CPU and copies
  them to the device, instead of making them there (PyTorch/XLA: random inputs made on the
  device are traced off a chain of generator seeds, so each compiles a graph of its own, ever
  larger; max_pool2d's 1,440 samples took about 5 s each by the 300th).

Standard library only: the toolkit's unit tests load this module without torch.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import oota_summary  # noqa: F401 - first: it makes oota_vocab importable in a checkout too
from oota_dispatch import FALLBACK, KERNEL, by_how, pair_served, short
from oota_vocab import CPU_PREFIX

HOOK_FILE = "oota_vendor.py"
MODULE_NAME = "oota_vendor"
DEFAULT_FOLDER = "/opt/oota/vendor-verify"

# Where a pair's samples computed (test data 'ran_on').
DEVICE, CPU, UNKNOWN = "device", "cpu", "unknown"
T = TypeVar("T")

_loaded: dict[str, ModuleType | None] = {}


class HookError(RuntimeError):
    """The vendor's hook exists but cannot be loaded; the message names the file."""


def hook_path(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(environ.get("OOTA_VENDOR_VERIFY") or DEFAULT_FOLDER) / HOOK_FILE


def vendor_hook(path: Path | None = None) -> ModuleType | None:
    """The vendor's hook module (loaded on the first call), or None where it has none."""
    path = path or hook_path()
    key = str(path)
    if key not in _loaded:
        _loaded[key] = _load(path) if path.is_file() else None
    return _loaded[key]


def _load(path: Path) -> ModuleType:
    known = sys.modules.get(MODULE_NAME)  # imported already, from the folder on sys.path
    if known is not None and Path(getattr(known, "__file__", "") or "").resolve() == path.resolve():
        return known
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    if spec is None or spec.loader is None:
        raise HookError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[MODULE_NAME]
        raise HookError(f"{path}: {type(exc).__name__}: {exc}") from exc
    return module


def _numbers(hook: ModuleType | None, name: str) -> dict[str, float]:
    read = getattr(hook, name, None)
    return {str(k): float(v) for k, v in read().items()} if callable(read) else {}


def fallback_counts(hook: ModuleType | None) -> dict[str, float]:
    """The hook's fallback counters ({} where the vendor declares none)."""
    return _numbers(hook, "fallback_counts")


def device_metrics(hook: ModuleType | None) -> dict[str, float]:
    """The hook's cumulative device figures ({} where the vendor declares none)."""
    return _numbers(hook, "device_metrics")


def grown(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """What grew between two readings of cumulative counters, and by how much."""
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v > before.get(k, 0.0)}


def samples_on_cpu(hook: Any) -> bool:
    """Whether the vendor asks for samples made on the CPU and copied to the device."""
    return getattr(hook, "SAMPLES_ON_CPU", False) is True


def declares_fallbacks(hook: Any) -> bool:
    """Whether the vendor says how to read its fallbacks (else coverage is unknown)."""
    return callable(getattr(hook, "fallback_counts", None))


@dataclass
class Coverage:
    """Where one operator × dtype's device runs computed, watched around each sample
    (:meth:`watch`) two ways: the vendor's fallback counters, and the dispatcher's view of the
    operators the sample called on the device (``calls``, an ``oota_dispatch.CallRecorder``:
    every vendor has one). A sample fell back when either says so. ``own_device``: the CPU
    vendor, whose device is the CPU: nothing it runs is a fallback."""

    hook: Any
    calls: Any = None  # oota_dispatch.CallRecorder, or None: the counters alone
    own_device: bool = False
    samples: int = 0
    fell_back: int = 0  # samples whose device run called the CPU fallback
    fallback_ops: dict[str, float] = field(default_factory=dict)  # the counters', grown
    routed: set[str] = field(default_factory=set)  # sent to the boxed fallback (dispatcher)
    served: dict[str, str] = field(default_factory=dict)  # operator -> how the key serves it
    by_name: bool = False  # served is the dispatcher's answer for the OpInfo's aten name
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def declared(self) -> bool:
        return declares_fallbacks(self.hook)

    def watch(self, run: Callable[[], T]) -> T:
        """``run()`` (one sample on the device), its fallbacks and device figures counted."""
        counts, figures = fallback_counts(self.hook), device_metrics(self.hook)
        try:
            return self.calls.during(run) if self.calls is not None else run()
        finally:
            calls = grown(counts, fallback_counts(self.hook))
            dispatched = dict(self.calls.calls) if self.calls is not None else {}
            routed = {short(op) for op, how in dispatched.items()
                      if how == FALLBACK and not self.own_device}
            self.samples += 1
            self.fell_back += bool(calls or routed)
            self.routed |= routed
            self.served.update(dispatched)
            for name, grew in calls.items():
                self.fallback_ops[name] = self.fallback_ops.get(name, 0.0) + grew
            for name, grew in grown(figures, device_metrics(self.hook)).items():
                self.metrics[name] = self.metrics.get(name, 0.0) + grew

    def name_if_silent(self, answers: Callable[[str], Mapping[str, str]]) -> None:
        """Where no sample called anything on the device, how the key serves the operator by
        its name (``answers(key)``: oota_dispatch.named); never evidence of where it ran."""
        if self.calls is not None and not self.served:
            self.served, self.by_name = dict(answers(self.calls.key)), True

    @property
    def served_as(self) -> str:
        """How the pair was served (oota_dispatch.pair_served); "" without a recorder."""
        if self.calls is None:
            return ""
        # What the CPU vendor runs is its device's work, whichever CPU kernel serves it.
        hows = [KERNEL if self.own_device and h == FALLBACK else h for h in self.served.values()]
        return pair_served(hows, boxed_fallback=self.calls.boxed_fallback and not
                           self.own_device, counters=self.declared,
                           counters_grew=bool(self.fallback_ops))

    @property
    def ran_on(self) -> str:
        """'cpu' (a sample fell back), 'device' (its own kernels, as the dispatcher and the
        vendor's counters tell), or 'unknown'."""
        if not self.samples:
            return UNKNOWN
        if self.fell_back:
            return CPU
        if (self.served_as == KERNEL and not self.by_name) or (
                self.calls is None and self.declared):
            return DEVICE
        return UNKNOWN

    def message(self) -> str:
        """Why a pair that fell back is not a device pass (the skip's reason)."""
        names = ", ".join(f"aten::{name}" for name in sorted(self.routed | set(self.fallback_ops)))
        key = self.calls.key if self.calls is not None else ""
        routed = (f"; the dispatcher sends {', '.join(f'aten::{n}' for n in sorted(self.routed))}"
                  f" to {key}'s boxed fallback") if self.routed else ""
        return (f"{CPU_PREFIX}{self.fell_back} of {self.samples} samples called the CPU "
                f"fallback ({names}{routed}): their results are the CPU's own and say nothing "
                "about the device")

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ran_on": self.ran_on}
        if self.calls is not None:
            data.update(dispatch_key=self.calls.key, boxed_fallback=self.calls.boxed_fallback,
                        served=self.served_as, dispatch_from="name" if self.by_name else
                        "calls", dispatch=by_how(
                            {short(op): how for op, how in self.served.items()}))
        if self.fallback_ops or self.routed:
            data.update(fallback_ops=sorted(self.routed | set(self.fallback_ops)),
                        fallback_samples=self.fell_back)
        if self.metrics:
            data["device_metrics"] = {k: round(v, 6) for k, v in sorted(self.metrics.items())}
        return data
