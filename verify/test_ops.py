"""Ops layer: PyTorch's own operator test database (OpInfo), run on the vendor's device.

For every operator of ``torch.testing._internal.common_methods_invocations.op_db`` (shipped in
the wheel) and every dtype the vendor declares (cell.json ``verify.dtypes``) that the OpInfo
supports on the CPU, the OpInfo's sample inputs run on the device and on the CPU and the
results are compared, as PyTorch's ``test_compare_cpu`` does: with the OpInfo's own tolerance
override for that test where it has one, else the vendor's per-dtype ``verify.tolerances``.
Comparisons PyTorch's own test skips or expects to fail (random operators, uninitialised
memory, known CPU/GPU differences) are skipped here with its reason. One result per operator
and dtype: passed, failed with the first mismatch, or skipped with the reason.

For the CPU vendor the device IS the CPU: comparing it with itself proves nothing, so there
the test is named ``test_op_runs`` and only runs each operator's samples once (that they run at
all catches a broken wheel); accelerators get ``test_op_matches_cpu``.

The must-pass operators (``ops-must-pass.yaml``, those the models layer needs) run first and
always; the others run until the time budget (``OOTA_OPS_BUDGET_S``, default 180 s, counted from
the first operator) is spent and are skipped after it; tests.json holds those as one skipped entry
(``[unrun-by-budget]``, with their count). Decisions that need no torch live in
``oota_ops.py``. op_db is imported while this module's tests are collected, and only when the
ops layer is selected: its import takes seconds that the other layers should not pay.
"""

from __future__ import annotations

import math
import os
import sys
import types
import unittest
from typing import Any

import oota_ops
import pytest
from oota_suite import read_cell

LAYER = "ops"
COMPARE_TEST = ("TestCommon", "test_compare_cpu")  # whose decorators in op_db apply here
DESCRIPTION_LIMIT = 160


def _selected() -> bool:
    wanted = {x.strip() for x in os.environ.get("OOTA_VERIFY_LAYERS", "").split(",")
              if x.strip()}
    return not wanted or LAYER in wanted


def _import_op_db() -> list[Any]:
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


def _full_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


class _Database:
    """op_db by full name ('max.binary'), the must-pass list, and why they could not be had."""

    def __init__(self) -> None:
        self.ops: dict[str, Any] = {}
        self.must: dict[str, oota_ops.MustPass] = {}
        self.problem = ""
        if not _selected():
            return
        try:
            self.ops = {_full_name(op): op for op in _import_op_db()}
        except Exception as exc:  # noqa: BLE001 - reported as the layer's one failure
            self.problem = f"cannot import PyTorch's OpInfo database: {type(exc).__name__}: {exc}"
            return
        try:
            self.must = {e.op: e for e in oota_ops.load_must_pass()}
        except (OSError, oota_ops.MustPassError) as exc:
            self.problem = str(exc)


DATABASE = _Database()
BUDGET = oota_ops.Budget(oota_ops.budget_seconds())


def _cases() -> list[Any]:
    if not _selected():
        return [pytest.param("none", "none", id="not-selected",
                             marks=pytest.mark.skip(reason="the ops layer is not selected"))]
    if DATABASE.problem:
        return [pytest.param("op_db", "none", id="op_db")]
    import torch

    params = []
    for name in oota_ops.ordered(list(DATABASE.ops), list(DATABASE.must)):
        on_cpu = DATABASE.ops[name].supported_dtypes("cpu")
        for dtype_name in (read_cell().get("verify") or {}).get("dtypes") or ["float32"]:
            dtype = getattr(torch, str(dtype_name), None)
            marks = () if dtype in on_cpu else pytest.mark.skip(
                reason=f"the OpInfo of {name} does not support {dtype_name} on the CPU")
            params.append(pytest.param(name, str(dtype_name), id=f"{name}-{dtype_name}",
                                       marks=marks))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "op_name" in metafunc.fixturenames:
        metafunc.parametrize("op_name,op_dtype", _cases())


# -- one operator × dtype ----------------------------------------------------------------------

