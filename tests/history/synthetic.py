"""Synthetic histories: cells' outcomes over daily runs spelled as a string (``P`` passed,
``F`` failed, ``E`` error, ``S`` skipped, ``~`` flaky, ``.`` not in that run), built straight
into the :class:`~oota.history.timeline.Timeline` the HUD reads, or as result files for a real
store."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from oota.history.records import Inputs
from oota.history.timeline import (
    CellSeries,
    MetricPoint,
    MetricSeries,
    Outcome,
    RunHead,
    Timeline,
)
from oota.results.model import CellRef
from tests.history.helpers import result
from tests.unit.test_report import refresh

T0 = dt.datetime(2026, 11, 1, 6, 0, tzinfo=dt.timezone.utc)
STATUS = {"P": "passed", "F": "failed", "E": "error", "S": "skipped", "~": "flaky"}
BASE = Inputs(torch="2.13.0+cpu", toolkit=None, base="oota/base:debian12", fingerprint="f1",
              host="lab-a", suite="0.1.0")
WORKLOAD = "test_workload.py::test_inference[tiny]"


def day(i: int) -> dt.datetime:
    return T0 + dt.timedelta(days=i)


def runs(count: int) -> tuple[RunHead, ...]:
    return tuple(RunHead(id=i + 1, key=f"r{i + 1:03d}", origin="verify",
                         started_at=day(i).isoformat()) for i in range(count))


def ref(cell_id: str, vendor: str = "cpu") -> CellRef:
    return CellRef(id=cell_id, vendor=vendor, os="debian12", python="3.11", torch="2.13.0",
                   toolkit=None, toolkit_version=None, fingerprint="f1")


def series(cell_id: str, marks: str, heads: tuple[RunHead, ...], *, vendor: str = "cpu",
           inputs: Mapping[int, Inputs] | None = None) -> CellSeries:
    """``marks[i]`` is the outcome in run i; ``inputs[i]`` the inputs from run i on."""
    changes = dict(inputs or {})
    current, found = BASE, []
    for i, mark in enumerate(marks):
        current = changes.get(i, current)
        if mark != ".":
            found.append(Outcome(run=heads[i], status=STATUS[mark],  # type: ignore[arg-type]
                                 message="mismatch 0.5" if mark == "F" else "",
                                 inputs=current))
    return CellSeries(cell=ref(cell_id, vendor), outcomes=tuple(found))


def metric(cell_id: str, values: list[float], heads: tuple[RunHead, ...],
           name: str = "latency_median_s", host: str = "lab-a") -> MetricSeries:
    return MetricSeries(cell_id=cell_id, host=host, test_id=WORKLOAD, name=name, points=tuple(
        MetricPoint(run=heads[i], value=v, good=True) for i, v in enumerate(values)))


def timeline(cells: dict[str, str], *, inputs: Mapping[str, Mapping[int, Inputs]] | None = None,
             metrics: tuple[MetricSeries, ...] = ()) -> Timeline:
    count = max(len(m) for m in cells.values())
    heads = runs(count)
    return Timeline(runs=heads, metrics=metrics, cells=tuple(
        series(cell, marks, heads, vendor=cell.split("-")[0],
               inputs=(inputs or {}).get(cell)) for cell, marks in cells.items()))


COMPILED = "test_compile.py::test_compiled_model[inductor-llama]"


def result_at(run_id: str, when: dt.datetime, *, matmul: str = "passed",
              torch: str = "2.13.0+cpu", latency: float | None = None,
              speedup: float | None = None, **more: Any) -> dict[str, Any]:
    """A cell's result.json of run ``run_id`` started at ``when`` (a workload test with
    ``latency``, a compiled model with ``speedup``, when given)."""
    data = result(run_id, 1, matmul=matmul, torch=torch, **more)
    data["started_at"] = when.isoformat(timespec="seconds")
    data["finished_at"] = (when + dt.timedelta(minutes=30)).isoformat(timespec="seconds")
    if latency is not None:
        data["tests"].append({"id": WORKLOAD, "layer": "workload", "status": "passed",
                              "duration_s": 1.0, "data": {"latency_median_s": latency,
                                                          "latency_p90_s": latency * 1.1}})
    if speedup is not None:
        data["tests"].append({"id": COMPILED, "layer": "compile", "status": "passed",
                              "duration_s": 1.0, "data": {"model": "llama", "speedup": speedup,
                                                          "compile_s": 4.5}})
    return refresh(data)
