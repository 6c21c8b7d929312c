"""What PyTorch's own operator tests decide about one operator × dtype, read from the OpInfo
database the torch wheel ships (``torch.testing._internal.common_methods_invocations.op_db``).

PyTorch's ``TestCommon.test_compare_cpu`` (test/test_ops.py) is PyTorch's rule for "the device
agrees with the CPU": one dtype per operator (``OpDTypes.any_common_cpu_cuda_one``: the first of
``ANY_DTYPE_ORDER`` that both the CPU and CUDA support, float32 for almost all), the operator's
``reference_inputs``, ``assertEqual(device, cpu, atol=1e-3, rtol=1e-3)`` widened by the OpInfo's
``toleranceOverride`` for that test, and the skips and expected failures op_db attaches to it
(random operators, uninitialised memory, known CPU/GPU differences). This module answers those
questions for the ops layer (verify/test_ops.py) and for the judge's recordings, so a run and a
replay read PyTorch's decisions the same way.
"""

from __future__ import annotations

import itertools
import sys
import types
import unittest
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

COMPARE_TEST = ("TestCommon", "test_compare_cpu")  # whose decorators in op_db apply here


def import_op_db() -> list[Any]:
    """op_db. Its module imports ``expecttest`` for a TestCase base class that op_db itself
    never uses; images install only what the suite runs, so a missing expecttest is stood in
    for by a plain unittest.TestCase rather than failing the whole layer."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("expecttest")
        stand_in.TestCase = unittest.TestCase  # type: ignore[attr-defined]
        sys.modules["expecttest"] = stand_in
    from torch.testing._internal.common_methods_invocations import op_db

    _find_test_cheaply()
    _seed_cheaply()
    return list(op_db)


def _find_test_cheaply() -> None:
    """PyTorch's sample iterators look for the unittest test that runs them (to seed each
    sample from its name) with ``inspect.stack()``, which also finds every frame's source file
    and line, scanning all of torch's thousands of modules per frame: about 20 ms per
    ``sample_inputs`` call in the autograd layer's thread, the largest part of that layer's
    time on the CPU cell. The same search over the frames without their source gives the same
    answer (a pytest test is no unittest.TestCase: None)."""
    from torch.testing._internal import common_utils

    def extract_test_fn() -> Any:
        frame = sys._getframe(1)
        while frame is not None:
            found = frame.f_locals.get("self")
            if isinstance(found, unittest.TestCase):
                *_, cls_name, test_name = found.id().rsplit(".", 2)
                if cls_name == type(found).__name__ and test_name.startswith("test"):
                    return getattr(found, test_name).__func__
            frame = frame.f_back
        return None

    original = getattr(common_utils, "extract_test_fn", None)
    for name, module in list(sys.modules.items()):  # and where it was imported by name
        if name.startswith("torch.testing._internal") and original is not None and \
                getattr(module, "extract_test_fn", None) is original:
            module.extract_test_fn = extract_test_fn  # type: ignore[attr-defined]


# How many frames a lazy device call keeps of where it was made (see _seed_cheaply).
LAZY_CALL_FRAMES = 8


def _seed_cheaply() -> None:
    """PyTorch's sample iterators seed every sample (``set_rng_seed``: ``torch.manual_seed``),
    and ``torch.manual_seed`` queues a seed for each device module not yet initialised (cuda,
    xpu, mtia on a CPU torch; the ones a vendor's device is not) with the whole stack of the
    call, formatted with every frame's source line, in case the lazy call fails later: about
    4 ms a sample under pytest's sixty frames, 70 % of refdev's time on max_pool2d (1,440
    samples a dtype; a cProfile of the ops layer, 2026-11-29). The same calls are queued with
    the seed, only their stack is cut to its innermost frames: a deferred error still says where
    it was queued from, and every seed and sample is the same."""
    import traceback

    def format_stack(f: Any = None, limit: int | None = None) -> list[str]:
        return traceback.format_stack(f or sys._getframe(1),
                                      LAZY_CALL_FRAMES if limit is None else limit)

    cut = types.SimpleNamespace(**{name: getattr(traceback, name) for name in dir(traceback)
                                   if not name.startswith("__")})
    cut.format_stack = format_stack
    for name in ("torch.cuda", "torch.xpu", "torch.mtia"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "traceback", None) is traceback and \
                callable(getattr(module, "_lazy_call", None)):
            module.traceback = cut  # type: ignore[attr-defined]


def full_name(op: Any) -> str:
    """The name a user sees: ``max.binary`` for the ``binary`` variant of ``max``."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def by_name() -> dict[str, Any]:
    return {full_name(op): op for op in import_op_db()}


@dataclass(frozen=True, kw_only=True, slots=True)
class Decisions:
    """PyTorch's decisions for one operator × dtype on one device type."""

    skip: str = ""  # why PyTorch's comparison skips (or expects to fail) it; "" when it runs
    compare_dtype: str = ""  # the one dtype test_compare_cpu judges this operator in ("": none)
    atol: float = 0.0  # the OpInfo's tolerance override for the comparison (0: none)
    rtol: float = 0.0
    device_dtypes: bool = True  # the OpInfo declares this dtype for the device type

    @property
    def pytorch_judges(self) -> bool:
        return not self.skip

    def to_json(self) -> dict[str, Any]:
        return {"skip": self.skip, "compare_dtype": self.compare_dtype, "atol": self.atol,
                "rtol": self.rtol, "device_dtypes": self.device_dtypes}


def test_decorators(op: Any, test: tuple[str, str], device_type: str, dtype: Any) -> list[Any]:
    """The decorators op_db gives PyTorch's test ``test`` (class, method: ``("TestCommon",
    "test_out")``) of ``op`` for this device type and dtype."""
    from torch.testing._internal.opinfo.core import DecorateInfo

    found = []
    for info in op.decorators:
        if isinstance(info, DecorateInfo):
            if info.is_active(*test, device_type, dtype, {}):
                found += list(info.decorators)
        else:
            found.append(info)  # a bare decorator applies to every test of the op
    return found


def compare_decorators(op: Any, device_type: str, dtype: Any) -> list[Any]:
    """The decorators op_db gives PyTorch's test_compare_cpu for this device and dtype."""
    return test_decorators(op, COMPARE_TEST, device_type, dtype)


def pytorch_skip(decorators: list[Any], test: str = COMPARE_TEST[1],
                 what: str = "comparison") -> str:
    """Why PyTorch's own ``test`` skips (or expects to fail) this op ('' when it does not)."""
    for decorator in decorators:
        name = getattr(decorator, "__name__", "")
        if name == "expectedFailure":
            return f"PyTorch's {test} expects this {what} to fail"
        if name == "decorator":  # what unittest.skip(reason) returns; the reason is in it
            cells = [c.cell_contents for c in getattr(decorator, "__closure__", None) or ()]
            reason = next((c for c in cells if isinstance(c, str)), "no reason given")
            return f"PyTorch's {test} skips this {what}: {reason}"
    return ""


def tolerance_override(decorators: list[Any], dtype: Any) -> tuple[float, float]:
    """(atol, rtol) of the OpInfo's toleranceOverride for the comparison, (0, 0) if none."""
    for decorator in decorators:
        table = getattr(decorator, "d", None)
        entry = table.get(dtype) if isinstance(table, dict) else None
        if entry is not None and hasattr(entry, "atol"):
            return float(entry.atol), float(entry.rtol)
    return 0.0, 0.0


def compare_dtype(op: Any, compare_as: str) -> str:
    """The dtype PyTorch's test_compare_cpu judges ``op`` in: the first dtype of PyTorch's
    ``ANY_DTYPE_ORDER`` that the OpInfo supports on both the CPU and the device type the vendor
    compares as (``verify.compare_as`` in vendor.yaml, else its own device; PyTorch's own test
    takes CUDA's); '' when none. A device type this torch does not know (a replay of refdev's
    recording without torch_refdev) takes the CPU's list, as the OpInfo does for a device it
    has none for."""
    from torch.testing._internal.common_device_type import ANY_DTYPE_ORDER

    on_cpu = set(op.supported_dtypes("cpu"))
    try:
        on_device = set(op.supported_dtypes(compare_as))
    except RuntimeError:
        on_device = on_cpu
    both = on_cpu & on_device
    chosen = next((dtype for dtype in ANY_DTYPE_ORDER if dtype in both), None)
    return str(chosen).removeprefix("torch.") if chosen is not None else ""


def declares(op: Any, device_type: str, dtype: Any) -> bool:
    """Whether the OpInfo declares ``dtype`` for ``device_type``: the CPU's list for a device
    the OpInfo has no list of its own for (PyTorch's own fallback), and for a device type this
    torch does not know (a replay of refdev's recording where torch_refdev is not imported)."""
    try:
        return dtype in op.supported_dtypes(device_type)
    except RuntimeError:
        return dtype in op.supported_dtypes("cpu")


def decisions(op: Any, device_type: str, dtype: Any, compare_as: str = "") -> Decisions:
    """PyTorch's decisions for ``op`` in ``dtype`` on ``device_type`` (a device other than the
    CPU: on the CPU vendor nothing is compared), the dtype it is compared in chosen as on
    ``compare_as`` (default: ``device_type``)."""
    decorators = compare_decorators(op, device_type, dtype)
    atol, rtol = tolerance_override(decorators, dtype)
    return Decisions(skip=pytorch_skip(decorators),
                     compare_dtype=compare_dtype(op, compare_as or device_type),
                     atol=atol, rtol=rtol, device_dtypes=declares(op, device_type, dtype))


def samples(op: Any, device: Any, dtype: Any, *, reference: bool,
            limit: int | None = None, requires_grad: bool = False) -> list[Any]:
    """The operator's sample inputs on ``device``, made there as PyTorch's tests make them:
    ``reference_inputs`` (a superset) where PyTorch's comparison uses them; the first
    ``limit`` only when given (max_pool2d has 1,440); with ``requires_grad``, the tensors
    PyTorch's gradient tests differentiate require it."""
    made = op.reference_inputs(device, dtype, requires_grad=requires_grad) if reference \
        else op.sample_inputs(device, dtype, requires_grad=requires_grad)
    return list(itertools.islice(made, limit))


def rule_for(op: Any, dtype_name: str, device_type: str, spec: Mapping[str, Any] | None = None,
             *, declared: bool = True) -> Any:
    """The rule the ops layer chooses for ``op`` × ``dtype_name`` on ``device_type``
    (``oota_rules.Rule``): PyTorch's skip, PyTorch's comparison for the dtype it judges, else
    oota's numbers or the vendor's (``spec``: cell.json's ``verify``, whose ``judge`` and
    ``tolerances`` apply). With ``declared``, a dtype the OpInfo does not declare for the device
    is skipped as the ops layer skips it (a replay, which holds the device's result, does not
    ask: on a machine without CUDA, op_db declares fewer CUDA dtypes). A RuleError where the
    vendor's numbers make no sense."""
    import oota_rules
    import torch

    spec = spec or {}
    dtype = getattr(torch, dtype_name, None)
    if not isinstance(dtype, torch.dtype):
        raise oota_rules.RuleError(f"dtype {dtype_name!r} is not a torch dtype")
    decided = decisions(op, device_type, dtype, str(spec.get("compare_as") or ""))
    if decided.skip:
        return oota_rules.skip_rule(decided.skip)
    if declared and not decided.device_dtypes:
        return oota_rules.skip_rule(f"the OpInfo of {full_name(op)} does not declare "
                                    f"{dtype_name} for {device_type}")
    return oota_rules.choose(
        dtype_name, pytorch_judges=dtype_name == decided.compare_dtype,
        override=(decided.atol, decided.rtol), judge=spec.get("judge"),
        tolerance=(spec.get("tolerances") or {}).get(dtype_name))


def _identity(function: Any) -> bool:
    return getattr(function, "__qualname__", "") == "SampleInput.__init__.<locals>.<lambda>"


def output_process(op: Any, dtype: Any, index: int, *, reference: bool) -> Any | None:
    """What the OpInfo's sample number ``index`` does to the operator's output before it is
    compared (``output_process_fn_grad``: eigh's eigenvectors in absolute value, svd's parts):
    a function, or None when the sample cannot be made again here. Twelve operators of op_db
    process their output; for the others the first sample says so and nothing more is made."""
    made = op.reference_inputs("cpu", dtype) if reference else op.sample_inputs("cpu", dtype)
    first = next(iter(made), None)
    if first is None:
        return None
    if _identity(first.output_process_fn_grad):
        return first.output_process_fn_grad
    again = op.reference_inputs("cpu", dtype) if reference else op.sample_inputs("cpu", dtype)
    sample = next(itertools.islice(again, index, None), None)
    return None if sample is None else sample.output_process_fn_grad
