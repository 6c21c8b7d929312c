"""The modules layer's work on one module × dtype (verify/test_modules.py): PyTorch's module
database (``torch.testing._internal.common_modules.module_db``, shipped in the wheel), what
PyTorch's own tests decide about each entry, its samples made on the CPU, and each sample run
on the device and judged against the same run on the CPU.

PyTorch's ``test_cpu_gpu_parity`` (test/test_modules.py) is the model: for every ModuleInput of
the entry, in train mode and (where the entry says the two differ) in eval mode, the module is
built on the CPU, the same weights go to the device, and the forward outputs and the gradients
of the inputs and parameters are compared. Here the comparison is oota's float64 rule, as in
the models layer: the device's error against the same run in float64 on the CPU may be at most
``multiplier`` times the CPU's own error plus a few ulps (float64 pairs, which have no wider
reference, are compared within the vendor's float64 tolerance). Buffers after the pass are
compared too (BatchNorm's running statistics). Where PyTorch's ``test_memory_format`` runs the
entry, the samples with 4-d (5-d) inputs also run with the module and those inputs in
``channels_last`` (``channels_last_3d``): judged against the CPU's contiguous run, and each
output must be laid out in that format where the CPU's is. PyTorch's skips and expected
failures of those two tests apply (``oota_pytorchtests``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import oota_judge
import oota_pytorchtests
import oota_rules
from oota_cases import Verdict
from oota_modulerun import Run, Sample, run

PARITY = ("TestModule", "test_cpu_gpu_parity")
MEMORY_FORMAT = ("TestModule", "test_memory_format")
COMPOSED_SOURCE = "oota's float64 rule for composed results"
# On the CPU vendor the device is the CPU: a module's samples are only run, to show that they
# run, and this many of each entry's are enough for that (as the ops layer's 8 per operator).
CPU_ONLY_SAMPLES = 8


def one_thread() -> Iterator[None]:
    """torch on one intra-op thread until the generator is closed, then as it was."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def import_module_db() -> list[Any]:
    oota_pytorchtests.stand_in_expecttest()
    from torch.testing._internal.common_modules import module_db

    return list(module_db)


def by_name() -> dict[str, Any]:
    """module_db by the name a user sees ('nn.Linear')."""
    return {info.name: info for info in import_module_db()}


def declares(info: Any, device_type: str, dtype_name: str) -> bool:
    """Whether the ModuleInfo declares ``dtype_name`` for the device type and for the CPU."""
    import torch

    dtype = getattr(torch, dtype_name, None)
    return dtype in info.supported_dtypes(device_type) and dtype in info.supported_dtypes("cpu")


def trainings(info: Any) -> list[bool]:
    """Train mode, and eval mode where the entry says the two differ (as PyTorch's tests)."""
    return [True, False] if info.train_and_eval_differ else [True]


def pytorch_skip(info: Any, test: tuple[str, str], device_type: str, dtype: Any,
                 training: bool) -> str:
    """Why PyTorch's ``test`` skips (or expects to fail) this entry ('' when it runs it)."""
    decorators = info.get_decorators(*test, device_type, dtype, {"training": training})
    return oota_pytorchtests.decision(decorators, test[1])


def _seed(name: str, dtype_name: str, training: bool) -> int:
    return zlib.crc32(f"{name}-{dtype_name}-{training}".encode())


def samples(info: Any, dtype_name: str, training: bool,
            limit: int | None = None) -> Iterator[Sample | Exception]:
    """The entry's samples, made on the CPU from the pair's own seed: each built module (its
    weights from the seed too; a lazy module materialised by one forward pass without
    gradients, as PyTorch's test does), or the exception that building it raised."""
    import torch

    dtype = getattr(torch, dtype_name)
    seed = _seed(info.name, dtype_name, training)
    torch.manual_seed(seed)
    made = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True,
                                   training=training)
    wanted = [m for m in made if m.forward_input is not None][:limit]
    for index, given in enumerate(wanted):
        torch.manual_seed(seed + index + 1)
        try:
            yield _sample(info, given, index, dtype, training, seed + index + 1)
        except Exception as exc:  # noqa: BLE001 - the CPU's refusal, counted by the caller
            yield exc