def _check_database() -> None:
    if DATABASE.problem:
        pytest.fail(DATABASE.problem)


def _compare_decorators(op: Any, device_type: str, dtype: Any) -> list[Any]:
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


def _pytorch_skip(decorators: list[Any]) -> str | None:
    """Why PyTorch's own comparison skips (or expects to fail) this op, if it does."""
    for decorator in decorators:
        name = getattr(decorator, "__name__", "")
        if name == "expectedFailure":
            return "PyTorch's test_compare_cpu expects this comparison to fail"
        if name == "decorator":  # what unittest.skip(reason) returns; the reason is in it
            cells = [c.cell_contents for c in getattr(decorator, "__closure__", None) or ()]
            reason = next((c for c in cells if isinstance(c, str)), "no reason given")
            return f"PyTorch's test_compare_cpu skips this comparison: {reason}"
    return None


def _tolerance(decorators: list[Any], dtype: Any, vendor: dict[str, float]) -> tuple[
        dict[str, float], str]:
    """The OpInfo's tolerance override for the comparison, else the vendor's."""
    for decorator in decorators:
        table = getattr(decorator, "d", None)
        entry = table.get(dtype) if isinstance(table, dict) else None
        if entry is not None and hasattr(entry, "atol"):
            return {"atol": float(entry.atol), "rtol": float(entry.rtol)}, "opinfo"
    return vendor, "vendor"


def _describe(sample: Any) -> str:
    def short(value: Any) -> str:
        import torch

        if isinstance(value, torch.Tensor):
            return f"Tensor{list(value.shape)} {str(value.dtype).removeprefix('torch.')}"
        if isinstance(value, (list, tuple)):
            return "(" + ", ".join(short(v) for v in value) + ")"
        return repr(value)

    parts = [short(sample.input)] + [short(a) for a in sample.args]
    parts += [f"{k}={short(v)}" for k, v in sample.kwargs.items()]
    text = ", ".join(parts)
    return text if len(text) <= DESCRIPTION_LIMIT else text[:DESCRIPTION_LIMIT - 1] + "…"


def _run(op: Any, sample: Any) -> Any:
    return sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))


def _leaf_difference(got: Any, want: Any, tol: dict[str, float]) -> tuple[float, float] | None:
    """(max abs, max rel) difference of one output where it is not within tolerance."""
    import torch

    if not isinstance(want, torch.Tensor):
        if isinstance(got, torch.Tensor):
            return math.inf, math.inf
        same = got == want or (isinstance(got, float) and isinstance(want, float)
                               and math.isnan(got) and math.isnan(want))
        return None if same else (math.inf, math.inf)
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
        return math.inf, math.inf
    got, want = got.cpu(), want.cpu()
    if got.layout != torch.strided:
        got, want = got.to_dense(), want.to_dense()
    wide = torch.complex128 if want.is_complex() else torch.float64
    a, b = got.to(wide), want.to(wide)
    close = torch.isclose(a, b, equal_nan=True, **tol)
    if bool(close.all()):
        return None
    diff = (a - b).abs()[~close]
    rel = diff / b.abs()[~close]
    return float(diff.max()), float(rel.max())


def _first_mismatch(got: Any, want: Any, tol: dict[str, float]) -> tuple[str, float, float] | None:
    from torch.utils._pytree import tree_flatten

    got_leaves, got_spec = tree_flatten(got)
    want_leaves, want_spec = tree_flatten(want)
    if got_spec != want_spec:
        return "output structure", math.inf, math.inf
    for index, (a, b) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        found = _leaf_difference(a, b, tol)
        if found is not None:
            return ("output" if len(want_leaves) == 1 else f"output[{index}]"), *found
    return None


