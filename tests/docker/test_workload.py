"""The workload layer for real: the session's CPU and reference cells, built and verified
through oota (tests/docker/conftest.py ``built``, ``reference_built``), train each model their
vendor names for its workload, time inference and record the figures; on refdev the loss curve
is compared with the CPU's and the device's peak memory is reported. The report's cell page
shows the figures."""

from __future__ import annotations

from typing import Any

from oota.config.vendors import load_vendor
from oota.report.write import write_report

from .conftest import DEFAULT_CELL, REPO, Built


def _workload_tests(built: Built) -> dict[str, dict[str, Any]]:
    """The workload layer's tests of the one cell ``built`` verified, by id."""
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


def test_on_refdev_the_curve_follows_the_cpu_and_peak_memory_is_reported(
        reference_built: Built) -> None:
    workload = load_vendor(REPO / "vendors" / "reference").verify.workload
    assert workload is not None, "vendors/reference/vendor.yaml runs the workload layer"
    tests = _workload_tests(reference_built)
    assert len(tests) == len(workload.models)
    for test in tests.values():
        assert test["status"] == "passed", test
        data = test["data"]
        # Passed: every step's loss was within the tolerance of the CPU's; the figure says by
        # how much at most.
        assert data["vs_cpu"] == "compared" and data["loss_max_dev_vs_cpu"] >= 0
        assert data["loss_final"] < data["loss_first"], data
        assert data["peak_device_bytes"] > 0   # refdev keeps its allocator's statistics
