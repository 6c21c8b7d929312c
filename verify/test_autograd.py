"""Autograd layer: PyTorch's operator database (op_db) differentiated on the vendor's device, and
two of PyTorch's common checks of every operator, as PyTorch's own tests run them.

Three checks, each one test per operator × dtype (``oota_autograd.py`` decides which pairs):

* ``test_grad_matches_cpu`` (``gradients``): for operators that support autograd, in every dtype
  of the vendor's that the OpInfo differentiates, each sample's backward from a fixed cotangent
  on the device against the CPU's, each input's gradient judged as the ops layer judges an
  output (``oota_grads.py``). On the CPU vendor the device is the CPU: ``test_grad_runs`` only
  runs the backward of a few samples;
* ``test_noncontiguous``: each sample with its tensors made non-contiguous gives the contiguous
  sample's result on the device (PyTorch's test_noncontiguous_samples, its dtypes);
* ``test_out``: out= behaves as PyTorch's test_out asks (``oota_outs.py``), for operators whose
  OpInfo supports it, in the one dtype PyTorch's test takes.

PyTorch's own skips and expected failures of the corresponding tests (test_compare_cpu and
test_fn_grad for gradients, test_noncontiguous_samples, test_out and test_out_warning) skip a
pair with PyTorch's reason, as the ops layer skips random and uninitialised operators; a dtype
the OpInfo does not declare for the device is skipped. A pair whose device runs went through the
backend's CPU fallback is never a device pass ('cpu-fallback', as in the ops layer).

The ops layer's must-pass operators (``ops-must-pass.yaml``: what the models layer trains) are
this layer's must-run operators: they run first and always, and one whose backward, or out=,
the device does not implement fails. The other pairs run until the time budget
(``OOTA_AUTOGRAD_BUDGET_S``, shared by the three checks; default 0 s: the must-run pairs only)
is spent; tests.json holds those left unrun as one skipped entry per check
(``[unrun-by-budget]``). With a budget, the pairs are judged by worker processes, as the ops
layer's are (``OOTA_AUTOGRAD_WORKERS``).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import oota_autograd
import oota_budget
import oota_common
import oota_dispatch
import oota_grads
import oota_hooks
import oota_opinfo
import oota_ops
import oota_opsworkers
import oota_outs
import oota_rules
import pytest
from oota_autograd import GRADIENTS, NONCONTIGUOUS, OUT, Outcome
from oota_opsworkers import PairResult
from oota_samples import first_line, make, not_implemented, seed
from oota_suite import read_cell
from oota_vocab import UNRUN_KEY, UNRUN_PARAM

LAYER = oota_autograd.LAYER
HERE = Path(__file__).resolve().parent
SPEC: dict[str, Any] = read_cell().get("verify") or {}
CPU_VENDOR = read_cell().get("device") == "cpu"


def _selected() -> bool:
    return oota_budget.selected(LAYER, os.environ)


class _Database:
    """op_db by full name, the must-run operators, and why they could not be had."""

    def __init__(self) -> None:
        self.ops: dict[str, Any] = {}
        self.must: dict[str, oota_ops.MustPass] = {}
        self.problem = ""
        if not _selected():
            return
        try:
            self.ops = oota_opinfo.by_name()
            self.must = {e.op: e for e in oota_ops.load_must_pass()}
        except (OSError, oota_ops.MustPassError) as exc:
            self.problem = str(exc)
        except Exception as exc:  # noqa: BLE001 - reported as the layer's one failure
            self.problem = f"cannot import PyTorch's OpInfo database: {type(exc).__name__}: {exc}"


DATABASE = _Database()
BUDGET = oota_autograd.SharedBudget(oota_budget.budget_seconds(
    oota_autograd.BUDGET_VARIABLE, oota_autograd.DEFAULT_BUDGET_S, os.environ))


def _dtype_names(dtypes: Any) -> list[str]:
    return [str(d).removeprefix("torch.") for d in dtypes]


def _all_pairs(check: str) -> list[tuple[str, str]]:
    """Every operator × dtype pair of ``check``, in the order they run (must-run first)."""
    vendor = [str(d) for d in SPEC.get("dtypes") or ["float32"]]
    found = []
    for name in oota_ops.ordered(list(DATABASE.ops), list(DATABASE.must)):
        op = DATABASE.ops[name]
        for dtype in oota_autograd.check_dtypes(
                check, vendor, supported=_dtype_names(op.supported_dtypes("cpu")),
                backward=_dtype_names(op.supported_backward_dtypes("cpu")),
                autograd=bool(op.supports_autograd), has_out=bool(op.supports_out)):
            found.append((name, dtype))
    return found


# Per check: the pairs collected as tests, and those folded before (a budget of 0 s).
SPLIT = {check: oota_budget.split_unrun(_all_pairs(check), DATABASE.must, BUDGET.seconds)
         for check in oota_autograd.CHECKS} if _selected() and not DATABASE.problem else {}
TESTS = {"test_grad_runs": GRADIENTS, "test_grad_matches_cpu": GRADIENTS,
         "test_noncontiguous": NONCONTIGUOUS, "test_out": OUT}


def _cases(check: str) -> list[Any]:
    if not _selected():
        return [pytest.param("none", "none", id="not-selected", marks=pytest.mark.skip(
            reason="the autograd layer is not selected"))]
    if DATABASE.problem:
        return [pytest.param("op_db", "none", id="op_db")]
    run, unrun = SPLIT[check]
    params = [pytest.param(name, dtype, id=f"{name}-{dtype}") for name, dtype in run]
    if unrun:
        params.append(pytest.param(UNRUN_PARAM, "", id=UNRUN_PARAM))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "op_name" in metafunc.fixturenames:
        metafunc.parametrize("op_name,op_dtype", _cases(TESTS[metafunc.function.__name__]))


# -- PyTorch's decisions -----------------------------------------------------------------------

def _pytorch_skip(check: str, op: Any, dtype: Any, device_type: str) -> str:
    """PyTorch's reason not to run this check of the pair ('' when it runs it)."""
    tests = oota_autograd.RUN_ONLY_TESTS if check == GRADIENTS and device_type == "cpu" else \
        oota_autograd.PYTORCH_TESTS[check]
    for test in tests:
        decorators = oota_opinfo.test_decorators(op, test, device_type, dtype)
        reason = oota_opinfo.pytorch_skip(decorators, test=test[1], what="test")
        if reason:
            return reason
    return ""


