"""Optimizers layer: PyTorch's own optimizer test database (OptimizerInfo ``optim_db``), a few
steps on the vendor's device judged against the same steps on the CPU
(``oota_optimizers.py``).

For every optimizer, every floating dtype the vendor declares (cell.json ``verify.dtypes``) and
each implementation (``test_optimizer_matches_cpu[Adam-foreach-float32]``): every
configuration the OptimizerInfo gives (its OptimizerInputs) takes 7 steps on the device with
that implementation, and its parameters and optimizer state after them are judged against the
CPU's for-loop steps, by oota's float64 rule for composed results (float64: the vendor's
tolerance). The for-loop implementation always runs; ``foreach`` and ``fused`` run where the
OptimizerInfo declares them (``supported_impls``, fused on its ``supports_fused_on``) and the
vendor claims them (``verify.capabilities.foreach`` / ``.fused``), and are skipped saying which
is missing otherwise ("not claimed: ..."). A configuration the implementation refuses on the
CPU too (foreach with a Tensor lr) is not one the device must take. A parameter the device's
steps left at its initial value while the CPU's moved it fails naming it: the step skipped it.

``test_optimizer_state_dict_moves[Adam-float32]`` (float32, where the vendor declares it, as
PyTorch's own state dict tests): the for-loop optimizer's state dict saved
after 7 steps on the device loads on the CPU (as a user loads it: onto the CPU, then
``load_state_dict``) and 2 more steps there give what the CPU's own state dict, loaded on the
CPU, gives; and the CPU's, loaded on the device, the same (skipped on the CPU vendor: there is
no other device).

The must-run optimizers (``optimizers-must-run.yaml``) run first and always; the others until
``OOTA_OPTIMIZERS_BUDGET_S`` (default 60 s, from the first optimizer) is spent, then are one
folded entry per test in tests.json. On the CPU vendor the device is the CPU: its for-loop
steps are the reference itself (run once, nothing compared), its foreach and fused steps are
compared with them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oota_budget
import oota_claims
import oota_dispatch
import oota_hooks
import oota_modules
import oota_optimizers as optim
import oota_rules
import pytest
from oota_cases import Verdict
from oota_judge import identical, judge_named
from oota_modules import first_line, not_implemented
from oota_suite import read_cell

LAYER = "optimizers"
MUST_RUN_FILE = Path(__file__).resolve().with_name("optimizers-must-run.yaml")
BUDGET_VARIABLE = "OOTA_OPTIMIZERS_BUDGET_S"
DEFAULT_BUDGET_S = 60.0
KEY = "optimizer"
FLOATING = ("float32", "float64", "float16", "bfloat16")
CELL = read_cell()
SPEC: dict[str, Any] = CELL.get("verify") or {}
DEVICE_TYPE = str(CELL.get("device") or "cpu")


class _Database:
    """optim_db by name, the must-run list, the budget, and why they could not be had."""

    def __init__(self) -> None:
        self.optimizers: dict[str, Any] = {}
        self.must: dict[str, oota_budget.MustRun] = {}
        self.problem = ""
        self.budget = oota_budget.Budget(0.0, BUDGET_VARIABLE)
        if not oota_budget.selected(LAYER, os.environ):
            return
        try:
            self.budget.seconds = oota_budget.budget_seconds(BUDGET_VARIABLE, DEFAULT_BUDGET_S,
                                                             os.environ)
            self.optimizers = optim.by_name()
            self.must = {e.name: e for e in oota_budget.load_entries(MUST_RUN_FILE, KEY)}
        except (OSError, ValueError) as exc:
            self.problem = str(exc)
        except Exception as exc:  # noqa: BLE001 - reported as the layer's one failure
            self.problem = (f"cannot import PyTorch's optimizer database: "
                            f"{type(exc).__name__}: {exc}")


DATABASE = _Database()


def _dtypes() -> list[str]:
    return [str(d) for d in SPEC.get("dtypes") or ["float32"] if str(d) in FLOATING]


def _state_dict_dtype() -> tuple[str, ...]:
    """The dtype the state dict moves in: float32 where the vendor declares it (PyTorch's
    optimizer tests default to it), else its first floating dtype ('none': the placeholders)."""
    dtypes = _dtypes()
    return ("float32" if "float32" in dtypes else dtypes[0] if dtypes else "", "none")


def _cases(implementations: tuple[str, ...]) -> list[Any]:
    if not oota_budget.selected(LAYER, os.environ):
        return [pytest.param("none", "none", "none", id="not-selected", marks=pytest.mark.skip(
            reason="the optimizers layer is not selected"))]
    if DATABASE.problem:
        return [pytest.param("optim_db", "none", "none", id="optim_db")]
    names = oota_budget.ordered(list(DATABASE.optimizers), list(DATABASE.must))
    return [pytest.param(name, impl, dtype, id=f"{name}-{impl}-{dtype}")
            for name in names for dtype in _dtypes() for impl in implementations]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "optim_name" not in metafunc.fixturenames:
        return
    impls = optim.IMPLEMENTATIONS if "optim_impl" in metafunc.fixturenames else (optim.FORLOOP,)
    cases = _cases(impls)
    if "optim_impl" in metafunc.fixturenames:
        metafunc.parametrize("optim_name,optim_impl,optim_dtype", cases)
    else:  # the state dict: in one dtype, as PyTorch's test_state_dict_with_cuda_params
        metafunc.parametrize("optim_name,optim_dtype", [
            pytest.param(c.values[0], c.values[2], id=str(c.id).replace(f"-{optim.FORLOOP}", ""),
                         marks=c.marks) for c in cases if c.values[2] in _state_dict_dtype()])


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Any:
    """torch's intra-op threads off while the layer runs: its tensors have a few elements."""
    yield from oota_modules.one_thread()


