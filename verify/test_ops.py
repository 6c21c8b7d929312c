"""Ops layer: PyTorch's own operator test database (OpInfo), run on the vendor's device.

For every operator of ``torch.testing._internal.common_methods_invocations.op_db`` (shipped in
the wheel) and every dtype the vendor declares (cell.json ``verify.dtypes``) that the OpInfo
supports on the CPU and declares for the device, the OpInfo's sample inputs run on the device
and on the CPU, and the judge (``oota_judge.py``) decides each sample by the rule
``oota_rules.choose`` gives the pair: PyTorch's own ``test_compare_cpu`` rule where PyTorch
judges the operator in that dtype (its ``reference_inputs``, atol = rtol = 1e-3 or the OpInfo's
override), else the device's error against the CPU's float64 result relative to the CPU's own
error, else the vendor's tolerance. Comparisons PyTorch's own test skips or expects to fail
(random operators, uninitialised memory, known CPU/GPU differences) are skipped with its reason
(``oota_opinfo.py``). One result per operator and dtype: passed, failed with the first wrong
sample, or skipped with the reason.

An accelerator's run records what it judged in ``$OOTA_VERIFY_OUT/cases.pt``: every failing
case and the closest call among the samples of one passing pair in ``OOTA_RECORD_EVERY``
(default 4; 0 records failures only), so ``oota judge`` can judge them again on any machine.
A failing sample is run once more under a dispatch recorder, and the aten operators it called
are kept in the test's data (``calls``): the report says which failures are built on another
failing operator. Every device run is itself recorded: how the device's dispatch key serves
each operator it called (``oota_dispatch.py``), beside the vendor's fallback counters
(``oota_hooks.py``), says whether the pair ran on the device or on its CPU fallback, for every
vendor; a pair that fell back is never a device pass.

For the CPU vendor the device IS the CPU: comparing it with itself proves nothing, so there
the test is named ``test_op_runs`` and only runs each operator's samples once (that they run at
all catches a broken wheel: a must-pass operator that raises fails); accelerators get
``test_op_matches_cpu``. A must-pass operator fails on any sample that raises, on the device or
on the CPU; any other passes on the samples that ran, and says how many of all.

The must-pass operators (``ops-must-pass.yaml``, those the models layer needs) run first and
always; the others run until the time budget (``OOTA_OPS_BUDGET_S``, default 180 s, counted from
the first operator) is spent and are skipped after it; tests.json holds those as one skipped entry
(``[unrun-by-budget]``, with their count); with a budget of 0 s they are that one test from
the start (thousands of tests that only say so cost pytest seconds). Decisions that need no
torch live in ``oota_ops.py`` and ``oota_rules.py``. op_db is imported while this module's tests are
collected, and only when the ops layer is selected: its import takes seconds that the other
layers should not pay.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import oota_budget
import oota_cases
import oota_dispatch
import oota_hooks
import oota_judge
import oota_opinfo
import oota_ops
import oota_opsworkers
import oota_rules
import pytest
from oota_opsworkers import PairResult
from oota_samples import (
    cpu_copy,
    failed_making,
    first_line,
    float64_result,
    make,
    not_implemented,
    run,
    run_on_device,
    seed,
)
from oota_suite import read_cell
from oota_vocab import UNRUN_KEY, UNRUN_PARAM

LAYER = "ops"
UNIT = oota_budget.UNITS[LAYER]  # what its folded entry counts: operator×dtype pairs
# The rules that look at a float64 result: oota's float64 rule, and PyTorch's rule with oota's
# element check beside it.
WIDE_RULES = (oota_rules.FLOAT64, oota_rules.PYTORCH)
RECORD_VARIABLE = "OOTA_RECORD_EVERY"
DEFAULT_RECORD_EVERY = 4
# A passing case is kept only if it is this small (elements in all): a sample, not a dump.
PASSING_CASE_ELEMENTS = 20_000


def _selected() -> bool:
    wanted = {x.strip() for x in os.environ.get("OOTA_VERIFY_LAYERS", "").split(",")
              if x.strip()}
    return not wanted or LAYER in wanted


def _record_every(environ: Any = os.environ) -> int:
    text = environ.get(RECORD_VARIABLE, "").strip()
    return int(text) if text.isdigit() else DEFAULT_RECORD_EVERY


class _Database:
    """op_db by full name ('max.binary'), the must-pass list, and why they could not be had."""

    def __init__(self) -> None:
        self.ops: dict[str, Any] = {}
        self.must: dict[str, oota_ops.MustPass] = {}
        self.problem = ""
        if not _selected():
            return
        try:
            self.ops = oota_opinfo.by_name()
        except Exception as exc:  # noqa: BLE001 - reported as the layer's one failure
            self.problem = f"cannot import PyTorch's OpInfo database: {type(exc).__name__}: {exc}"
            return
        try:
            self.must = {e.op: e for e in oota_ops.load_must_pass()}
        except (OSError, oota_ops.MustPassError) as exc:
            self.problem = str(exc)


DATABASE = _Database()
BUDGET = oota_ops.Budget(oota_ops.budget_seconds())
SPEC: dict[str, Any] = read_cell().get("verify") or {}


def _cases() -> list[Any]:
    if not _selected():
        return [pytest.param("none", "none", id="not-selected",
                             marks=pytest.mark.skip(reason="the ops layer is not selected"))]
    if DATABASE.problem:
        return [pytest.param("op_db", "none", id="op_db")]
    params, folded, placed = [], set(FOLDED), False
    for name, dtype_name, runs in ALL_PAIRS:
        if (name, dtype_name) in folded:  # one test, where the first of them stood
            if not placed:
                params.append(pytest.param(UNRUN_PARAM, "", id=UNRUN_PARAM))
                placed = True
            continue
        marks = () if runs else pytest.mark.skip(
            reason=f"the OpInfo of {name} does not support {dtype_name} on the CPU")
        params.append(pytest.param(name, dtype_name, id=f"{name}-{dtype_name}", marks=marks))
    return params


def pairs() -> list[tuple[str, str, bool]]:
    """Every operator × dtype in the order the layer runs them (must-pass first), and whether
    the OpInfo supports the dtype on the CPU (else the pair is skipped at collection)."""
    import torch

    found = []
    for name in oota_ops.ordered(list(DATABASE.ops), list(DATABASE.must)):
        on_cpu = DATABASE.ops[name].supported_dtypes("cpu")
        for dtype_name in SPEC.get("dtypes") or ["float32"]:
            found.append((name, str(dtype_name), getattr(torch, str(dtype_name), None) in on_cpu))
    return found


ALL_PAIRS = pairs() if _selected() and not DATABASE.problem else []
# The pairs that run, in order: what the worker processes share (oota_opsworkers); and, with a
# budget of 0 s, the pairs only a budget would have run, folded into one skipped test before
# collection (as the recorder folds them after a run: oota_budget.fold_unrun).
PAIRS, FOLDED = oota_budget.split_unrun([(name, dtype) for name, dtype, runs in ALL_PAIRS if runs],
                                        DATABASE.must, BUDGET.seconds)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "op_name" in metafunc.fixturenames:
        metafunc.parametrize("op_name,op_dtype", _cases())


# -- what a run records ---------------------------------------------------------------------

class _Recording:
    """The cases this run keeps, written to ``$OOTA_VERIFY_OUT/cases.pt`` at the end."""

    def __init__(self) -> None:
        self.cases: list[dict[str, Any]] = []
        self.settings: dict[str, Any] = {}
        self.device = ""

    def start(self, device: Any, device_module: Any) -> None:
        import torch

        if self.settings:
            return
        cudnn = getattr(torch.backends, "cudnn", None)
        matmul = getattr(getattr(torch.backends, "cuda", None), "matmul", None)
        self.settings = {
            "cudnn_allow_tf32": bool(cudnn and cudnn.is_available() and cudnn.allow_tf32),
            "matmul_allow_tf32": bool(matmul and matmul.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision()}
        name = getattr(device_module, "get_device_name", None)
        try:
            self.device = str(name()) if callable(name) else device.type
        except Exception:  # noqa: BLE001 - a name is only for the reader
            self.device = device.type

    def write(self, folder: str) -> None:
        import torch

        if not folder or not self.cases:
            return
        cell = read_cell()
        data = oota_cases.recording(
            self.cases, device=self.device, device_type=str(cell.get("device") or ""),
            torch=torch.__version__, cell=str(cell.get("id") or ""), settings=self.settings,
            note="", by="oota-verify's ops layer")
        oota_cases.save(Path(folder) / oota_cases.CASES_FILE, data)


RECORDING = _Recording()


@pytest.fixture(scope="module", autouse=True)
def _write_recording() -> Any:
    yield
    RECORDING.write(os.environ.get("OOTA_VERIFY_OUT", ""))


# -- one operator × dtype ----------------------------------------------------------------------

def _calls(op: Any, sample: Any) -> list[str]:
    """The aten operators one failing sample dispatches (in first-call order), from a second
    run under a dispatch recorder: which operators a failure is built on."""
    return oota_dispatch.called(lambda: run(op, sample))


@dataclass
class _Judged:
    """One pair's judgement: the outcome, the case to record (None: none), the calls of a
    failing sample."""

    outcome: oota_ops.Outcome
    case: dict[str, Any] | None = None
    calls: list[str] = field(default_factory=list)
    coverage: oota_hooks.Coverage | None = None  # where the device runs computed


def _device_failure(exc: Exception, samples: int, ran: int, index: int) -> oota_ops.Outcome:
    if not_implemented(exc):
        return oota_ops.Outcome(samples=samples, ran=ran, not_implemented=first_line(exc))
    return oota_ops.Outcome(samples=samples, ran=ran,
                            error=f"sample {index}: {first_line(exc)} (the CPU ran it)")


def _coverage(device: Any) -> oota_hooks.Coverage:
    """Where the pair's device runs compute: the vendor's counters and the dispatcher's view
    (the CPU vendor: the CPU is its own device)."""
    return oota_hooks.Coverage(oota_hooks.vendor_hook(),
                               calls=oota_dispatch.recorder_for(device.type),
                               own_device=device.type == "cpu")


def _judge_samples(op: Any, name: str, dtype_name: str, device: Any, rule: oota_rules.Rule,
                   keep_passing: bool) -> _Judged:
    import torch

    dtype = getattr(torch, dtype_name)
    seed(name, dtype_name)
    try:
        made = make(op, device, dtype, reference=rule.kind == oota_rules.PYTORCH)
    except Exception as exc:  # noqa: BLE001 - the device's failure is the finding
        return _Judged(failed_making(exc))
    samples, ran, cpu_errors, refused = len(made), 0, 0, ""
    worst, kept, kept_ratio = 0.0, None, -1.0
    coverage = _coverage(device)
    verdicts: list[oota_cases.Verdict] = []
    for index, sample in enumerate(made):
        cpu_sample = cpu_copy(sample)
        try:
            want = run(op, cpu_sample)
        except Exception as exc:  # noqa: BLE001 - a sample the CPU refuses has nothing to compare
            cpu_errors += 1
            refused = refused or f"sample {index}: {first_line(exc)}"
            continue
        try:
            got = coverage.watch(lambda: run_on_device(op, sample, device))  # noqa: B023
        except Exception as exc:  # noqa: BLE001 - the device's failure is the finding
            return _Judged(_device_failure(exc, samples, ran, index), coverage=coverage)
        ran += 1
        wide = rule.kind in WIDE_RULES and not oota_judge.identical(
            oota_cases.plain(got, copy=False), oota_cases.plain(want, copy=False))
        reference = float64_result(op, cpu_sample) if wide else None
        case = oota_cases.make_case(
            op=name, dtype=dtype_name, sample=index, input_=cpu_sample.input,
            args=cpu_sample.args, kwargs=cpu_sample.kwargs, cpu=want, device=got,
            reference=reference, rule=rule, device_type=device.type, copy=False)
        verdict = oota_judge.judge(case, device.type, RECORDING.settings,
                                   rerun=_rerun(op, sample), subnormals=_subnormals())
        if verdict.status == "failed":
            return _Judged(oota_ops.Outcome(samples=samples, ran=ran, failure=verdict.message),
                           oota_cases.finish(case, verdict), _calls(op, sample), coverage)
        verdicts.append(verdict)
        ratio = verdict.ratio or 0.0
        worst = max(worst, ratio)
        if keep_passing and ratio > kept_ratio and \
                oota_cases.case_elements(case) <= PASSING_CASE_ELEMENTS:
            kept, kept_ratio = oota_cases.finish(case, verdict), ratio
    pooled = oota_judge.pooled_bias(verdicts, rule, device.type)
    if pooled:
        return _Judged(oota_ops.Outcome(samples=samples, ran=ran, cpu_errors=cpu_errors,
                                        refused=refused,
                                        failure=f"{name} ({dtype_name}): {pooled}"), kept,
                       coverage=coverage)
    return _Judged(oota_ops.Outcome(samples=samples, ran=ran, cpu_errors=cpu_errors,
                                    refused=refused, rule=rule.describe(), worst=worst), kept,
                   coverage=coverage)


def _rerun(op: Any, sample: Any) -> oota_judge.Rerun:
    """The operator run again on the CPU on inputs the judge chooses (the sample's own output
    processing applied, as in the comparison)."""
    process = sample.output_process_fn_grad

    def call(input_: Any, args: Any, kwargs: Any) -> Any:
        return process(op(input_, *args, **kwargs))
    return oota_judge.Rerun(call=call)


def _subnormals() -> str:
    """'keep' where the vendor's data says its device keeps subnormal results
    (``verify.subnormals``)."""
    return str(SPEC.get("subnormals") or "note")


def _run_only(op: Any, name: str, dtype_name: str, device: Any) -> _Judged:
    """The CPU vendor: a few of the operator's samples run (nothing to compare with); a
    sample that raises is its device's refusal, the first one kept."""
    import torch

    seed(name, dtype_name)
    try:
        made = oota_opinfo.samples(op, device, getattr(torch, dtype_name), reference=False,
                                   limit=oota_ops.CPU_ONLY_SAMPLES)
    except Exception as exc:  # noqa: BLE001 - the failure is the finding
        return _Judged(failed_making(exc))
    ran, refused, coverage = 0, [], _coverage(device)
    for index, sample in enumerate(made):
        try:
            coverage.watch(lambda: run(op, sample))  # noqa: B023
        except Exception as exc:  # noqa: BLE001 - the CPU's refusal is the finding
            refused.append(f"sample {index}: {first_line(exc)}")
            continue
        ran += 1
    return _Judged(oota_ops.Outcome(samples=len(made), ran=ran, cpu_errors=len(refused),
                                    refused=(refused or [""])[0], cpu_only=True),
                   coverage=coverage)