def _declared(check: str, op: Any, dtype: Any, device_type: str) -> bool:
    if check != GRADIENTS:
        return oota_opinfo.declares(op, device_type, dtype)
    try:
        return dtype in op.supported_backward_dtypes(device_type)
    except RuntimeError:
        return dtype in op.supported_backward_dtypes("cpu")


def _tolerance(check: str, op: Any, dtype: Any, device_type: str) -> tuple[float, float] | None:
    """(atol, rtol) of PyTorch's comparison in this check: the OpInfo's override for the test
    (toleranceOverride, precisionOverride), never below assert_close's default for the dtype;
    None: that default."""
    atol = rtol = 0.0
    for test in oota_autograd.PYTORCH_TESTS[check]:
        for decorator in oota_opinfo.test_decorators(op, test, device_type, dtype):
            entry = getattr(decorator, "d", {}).get(dtype) if isinstance(
                getattr(decorator, "d", None), dict) else None
            if hasattr(entry, "atol"):
                atol, rtol = max(atol, float(entry.atol)), max(rtol, float(entry.rtol))
            elif isinstance(entry, float):  # precisionOverride: an atol
                atol = max(atol, entry)
    if not atol and not rtol:
        return None
    default_rtol, default_atol = oota_rules.ASSERT_CLOSE.get(str(dtype).removeprefix("torch."),
                                                             (0.0, 0.0))
    return max(atol, default_atol), max(rtol, default_rtol)


# -- one pair of one check ---------------------------------------------------------------------

