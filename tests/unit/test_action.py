"""oota's GitHub Action (action.yml, oota/api/ghaction.py): run by the workflow runner
(tests/workflow_runner.py) with quoted args, which reach ``oota build`` as words and never a
shell; the job summary holds the report's tables and each failed cell is an ``::error::``
annotation; a report an earlier run left is not summarised as this run's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from oota.api import ghaction
from oota.api.reports import report
from oota.errors import InputError
from tests import workflow_runner as runner
from tests.conftest import REPO
from tests.unit.test_report import make_result, write_results

FAILED_CELL = "cpu-torch2.13.0-py3.12-debian12"
# Installing oota from source into the action's venv took 116 s here (2026-11-28); the test
# stands in for that step with this interpreter, where oota is installed.
INSTALLED = {"install": {"python": sys.executable}}


@pytest.mark.parametrize("args", [
    pytest.param('--layer device --hosts "no such hosts.yaml" --results "$(touch pwned)"',
                 id="quoted-words"),
    pytest.param('["--layer", "device", "--hosts", "no such hosts.yaml", "--results", '
                 '"$(touch pwned)"]', id="json-list"),
])
def test_the_action_passes_quoted_args_as_words_never_to_a_shell(tmp_path: Path,
                                                                 args: str) -> None:
    run = runner.Run(work=tmp_path / "wf", event="push", vars={}, secrets={})
    done = runner.run_action(run, {"vendor": "cpu", "args": args}, stand_ins=INSTALLED)
    log = (run.work / "logs" / "action.log").read_text(encoding="utf-8")
    workspace = done["workspace"]
    assert done["result"] == "failure" and "--- exit 2" in log
    assert "error: no such hosts.yaml: file not found" in log   # one word, space and all
    assert not (workspace / "pwned").exists()                    # $(...) was never run
    assert done["outputs"] == {"report": str(workspace / "reports")}
    summaries = sorted((run.work / "logs").glob("summary-*.md"))
    assert [s.read_text(encoding="utf-8") for s in summaries] == [
        "## oota build: exit 2\n\nNo report was written by this run (see the step's log).\n"]


def _report_with_a_failed_cell(folder: Path) -> Path:
    results = write_results(folder / "results", [
        make_result("cpu"),
        make_result("cpu", python="3.12", build="failed", build_message="pip: no torch, 3.12")])
    report(str(results), str(folder / "reports"))
    return folder / "reports"


def test_the_summary_shows_the_tables_and_each_failed_cell_is_an_error(tmp_path: Path) -> None:
    reports = _report_with_a_failed_cell(tmp_path)
    text = ghaction.summary(reports, 1)
    assert text.startswith("## oota build: exit 1\n\n### cpu: cells × layers\n\n| cell |")
    assert f"| `{FAILED_CELL}` | ✗ [1] |" in text and "1. pip: no torch, 3.12" in text
    assert ghaction.error_lines(reports) == [
        f"::error title=oota {FAILED_CELL}::{FAILED_CELL}: failed: build: pip: no torch, 3.12"]


def test_a_report_left_by_an_earlier_run_is_not_this_runs(tmp_path: Path) -> None:
    _report_with_a_failed_cell(tmp_path)
    summary = tmp_path / "summary.md"
    env = {**os.environ, "OOTA_VENDOR": "cpu", "OOTA_MATRIX": "matrix.yaml",
           "OOTA_ARGS": "--hosts 'no such hosts.yaml'", "GITHUB_STEP_SUMMARY": str(summary),
           "GITHUB_OUTPUT": str(tmp_path / "output")}
    (tmp_path / "matrix.yaml").write_text((REPO / "matrix.yaml").read_text())
    proc = subprocess.run([sys.executable, "-m", "oota.api.ghaction"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "::error" not in proc.stdout   # the old report's failed cell is not this run's
    assert summary.read_text() == ("## oota build: exit 2\n\nNo report was written by this "
                                   "run (see the step's log).\n")
    assert (tmp_path / "output").read_text() == f"report={tmp_path / 'reports'}\n"


@pytest.mark.parametrize(("args", "expected"), [
    ("", []),
    ("--jobs 2  --layer 'device, ops'", ["--jobs", "2", "--layer", "device, ops"]),
    ('--results "a b" --x=$HOME', ["--results", "a b", "--x=$HOME"]),
    ('  ["--jobs", "2"] ', ["--jobs", "2"]),
])
def test_args_are_split_as_words_or_read_as_a_list(args: str, expected: list[str]) -> None:
    assert ghaction.parse_args(args) == expected


@pytest.mark.parametrize(("args", "message"), [
    ('--results "a b', "args: No closing quotation"),
    ('["--jobs", 2]', "args: a JSON list must hold strings only"),
    ('["--jobs"', "args: not a JSON list"),
])
def test_bad_args_are_refused_naming_the_input(args: str, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("[", r"\[")):
        ghaction.parse_args(args)
