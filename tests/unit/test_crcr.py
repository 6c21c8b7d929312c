"""`report --format crcr`: crcr.json, the callback payload of PyTorch's cross-repository CI relay
(RFC-0050): its fields, the honest mapping of our statuses to the relay's conclusion, the CI
run it describes, and its schema."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from oota.api.fields import parse
from oota.api.reports import report
from oota.api.requests import ReportRequest
from oota.errors import InputError
from oota.report import crcr
from tests import forkcli
from tests.reports import build_report
from tests.unit.test_report import NOW, case, make_result, refresh, typed, write_results

REPO = Path(__file__).resolve().parents[2]
GITHUB = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "lab/oota-ci",
          "GITHUB_RUN_ID": "4242", "GITHUB_RUN_ATTEMPT": "2", "GITHUB_WORKFLOW": "oota matrix",
          "GITHUB_JOB": "merge", "GITHUB_EVENT_NAME": "schedule"}
RUN_URL = "https://github.com/lab/oota-ci/actions/runs/4242"


def with_status(status: str, python: str = "3.11") -> dict[str, Any]:
    result = make_result("cpu", python=python, tests=[case("test_install.py::test_imports",
                                                           "install")])
    result["status"] = status  # the cell's outcome as the report reads it
    return result


def honest(status: str, python: str = "3.11") -> dict[str, Any]:
    """A cell whose one test ended ``status``, its status and summary derived from it (a file
    on disk is checked: its status must follow from its tests)."""
    return refresh(make_result("cpu", python=python, tests=[
        case("test_install.py::test_imports", "install", status)]))


def payload(results: list[dict[str, Any]], problems: tuple[str, ...] = (),
            env: dict[str, str] | None = None, artifact: str | None = None) -> dict[str, Any]:
    report = build_report(typed(results), problems, generated_at=NOW)
    ci = crcr.CiRun.from_env(env or {})
    data = crcr.payload(report, ci, crcr.artifact_url(artifact, ci))
    assert crcr.validation_errors(data) == []
    return data


@pytest.mark.parametrize(("statuses", "conclusion"), [
    pytest.param(["passed"], "success", id="passed"),
    pytest.param(["passed", "failed"], "failure", id="failed"),
    pytest.param(["passed", "error"], "failure", id="error-is-a-failed-job"),
    pytest.param(["failed", "interrupted"], "cancelled", id="interrupted"),
    pytest.param(["passed", "unsupported-here"], "neutral", id="no-hardware-is-not-success"),
    pytest.param(["skipped"], "skipped", id="only-skipped"),
    pytest.param(["passed", "skipped"], "success", id="passed-and-skipped"),
    pytest.param(["passed", "flaky"], "neutral", id="flaky-is-not-success-nor-failure"),
])
def test_conclusion_is_the_worst_cell_mapped_honestly(statuses: list[str],
                                                      conclusion: str) -> None:
    results = [with_status(s, python=f"3.{10 + i}") for i, s in enumerate(statuses)]
    assert payload(results)["workflow"]["conclusion"] == conclusion


def test_an_unreadable_result_is_not_a_success() -> None:
    data = payload([with_status("passed")], problems=("results/x/result.json: unreadable",))
    assert data["workflow"]["conclusion"] == "failure"


def test_nothing_to_report_is_neutral() -> None:
    assert payload([])["workflow"]["conclusion"] == "neutral"


def test_test_counts_keep_failures_apart_from_errors_and_no_hardware() -> None:
    result = make_result("cpu", tests=[
        case("test_install.py::test_imports", "install"),
        case("test_device.py::test_matmul", "device", "failed", "mismatch"),
        case("test_device.py::test_sort", "device", "unsupported-here", "no GPU"),
        case("test_models.py::test_forward[resnet]", "models", "skipped", "no torchvision"),
        case("test_compat.py::test_op", "compat", "error", "fixture broke"),
        case("test_compat.py::test_slow", "compat", "interrupted", "SIGTERM"),
        case("test_ops.py::test_op_matches_cpu[tanh-float32]", "ops", "flaky", "retried")])
    counts = payload([refresh(result)])["workflow"]["test_results"]
    assert counts == {"passed": 1, "failed": 1, "skipped": 2, "total": 7}  # flaky: no pass


def test_the_payload_outside_ci_has_nulls_and_no_artifact_url() -> None:
    data = payload([with_status("passed")])
    assert data["event_type"] is None and data["delivery_id"] is None and data["payload"] is None
    workflow = data["workflow"]
    assert workflow["schema_version"] == "1" and workflow["status"] == "completed"
    assert workflow["name"] == "oota" and workflow["url"] is None and workflow["run_id"] is None
    assert workflow["completed_at"] == NOW and workflow["started_at"] is None
    assert "artifact_url" not in workflow


def test_github_actions_gives_the_run_and_its_url() -> None:
    workflow = payload([with_status("passed")], env=GITHUB)["workflow"]
    assert workflow["url"] == RUN_URL and workflow["artifact_url"] == RUN_URL
    assert (workflow["run_id"], workflow["run_attempt"]) == ("4242", "2")
    assert workflow["name"] == "oota matrix" and workflow["job_name"] == "merge"
    assert workflow["check_run_id"] == "4242-2"


def test_an_explicit_artifact_url_wins() -> None:
    url = "https://lab.example/oota/2026-11-23/"
    assert payload([with_status("passed")], env=GITHUB,
                   artifact=url)["workflow"]["artifact_url"] == url


def test_a_relay_dispatch_is_answered_with_its_envelope(tmp_path: Path) -> None:
    envelope = {"event_type": "pull_request", "delivery_id": "d-77",
                "payload": {"pull_request": {"number": 12, "head": {"sha": "ab" * 20}}}}
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "pull_request", "client_payload": envelope}),
                     encoding="utf-8")
    env = GITHUB | {"GITHUB_EVENT_NAME": "repository_dispatch", "GITHUB_EVENT_PATH": str(event)}
    data = payload([with_status("passed")], env=env)
    assert data["event_type"] == "pull_request" and data["delivery_id"] == "d-77"
    assert data["payload"] == envelope["payload"]


@pytest.mark.parametrize(("url", "message"), [
    pytest.param("ftp://lab.example/x", r"not an http\(s\) URL", id="scheme"),
    pytest.param("lab.example/x", r"not an http\(s\) URL", id="no-scheme"),
    pytest.param("https://user:hunter2@lab.example/x", "holds a credential", id="password"),
])
def test_a_bad_artifact_url_is_bad_input(url: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        crcr.artifact_url(url, crcr.CiRun())
    assert "hunter2" not in str(caught.value)


def test_the_schema_cites_the_rfc_and_rejects_what_the_relay_would() -> None:
    assert "RFC-0050" in str(crcr.schema()["description"])
    good = payload([with_status("passed")])
    for broken in ({**good["workflow"], "conclusion": "passed"},
                   {k: v for k, v in good["workflow"].items() if k != "test_results"},
                   {**good["workflow"], "artifact_url": "https://u:p@host/x"}):
        assert crcr.validation_errors({**good, "workflow": broken}) != []


def test_unknown_format_and_lone_artifact_url_are_bad_input(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", [with_status("passed")])
    with pytest.raises(InputError, match="--format 'html' is not one of crcr"):
        report(str(results), str(tmp_path / "reports"), formats="html")
    with pytest.raises(InputError, match="add --format crcr"):
        parse(ReportRequest, results=str(results), artifact_url="https://x.example/")


def test_format_crcr_through_the_command(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", [with_status("passed"),
                                                   honest("unsupported-here", "3.13")])
    out = tmp_path / "reports"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    proc = forkcli.run(
        [sys.executable, "-m", "oota", "report", "--results", str(results), "--out", str(out),
         "--format", "crcr", "--artifact-url", "https://lab.example/run/9"],
        cwd=REPO, text=True, capture_output=True, timeout=120, check=False,
        env=env | GITHUB | {"PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert f"{out}/crcr.json" in proc.stdout
    data = json.loads((out / "crcr.json").read_text(encoding="utf-8"))
    assert crcr.validation_errors(data) == []
    assert data["workflow"]["conclusion"] == "neutral"
    assert data["workflow"]["artifact_url"] == "https://lab.example/run/9"
    assert data["workflow"]["url"] == RUN_URL
    assert (out / "matrix.md").is_file() and (out / "index.html").is_file()