def _sample(info: Any, given: Any, index: int, dtype: Any, training: bool,
            seed: int) -> Sample:
    import torch

    module = info.module_cls(*given.constructor_input.args,
                             **given.constructor_input.kwargs).to(dtype)
    module.train(training)
    forward = given.forward_input
    if info.is_lazy:
        with torch.no_grad():
            module(*forward.args, **forward.kwargs)
    return Sample(index=index, description=given.desc or "default", module=module,
                  args=forward.args, kwargs=forward.kwargs, training=training, dtype=dtype,
                  seed=seed)


@dataclass
class Outcome:
    """What happened to one module × dtype's samples (a sample: one ModuleInput in one mode)."""

    samples: int = 0  # samples made
    ran: int = 0  # samples that ran on the device (and were judged, unless cpu_only)
    formats: int = 0  # runs in a memory format (channels_last...) among them
    cpu_errors: int = 0  # samples the CPU refused (on the CPU vendor: its device)
    refused: str = ""  # the first of those
    cpu_only: bool = False  # the CPU vendor: nothing is compared
    failure: str = ""  # the judge's message on the first wrong sample
    not_implemented: str = ""  # the device's NotImplementedError, first line
    error: str = ""  # anything else the device raised on a sample the CPU ran
    worst: float = 0.0  # the largest share of the rule's allowance a sample used
    skipped_formats: set[str] = field(default_factory=set)  # PyTorch's reasons, not run

    @property
    def count(self) -> str:
        return f" ({self.ran} of {self.samples} samples ran)" if self.samples else ""


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def not_implemented(exc: BaseException) -> bool:
    return isinstance(exc, NotImplementedError) or "not implemented for" in str(exc)


def rule_for(dtype_name: str, spec: dict[str, Any]) -> oota_rules.Rule:
    """The float64 rule for a composed result, with the numbers of oota's float64 check beside
    PyTorch's rule (``oota_rules.ADDON_*``: 10x the CPU's error + 8 ulp), where the vendor's
    ``verify.judge`` has no override for the dtype: a module's forward and backward are many
    operators, whose algorithms may rightly differ from the CPU's (refdev's math attention
    against the CPU's flash attention used 18x the CPU's own error in a Transformer's gradient,
    2 ulp of the largest; a 0.1% bias is thousands of ulp). float64 and complex128, which have
    no wider reference, are compared within the vendor's tolerance."""
    tolerance = (spec.get("tolerances") or {}).get(dtype_name)
    if dtype_name in ("float64", "complex128"):
        return oota_rules.tolerance_rule(dtype_name, tolerance)
    if (spec.get("judge") or {}).get(dtype_name):
        return oota_rules.float64_rule(dtype_name, spec.get("judge"), tolerance)
    fallback = oota_rules.tolerance_rule(dtype_name, tolerance)
    return oota_rules.Rule(kind=oota_rules.FLOAT64, multiplier=oota_rules.ADDON_MULTIPLIER,
                           floor_ulps=oota_rules.ADDON_FLOOR_ULPS, atol=fallback.atol,
                           rtol=fallback.rtol, source=COMPOSED_SOURCE)


def head(name: str, dtype_name: str, sample: Sample, memory_format: str = "") -> str:
    mode = "train" if sample.training else "eval"
    shown = f", {memory_format}" if memory_format else ""
    return f"{name} ({dtype_name}): sample {sample.index} ({sample.description}), {mode}{shown}"


def judge_runs(got: Run, want: Run, wide: Callable[[], Run | None], *, rule: oota_rules.Rule,
               dtype_name: str, device_name: str, heading: str) -> Any:
    """The judge's verdict on a device run against the CPU's same results; ``wide`` makes
    the float64 run, only where the two are not identical, element for element."""
    cpu = dict(want.named)
    device = dict(got.named)
    if list(device) != list(cpu):
        missing = sorted(set(cpu) - set(device)) or sorted(set(device) - set(cpu))
        return Verdict(status="failed", message=(
            f"{heading}: the run on {device_name} gave other results than the CPU's "
            f"(differs at: {', '.join(missing[:5]) or 'their order'})"))
    if oota_judge.identical([device[n] for n in cpu], list(cpu.values())):
        return Verdict(status="passed", message=f"{heading}: identical to the CPU's", ratio=0.0)
    made = wide()
    reference = dict(made.named) if made is not None else {}
    named = [(n, device[n], value, reference.get(n)) for n, value in want.named]
    return oota_judge.judge_named(named, rule=rule, dtype=dtype_name, device_name=device_name,
                                  head=heading)