def test_must_run_names_are_optimizers(record_data: Any) -> None:
    """Every must-run entry names an optimizer of optim_db (a typo would silently drop it)."""
    if DATABASE.problem:
        pytest.fail(DATABASE.problem, pytrace=False)
    unknown = oota_budget.unknown_names([(e.name, e.line) for e in DATABASE.must.values()],
                                        DATABASE.optimizers, MUST_RUN_FILE.name,
                                        "an optimizer of PyTorch's optimizer database")
    record_data(must_run=len(DATABASE.must), optimizers=len(DATABASE.optimizers),
                unknown=unknown)
    assert not unknown, "; ".join(unknown)


# -- one optimizer × implementation × dtype -------------------------------------------------------

@dataclass
class _Tally:
    """What the configurations of one test did."""

    configs: int = 0
    ran: int = 0
    cpu_errors: int = 0  # configurations the CPU's for-loop steps refused
    refused: str = ""
    not_applicable: int = 0  # configurations the implementation refuses on the CPU too
    worst: float = 0.0


class _Failed(Exception):
    """The test's failure (or skip), with its message."""

    def __init__(self, message: str, status: str = "failed") -> None:
        super().__init__(message)
        self.status = status


class _Judging:
    """One optimizer × implementation × dtype being judged on the device."""

    def __init__(self, name: str, impl: str, dtype_name: str, device: Any) -> None:
        import torch

        self.info = DATABASE.optimizers[name]
        self.name, self.impl, self.dtype_name, self.device = name, impl, dtype_name, device
        self.dtype = getattr(torch, dtype_name)
        self.rule = oota_modules.rule_for(dtype_name, SPEC)
        self.tally = _Tally()
        self.coverage = None if device.type == "cpu" else oota_hooks.Coverage(
            oota_hooks.vendor_hook(), calls=oota_dispatch.recorder_for(device.type))
        # The CPU vendor's for-loop steps are the reference itself.
        self.trivial = device.type == "cpu" and impl == optim.FORLOOP

    def head(self, desc: str) -> str:
        return f"{self.name} ({self.impl}, {self.dtype_name}), configuration '{desc}'"

    def trained(self, kwargs: dict[str, Any], device: Any, impl: str, steps: int = optim.STEPS,
                wide: bool = False) -> optim.Trained:
        """A fresh network and optimizer with ``impl`` on ``device``, after ``steps`` steps
        (watched where the device is the vendor's)."""
        run = optim.start(self.info, {**kwargs, **optim.flags(self.info, impl)}, self.dtype,
                          device, wide=wide)
        if self.coverage is None or device.type == "cpu":
            return optim.train(run, steps)
        return self.coverage.watch(lambda: optim.train(run, steps))

    def reference(self, desc: str, kwargs: dict[str, Any]) -> optim.Trained | None:
        """The CPU's for-loop steps, or None where the CPU refuses the configuration."""
        import torch

        try:
            return self.trained(optim.on_cpu(kwargs), torch.device("cpu"), optim.FORLOOP)
        except Exception as exc:  # noqa: BLE001 - nothing to compare with
            self.tally.cpu_errors += 1
            self.tally.refused = self.tally.refused or f"'{desc}': {first_line(exc)}"
            return None

    def refused_on_cpu_too(self, kwargs: dict[str, Any]) -> bool:
        """Whether the implementation refuses this configuration on the CPU as well (the
        device's run is the CPU's on the CPU vendor; elsewhere asked where the CPU has it)."""
        import torch

        if self.device.type == "cpu":
            return True
        if self.impl == optim.FORLOOP or optim.unsupported(self.info, self.impl, "cpu"):
            return False
        try:
            self.trained(optim.on_cpu(kwargs), torch.device("cpu"), self.impl)
        except Exception:  # noqa: BLE001 - the implementation refuses it by design
            return True
        return False

    def config(self, desc: str, kwargs: dict[str, Any]) -> None:
        """One configuration's steps on the device against the CPU's; raises _Failed with
        the message that fails (or skips) the test."""
        self.tally.configs += 1
        want = self.reference(desc, kwargs)
        if want is None:
            return
        if self.trivial:
            self.tally.ran += 1
            return
        try:
            got = self.trained(kwargs if self.device.type != "cpu" else optim.on_cpu(kwargs),
                               self.device, self.impl)
        except Exception as exc:  # noqa: BLE001 - the device's failure is the finding
            if self.refused_on_cpu_too(kwargs):
                self.tally.not_applicable += 1
                return
            raise _Failed(*_device_error(self.head(desc), exc, self.device.type)) from None
        self.tally.ran += 1
        self.judge(self.head(desc), got, want, lambda: self.wide(kwargs, optim.STEPS),
                   optim.unchanged(got, want))

    def wide(self, kwargs: dict[str, Any], steps: int) -> optim.Trained | None:
        """The CPU's for-loop steps in float64 from the same weights (the judge's
        reference), or None where the rule needs none or they cannot run."""
        import torch

        if self.rule.kind != oota_rules.FLOAT64:
            return None
        try:
            return self.trained(optim.on_cpu(kwargs), torch.device("cpu"), optim.FORLOOP,
                                steps, wide=True)
        except Exception:  # noqa: BLE001 - no reference: the judge falls back to the tolerance
            return None

    def judge(self, heading: str, got: optim.Trained, want: optim.Trained,
              wide: Callable[[], optim.Trained | None], stayed: str = "") -> None:
        """Raise _Failed where the device's results are wrong (``stayed``: the parameters its
        steps skipped, ``oota_optimizers.unchanged``); the float64 reference is made only
        where they are not the CPU's, element for element."""
        if stayed:
            raise _Failed(f"{heading}: {stayed} kept their initial values on "
                          f"{self.device.type} after {got.done} steps, while the CPU's steps "
                          "moved them: the step skipped them")
        made: list[optim.Trained | None] = []

        def reference() -> optim.Trained | None:
            if not made:
                made.append(wide())
            return made[0]

        for stage in (optim.after_first, optim.results):
            verdict = _judged(heading, stage, got, want, reference, self.rule, self.dtype_name,
                              self.device.type)
            if verdict.status == "failed":
                raise _Failed(verdict.message)
            self.tally.worst = max(self.tally.worst, verdict.ratio or 0.0)


