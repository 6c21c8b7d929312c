"""The workload layer for real: the session's CPU cell, built and verified through oota
(tests/docker/conftest.py ``built``), trains each model the CPU vendor names for its workload,
times inference and records the figures; the report's cell page shows them."""

from __future__ import annotations

from typing import Any

from oota.config.vendors import load_vendor
from oota.report.write import write_report

from .conftest import DEFAULT_CELL, REPO, Built


def _workload_tests(built: Built) -> dict[str, dict[str, Any]]:
    (result,) = built.results
    return {t["id"]: t for t in result["tests"] if t["layer"] == "workload"}


def test_each_model_trains_and_records_its_figures(built: Built) -> None:
    workload = load_vendor(REPO / "vendors" / "cpu").verify.workload
    assert workload is not None, "vendors/cpu/vendor.yaml runs the workload layer"
    tests = _workload_tests(built)
    assert sorted(tests) == sorted(f"test_workload.py::test_workload[{m}]"
                                   for m in workload.models)
    for test in tests.values():
        assert test["status"] == "passed", test
        data = test["data"]
        assert data["train_steps"] == workload.train_steps
        assert data["timed_forwards"] == workload.timed_forwards
        assert data["loss_final"] < data["loss_first"], data   # the loss fell
        assert 0 < data["latency_median_s"] <= data["latency_p90_s"]
        assert data["train_steps_per_s"] > 0
        # The CPU vendor's device is the CPU: no curve to compare, and torch.cpu keeps no
        # memory statistics: both absent, not 0.
        assert data["loss_max_dev_vs_cpu"] is None
        assert data["vs_cpu"] == "n/a: the device is the CPU"
        assert data["peak_device_bytes"] is None


def test_the_cell_page_shows_the_workload(built: Built, tmp_path: Any) -> None:
    write_report(built.results_dir, tmp_path / "reports")
    page = (tmp_path / "reports" / "cells" / f"{DEFAULT_CELL}.html").read_text()
    section = page[page.index('id="workload"'):]
    section = section[:section.index("</table>")]
    assert "<td>llama</td>" in section and "n/a: the device is the CPU" in section
