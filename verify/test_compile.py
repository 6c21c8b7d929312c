"""Compile layer: torch.compile on the device with the backends and modes the vendor claims.

PyTorch asks an accelerator's compiler backend (docs/source/accelerator/compiler.md) to be
listed by Dynamo, to give compiled results equal to eager ones, and to behave on graph breaks,
recompiles, dynamic shapes and autograd. Per claimed backend (cell.json ``verify.compile``):

* the backend is registered with Dynamo (``torch._dynamo.list_backends``);
* each model of ``verify.compile.models`` trains one step through a compiled model (forward,
  autograd, SGD), judged against the CPU's eager step and against the device's own eager step;
  its record holds graph breaks and their reasons, graphs compiled, the compile time (the first
  step's time less a warm step's) and the speedup over eager (medians of ``timed_runs`` timed
  forward+backward passes each, with their spread). It comes first after the backend: the
  figures a history keeps should be the last a short budget leaves out;
* a function called again with the same shape does not recompile (guards hold), with a new
  shape recompiles or runs a dynamic graph, and stays right; a graph break splits one function
  into two graphs that together give the right result;
* PyTorch's OpInfo operators (oota_compile.OPS, float32 and the vendor's half dtypes) and a
  fused chain, compiled on the device, are judged against the CPU's eager result by the float64
  rule (the device's error against float64 at most 4x the CPU's own, verify/oota_rules.py);
* the modes claimed besides default, torch.export and an AOTInductor package where claimed
  (test_compile_programs.py).

What the vendor does not claim is skipped as "not claimed" with its reason. A compile error is
a failure naming the case and the error's first lines, never a skip. The backend and the fused
chain in float32 run whatever the time budget (``OOTA_COMPILE_BUDGET_S``, default 30 s,
counted from the layer's first case): on the CPU the first Inductor compile of a process costs
about 14 s (this host, 2 cores), each further one about 1 s; the others run while it lasts. The
default holds a whole default verification of the CPU cell within twice what it took before the
layers of PyTorch's own bar (docs/reference/verify-suite.md); ``OOTA_COMPILE_BUDGET_S=600``
runs every case.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import oota_compile
import oota_compilerun as run
import oota_judge
import pytest
from oota_claims import NOT_CLAIMED
from oota_compilerun import pytest_generate_tests  # noqa: F401 - the cases from cell.json
from test_models import MODELS, SEED, StepResult, _named, _train_step, _widened

LAYER = "compile"


def test_not_claimed(unclaimed: tuple[str, str]) -> None:
    """Each backend, mode or feature the vendor leaves out, with its reason."""
    name, why = unclaimed
    if name == "none":
        pytest.skip("the vendor leaves out nothing it names (verify.compile.not_claimed)")
    pytest.skip(f"{NOT_CLAIMED}{name}: {why}")


def test_backend_registered(compile_backend: str, device: Any, record_data: Any) -> None:
    """Dynamo lists the backend (PyTorch's checklist for an accelerator's backend)."""
    import torch
    from torch._dynamo.device_interface import get_registered_device_interfaces

    listed = torch._dynamo.list_backends(exclude_tags=())
    interfaces = [name for name, _ in get_registered_device_interfaces()]
    record_data(backend=compile_backend, device_interface=device.type in interfaces)
    assert compile_backend in listed, (
        f"backend {compile_backend!r} is not registered with Dynamo; "
        f"torch._dynamo.list_backends() lists {', '.join(listed)}")


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

    if compile_model == "none":
        pytest.skip("the vendor names no model to compile (verify.compile.models, else the "
                    "first of verify.models)")
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
    run.graphs_captured(counters, head)
    failed = [v.message for v in verdicts if v.status != "passed"]
    assert not failed, "\n".join(failed)


def _shaped(x: Any) -> Any:
    return (x.sin() * 2 + x).sum(0)


def test_guards_and_recompile(compile_backend: str, device: Any, record_data: Any) -> None:
    """The same shape again runs the compiled graph (no recompile); a new shape recompiles or
    runs a dynamic graph; every result matches eager on the CPU."""
    import torch

    run.in_budget(False)
    counters = run.reset()
    fast = run.compiled(_shaped, compile_backend, f"guards ({compile_backend})")
    graphs, problems = [], []
    for rows in (4, 4, 6, 9):
        x = torch.randn(rows, 8, generator=torch.Generator().manual_seed(rows))
        got = run.run(f"guards ({compile_backend}): shape ({rows}, 8)",
                   lambda x=x: fast(x.to(device)))
        graphs.append(int(counters["stats"]["unique_graphs"]))
        if not torch.allclose(got.cpu(), _shaped(x), rtol=1e-5, atol=1e-5):
            problems.append(f"shape ({rows}, 8): the compiled result differs from eager by "
                            f"{float((got.cpu() - _shaped(x)).abs().max()):.3g}")
    record_data(backend=compile_backend, graphs_per_call=graphs,
                recompiles=graphs[-1] - 1, dynamic=graphs[3] == graphs[2])
    assert graphs[1] == graphs[0] == 1, (
        f"the same shape compiled again (graphs after each call: {graphs}): guards fail")
    assert graphs[2] >= 2 or graphs[3] >= 2 or graphs == [1, 1, 1, 1], graphs
    assert not problems, "; ".join(problems)


def _with_break(x: Any) -> Any:
    import torch

    y = x.cos() + 1
    torch._dynamo.graph_break()
    return y * x.sin()


def test_graph_break(compile_backend: str, device: Any, record_data: Any) -> None:
    """A function with one graph break runs as two graphs and stays right."""
    import torch

    run.in_budget(False)
    counters = run.reset()
    fast = run.compiled(_with_break, compile_backend, f"graph break ({compile_backend})")
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(SEED))
    got = run.run(f"graph break ({compile_backend})", lambda: fast(x.to(device)))
    breaks = oota_compile.graph_breaks(counters["graph_break"])
    record_data(backend=compile_backend, graphs=counters["stats"]["unique_graphs"], **breaks)
    assert breaks["graph_breaks"] == 1, (
        f"Dynamo counted {breaks} for one torch._dynamo.graph_break()")
    assert torch.allclose(got.cpu(), _with_break(x), rtol=1e-5, atol=1e-5), (
        f"graph break ({compile_backend}): the compiled result differs from eager by "
        f"{float((got.cpu() - _with_break(x)).abs().max()):.3g}")


def _fused(x: Any, w: Any, b: Any) -> Any:
    import torch

    hidden = torch.nn.functional.gelu(x @ w + b)
    return torch.nn.functional.layer_norm(hidden, hidden.shape[-1:]) * x


def _op_case(op_name: str, dtype: Any) -> tuple[Callable[..., Any], tuple[Any, ...], dict]:
    """The function compiled and its CPU arguments: the fused chain, or the OpInfo operator's
    first sample input."""
    import oota_opinfo
    import torch

    torch.manual_seed(SEED)
    if op_name == oota_compile.FUSED:
        return _fused, (torch.randn(8, 16, dtype=dtype), torch.randn(16, 16, dtype=dtype),
                        torch.randn(16, dtype=dtype)), {}
    op = oota_opinfo.by_name()[op_name]
    sample = oota_opinfo.samples(op, "cpu", dtype, reference=False, limit=1)[0]
    return op.op, (sample.input, *sample.args), dict(sample.kwargs)


def _moved(value: Any, to: Callable[[Any], Any]) -> Any:
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: to(t) if hasattr(t, "is_floating_point") else t, value)


def test_compiled_op(compile_backend: str, compile_op: str, compile_dtype: str, device: Any,
                     spec: dict[str, Any], record_data: Any) -> None:
    import torch

    must = compile_dtype == "float32" and compile_op == oota_compile.FUSED
    run.in_budget(must)
    dtype = getattr(torch, compile_dtype)
    op_fn, args, kwargs = _op_case(compile_op, dtype)

    def fn(*a: Any, **k: Any) -> Any:
        # A frame of the suite's own: Dynamo skips a torch function's frame compiled directly
        # (nn.functional's silu and layer_norm gave no graph and ran eagerly, passing).
        return op_fn(*a, **k)

    wide = fn(*_moved(args, lambda t: t.double() if t.is_floating_point() else t),
              **_moved(kwargs, lambda t: t.double() if t.is_floating_point() else t))
    want = fn(*args, **kwargs)
    counters = run.reset()
    head = f"{compile_op} ({compile_dtype}) compiled by {compile_backend}"
    fast = run.compiled(fn, compile_backend, head)
    on_device, device_kwargs = _moved(args, lambda t: t.to(device)), _moved(kwargs,
                                                                           lambda t: t.to(device))
    got = run.run(head, lambda: fast(*on_device, **device_kwargs))
    verdict = run.judge_outputs(got, want, wide, rule=run.rule(spec, compile_dtype),
                             dtype=compile_dtype, device=device, head=head)
    record_data(op=compile_op, dtype=compile_dtype, backend=compile_backend, must_run=must,
                graphs=counters["stats"]["unique_graphs"],
                worst=verdict.ratio, **oota_compile.graph_breaks(counters["graph_break"]))
    run.graphs_captured(counters, head)
    assert verdict.status == "passed", verdict.message