def _not_implemented(exc: Exception) -> bool:
    return isinstance(exc, NotImplementedError) or "not implemented for" in str(exc)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _outcome(op: Any, device: Any, dtype: Any, tol: dict[str, float],
             cpu_only: bool) -> oota_ops.Outcome:
    import torch

    samples = ran = cpu_errors = 0
    try:
        # Made on the device, as PyTorch's test does; a device that cannot even make them
        # fails (or lacks) the operator like one that cannot run it.
        made = list(op.sample_inputs(device, dtype))
        if cpu_only:  # the samples only have to run: a few prove that (max_pool2d has 1440)
            made = made[:oota_ops.CPU_ONLY_SAMPLES]
    except Exception as exc:  # noqa: BLE001 - the device's failure is the finding
        if _not_implemented(exc):
            return oota_ops.Outcome(not_implemented=f"making samples: {_first_line(exc)}")
        return oota_ops.Outcome(error=f"making samples: {_first_line(exc)}")
    for index, sample in enumerate(made):
        samples += 1
        cpu_sample = sample.transform(
            lambda t: t.to("cpu") if isinstance(t, torch.Tensor) else t)
        try:
            want = _run(op, cpu_sample)
        except Exception:  # noqa: BLE001 - a sample the CPU refuses has nothing to compare
            cpu_errors += 1
            continue
        ran += 1
        if cpu_only:
            continue
        try:
            got = _run(op, sample)
        except Exception as exc:  # noqa: BLE001 - the device's failure is the finding
            if _not_implemented(exc):
                return oota_ops.Outcome(samples=samples, ran=ran,
                                        not_implemented=_first_line(exc))
            return oota_ops.Outcome(samples=samples, ran=ran,
                                    error=f"sample {index}: {_first_line(exc)} (the CPU "
                                          "ran it)")
        found = _first_mismatch(got, want, tol)
        if found is not None:
            return oota_ops.Outcome(samples=samples, ran=ran, mismatch=oota_ops.Mismatch(
                sample=index, description=_describe(sample), where=found[0], max_abs=found[1],
                max_rel=found[2], **tol))
    return oota_ops.Outcome(samples=samples, ran=ran, cpu_errors=cpu_errors, cpu_only=cpu_only)


def _check(op_name: str, op_dtype: str, device: Any, tolerance: Any, record_data: Any) -> None:
    import torch

    _check_database()
    must = op_name in DATABASE.must
    late = BUDGET.skip_reason(must)
    if late:
        pytest.skip(late)
    op, dtype = DATABASE.ops[op_name], getattr(torch, op_dtype)
    decorators = _compare_decorators(op, device.type, dtype)
    skipped = None if device.type == "cpu" else _pytorch_skip(decorators)
    if skipped:
        pytest.skip(skipped)
    tol, source = _tolerance(decorators, dtype, tolerance(op_dtype))
    outcome = _outcome(op, device, dtype, tol, cpu_only=device.type == "cpu")
    status, message = oota_ops.verdict(outcome, op=op_name, dtype=op_dtype, device=device.type,
                                       must_pass=must)
    record_data(op=op_name, dtype=op_dtype, must_pass=must, tried=True, samples=outcome.samples,
                ran=outcome.ran, cpu_errors=outcome.cpu_errors, compared=not outcome.cpu_only,
                tolerance_from=source, **tol, note=message)
    if status == "skipped":
        pytest.skip(message)
    if status == "failed":
        pytest.fail(message, pytrace=False)


def test_must_pass_names_are_operators(record_data: Any) -> None:
    """Every must-pass entry names an operator of op_db (a typo would silently drop it)."""
    if DATABASE.problem:
        pytest.fail(DATABASE.problem)
    unknown = oota_ops.unknown_names(DATABASE.must.values(), DATABASE.ops)
    record_data(must_pass=len(DATABASE.must), operators=len(DATABASE.ops), unknown=unknown)
    assert not unknown, "; ".join(unknown)


if read_cell().get("device") == "cpu":
    def test_op_runs(op_name: str, op_dtype: str, device: Any, tolerance: Any,
                     record_data: Any) -> None:
        """The CPU vendor: the operator's samples run (nothing to compare with)."""
        _check(op_name, op_dtype, device, tolerance, record_data)
else:
    def test_op_matches_cpu(op_name: str, op_dtype: str, device: Any, tolerance: Any,
                            record_data: Any) -> None:
        """An accelerator: the operator's results on the device match the CPU's."""
        _check(op_name, op_dtype, device, tolerance, record_data)