def _rule(op: Any, name: str, dtype_name: str, device: Any) -> oota_rules.Rule | PairResult:
    """The rule for the pair, or the result that skips it (PyTorch's or the OpInfo's reason)
    or fails it (the vendor's numbers make no sense)."""
    try:
        rule = oota_opinfo.rule_for(op, dtype_name, device.type, SPEC)
    except oota_rules.RuleError as exc:
        return PairResult(status="failed", message=f"cell.json verify: {exc}")
    if rule.kind == oota_rules.SKIP:
        return PairResult(status="skipped", message=rule.source)
    return rule


def judge_pair(op_name: str, op_dtype: str, device: Any, device_module: Any) -> PairResult:
    """One operator × dtype on the device: run (the CPU vendor) or judged against the CPU."""
    if DATABASE.problem:
        return PairResult(status="failed", message=DATABASE.problem)
    must = op_name in DATABASE.must
    late = BUDGET.skip_reason(must)
    if late:
        return PairResult(status="skipped", message=late)
    op = DATABASE.ops[op_name]
    if device.type == "cpu":
        judged = _run_only(op, op_name, op_dtype, device)
        rule = None
    else:
        RECORDING.start(device, device_module)
        chosen = _rule(op, op_name, op_dtype, device)
        if isinstance(chosen, PairResult):
            return chosen
        rule = chosen
        keep = oota_cases.keep_passing(op_name, op_dtype, _record_every())
        judged = _judge_samples(op, op_name, op_dtype, device, rule, keep)
    outcome = judged.outcome
    status, message = oota_ops.verdict(outcome, op=op_name, dtype=op_dtype, device=device.type,
                                       must_pass=must)
    aten = str(getattr(op, "aten_name", op.name))
    cover = judged.coverage or _coverage(device)
    cover.name_if_silent(lambda key: oota_dispatch.named(aten, key))
    if status == "passed" and cover.ran_on == oota_hooks.CPU:
        status, message = "skipped", cover.message()  # never a device pass
    data = dict(op=op_name, aten=aten, dtype=op_dtype,
                must_pass=must, tried=True, samples=outcome.samples, ran=outcome.ran,
                cpu_errors=outcome.cpu_errors, compared=not outcome.cpu_only,
                rule=rule.kind if rule else "", rule_source=rule.source if rule else "",
                worst=round(outcome.worst, 4), recorded=judged.case is not None,
                **({"calls": judged.calls} if judged.calls else {}), **cover.to_data(),
                note=message)
    return PairResult(status=status, message=message, data=data, case=judged.case)