def layout_failure(got: Run, in_cpu_format: Run, memory_format: str, device_name: str,
                   heading: str) -> str:
    """Why the device's outputs are not laid out as the CPU's are in ``memory_format``."""
    missing = sorted(in_cpu_format.in_format - got.in_format)
    if not missing:
        return ""
    return (f"{heading}: {', '.join(missing)} is {memory_format} on the CPU and not on "
            f"{device_name} (the module and its inputs in {memory_format} on both)")


def run_cpu(sample: Sample, memory_format: str = "", grads: list[Any] | None = None) -> Run:
    import torch

    return run(sample, torch.device("cpu"), memory_format=memory_format, grads=grads)


def run_wide(sample: Sample, rule: oota_rules.Rule, want: Run) -> Run | None:
    """The sample in float64 on the CPU from the CPU run's gradients (the judge's reference),
    or None where the rule needs none or the module cannot run so."""
    import torch

    if rule.kind != oota_rules.FLOAT64:
        return None
    try:
        return run(sample, torch.device("cpu"), dtype=torch.float64, grads=want.grads)
    except Exception:  # noqa: BLE001 - no reference: the judge falls back to the tolerance
        return None


def verdict(outcome: Outcome, *, name: str, dtype: str, device: str, must_run: bool,
            rule: str = "") -> tuple[str, str]:
    """(status, message) of one module × dtype, as the ops layer words an operator's: a module
    the device does not implement fails when it is on the must-run list and is skipped
    otherwise; a must-run module also fails when the CPU refused any of its samples; any other
    passes on the samples that ran, and says how many of all."""
    pair = f"{name} ({dtype})"
    if outcome.not_implemented:
        text = f"{pair} is not implemented on {device}: {outcome.not_implemented}{outcome.count}"
        return ("failed", f"must-run module: {text}") if must_run else ("skipped", text)
    if outcome.error:
        return "failed", f"{pair} raised on {device}: {outcome.error}{outcome.count}"
    if outcome.failure:
        return "failed", outcome.failure
    if outcome.samples == 0:
        return "skipped", f"the ModuleInfo of {name} has no samples for {dtype}"
    if outcome.cpu_errors and must_run:
        return "failed", (f"must-run module: {pair} raised on the CPU: {outcome.refused}"
                          f"{outcome.count}")
    if outcome.ran == 0:
        return "skipped", (f"every one of the {outcome.samples} samples of {pair} raised on the "
                           f"CPU (first: {outcome.refused})")
    return "passed", _passed(outcome, pair, device, rule)


def _passed(outcome: Outcome, pair: str, device: str, rule: str) -> str:
    some = f"{outcome.ran} of {outcome.samples}" if outcome.cpu_errors else str(outcome.ran)
    formats = (f", {outcome.formats} of them also in a channels-last memory format"
               if outcome.formats else "")
    others = (f"; the other {outcome.cpu_errors} raised on the CPU (first: {outcome.refused})"
              if outcome.cpu_errors else "")
    if outcome.cpu_only:
        return (f"ran {some} samples of {pair} forward and backward on the CPU{formats}"
                f"{others}; the CPU vendor's device is the CPU, so nothing was compared")
    return (f"{some} samples of {pair} on {device}, forward and backward{formats}, within "
            f"{rule} (the worst uses {outcome.worst:.2g} of it){others}")


# A pass names this many of the aten operators its device runs sent to the CPU fallback.
NAMES_SHOWN = 8


def fallback_note(coverage: Any) -> str:
    """Where a passing test's device runs called the backend's CPU fallback, which aten
    operators ('' where none did): the pass stands (the module's or optimizer's composition
    ran on the device's dispatch), and the reader is told (an ``oota_hooks.Coverage``)."""
    names = sorted(coverage.routed | set(coverage.fallback_ops)) if coverage else []
    if not names:
        return ""
    shown = ", ".join(f"aten::{n}" for n in names[:NAMES_SHOWN])
    more = f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
    return (f"; {coverage.fell_back} of its {coverage.samples} device runs called the "
            f"backend's CPU fallback ({shown}{more})")
