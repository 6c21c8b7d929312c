"""Modules layer: PyTorch's own module test database (ModuleInfo ``module_db``), run on the
vendor's device, forward and backward, judged against the CPU (``oota_modules.py``).

One result per module × dtype, for every dtype the vendor declares (cell.json
``verify.dtypes``) that the ModuleInfo declares for the device and the CPU: passed, failed with
the first wrong sample and what was wrong (an output, the gradient of an input or a parameter,
a buffer, a memory format), or skipped with the reason (PyTorch's own test skips it, the device
lacks an operator). A module that declares none of the vendor's dtypes is one skipped test
that says so.

The must-run modules (``modules-must-run.yaml``: what the models layer is made of, and the
module whose backward the reference backend's wrong-gradient fault breaks) run first and
always; the others run until the time budget (``OOTA_MODULES_BUDGET_S``, default 60 s, counted
from the first module) is spent, and are then one folded entry in tests.json
(``[unrun-by-budget]``, with their count).

For the CPU vendor the device IS the CPU: comparing it with itself proves nothing, so there
the test is ``test_module_runs`` and only runs the first 8 samples of each module forward and
backward (a must-run module whose sample raises fails: a broken wheel fails); accelerators get
``test_module_matches_cpu``. module_db is imported while this module's tests are collected,
only when the layer is selected.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import oota_budget
import oota_dispatch
import oota_hooks
import oota_modules
import oota_rules
import pytest
from oota_modulerun import Sample, run
from oota_modules import MEMORY_FORMAT, PARITY, Outcome, first_line, not_implemented
from oota_suite import read_cell

LAYER = "modules"
MUST_RUN_FILE = Path(__file__).resolve().with_name("modules-must-run.yaml")
BUDGET_VARIABLE = "OOTA_MODULES_BUDGET_S"
DEFAULT_BUDGET_S = 60.0
KEY = "module"
CELL = read_cell()
SPEC: dict[str, Any] = CELL.get("verify") or {}
DEVICE_TYPE = str(CELL.get("device") or "cpu")


class _Database:
    """module_db by name, the must-run list, the budget, and why they could not be had."""

    def __init__(self) -> None:
        self.modules: dict[str, Any] = {}
        self.must: dict[str, oota_budget.MustRun] = {}
        self.problem = ""
        self.budget = oota_budget.Budget(0.0, BUDGET_VARIABLE)
        if not oota_budget.selected(LAYER, os.environ):
            return
        try:
            self.budget.seconds = oota_budget.budget_seconds(BUDGET_VARIABLE, DEFAULT_BUDGET_S,
                                                             os.environ)
            self.modules = oota_modules.by_name()
            self.must = {e.name: e for e in oota_budget.load_entries(MUST_RUN_FILE, KEY)}
        except (OSError, ValueError) as exc:
            self.problem = str(exc)
        except Exception as exc:  # noqa: BLE001 - reported as the layer's one failure
            self.problem = f"cannot import PyTorch's module database: {type(exc).__name__}: {exc}"


DATABASE = _Database()


def _cases() -> list[Any]:
    if not oota_budget.selected(LAYER, os.environ):
        return [pytest.param("none", "none", id="not-selected",
                             marks=pytest.mark.skip(reason="the modules layer is not selected"))]
    if DATABASE.problem:
        return [pytest.param("module_db", "none", id="module_db")]
    wanted = [str(d) for d in SPEC.get("dtypes") or ["float32"]]
    params = []
    for name in oota_budget.ordered(list(DATABASE.modules), list(DATABASE.must)):
        info = DATABASE.modules[name]
        dtypes = [d for d in wanted if oota_modules.declares(info, DEVICE_TYPE, d)]
        params += [pytest.param(name, d, id=f"{name}-{d}") for d in dtypes]
        if not dtypes:
            params.append(pytest.param(name, "none", id=f"{name}-none", marks=pytest.mark.skip(
                reason=f"the ModuleInfo of {name} declares none of the vendor's dtypes "
                       f"({', '.join(wanted)}) for {DEVICE_TYPE} and the CPU")))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "module_name" in metafunc.fixturenames:
        metafunc.parametrize("module_name,module_dtype", _cases())


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Any:
    """torch's intra-op threads off while the layer runs: every sample is a few hundred
    elements, where threads only add synchronisation (the CPU cell's layer: 13.7 s of tests
    with torch's default 2 threads, 5.2 s with one, on a busy 2-core machine, 2026-11-28)."""
    yield from oota_modules.one_thread()


def test_must_run_names_are_modules(record_data: Any) -> None:
    """Every must-run entry names a module of module_db (a typo would silently drop it)."""
    if DATABASE.problem:
        pytest.fail(DATABASE.problem, pytrace=False)
    unknown = oota_budget.unknown_names([(e.name, e.line) for e in DATABASE.must.values()],
                                        DATABASE.modules, MUST_RUN_FILE.name,
                                        "a module of PyTorch's module database")
    record_data(must_run=len(DATABASE.must), modules=len(DATABASE.modules), unknown=unknown)
    assert not unknown, "; ".join(unknown)


# -- one module × dtype -------------------------------------------------------------------------

def _coverage(device: Any) -> oota_hooks.Coverage | None:
    """Where the device runs compute (the vendor's fallback counters and the dispatcher's
    view), as the ops layer records it; None on the CPU vendor, whose device is the CPU (the
    dispatcher's recorder would cost more than the layer's whole run there)."""
    if device.type == "cpu":
        return None
    return oota_hooks.Coverage(oota_hooks.vendor_hook(),
                               calls=oota_dispatch.recorder_for(device.type))


class _Pair:
    """One module × dtype being judged: its rule, what its samples did, where they ran."""

    def __init__(self, name: str, dtype_name: str, device: Any, rule: oota_rules.Rule) -> None:
        self.name, self.dtype_name, self.device, self.rule = name, dtype_name, device, rule
        self.outcome = Outcome(cpu_only=device.type == "cpu")
        self.coverage = _coverage(device)

    def device_run(self, sample: Sample, want: Any, memory_format: str = "") -> Any:
        """The sample on the device, from the gradients the CPU's run started from."""
        watch = self.coverage.watch if self.coverage is not None else None
        return run(sample, self.device, memory_format=memory_format, watch=watch,
                   grads=want.grads)

    def refused_by_device(self, exc: Exception, sample: Sample, memory_format: str) -> None:
        where = f" in {memory_format}" if memory_format else ""
        text = f"sample {sample.index} ({sample.description}){where}: {first_line(exc)}"
        if not_implemented(exc):
            self.outcome.not_implemented = text
        else:
            self.outcome.error = f"{text} (the CPU ran it)"

    @property
    def ended(self) -> bool:
        return bool(self.outcome.failure or self.outcome.error or self.outcome.not_implemented)

    def judge(self, sample: Sample, skip_formats: str) -> None:
        """One sample against the CPU's run of it, then in its memory formats."""
        try:
            want = oota_modules.run_cpu(sample)
        except Exception as exc:  # noqa: BLE001 - nothing to compare with
            self.cpu_refused(exc, sample)
            return
        made: list[Any] = []

        def wide() -> Any:  # the float64 run, made once and only where a run is not the CPU's
            if not made:
                made.append(oota_modules.run_wide(sample, self.rule, want))
            return made[0]

        try:
            got = self.device_run(sample, want)
        except Exception as exc:  # noqa: BLE001 - the device's failure is the finding
            self.refused_by_device(exc, sample, "")
            return
        self.outcome.ran += 1
        if self.judged(got, want, wide, sample, ""):
            for memory_format in ([] if skip_formats else sample.formats()):
                if not self.in_format(sample, memory_format, want, wide):
                    return

    def judged(self, got: Any, want: Any, wide: Any, sample: Sample, memory_format: str) -> bool:
        heading = oota_modules.head(self.name, self.dtype_name, sample, memory_format)
        verdict = oota_modules.judge_runs(got, want, wide, rule=self.rule,
                                          dtype_name=self.dtype_name,
                                          device_name=self.device.type, heading=heading)
        if verdict.status == "failed":
            self.outcome.failure = verdict.message
            return False
        self.outcome.worst = max(self.outcome.worst, verdict.ratio or 0.0)
        return True

    def in_format(self, sample: Sample, memory_format: str, want: Any, wide: Any) -> bool:
        """The sample in ``memory_format`` on the device, judged against the CPU's run in that
        format, its outputs laid out as the CPU lays them out."""
        try:
            layout = oota_modules.run_cpu(sample, memory_format, want.grads)
        except Exception:  # noqa: BLE001 - the CPU cannot run it so: nothing to compare with
            return True
        try:
            got = self.device_run(sample, want, memory_format)
        except Exception as exc:  # noqa: BLE001 - the device's failure is the finding
            self.refused_by_device(exc, sample, memory_format)
            return False
        # Against the CPU's run in the same format: its kernels round otherwise than its
        # contiguous ones (BatchNorm's running mean in channels_last, 13x apart).
        if not self.judged(got, layout, wide, sample, memory_format):
            return False
        heading = oota_modules.head(self.name, self.dtype_name, sample, memory_format)
        self.outcome.failure = oota_modules.layout_failure(got, layout, memory_format,
                                                           self.device.type, heading)
        self.outcome.formats += not self.outcome.failure
        return not self.outcome.failure

    def cpu_refused(self, exc: BaseException, sample: Sample | None) -> None:
        where = f"sample {sample.index} ({sample.description})" if sample else "a sample"
        self.outcome.cpu_errors += 1
        self.outcome.refused = self.outcome.refused or f"{where}: {first_line(exc)}"

    def run_only(self, sample: Sample, skip_formats: str) -> None:
        """The CPU vendor: the sample runs, in its memory formats too; nothing is compared."""
        formats = [] if skip_formats else sample.formats()
        try:
            for memory_format in ["", *formats]:
                oota_modules.run_cpu(sample, memory_format)
        except Exception as exc:  # noqa: BLE001 - the CPU's refusal is the finding
            self.cpu_refused(exc, sample)
            return
        self.outcome.ran += 1
        self.outcome.formats += len(formats)


def _samples(pair: _Pair, info: Any, training: bool, skip_formats: str) -> None:
    limit = oota_modules.CPU_ONLY_SAMPLES if pair.outcome.cpu_only else None
    for made in oota_modules.samples(info, pair.dtype_name, training, limit):
        pair.outcome.samples += 1
        if isinstance(made, Exception):
            pair.cpu_refused(made, None)
        elif pair.outcome.cpu_only:
            pair.run_only(made, skip_formats)
        else:
            pair.judge(made, skip_formats)
        if pair.ended:
            return


def judge_pair(name: str, dtype_name: str, device: Any) -> tuple[str, str, dict[str, Any]]:
    """(status, message, data) of one module × dtype on the device."""
    import torch

    info = DATABASE.modules[name]
    dtype = getattr(torch, dtype_name)
    skips = {t: oota_modules.pytorch_skip(info, PARITY, device.type, dtype, t)
             for t in oota_modules.trainings(info)}
    modes = [t for t, why in skips.items() if not why]
    if not modes:
        return "skipped", next(iter(skips.values())), {}
    try:
        pair = _Pair(name, dtype_name, device, oota_modules.rule_for(dtype_name, SPEC))
    except oota_rules.RuleError as exc:
        return "failed", f"cell.json verify: {exc}", {}
    for training in modes:
        _samples(pair, info, training,
                 oota_modules.pytorch_skip(info, MEMORY_FORMAT, device.type, dtype, training))
        if pair.ended:
            break
    status, message = oota_modules.verdict(
        pair.outcome, name=name, dtype=dtype_name, device=device.type,
        must_run=name in DATABASE.must, rule=pair.rule.describe())
    if status == "passed":
        message += oota_modules.fallback_note(pair.coverage)
    return status, message, _data(pair, modes)


def _data(pair: _Pair, modes: list[bool]) -> dict[str, Any]:
    outcome = pair.outcome
    return dict(module=pair.name, dtype=pair.dtype_name, must_run=pair.name in DATABASE.must,
                samples=outcome.samples, ran=outcome.ran, formats=outcome.formats,
                cpu_errors=outcome.cpu_errors, compared=not outcome.cpu_only,
                modes=["train" if t else "eval" for t in modes], rule=pair.rule.kind,
                worst=round(outcome.worst, 4),
                **(pair.coverage.to_data() if pair.coverage is not None else {}))


def _check(module_name: str, module_dtype: str, device: Any, record_data: Any) -> None:
    if DATABASE.problem:
        pytest.fail(DATABASE.problem, pytrace=False)
    late = DATABASE.budget.skip_reason(module_name in DATABASE.must)
    if late:
        pytest.skip(late)
    status, message, data = judge_pair(module_name, module_dtype, device)
    if data:
        record_data(**data, note=message)
    if status == "skipped":
        pytest.skip(message)
    if status == "failed":
        pytest.fail(message, pytrace=False)


if DEVICE_TYPE == "cpu":
    def test_module_runs(module_name: str, module_dtype: str, device: Any,
                         record_data: Any) -> None:
        """The CPU vendor: the module's samples run forward and backward (nothing to compare
        with)."""
        _check(module_name, module_dtype, device, record_data)
else:
    def test_module_matches_cpu(module_name: str, module_dtype: str, device: Any,
                                record_data: Any) -> None:
        """An accelerator: each sample's outputs, gradients and buffers on the device are
        judged against the CPU's."""
        _check(module_name, module_dtype, device, record_data)