def _device_error(heading: str, exc: Exception, device: str) -> tuple[str, str]:
    if not_implemented(exc):
        return f"{heading} is not implemented on {device}: {first_line(exc)}", "not-implemented"
    return f"{heading} raised on {device}: {first_line(exc)}", "failed"


def _judged(heading: str, stage: Callable[[optim.Trained], list[tuple[str, Any]]],
            got: optim.Trained, want: optim.Trained, wide: Callable[[], optim.Trained | None],
            rule: oota_rules.Rule, dtype_name: str, device: str) -> Verdict:
    """The verdict on one ``stage`` of the runs' results (the parameters after the first step,
    or everything after the last)."""
    mine, theirs = dict(stage(got)), stage(want)
    if list(mine) != [n for n, _ in theirs]:
        differ = sorted(set(mine) ^ {n for n, _ in theirs})
        return Verdict(status="failed", message=(
            f"{heading}: the parameters and optimizer state on {device} are not the CPU's "
            f"(differs at: {', '.join(differ[:5]) or 'their order'})"))
    if identical([mine[n] for n, _ in theirs], [value for _, value in theirs]):
        return Verdict(status="passed", message=f"{heading}: identical to the CPU's", ratio=0.0)
    made = wide()
    reference = dict(stage(made)) if made is not None else {}
    return judge_named([(n, mine[n], value, reference.get(n)) for n, value in theirs],
                       rule=rule, dtype=dtype_name, device_name=device, head=heading)


