"""Compile layer, whole programs: the modes claimed besides default, torch.export and an
AOTInductor package (see test_compile.py for what the layer checks and the vendor's claims in
cell.json ``verify.compile``). After test_compile.py, whose cases come first in the budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import oota_compile
import oota_compilerun as run
import pytest
from oota_compilerun import pytest_generate_tests  # noqa: F401 - the cases from cell.json
from test_compile import _fused
from test_models import SEED

LAYER = "compile"


@pytest.mark.parametrize("mode", [m for m in oota_compile.MODES if m != "default"])
def test_compile_mode(compile_backend: str, mode: str, device: Any, spec: dict[str, Any],
                      record_data: Any) -> None:
    """The fused chain compiled in a mode the vendor claims, against the CPU."""
    run.require(mode)
    if compile_backend != run.CLAIMS.backends[0]:
        pytest.skip(f"modes are claimed with the first backend, {run.CLAIMS.backends[0]}")
    run.in_budget(False)
    head = f"fused chain, mode {mode}"
    counters = run.reset()
    _judged_program(head, spec, device, record_data,
                    lambda fn: run.compiled(fn, compile_backend, f"mode {mode}", mode=mode))
    run.graphs_captured(counters, head)


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
