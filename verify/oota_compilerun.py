"""What the compile layer's tests share (verify/test_compile.py, test_compile_programs.py): the
vendor's claims and the cases they make, the time budget, and compiling and running a case so
that an error fails it by name (never a skip).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import oota_budget
import oota_compile
import oota_judge
import oota_rules
import pytest
from oota_claims import NOT_CLAIMED
from oota_suite import verify_spec

LAYER = "compile"
CLAIMS = oota_compile.Claims.from_spec(verify_spec())
BUDGET = oota_budget.Budget(0.0, oota_compile.BUDGET_VARIABLE)
if oota_budget.selected(LAYER, os.environ):
    BUDGET.seconds = oota_budget.budget_seconds(oota_compile.BUDGET_VARIABLE,
                                                oota_compile.DEFAULT_BUDGET_S, os.environ)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    spec = verify_spec()
    backends = [pytest.param(b, id=b) for b in CLAIMS.backends]
    none = [pytest.param(None, id="none", marks=pytest.mark.skip(
        reason=f"{NOT_CLAIMED}torch.compile: the vendor claims no backend "
               f"({oota_compile.SPEC_KEY})"))]
    if "compile_backend" in metafunc.fixturenames:
        metafunc.parametrize("compile_backend", backends or none)
    if "compile_model" in metafunc.fixturenames:
        metafunc.parametrize("compile_model", CLAIMS.models or ["none"])
    if "compile_op" in metafunc.fixturenames:
        cases = [(op, d) for d in oota_compile.dtypes(spec.get("dtypes") or ["float32"])
                 for op in (oota_compile.FUSED, *oota_compile.OPS)]
        metafunc.parametrize("compile_op,compile_dtype", cases,
                             ids=[f"{op}-{d}" for op, d in cases])
    if "unclaimed" in metafunc.fixturenames:
        declared = "compile" in spec
        pairs = CLAIMS.unclaimed(declared)
        metafunc.parametrize("unclaimed", pairs or [("none", "")],
                             ids=[name for name, _ in pairs] or ["none"])


def in_budget(must_run: bool) -> None:
    late = BUDGET.skip_reason(must_run)
    if late:
        pytest.skip(late)


def compiled(fn: Any, backend: str, what: str, mode: str | None = None) -> Any:
    import torch

    try:
        return torch.compile(fn, backend=backend, mode=mode)
    except Exception as exc:  # a backend that cannot even be set up fails the case
        pytest.fail(f"{what}: torch.compile(backend={backend!r}) raised "
                    f"{oota_compile.first_lines(exc)}", pytrace=False)


def run(what: str, call: Callable[[], Any]) -> Any:
    """``call()``; an error (compiling happens on the first call) fails the case by name."""
    try:
        return call()
    except Exception as exc:
        pytest.fail(f"{what}: {oota_compile.first_lines(exc)}", pytrace=False)


def reset() -> Any:
    import torch
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    return counters


def graphs_captured(counters: Any, head: str) -> int:
    """The graphs Dynamo captured since :func:`reset`; a case that captured none fails: what
    ran was eager mode (a frame Dynamo skips, Dynamo disabled, a backend error suppressed into
    eager), never evidence of the backend."""
    graphs = int(counters["stats"]["unique_graphs"])
    if graphs < 1:
        pytest.fail(f"{head}: Dynamo captured no graph, so what ran was eager mode, not the "
                    "backend", pytrace=False)
    return graphs


def rule(spec: dict[str, Any], dtype_name: str) -> Any:
    try:
        return oota_rules.float64_rule(dtype_name, spec.get("judge"),
                                       (spec.get("tolerances") or {}).get(dtype_name))
    except oota_rules.RuleError as exc:
        pytest.fail(f"cell.json verify: {exc}", pytrace=False)


def judge_outputs(got: Any, want: Any, wide: Any, *, rule: Any, dtype: str, device: Any,
                   head: str) -> Any:
    """The float64 rule's verdict on every tensor of an output (a tensor or a tuple)."""
    from torch.utils._pytree import tree_leaves

    leaves = list(zip(tree_leaves(got), tree_leaves(want), tree_leaves(wide), strict=True))
    named = [(f"output {i}", g.detach().cpu(), w.detach(), r.detach())
             for i, (g, w, r) in enumerate(leaves) if hasattr(g, "detach")]
    return oota_judge.judge_named(named, rule=rule, dtype=dtype, device_name=device.type,
                                  head=head)


def require(name: str) -> None:
    """Skip the running test as not claimed unless the vendor claims mode or feature
    ``name``."""
    if not CLAIMS.claims(name):
        pytest.skip(f"{NOT_CLAIMED}{name}: {CLAIMS.why_not(name)}")
