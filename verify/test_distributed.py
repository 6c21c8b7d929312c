"""Distributed layer: torch.distributed's collectives and DDP on the vendor's backend and device.

What the vendor claims (``verify.distributed`` in vendor.yaml, shipped in cell.json): its c10d
backend (``gloo`` for the CPU, ``nccl``, ``xccl``, ``hccl``, refdev's ``refccl``, ...), the
world sizes its host runs, the dtypes (default: ``verify.dtypes``) and whether all_to_all is
claimed. A vendor that claims none has every test here skipped as not claimed, never passed.

Per world size, ``world_size`` processes on this host run every case once
(``oota_distributed``, ``oota_distworker.py``): ``barrier``; ``all_reduce``, ``all_gather``,
``reduce_scatter``, ``broadcast`` (and ``all_to_all`` where claimed) in each dtype, every
rank's outputs checked element for element against the same collective computed on the CPU;
and a two-step DDP training of a tiny model whose losses, gradients and weights are judged
against one process on the CPU over the whole batch (oota_judge's float64 rule), every rank's
weights equal after it. A case no rank leaves within the deadline fails naming each rank and
where it was; a rank that dies fails its case with its exit and stack; cases a run never
reached are skipped, saying where it ended. Each test records {collective, dtype,
world_size, backend}.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import oota_distddp
import oota_judge
import oota_rules
import pytest
from oota_claims import NOT_CLAIMED
from oota_distributed import (
    REDUCTIONS,
    Case,
    Ending,
    Launch,
    deadline_s,
    dtypes_of,
    expected,
    mismatch,
    plan,
)
from oota_suite import verify_spec

LAYER = "distributed"
UNCLAIMED = (f"{NOT_CLAIMED}torch.distributed on the device: the vendor declares no "
             "collective backend (verify.distributed in its vendor.yaml)")


def _dist_spec() -> dict[str, Any]:
    return verify_spec().get("distributed") or {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per world size × case of the plan; one not-claimed skip without a claim."""
    if "dist_case" not in metafunc.fixturenames:
        return
    claim = _dist_spec()
    if not claim.get("backend"):
        metafunc.parametrize("world_size,dist_case", [pytest.param(
            0, None, id="none", marks=pytest.mark.skip(reason=UNCLAIMED))])
        return
    cases = plan(claim, dtypes_of(verify_spec()))
    metafunc.parametrize("world_size,dist_case", [
        pytest.param(int(w), case, id=f"world{w}-{case.id}")
        for w in claim.get("world_sizes") or [2] for case in cases
        if (case.collective == "ddp") == ("ddp" in metafunc.function.__name__)])


@dataclass
class Run:
    """One world size's run: the launch (its saved outputs) and how it ended."""

    launch: Launch
    ending: Ending | None


_RUNS: dict[int, Run] = {}


def _device_count(device: Any, device_module: Any) -> int | None:
    if device.type == "cpu" or not hasattr(device_module, "device_count"):
        return None
    return int(device_module.device_count())


@pytest.fixture
def dist_run(world_size: int, device: Any, device_module: Any, spec: dict[str, Any]) -> Run:
    """The run of every case on ``world_size`` ranks, started by the first test that needs it."""
    count = _device_count(device, device_module)
    if count is not None and count < world_size:
        pytest.skip(f"world size {world_size} needs {world_size} {device.type} devices; this "
                    f"host has {count}")
    if world_size not in _RUNS:
        claim = spec.get("distributed") or {}
        try:
            deadline = deadline_s(claim)
        except ValueError as exc:
            pytest.fail(str(exc), pytrace=False)
        launch = Launch(world=world_size, cases=plan(claim, dtypes_of(spec)), deadline=deadline)
        launch.start(os.environ)
        _RUNS[world_size] = Run(launch=launch, ending=launch.wait())
    return _RUNS[world_size]


