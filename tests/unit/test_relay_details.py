"""What crcr.json tells the relay beyond counts: the failed tests (id, message, the first lines
of the stack, within the relay's limits) and a triage verdict from the history."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from oota.history.records import Inputs
from oota.history.timeline import CellSeries, Outcome, RunHead, Timeline
from oota.report import crcr
from oota.report.failures import FailedTest, failed_tests, sections
from oota.report.relaydetail import (
    MESSAGE_BYTES,
    PAYLOAD_BYTES,
    STACK_BYTES,
    cut,
    detail,
    triage_verdict,
)
from oota.report.triage import CellTriage, side, triage, verdict_of
from oota.report.write import write_report
from oota.results.model import CellRef
from tests.reports import build_report
from tests.unit.test_report import NOW, case, make_result, typed, write_results

CELL = "cpu-torch2.13.0-py3.11-debian12"
FAIL = "test_device.py::test_matmul"
LOG = """\
=================================== FAILURES ===================================
_________________________________ test_matmul __________________________________
    def test_matmul():
>       assert mm(a, b) == expected
E       AssertionError: max abs diff 0.5
verify/test_device.py:42: AssertionError
=========================== short test summary info ============================
FAILED test_device.py::test_matmul - AssertionError
"""


def failing(message: str = "AssertionError: max abs diff 0.5",
            status: str = "failed") -> dict[str, Any]:
    return make_result("cpu", tests=[case("test_install.py::test_imports", "install"),
                                     case(FAIL, "device", status, message)])


def test_the_stack_comes_from_the_copys_verify_log(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", [failing()])
    (results / CELL / "verify.log").write_text(LOG, encoding="utf-8")
    write_report(results, tmp_path / "reports")
    report = build_report(typed([failing()]), (), generated_at=NOW)
    assert failed_tests(report)[0].stack == ""  # read from no folder: messages only
    from oota.report.data import collect
    (found,) = failed_tests(collect(results))
    assert found.test == FAIL and found.status == "failed" and found.cell == CELL
    assert found.stack.splitlines() == ["    def test_matmul():",
                                        ">       assert mm(a, b) == expected",
                                        "E       AssertionError: max abs diff 0.5",
                                        "verify/test_device.py:42: AssertionError"]


def test_pytests_short_headers_are_sections_too() -> None:
    log = ["_ test_op[nn.functional.very_long_name-bfloat16] _", "boom", "___ test_y ___",
           "why", "=== warnings summary ==="]
    assert sections(log) == {"test_op[nn.functional.very_long_name-bfloat16]": "boom",
                             "test_y": "why"}


def test_a_build_that_failed_a_cell_is_a_failure_too() -> None:
    broken = make_result("cuda", toolkit="cuda", toolkit_version="13.0", build="failed",
                         build_message="pip: no matching distribution")
    (found,) = failed_tests(build_report(typed([broken]), (), generated_at=NOW))
    assert found.test == "stage build" and "no matching distribution" in found.message


def test_entries_follow_the_actions_fields_and_limits() -> None:
    big = FailedTest(cell=CELL, origin="lab-b", test=FAIL, status="failed",
                     message="é" * 2000, duration_s=1.23456, stack="x" * 10_000)
    (entry,) = detail([big], PAYLOAD_BYTES)
    assert set(entry) == {"name", "classname", "message", "stacktrace", "duration"}
    assert entry["classname"] == f"{CELL} @ lab-b" and entry["duration"] == 1.235
    assert len(entry["message"].encode()) <= MESSAGE_BYTES and entry["message"].endswith("…")
    assert len(entry["stacktrace"].encode()) <= STACK_BYTES
    assert cut("short", 10) == "short"


def test_the_body_stays_under_the_huds_limit() -> None:
    """1,500 failures with 4 KB stacks would make 6 MB: the first 1,000 go with their
    messages, then stacks in order while room is left."""
    many = [FailedTest(cell=CELL, origin="", test=f"{FAIL}[{i}]", status="failed",
                       message="m" * 900, duration_s=0.1, stack="s" * 5000) for i in range(1500)]
    entries = detail(many, PAYLOAD_BYTES)
    assert len(entries) == 1000
    assert len(json.dumps(entries).encode()) < PAYLOAD_BYTES
    assert "stacktrace" in entries[0] and "stacktrace" not in entries[-1]


def run(i: int, hours: float) -> RunHead:
    when = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=hours)
    return RunHead(id=i, key=f"r{i}", origin="merge", started_at=when.isoformat())


def history(*outcomes: tuple[str, Inputs, tuple[str, ...]], cell: str = CELL) -> Timeline:
    heads = [run(i + 1, 24 * i) for i in range(len(outcomes))]
    ref = CellRef(id=cell, vendor="cpu", os="debian12", python="3.11", torch="2.13.0",
                  toolkit=None, toolkit_version=None, fingerprint="f1")
    return Timeline(runs=tuple(heads), metrics=(), cells=(CellSeries(cell=ref, outcomes=tuple(
        Outcome(run=h, status=s, message="", inputs=i, failed_tests=f)  # type: ignore[arg-type]
        for h, (s, i, f) in zip(heads, outcomes, strict=True))),))


OLD = Inputs(torch="2.13.0", torch_git="a" * 40, toolkit="rocm 6.1", fingerprint="f1",
             host="lab", suite="0.1.0")
NEW_TORCH = Inputs(torch="2.13.1", torch_git="b" * 40, toolkit="rocm 6.1", fingerprint="f2",
                   host="lab", suite="0.1.0")
NEW_TOOLKIT = Inputs(torch="2.13.0", torch_git="a" * 40, toolkit="rocm 6.2", fingerprint="f2",
                     host="lab", suite="0.1.0")
BOTH = Inputs(torch="2.13.1", torch_git="b" * 40, toolkit="rocm 6.2", fingerprint="f2",
              host="lab", suite="0.1.0")
ERR = ("test_device.py::test_matmul",)


@pytest.mark.parametrize(("timeline", "category", "confidence"), [
    pytest.param(None, "unknown", "low", id="no-history"),
    pytest.param(history(("passed", OLD, ()), ("failed", NEW_TORCH, ERR)), "upstream", "high",
                 id="torch-changed"),
    pytest.param(history(("passed", OLD, ()), ("failed", NEW_TOOLKIT, ERR)), "backend", "high",
                 id="toolkit-changed"),
    pytest.param(history(("passed", OLD, ()), ("failed", BOTH, ERR)), "unknown", "low",
                 id="both-changed"),
    pytest.param(history(("failed", OLD, ERR)), "unknown", "low", id="never-passed"),
    pytest.param(history(("passed", OLD, ()), ("failed", OLD, ERR), ("passed", OLD, ()),
                         ("failed", OLD, ERR)), "flake", "medium", id="flaky-before"),
    pytest.param(history(("passed", OLD, ()), ("failed", OLD, ERR)), "unknown", "low",
                 id="nothing-changed"),
])
def test_triage_from_the_history(timeline: Timeline | None, category: str,
                                 confidence: str) -> None:
    report = build_report(typed([failing()]), (), generated_at=NOW)
    (found,) = triage(report.groups, timeline)
    assert (found.category, found.confidence) == (category, confidence), found.why


def test_an_error_is_infra_whatever_the_history() -> None:
    errored = failing(status="error", message="fixture broke: no space left on device")
    report = build_report(typed([errored]), (), generated_at=NOW)
    (found,) = triage(report.groups, history(("passed", OLD, ()), ("failed", NEW_TORCH, ERR)))
    assert found.category == "infra" and "no space left" in found.why


@pytest.mark.parametrize(("change", "where"), [
    ("torch 2.13.0 -> 2.13.1", "upstream"), ("torch commit aaa -> bbb", "upstream"),
    ("requirement torch==2.13.0 -> torch==2.13.1", "upstream"),
    ("requirement torch-npu==2.13.0 -> torch-npu==2.13.1", "backend"),
    ("toolkit rocm 6.1 -> rocm 6.2", "backend"), ("base image a -> b", "backend"),
    ("pass_env REFDEV_WRONG_OP: unset -> tanh", "backend"), ("oota 0.1.0 -> 0.2.0", "neutral"),
    ("host lab-a -> lab-b", "neutral"), ("fingerprint f1 -> f2", "neutral"),
])
def test_which_side_a_change_is_on(change: str, where: str) -> None:
    assert side(change) == where


def cells(*categories: str) -> list[CellTriage]:
    return [CellTriage(cell=f"c{i}", category=c, confidence="high", why="w")  # type: ignore[arg-type]
            for i, c in enumerate(categories)]


@pytest.mark.parametrize(("categories", "verdict"), [
    (("backend",), ("backend", "high")), (("upstream", "infra"), ("upstream", "medium")),
    (("upstream", "backend"), ("unknown", "low")), (("infra", "infra"), ("infra", "high")),
    (("infra", "flake"), ("infra", "low")), (("unknown",), ("unknown", "low")),
])
def test_one_verdict_for_the_job(categories: tuple[str, ...], verdict: tuple[str, str]) -> None:
    assert verdict_of(cells(*categories)) == verdict


def test_the_verdict_keeps_the_relays_rules() -> None:
    """schema_version 1; category, confidence and a non-empty summary of at most 1,000
    characters; at most 10 evidence entries; suspected_upstream only for upstream, naming a
    commit; under 16 KiB in all (test-infra's utils/triage_verdict.py)."""
    failures = [FailedTest(cell=CELL, origin="", test=f"t{i}", status="failed",
                           message="   " if i == 0 else "x" * 3000, duration_s=0)
                for i in range(30)]
    upstream = [CellTriage(cell=CELL, category="upstream", confidence="high", why="w" * 2000,
                           commit="b" * 40)]
    verdict = triage_verdict(upstream, failures, NOW, shown=12)
    assert verdict is not None
    assert verdict["schema_version"] == 1 and verdict["category"] == "upstream"
    assert 0 < len(verdict["summary"]) <= 1000
    assert verdict["suspected_upstream"]["commit"] == "b" * 40
    assert len(verdict["evidence"]) <= 10 and verdict["evidence"][0]["excerpt"] == "failed"
    assert len(json.dumps(verdict).encode()) <= 16 * 1024
    backend = triage_verdict(cells("backend"), failures, NOW, shown=30)
    assert backend is not None and "suspected_upstream" not in backend
    assert triage_verdict([], [], NOW, shown=0) is None


def test_crcr_json_carries_the_details_and_the_verdict(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", [failing()])
    (results / CELL / "verify.log").write_text(LOG, encoding="utf-8")
    from oota.api.reports import report
    report(str(results), str(tmp_path / "reports"), formats="crcr")
    data = json.loads((tmp_path / "reports/crcr.json").read_text("utf-8"))
    assert crcr.validation_errors(data) == []
    workflow = data["workflow"]
    (entry,) = workflow["failed_tests_detail"]
    assert entry["name"] == FAIL and entry["classname"] == CELL
    assert entry["message"] == "failed: AssertionError: max abs diff 0.5"
    assert "assert mm(a, b) == expected" in entry["stacktrace"]
    verdict = workflow["triage_verdict"]
    assert (verdict["category"], verdict["confidence"]) == ("unknown", "low")
    assert verdict["summary"] == f"{CELL}: unknown (no history of this failure)"
    assert verdict["evidence"] == [{"job": CELL, "test": FAIL,
                                    "excerpt": "AssertionError: max abs diff 0.5"}]


def test_a_run_that_passed_adds_neither(tmp_path: Path) -> None:
    report = build_report(typed([make_result("cpu", tests=[case(FAIL, "device")])]), (),
                          generated_at=NOW)
    workflow = crcr.payload(report, crcr.CiRun(), None, failures=failed_tests(report),
                            triage=triage(report.groups, None))["workflow"]
    assert "failed_tests_detail" not in workflow and "triage_verdict" not in workflow
