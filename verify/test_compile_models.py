"""Compile layer, models and whole programs: a training step through a compiled model, the
modes claimed besides default, torch.export and an AOTInductor package (see test_compile.py
for what the layer checks and the vendor's claims in cell.json ``verify.compile``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import oota_compile
import oota_compilerun as run
import oota_judge
import pytest
from oota_compilerun import pytest_generate_tests  # noqa: F401 - the cases from cell.json
from test_compile import _fused
from test_models import MODELS, SEED, StepResult, _named, _train_step, _widened

LAYER = "compile"


def _sync(device_module: Any) -> None:
    if device_module is not None and hasattr(device_module, "synchronize"):
        device_module.synchronize()


def _pass_seconds(model: Any, batch: dict[str, Any], device_module: Any, runs: int) -> list[float]:
    """Seconds of ``runs`` timed forward+backward passes, after one untimed."""
    seconds = []
    for _ in range(runs + 1):
        model.zero_grad(set_to_none=True)
        started = time.perf_counter()
        model(**batch).loss.backward()
        _sync(device_module)
        seconds.append(time.perf_counter() - started)
    return seconds[1:]


def _steps(case: Any, dtype: Any, raw: dict[str, Any], device: Any, device_module: Any
           ) -> tuple[StepResult, StepResult, StepResult, Any]:
    """The CPU's eager step, the float64 step and the device's eager step (its model kept)."""
    import torch

    inputs = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in raw.items()}
    wide_inputs = {k: (v.double() if v.is_floating_point() else v) for k, v in raw.items()}
    torch.manual_seed(SEED)
    want = _train_step(case.build().to(dtype), inputs, torch.device("cpu"), None)
    wide = _train_step(_widened(case, dtype), wide_inputs, torch.device("cpu"), None)
    torch.manual_seed(SEED)
    eager_model = case.build().to(dtype)
    eager = _train_step(eager_model, inputs, device, device_module)
    return want, wide, eager, eager_model


def test_compiled_model(compile_backend: str, compile_model: str, device: Any,
                        device_module: Any, spec: dict[str, Any], record_data: Any) -> None:
    import torch

    case = MODELS.get(compile_model)
    if case is None:
        pytest.fail(f"verify.compile.models names '{compile_model}'; known: "
                    f"{', '.join(sorted(MODELS))}")
    run.in_budget(False)
    dtype_name = str(spec.get("model_dtype") or "float32")
    dtype = getattr(torch, dtype_name)
    raw = case.inputs(torch.Generator().manual_seed(SEED))
    want, wide, eager, eager_model = _steps(case, dtype, raw, device, device_module)
    counters = run.reset()
    torch.manual_seed(SEED)
    model = case.build().to(dtype)
    head = f"{compile_model} ({dtype_name}) compiled by {compile_backend}"
    run.run(head, lambda: model.compile(backend=compile_backend))
    inputs = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in raw.items()}
    got = run.run(f"{head}: a training step", lambda: _train_step(model, inputs, device,
                                                                   device_module))
    rule = run.rule(spec, dtype_name)
    verdicts = [oota_judge.judge_named(_named(got, against, wide), rule=rule, dtype=dtype_name,
                                       device_name=device.type, head=f"{head} against {name}")
                for name, against in (("the CPU's eager step", want),
                                      ("the device's eager step", eager))]
    batch = {k: v.to(device) for k, v in inputs.items()}
    timed = oota_compile.speedup(
        _pass_seconds(eager_model, batch, device_module, run.CLAIMS.timed_runs),
        _pass_seconds(model, batch, device_module, run.CLAIMS.timed_runs))
    record_data(model=compile_model, dtype=dtype_name, backend=compile_backend,
                compile_s=max(0.0, got.seconds - timed["compiled_median_s"]),
                first_step_s=got.seconds, graphs=int(counters["stats"]["unique_graphs"]),
                worst=max(v.ratio for v in verdicts), judge=rule.describe(), **timed,
                **oota_compile.graph_breaks(counters["graph_break"]))
    failed = [v.message for v in verdicts if v.status != "passed"]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("mode", [m for m in oota_compile.MODES if m != "default"])
def test_compile_mode(compile_backend: str, mode: str, device: Any, spec: dict[str, Any],
                      record_data: Any) -> None:
    """The fused chain compiled in a mode the vendor claims, against the CPU."""
    run.require(mode)
    if compile_backend != run.CLAIMS.backends[0]:
        pytest.skip(f"modes are claimed with the first backend, {run.CLAIMS.backends[0]}")
    run.in_budget(False)
    _judged_program(f"fused chain, mode {mode}", spec, device, record_data,
                    lambda fn: run.compiled(fn, compile_backend, f"mode {mode}", mode=mode))


def _inputs(dtype: Any = None) -> tuple[Any, ...]:
    import torch

    gen = torch.Generator().manual_seed(SEED)
    made = (torch.randn(8, 16, generator=gen), torch.randn(16, 16, generator=gen),
            torch.randn(16, generator=gen))
    return tuple(t.to(dtype) for t in made) if dtype is not None else made


def _judged_program(head: str, spec: dict[str, Any], device: Any, record_data: Any,
                    build: Any) -> None:
    """Build a callable from the fused chain with ``build`` (given the function), run it on the
    device, judge it against the CPU by the float64 rule."""
    import torch

    args = _inputs()
    program = run.run(head, lambda: build(_fused))
    got = run.run(head, lambda: program(*(a.to(device) for a in args)))
    verdict = run.judge_outputs(got, _fused(*args), _fused(*_inputs(torch.float64)),
                                rule=run.rule(spec, "float32"), dtype="float32", device=device,
                                head=head)
    record_data(case=head, worst=verdict.ratio)
    assert verdict.status == "passed", verdict.message


class _Fused:
    """The fused chain as a module (torch.export takes modules)."""

    def __new__(cls) -> Any:
        import torch

        class Fused(torch.nn.Module):
            def forward(self, x: Any, w: Any, b: Any) -> Any:
                return _fused(x, w, b)

        return Fused()


def _exported(device: Any) -> Any:
    import torch

    return torch.export.export(_Fused(), tuple(a.to(device) for a in _inputs()))


def test_export(device: Any, spec: dict[str, Any], record_data: Any) -> None:
    """torch.export on the device: the exported program runs there and matches the CPU."""
    run.require("export")
    run.in_budget(False)
    _judged_program("torch.export of the fused chain", spec, device, record_data,
                    lambda fn: _exported(device).module())


def test_aot_inductor(device: Any, spec: dict[str, Any], record_data: Any,
                      tmp_path: Path) -> None:
    """An AOTInductor package of the exported chain, built, loaded and run on the device."""
    import torch

    run.require("aot_inductor")
    run.in_budget(False)

    def package(fn: Any) -> Any:
        path = torch._inductor.aoti_compile_and_package(
            _exported(device), package_path=str(tmp_path / "fused.pt2"))
        return torch._inductor.aoti_load_package(path)

    _judged_program("AOTInductor package of the fused chain", spec, device, record_data,
                    package)