def _outputs(run: Run, case: Case) -> list[Any]:
    """Every rank's outputs of ``case``; fails or skips it where the run did not finish it."""
    ending = run.ending
    if ending is not None and ending.index == case.index:
        pytest.fail(f"{case.words}: {ending.message}", pytrace=False)
    outputs = [run.launch.output(r, case.index) for r in range(run.launch.world)]
    if ending is not None and any(o is None for o in outputs):
        pytest.skip(f"not reached: the run on {run.launch.world} ranks ended in "
                    f"{run.launch.cases[ending.index].words}, which fails")
    assert all(o is not None for o in outputs), f"{case.words}: a rank saved no outputs"
    return outputs


def test_collective(world_size: int, dist_case: Case, dist_run: Run, spec: dict[str, Any],
                    tolerance: Any, record_data: Any) -> None:
    claim = spec.get("distributed") or {}
    record_data(collective=dist_case.collective, dtype=dist_case.dtype or None,
                world_size=world_size, backend=claim.get("backend"))
    outputs = _outputs(dist_run, dist_case)
    if dist_case.collective == "barrier":
        return
    loose = dist_case.collective in REDUCTIONS and world_size > 2
    problems = [mismatch(dist_case, rank, got, expected(dist_case, rank, world_size),
                         tolerance(dist_case.dtype) if loose else None)
                for rank, got in enumerate(outputs)]
    problems = [p for p in problems if p]
    if problems:
        pytest.fail(f"{dist_case.words} on {world_size} ranks ({claim.get('backend')}): "
                    + "; ".join(problems), pytrace=False)


def _named(ranks: list[dict[str, Any]], cpu: dict[str, Any], wide: dict[str, Any] | None
           ) -> list[tuple[str, Any, Any, Any]]:
    """(name, DDP's, the single process's, float64's) of every loss, gradient and weight."""
    import torch

    out = []
    for step in range(oota_distddp.STEPS):
        loss = torch.stack([r["losses"][step] for r in ranks]).mean()
        out.append((f"loss at step {step + 1}", loss, cpu["losses"][step],
                    wide["losses"][step] if wide else None))
        out += [(f"gradient of {n} at step {step + 1}", ranks[0]["grads"][step][n], g,
                 wide["grads"][step][n] if wide else None)
                for n, g in cpu["grads"][step].items()]
    out += [(f"weight {n} after {oota_distddp.STEPS} steps", ranks[0]["params"][n], p,
             wide["params"][n] if wide else None) for n, p in cpu["params"].items()]
    return out


def test_ddp_training(world_size: int, dist_case: Case, dist_run: Run, device: Any,
                      spec: dict[str, Any], record_data: Any) -> None:
    import torch

    dtype_name = str(spec.get("model_dtype") or "float32")
    record_data(collective="ddp", dtype=dtype_name, world_size=world_size,
                backend=(spec.get("distributed") or {}).get("backend"),
                steps=oota_distddp.STEPS)
    ranks = _outputs(dist_run, dist_case)
    for rank, result in enumerate(ranks[1:], start=1):
        differ = [n for n, p in result["params"].items()
                  if not torch.equal(p, ranks[0]["params"][n])]
        assert not differ, (f"ddp on {world_size} ranks: rank {rank}'s weights differ from "
                            f"rank 0's after {oota_distddp.STEPS} steps: {', '.join(differ)}")
    dtype = getattr(torch, dtype_name)
    cpu = oota_distddp.single_process(dtype, world_size)
    wide = oota_distddp.single_process(torch.float64, world_size)
    try:
        rule = oota_rules.float64_rule(dtype_name, spec.get("judge"),
                                       (spec.get("tolerances") or {}).get(dtype_name))
    except oota_rules.RuleError as exc:
        pytest.fail(f"cell.json verify: {exc}", pytrace=False)
    verdict = oota_judge.judge_named(_named(ranks, cpu, wide), rule=rule, dtype=dtype_name,
                                     device_name=f"{device.type} (DDP)",
                                     head=f"ddp ({dtype_name}) on {world_size} ranks against "
                                          "one process on the CPU")
    record_data(worst=verdict.ratio, judge=rule.describe())
    assert verdict.status == "passed", verdict.message