def _coverage(device: Any) -> oota_hooks.Coverage:
    return oota_hooks.Coverage(oota_hooks.vendor_hook(),
                               calls=oota_dispatch.recorder_for(device.type),
                               own_device=device.type == "cpu")


def _making_failed(exc: Exception) -> Outcome:
    text = f"making samples: {first_line(exc)}"
    return Outcome(not_implemented=text) if not_implemented(exc) else Outcome(error=text)


def _gradients(op: Any, name: str, dtype_name: str, device: Any,
               cover: oota_hooks.Coverage) -> Outcome | PairResult:
    import torch

    dtype = getattr(torch, dtype_name)
    if device.type == "cpu":
        limit = oota_autograd.CPU_ONLY_SAMPLES
        return dataclasses.replace(oota_grads.run_only(op, name, dtype_name, cover.watch, make(
            op, device, dtype, reference=False, requires_grad=True, limit=limit)), limit=limit)
    try:
        rule = oota_opinfo.rule_for(op, dtype_name, device.type, SPEC)
    except oota_rules.RuleError as exc:
        return PairResult(status="failed", message=f"cell.json verify: {exc}")
    if rule.kind == oota_rules.SKIP:
        return PairResult(status="skipped", message=rule.source)
    limit = oota_autograd.SAMPLES_LIMIT
    made = make(op, device, dtype, reference=False, requires_grad=True, limit=limit)
    pair = oota_grads.Pair(op=op, name=name, dtype=dtype_name, device=device, rule=rule,
                           watch=cover.watch)
    return dataclasses.replace(oota_grads.judge_pair(pair, made).outcome, limit=limit)


def _common(check: str, op: Any, name: str, dtype_name: str, device: Any,
            cover: oota_hooks.Coverage) -> Outcome:
    import torch

    dtype = getattr(torch, dtype_name)
    pair = oota_common.Pair(
        op=op, name=name, dtype=dtype_name, device=device, watch=cover.watch,
        tolerance=_tolerance(check, op, dtype, device.type),
        warning_case=not oota_opinfo.pytorch_skip(oota_opinfo.test_decorators(
            op, oota_autograd.OUT_WARNING_TEST, device.type, dtype)))
    limit = oota_autograd.SAMPLES_LIMIT
    made = make(op, device, dtype, reference=False, limit=limit)
    found = oota_common.noncontiguous(pair, made) if check == NONCONTIGUOUS else \
        oota_outs.check_out(pair, made)
    return dataclasses.replace(found, limit=limit)


def _skipped(check: str, op: Any, name: str, dtype_name: str, device: Any) -> str:
    """Why PyTorch's tests, or the OpInfo's dtypes for the device, leave the pair out."""
    import torch

    dtype = getattr(torch, dtype_name)
    reason = _pytorch_skip(check, op, dtype, device.type)
    if reason:
        return reason
    if not _declared(check, op, dtype, device.type):
        what = "differentiate" if check == GRADIENTS else "declare"
        return f"the OpInfo of {name} does not {what} {dtype_name} for {device.type}"
    return ""


def judge_pair(check: str, name: str, dtype_name: str, device: Any) -> PairResult:
    """One operator × dtype of one check on the device."""
    if DATABASE.problem:
        return PairResult(status="failed", message=DATABASE.problem)
    must = name in DATABASE.must
    late = BUDGET.skip_reason(check, must)
    if late:
        return PairResult(status="skipped", message=late)
    op = DATABASE.ops[name]
    reason = _skipped(check, op, name, dtype_name, device)
    if reason:
        return PairResult(status="skipped", message=reason)
    cover = _coverage(device)
    seed(name, dtype_name)
    try:
        found = _gradients(op, name, dtype_name, device, cover) if check == GRADIENTS else \
            _common(check, op, name, dtype_name, device, cover)
    except Exception as exc:  # noqa: BLE001 - making the samples failed: the device's finding
        found = _making_failed(exc)
    if isinstance(found, PairResult):
        return found
    status, message = oota_autograd.verdict(check, found, op=name, dtype=dtype_name,
                                            device=device.type, must_run=must)
    aten = str(getattr(op, "aten_name", op.name))
    cover.name_if_silent(lambda key: oota_dispatch.named(aten, key))
    if status == "passed" and cover.ran_on == oota_hooks.CPU:
        status, message = "skipped", cover.message()  # never a device pass
    data = dict(check=check, op=name, aten=aten, dtype=dtype_name, must_run=must, tried=True,
                samples=found.samples, ran=found.ran, cpu_errors=found.cpu_errors,
                compared=not found.cpu_only, **cover.to_data(), note=message)
    return PairResult(status=status, message=message, data=data)


