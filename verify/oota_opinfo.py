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
from dataclasses import dataclass
from typing import Any

COMPARE_TEST = ("TestCommon", "test_compare_cpu")  # whose decorators in op_db apply here


def compared_with() -> str:
    """The device type whose OpInfo dtype lists, beside the CPU's, choose the one dtype an
    operator is compared in: the vendor's ``verify.compare_as`` (vendor.yaml, in cell.json;
    PyTorch's own test_compare_cpu takes CUDA's), else the cell's own device."""
    from oota_suite import read_cell

    cell = read_cell()
    return str((cell.get("verify") or {}).get("compare_as") or cell.get("device") or "cpu")


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

    return list(op_db)


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


def compare_decorators(op: Any, device_type: str, dtype: Any) -> list[Any]:
    """The decorators op_db gives PyTorch's test_compare_cpu for this device and dtype."""
    from torch.testing._internal.opinfo.core import DecorateInfo

    found = []
    for info in op.decorators:
        if isinstance(info, DecorateInfo):
            if info.is_active(*COMPARE_TEST, device_type, dtype, {}):
                found += list(info.decorators)
        else:
            found.append(info)  # a bare decorator applies to every test of the op
    return found


def pytorch_skip(decorators: list[Any]) -> str:
    """Why PyTorch's own comparison skips (or expects to fail) this op ('' when it does not)."""
    for decorator in decorators:
        name = getattr(decorator, "__name__", "")
        if name == "expectedFailure":
            return "PyTorch's test_compare_cpu expects this comparison to fail"
        if name == "decorator":  # what unittest.skip(reason) returns; the reason is in it
            cells = [c.cell_contents for c in getattr(decorator, "__closure__", None) or ()]
            reason = next((c for c in cells if isinstance(c, str)), "no reason given")
            return f"PyTorch's test_compare_cpu skips this comparison: {reason}"
    return ""


def tolerance_override(decorators: list[Any], dtype: Any) -> tuple[float, float]:
    """(atol, rtol) of the OpInfo's toleranceOverride for the comparison, (0, 0) if none."""
    for decorator in decorators:
        table = getattr(decorator, "d", None)
        entry = table.get(dtype) if isinstance(table, dict) else None
        if entry is not None and hasattr(entry, "atol"):
            return float(entry.atol), float(entry.rtol)
    return 0.0, 0.0


def compare_dtype(op: Any) -> str:
    """The dtype PyTorch's test_compare_cpu judges ``op`` in: the first dtype of PyTorch's
    ``ANY_DTYPE_ORDER`` that the OpInfo supports on both the CPU and the device the vendor
    compares as (:func:`compared_with`; '' when none)."""
    from torch.testing._internal.common_device_type import ANY_DTYPE_ORDER

    both = set(op.supported_dtypes("cpu")) & set(op.supported_dtypes(compared_with()))
    chosen = next((dtype for dtype in ANY_DTYPE_ORDER if dtype in both), None)
    return str(chosen).removeprefix("torch.") if chosen is not None else ""


def declares(op: Any, device_type: str, dtype: Any) -> bool:
    """Whether the OpInfo declares ``dtype`` for ``device_type``: the CPU's list for a device
    the OpInfo has no list of its own for (PyTorch's own fallback)."""
    return dtype in op.supported_dtypes(device_type)


def decisions(op: Any, device_type: str, dtype: Any) -> Decisions:
    """PyTorch's decisions for ``op`` in ``dtype`` on ``device_type`` (a device other than the
    CPU: on the CPU vendor nothing is compared)."""
    decorators = compare_decorators(op, device_type, dtype)
    atol, rtol = tolerance_override(decorators, dtype)
    return Decisions(skip=pytorch_skip(decorators), compare_dtype=compare_dtype(op),
                     atol=atol, rtol=rtol, device_dtypes=declares(op, device_type, dtype))


def samples(op: Any, device: Any, dtype: Any, *, reference: bool,
            limit: int | None = None) -> list[Any]:
    """The operator's sample inputs on ``device``, made there as PyTorch's tests make them:
    ``reference_inputs`` (a superset) where PyTorch's comparison uses them; the first
    ``limit`` only when given (max_pool2d has 1,440)."""
    made = op.reference_inputs(device, dtype) if reference else op.sample_inputs(device, dtype)
    return list(itertools.islice(made, limit))
