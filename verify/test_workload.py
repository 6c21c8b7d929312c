"""Workload layer: a short training run and timed inference of each model the vendor names.

Off unless the vendor asks for it (``verify.workload`` in vendor.yaml, shipped in cell.json with
every default filled in). The models are the models layer's tiny ones (verify/test_models.py
MODELS, the same builders, inputs and seed). Per model:

* training stability: ``train_steps`` SGD steps on one fixed batch, from the same seed on the
  device, on the CPU in the model's dtype and on the CPU in float64; the loss must fall
  (last < first), and the device's losses and its weights after the last step must stay as
  close to the float64 run as the CPU's own run does (``oota_rules.judge_curve``: at most
  ``judge.multiplier`` times the CPU's drift, default 4, plus a few ulps; the vendor may
  override it with a reason). On the CPU vendor the device is the CPU: only "falls" is
  checked, and the record says the comparison is n/a;
* inference latency: ``warmup_forwards`` untimed forwards, then ``timed_forwards`` each timed
  with the device synchronised: median and p90;
* training throughput: steps per second of the device's run (its first step untimed);
* peak device memory over the device's training and inference, where the device keeps that
  statistic (torch.cuda, torch.refdev, ...); else None, which means "not reported", never 0.

The figures (``loss_first``, ``loss_final``, ``loss_max_dev_vs_cpu``, ``loss_drift`` and
``weights_drift`` with the CPU's own ``loss_drift_cpu``/``weights_drift_cpu``,
``latency_median_s``, ``latency_p90_s``, ``train_steps_per_s``, ``peak_device_bytes``) go into
the test's data, where oota's report shows them and its history keeps them to judge
regressions over time.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import pytest
from oota_rules import CurveRule, RuleError, judge_drifts
from oota_workload import CPU_IS_DEVICE, Curves, latency, steps_per_second
from test_models import LR, MODELS, SEED, ModelCase, _peak_start

LAYER = "workload"


@dataclass
class TrainingRun:
    losses: list[float]
    step_seconds: list[float]
    model: Any        # the trained model, still on its device
    batch: dict[str, Any]


def _sync(device_module: Any) -> None:
    if device_module is not None and hasattr(device_module, "synchronize"):
        device_module.synchronize()


def _train(case: ModelCase, dtype: Any, inputs: dict[str, Any], device: Any,
           device_module: Any, steps: int) -> TrainingRun:
    """``steps`` SGD steps on one batch from the suite's seed; each step timed to the end of
    its device work, its loss read back after the clock stops."""
    import torch

    torch.manual_seed(SEED)
    model = case.build().to(dtype).to(device).train()
    batch = {k: v.to(device) for k, v in inputs.items()}
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses, seconds = [], []
    for _ in range(steps):
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        _sync(device_module)
        seconds.append(time.perf_counter() - started)
        losses.append(float(loss.detach().cpu()))  # some devices have no float64
    return TrainingRun(losses=losses, step_seconds=seconds, model=model, batch=batch)


def _forward_seconds(model: Any, batch: dict[str, Any], device_module: Any, warmup: int,
                     timed: int) -> list[float]:
    """Seconds of each timed inference forward, after ``warmup`` untimed ones."""
    import torch

    model.eval()
    seconds = []
    with torch.no_grad():
        for _ in range(warmup):
            model(**batch)
        _sync(device_module)
        for _ in range(timed):
            started = time.perf_counter()
            model(**batch)
            _sync(device_module)
            seconds.append(time.perf_counter() - started)
    return seconds


def _inputs(case: ModelCase, dtype: Any) -> dict[str, Any]:
    import torch

    return {k: (v.to(dtype) if v.is_floating_point() else v)
            for k, v in case.inputs(torch.Generator().manual_seed(SEED)).items()}


def _weights_drift(model: Any, reference: Any) -> tuple[float, float]:
    """(largest |weight - float64 weight|, largest |float64 weight|) over every parameter."""
    import torch

    worst = scale = 0.0
    wide = dict(reference.named_parameters())
    for name, value in model.named_parameters():
        ref = wide[name].detach()
        diff = (value.detach().cpu().double() - ref).abs()
        worst = max(worst, float(diff.max()) if bool(torch.isfinite(diff).all()) else math.inf)
        scale = max(scale, float(ref.abs().max()))
    return worst, scale


def _curve_rule(workload: dict[str, Any]) -> CurveRule:
    try:
        return CurveRule.from_spec(workload.get("judge"))
    except RuleError as exc:
        pytest.fail(f"cell.json verify.workload: {exc}", pytrace=False)


def _weights(run: TrainingRun, cpu: TrainingRun, wide: TrainingRun, rule: CurveRule,
             dtype_name: str) -> dict[str, Any]:
    """The final weights judged like the curve: the device's drift from the float64 run
    against the CPU's own."""
    device_drift, scale = _weights_drift(run.model, wide.model)
    cpu_drift, _ = _weights_drift(cpu.model, wide.model)
    judged = judge_drifts(device_drift, cpu_drift, scale, rule, dtype_name)
    return {"weights_drift": device_drift, "weights_drift_cpu": cpu_drift,
            "weights_allowed": judged.allowed,
            "problem": "" if judged.passed else judged.message("the device's final weights")}