# Every pair of the three checks, in the order the tests run (each check's must-run pairs
# first), as the worker processes share them: ('gradients:tanh', 'float32').
WORK = [(f"{check}:{name}", dtype) for check, (run, _) in SPLIT.items() for name, dtype in run]
# Where the pairs are judged (oota_autograd.workers): worker processes on the ops layer's pool
# (oota_opsworkers: a kernel that crashes one fails the pair it held, and the run goes on), or,
# with none, here, in one long-lived thread: its stack is a few frames deep, where pytest's is
# about sixty, and torch captures the stack on every torch.manual_seed (for lazy device
# initialisation): under pytest's stack that was most of the layer's time.
VARIABLES, DEFAULT_WORKERS = oota_autograd.workers(BUDGET.seconds)
POOL = oota_opsworkers.Pool(command=(sys.executable, str(HERE / "oota_autogradworker.py")),
                            variables=VARIABLES, default=DEFAULT_WORKERS)
if WORK and POOL.wanted() > 0:
    POOL.start(WORK, {key for key, _ in WORK if key.partition(":")[2] in DATABASE.must})
RUNNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="oota-autograd")


def _result(check: str, op_name: str, op_dtype: str, device: Any) -> PairResult:
    if POOL.problem:
        return PairResult(status="failed", message=POOL.problem)
    if POOL.wanted() > 0 and not DATABASE.problem:
        BUDGET.skip_reason(check, True)  # the clock starts at the first pair, here too
        return POOL.result(f"{check}:{op_name}", op_dtype, BUDGET)
    return RUNNER.submit(judge_pair, check, op_name, op_dtype, device).result()


def _check(check: str, op_name: str, op_dtype: str, device: Any, record_data: Any) -> None:
    if op_name == UNRUN_PARAM:  # the pairs a budget of 0 s folded at collection
        unrun = SPLIT[check][1]
        record_data(**{UNRUN_KEY: len(unrun), oota_autograd.UNIT.key: len(
            {name for name, _ in unrun})})
        pytest.skip(oota_budget.unrun_message(unrun, BUDGET.seconds, BUDGET.variable,
                                                oota_autograd.UNIT))
    result = _result(check, op_name, op_dtype, device)
    if result.data:
        record_data(**result.data)
    if result.status == "skipped":
        pytest.skip(result.message)
    if result.status == "failed":
        pytest.fail(result.message, pytrace=False)


if CPU_VENDOR:
    def test_grad_runs(op_name: str, op_dtype: str, device: Any, record_data: Any) -> None:
        """The CPU vendor: the backward of the operator's samples runs (nothing to compare)."""
        _check(GRADIENTS, op_name, op_dtype, device, record_data)
else:
    def test_grad_matches_cpu(op_name: str, op_dtype: str, device: Any,
                              record_data: Any) -> None:
        """An accelerator: each sample's gradients on the device judged against the CPU's."""
        _check(GRADIENTS, op_name, op_dtype, device, record_data)


def test_noncontiguous(op_name: str, op_dtype: str, device: Any, record_data: Any) -> None:
    """Non-contiguous inputs give the contiguous inputs' result on the device."""
    _check(NONCONTIGUOUS, op_name, op_dtype, device, record_data)


def test_out(op_name: str, op_dtype: str, device: Any, record_data: Any) -> None:
    """out= behaves as PyTorch's test_out asks, on the device."""
    _check(OUT, op_name, op_dtype, device, record_data)