def _report(result: PairResult, record_data: Any) -> None:
    if result.case is not None:
        RECORDING.cases.append(result.case)
    if result.data:
        record_data(**result.data)
    if result.status == "skipped":
        pytest.skip(result.message)
    if result.status == "failed":
        pytest.fail(result.message, pytrace=False)


POOL = oota_opsworkers.Pool()
if PAIRS and POOL.wanted() > 0:
    POOL.start(PAIRS, DATABASE.must)


def _check(op_name: str, op_dtype: str, device: Any, device_module: Any,
           record_data: Any) -> None:
    """The pair's result, from a worker process (each pair is judged by the same code with the
    same seed wherever it runs), else (OOTA_OPS_WORKERS=0) judged here."""
    if op_name == UNRUN_PARAM:
        record_data(**{UNRUN_KEY: len(FOLDED), UNIT.key: len({name for name, _ in FOLDED})})
        pytest.skip(oota_budget.unrun_message(FOLDED, BUDGET.seconds, BUDGET.variable, UNIT))
    if POOL.problem:
        pytest.fail(POOL.problem, pytrace=False)
    if POOL.wanted() > 0 and not DATABASE.problem:
        # The clock starts at the first operator, here too; a pair the budget leaves unrun
        # is skipped here unless a worker took it before.
        late = BUDGET.skip_reason(op_name in DATABASE.must)
        if device.type != "cpu":
            RECORDING.start(device, device_module)
        _report(POOL.result(op_name, op_dtype, BUDGET, late), record_data)
        return
    _report(judge_pair(op_name, op_dtype, device, device_module), record_data)


def test_must_pass_names_are_operators(record_data: Any) -> None:
    """Every must-pass entry names an operator of op_db (a typo would silently drop it)."""
    if DATABASE.problem:
        pytest.fail(DATABASE.problem)
    unknown = oota_ops.unknown_names(DATABASE.must.values(), DATABASE.ops)
    record_data(must_pass=len(DATABASE.must), operators=len(DATABASE.ops), unknown=unknown)
    assert not unknown, "; ".join(unknown)


if read_cell().get("device") == "cpu":
    def test_op_runs(op_name: str, op_dtype: str, device: Any, device_module: Any,
                     record_data: Any) -> None:
        """The CPU vendor: the operator's samples run (nothing to compare with)."""
        _check(op_name, op_dtype, device, device_module, record_data)
else:
    def test_op_matches_cpu(op_name: str, op_dtype: str, device: Any, device_module: Any,
                            record_data: Any) -> None:
        """An accelerator: each sample's result on the device is judged against the CPU's."""
        _check(op_name, op_dtype, device, device_module, record_data)