def test_workload(workload_model: str, workload: dict[str, Any], device: Any,
                  device_module: Any, spec: dict[str, Any], record_data: Any) -> None:
    import torch

    case = MODELS.get(workload_model)
    if case is None:
        pytest.fail(f"verify.workload.models names '{workload_model}'; known: "
                    f"{', '.join(sorted(MODELS))}")
    dtype_name = str(spec.get("model_dtype") or "float32")
    dtype, rule = getattr(torch, dtype_name), _curve_rule(workload)
    steps, on_cpu, host = int(workload["train_steps"]), device.type == "cpu", torch.device("cpu")
    cpu = None if on_cpu else _train(case, dtype, _inputs(case, dtype), host, None, steps)
    wide = None if on_cpu else _train(case, torch.float64, _inputs(case, torch.float64), host,
                                      None, steps)
    peak = _peak_start(device_module)
    run = _train(case, dtype, _inputs(case, dtype), device, device_module, steps)
    forwards = _forward_seconds(run.model, run.batch, device_module,
                                int(workload["warmup_forwards"]), int(workload["timed_forwards"]))
    curves = Curves(device=run.losses, cpu=None if cpu is None else cpu.losses,
                    reference=None if wide is None else wide.losses, rule=rule)
    judged = curves.judgement
    weights = _weights(run, cpu, wide, rule, dtype_name) if cpu and wide else {}
    record_data(model=workload_model, dtype=dtype_name, train_steps=steps,
                timed_forwards=len(forwards), loss_first=run.losses[0],
                loss_final=run.losses[-1], loss_max_dev_vs_cpu=curves.max_diff,
                vs_cpu=CPU_IS_DEVICE if on_cpu else "compared",
                loss_drift=judged.device_drift if judged else None,
                loss_drift_cpu=judged.cpu_drift if judged else None,
                loss_allowed=judged.allowed if judged else None,
                **{k: v for k, v in weights.items() if k != "problem"},
                judge=f"{rule.multiplier:g}x the CPU's drift + {rule.floor_ulps:g} ulp "
                      f"({rule.source})", **latency(forwards),
                train_steps_per_s=steps_per_second(run.step_seconds),
                peak_device_bytes=int(device_module.max_memory_allocated()) if peak else None)
    problems = curves.problems() + ([weights["problem"]] if weights.get("problem") else [])
    assert not problems, "; ".join(problems) + f"\ndevice losses: {run.losses}" + (
        f"\nCPU losses: {cpu.losses}\nfloat64 losses: {wide.losses}" if cpu and wide else "")