def _skip_reason(judging: _Judging) -> str:
    """Why this test does not run: the OptimizerInfo lacks the implementation, PyTorch's own
    test skips it, or the vendor does not claim it ('' where it runs)."""
    info, impl = judging.info, judging.impl
    found = optim.unsupported(info, impl, judging.device.type) or optim.pytorch_skip(
        info, optim.TESTS[impl], judging.device.type, judging.dtype)
    if found:
        return found
    if impl != optim.FORLOOP:
        oota_claims.require(SPEC, impl, f"{info.name}'s {impl} implementation")
    return ""


def judge_optimizer(name: str, impl: str, dtype_name: str, device: Any
                    ) -> tuple[str, str, dict[str, Any]]:
    """(status, message, data) of one optimizer × implementation × dtype on the device."""
    try:
        judging = _Judging(name, impl, dtype_name, device)
    except oota_rules.RuleError as exc:
        return "failed", f"cell.json verify: {exc}", {}
    why = _skip_reason(judging)
    if why:
        return "skipped", why, {}
    try:
        for desc, kwargs in optim.configs(judging.info, device.type, judging.dtype):
            judging.config(desc, kwargs)
    except _Failed as failed:
        return (*_failure(failed, name in DATABASE.must), _data(judging))
    return (*_verdict(judging), _data(judging))


def _failure(failed: _Failed, must: bool) -> tuple[str, str]:
    """A device that lacks an operator the steps need skips the test, unless the optimizer
    is on the must-run list; anything else fails it."""
    if failed.status != "not-implemented":
        return "failed", str(failed)
    return ("failed", f"must-run optimizer: {failed}") if must else ("skipped", str(failed))


STEPPED = f"parameters and optimizer state after {optim.STEPS} steps"
MOVED = (f"parameters and optimizer state after {optim.STEPS} steps, the state dict moved and "
         f"{optim.MORE_STEPS} more steps, both ways,")
RAN_ONLY = (f"for {optim.STEPS} steps on the CPU; the CPU vendor's device is the CPU, so its "
            "for-loop steps are the reference itself and nothing was compared")


def _verdict(judging: _Judging, judged: str = STEPPED) -> tuple[str, str]:
    """(status, message) of a test whose configurations all ran or were left out: what was
    ``judged`` on the device (the CPU vendor's for-loop steps only ran)."""
    tally, must = judging.tally, judging.name in DATABASE.must
    pair = f"{judging.name} ({judging.impl}, {judging.dtype_name})"
    refused = f"the CPU's for-loop steps refused {tally.cpu_errors} (first: {tally.refused})"
    if tally.cpu_errors and must:
        return "failed", f"must-run optimizer: {pair}: {refused}"
    if tally.ran == 0:
        why = [refused] if tally.cpu_errors else []
        if tally.not_applicable:
            why.append(f"the {judging.impl} implementation refuses {tally.not_applicable} on "
                       "the CPU too")
        return "skipped", (f"none of the {tally.configs} configurations of {pair} ran: "
                           f"{'; '.join(why)}")
    if judging.device.type == "cpu":  # the first CPU_ONLY_CONFIGS of each test there
        pair += f" (the first {optim.CPU_ONLY_CONFIGS} the OptimizerInfo gives, on the CPU vendor)"
    if judging.device.type == "cpu" and judging.impl == optim.FORLOOP:
        return "passed", f"ran {tally.ran} configurations of {pair} {RAN_ONLY}"
    return "passed", (f"{tally.ran} of {tally.configs} configurations of {pair} on "
                      f"{judging.device.type}: {judged} within {judging.rule.describe()} (the "
                      f"worst uses {tally.worst:.2g} of it){_others(judging)}"
                      f"{oota_modules.fallback_note(judging.coverage)}")


def _others(judging: _Judging) -> str:
    tally, parts = judging.tally, []
    if tally.not_applicable:
        parts.append(f"{tally.not_applicable} the {judging.impl} implementation refuses on the "
                     "CPU too")
    if tally.cpu_errors:
        parts.append(f"{tally.cpu_errors} the CPU's for-loop steps refused (first: "
                     f"{tally.refused})")
    return f"; not run: {', '.join(parts)}" if parts else ""


def _data(judging: _Judging) -> dict[str, Any]:
    tally = judging.tally
    return dict(optimizer=judging.name, implementation=judging.impl, dtype=judging.dtype_name,
                must_run=judging.name in DATABASE.must, configs=tally.configs, ran=tally.ran,
                cpu_errors=tally.cpu_errors, not_applicable=tally.not_applicable,
                steps=optim.STEPS, compared=not judging.trivial, rule=judging.rule.kind,
                worst=round(tally.worst, 4),
                **(judging.coverage.to_data() if judging.coverage is not None else {}))


