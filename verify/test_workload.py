"""Workload layer: a short training run and timed inference of each model the vendor names.

Off unless the vendor asks for it (``verify.workload`` in vendor.yaml, shipped in cell.json with
every default filled in). The models are the models layer's tiny ones (verify/test_models.py
MODELS, the same builders, inputs and seed). Per model:

* training stability: ``train_steps`` SGD steps on one fixed batch, from the same seed on the
  device and on the CPU; the loss must fall (last < first) and, at every step, the device's
  loss must be within ``loss_tolerance`` of the CPU's. On the CPU vendor the device is the
  CPU: only "falls" is checked, and the record says the comparison is n/a;
* inference latency: ``warmup_forwards`` untimed forwards, then ``timed_forwards`` each timed
  with the device synchronised: median and p90;
* training throughput: steps per second of the device's run (its first step untimed);
* peak device memory over the device's training and inference, where the device keeps that
  statistic (torch.cuda, torch.refdev, ...); else None, which means "not reported", never 0.

The figures (``loss_first``, ``loss_final``, ``loss_max_dev_vs_cpu``, ``latency_median_s``,
``latency_p90_s``, ``train_steps_per_s``, ``peak_device_bytes``) go into the test's data, where
oota's report shows them and its history keeps them to judge regressions over time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
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


def test_workload(workload_model: str, workload: dict[str, Any], device: Any,
                  device_module: Any, spec: dict[str, Any], record_data: Any) -> None:
    import torch

    case = MODELS.get(workload_model)
    if case is None:
        pytest.fail(f"verify.workload.models names '{workload_model}'; known: "
                    f"{', '.join(sorted(MODELS))}")
    dtype_name = str(spec.get("model_dtype") or "float32")
    dtype = getattr(torch, dtype_name)
    inputs = {k: (v.to(dtype) if v.is_floating_point() else v)
              for k, v in case.inputs(torch.Generator().manual_seed(SEED)).items()}
    steps = int(workload["train_steps"])
    on_cpu = device.type == "cpu"
    cpu = None if on_cpu else _train(case, dtype, inputs, torch.device("cpu"), None, steps)
    peak = _peak_start(device_module)
    run = _train(case, dtype, inputs, device, device_module, steps)
    forwards = _forward_seconds(run.model, run.batch, device_module,
                                int(workload["warmup_forwards"]), int(workload["timed_forwards"]))
    tolerance = workload["loss_tolerance"]
    curves = Curves(device=run.losses, cpu=None if cpu is None else cpu.losses,
                    rtol=float(tolerance["rtol"]), atol=float(tolerance["atol"]))
    record_data(model=workload_model, dtype=dtype_name, train_steps=steps,
                timed_forwards=len(forwards), loss_first=run.losses[0],
                loss_final=run.losses[-1], loss_max_dev_vs_cpu=curves.max_diff,
                vs_cpu=CPU_IS_DEVICE if on_cpu else "compared",
                loss_rtol=curves.rtol, loss_atol=curves.atol, **latency(forwards),
                train_steps_per_s=steps_per_second(run.step_seconds),
                peak_device_bytes=int(device_module.max_memory_allocated()) if peak else None)
    problems = curves.problems()
    assert not problems, "; ".join(problems) + f"\ndevice losses: {run.losses}" + (
        f"\nCPU losses: {cpu.losses}" if cpu else "")