# -- the state dict between the device and the CPU -------------------------------------------------

def _moves(judging: _Judging, desc: str, kwargs: dict[str, Any]) -> None:
    """One configuration's state dict after STEPS for-loop steps, device -> CPU and CPU ->
    device, each resumed for MORE_STEPS and judged against the CPU's own state dict resumed on
    the CPU (loading casts some state to the parameters' dtype: NAdam's mu_product becomes
    float16 beside float16 parameters, on every device). 'capturable' is left out on both
    sides: a state dict carries its flags along."""
    import torch

    cpu, plain = torch.device("cpu"), optim.on_cpu(kwargs)
    judging.tally.configs += 1
    want = judging.reference(desc, kwargs)
    if want is None:
        return
    saved = optim.state_dict_bytes(want)
    ref = optim.resumed(judging.info, plain, judging.dtype, cpu, want, saved)
    judging.tally.ran += 1
    try:
        back = optim.resumed(judging.info, plain, judging.dtype, judging.device, want, saved)
        got = judging.trained(plain, judging.device, optim.FORLOOP)
        saved_there = optim.state_dict_bytes(got)
    except Exception as exc:  # noqa: BLE001 - the device's failure is the finding
        raise _Failed(*_device_error(judging.head(desc), exc, judging.device.type)) from None
    # What the device saves must first be right: its own steps, judged as the other test does.
    judging.judge(judging.head(desc), got, want, lambda: judging.wide(kwargs, optim.STEPS),
                  optim.unchanged(got, want))
    there = optim.resumed(judging.info, plain, judging.dtype, cpu, got, saved_there)
    try:
        for trained in (ref, back, there):
            optim.train(trained, optim.MORE_STEPS)
    except Exception as exc:  # noqa: BLE001 - the device's failure is the finding
        raise _Failed(*_device_error(judging.head(desc), exc, judging.device.type)) from None
    device = judging.device.type
    for heading, trained in ((f"saved on {device} and loaded on the CPU", there),
                             (f"saved on the CPU and loaded on {device}", back)):
        judging.judge(f"{judging.head(desc)}, state dict {heading}", trained, ref,
                      lambda: judging.wide(kwargs, optim.STEPS + optim.MORE_STEPS))


def judge_state_dict(name: str, dtype_name: str, device: Any
                     ) -> tuple[str, str, dict[str, Any]]:
    """(status, message, data) of one optimizer × dtype's state dict moved both ways."""
    try:
        judging = _Judging(name, optim.FORLOOP, dtype_name, device)
    except oota_rules.RuleError as exc:
        return "failed", f"cell.json verify: {exc}", {}
    if device.type == "cpu":
        return "skipped", ("the CPU vendor's device is the CPU: there is no other device to "
                           "move a state dict to"), {}
    why = optim.pytorch_skip(judging.info, optim.STATE_DICT_TEST, device.type, judging.dtype)
    if why:
        return "skipped", why, {}
    try:
        for desc, kwargs in optim.configs(judging.info, device.type, judging.dtype):
            _moves(judging, desc, kwargs)
    except _Failed as failed:
        return (*_failure(failed, name in DATABASE.must), _data(judging))
    status, message = _verdict(judging, MOVED)
    return status, message, {**_data(judging), "steps": optim.STEPS + optim.MORE_STEPS}


def _check(judge: Any, record_data: Any, must: bool, *args: Any) -> None:
    if DATABASE.problem:
        pytest.fail(DATABASE.problem, pytrace=False)
    late = DATABASE.budget.skip_reason(must)
    if late:
        pytest.skip(late)
    status, message, data = judge(*args)
    if data:
        record_data(**data, note=message)
    if status == "skipped":
        pytest.skip(message)
    if status == "failed":
        pytest.fail(message, pytrace=False)


def test_optimizer_matches_cpu(optim_name: str, optim_impl: str, optim_dtype: str, device: Any,
                               record_data: Any) -> None:
    """The optimizer's steps with this implementation on the device against the CPU's."""
    _check(judge_optimizer, record_data, optim_name in DATABASE.must, optim_name, optim_impl,
           optim_dtype, device)


def test_optimizer_state_dict_moves(optim_name: str, optim_dtype: str, device: Any,
                                    record_data: Any) -> None:
    """The for-loop optimizer's state dict, saved on the device, goes on on the CPU, and back."""
    _check(judge_state_dict, record_data, optim_name in DATABASE.must, optim_name, optim_dtype,
           device)
