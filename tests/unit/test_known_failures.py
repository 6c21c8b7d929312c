"""Known failures kept in a tracker (``known_failures`` in vendor.yaml): a GitHub repository's
open issues with a label become skip entries of the verification, read through the real API
shape from a real HTTP server on loopback, cached for offline runs, and applied by the suite
as skips.yaml's are (real pytest processes over a fake layer)."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from oota.config.issueskips import Issue, IssueSource, cases, entries_from
from oota.config.matrix import load_matrix
from oota.config.vendors import load_vendor
from oota.console import Console
from oota.engine.base import RunOutcome, RunRequest
from oota.execute.build import BuildOptions
from oota.execute.issueskips import FRESH_S, VARIABLE, cache_file, read_known_failures
from oota.plan import plan
from oota.project import Project
from tests import forkcli
from tests.runs import build_cells
from tests.unit.test_interrupts import FakeEngine
from tests.unit.test_vendor_schema import copy_vendor, problems_of

REPO = Path(__file__).resolve().parents[2]
SOURCE = IssueSource(repo="vendor/torch-vendor", label="skipped")
TODAY = dt.date(2026, 11, 28)
NOW = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.timezone.utc)
TOKEN = "ghp_not-a-real-token"


def github_issue(number: int, title: str, body: str, *, assignee: str = "",
                 pull: bool = False) -> dict[str, Any]:
    """An item of GitHub's issues list, as the REST API gives it (fields oota reads, and
    some it does not)."""
    item: dict[str, Any] = {
        "number": number, "title": title, "body": body, "state": "open",
        "html_url": f"https://github.com/vendor/torch-vendor/issues/{number}",
        "user": {"login": "reporter"}, "labels": [{"name": "skipped"}], "comments": 2,
        "assignees": [{"login": assignee}] if assignee else []}
    if pull:
        item["pull_request"] = {"url": "https://api.github.com/repos/vendor/torch-vendor/pulls/9"}
    return item


ISSUES = [
    github_issue(12, "tanh is off by 2 ulp in bfloat16 on the X200",
                 "Seen on driver 1.2.\n\nCases:\n- `test_ops.py::test_op_matches_cpu[tanh-"
                 "bfloat16]`\n- nn.functional.gelu\n\nMore text that is not a case.",
                 assignee="jane"),
    github_issue(15, "DISABLED gemma", "The model hangs on two cards."),
    github_issue(9, "a fix", "Cases:\n- tanh", pull=True),
]
PAGE_TWO = [github_issue(20, "no cases here", "Just a discussion.")]


class Tracker:
    """A GitHub API on loopback: the issues list in two pages (Link: rel="next"), every
    request's path and Authorization header kept."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.status = 200
        tracker = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                tracker.requests.append((self.path, self.headers.get("Authorization") or ""))
                if tracker.status != 200:
                    self.send_response(tracker.status)
                    self.end_headers()
                    return
                second = "page=2" in self.path
                body = json.dumps(PAGE_TWO if second else ISSUES).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if not second:
                    nxt = self.path.replace("page=1", "page=2")
                    self.send_header("Link", f'<{tracker.url}{nxt}>; rel="next"')
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def tracker() -> Iterator[Tracker]:
    server = Tracker()
    yield server
    server.close()


def env_for(tracker: Tracker, token: str = TOKEN) -> dict[str, str]:
    return {"GITHUB_API_URL": tracker.url, "GITHUB_TOKEN": token}


# -- issues to entries -------------------------------------------------------------------------
def test_an_issue_names_its_tests_under_cases_or_in_a_disabled_title() -> None:
    issues = [i for i in (Issue.from_github(x) for x in ISSUES) if i]
    assert [i.number for i in issues] == [12, 15]   # the pull request is no known failure
    assert cases(issues[0]) == (["test_ops.py::test_op_matches_cpu[tanh-bfloat16]",
                                 "nn.functional.gelu"], [])
    assert cases(issues[1]) == (["gemma"], [])
    bad = Issue(number=3, title="t", body="Cases:\n- tanh\n- not one id\n", url="u", owner="o")
    assert cases(bad) == (["tanh"], ["not one id"])


def test_each_id_becomes_an_entry_with_the_issue_as_reason_owner_and_address() -> None:
    issues = [i for i in (Issue.from_github(x) for x in [*ISSUES, *PAGE_TWO]) if i]
    got = entries_from(issues, IssueSource(repo=SOURCE.repo, label="skipped", kind="xfail",
                                           max_age_days=7), TODAY, file_ids=["gemma"])
    assert [e.to_json() for e in got.entries] == [
        {"id": "test_ops.py::test_op_matches_cpu[tanh-bfloat16]",
         "reason": "tanh is off by 2 ulp in bfloat16 on the X200", "owner": "jane",
         "expires": "2026-12-05", "issue": "https://github.com/vendor/torch-vendor/issues/12",
         "kind": "xfail"},
        {"id": "nn.functional.gelu", "reason": "tanh is off by 2 ulp in bfloat16 on the X200",
         "owner": "jane", "expires": "2026-12-05",
         "issue": "https://github.com/vendor/torch-vendor/issues/12", "kind": "xfail"}]
    # skips.yaml names gemma already: the file decides; an issue naming no test is said.
    assert got.problems == (
        "https://github.com/vendor/torch-vendor/issues/15: 'gemma' is named already "
        "(skips.yaml or an earlier issue): left out",
        "https://github.com/vendor/torch-vendor/issues/20: names no test (no 'Cases:' "
        "section, no title 'DISABLED <id>')")


# -- reading the tracker -----------------------------------------------------------------------
def test_the_open_labelled_issues_are_read_page_by_page_with_the_token(
        tracker: Tracker, tmp_path: Path) -> None:
    known = read_known_failures(SOURCE, tmp_path, environ=env_for(tracker), now=NOW)
    assert [e.id for e in known.entries] == [
        "test_ops.py::test_op_matches_cpu[tanh-bfloat16]", "nn.functional.gelu", "gemma"]
    assert {e.expires for e in known.entries} == {TODAY + dt.timedelta(days=14)}
    assert known.note == ("known failures: 3 entries from 3 open issues of vendor/torch-vendor "
                          "labelled 'skipped' (read now)")
    first, second = tracker.requests
    assert first[0] == ("/repos/vendor/torch-vendor/issues?state=open&per_page=100"
                        "&labels=skipped&page=1")
    assert "page=2" in second[0]
    assert {auth for _, auth in tracker.requests} == {f"Bearer {TOKEN}"}
    cached = json.loads(cache_file(SOURCE, tmp_path).read_text())
    assert cached["read_at"] == "2026-11-28T12:00:00+00:00" and len(cached["issues"]) == 3
    assert TOKEN not in cache_file(SOURCE, tmp_path).read_text()
    # The suite gets them as JSON in one variable.
    passed = json.loads(known.variable()[VARIABLE])
    assert [e["id"] for e in passed] == [e.id for e in known.entries]


def test_a_run_of_many_cells_asks_once_then_the_cache_answers(tracker: Tracker,
                                                              tmp_path: Path) -> None:
    read_known_failures(SOURCE, tmp_path, environ=env_for(tracker), now=NOW)
    asked = len(tracker.requests)
    soon = NOW + dt.timedelta(seconds=FRESH_S - 1)
    again = read_known_failures(SOURCE, tmp_path, environ=env_for(tracker), now=soon)
    assert len(tracker.requests) == asked and len(again.entries) == 3
    assert again.note.endswith(f"(read {int(FRESH_S) - 1} s ago)")


def test_offline_the_last_list_decides_and_with_none_the_file_alone(tracker: Tracker,
                                                                   tmp_path: Path) -> None:
    never = read_known_failures(SOURCE, tmp_path / "empty", now=NOW,
                                environ={"GITHUB_API_URL": "http://127.0.0.1:9"})
    assert never.entries == () and never.variable() == {}
    assert "could not be read" in never.note and "skips.yaml alone decides" in never.note
    read_known_failures(SOURCE, tmp_path, environ=env_for(tracker), now=NOW)
    tracker.status = 403
    later = NOW + dt.timedelta(days=2)
    stale = read_known_failures(SOURCE, tmp_path, environ=env_for(tracker), now=later)
    assert len(stale.entries) == 3
    assert stale.note.endswith("(offline (HTTP 403; rate-limited or refused (set GITHUB_TOKEN))"
                               ": the list read 2026-11-28 12:00 UTC)")
    # Entries expire from the day the list was read, not from the day it was used.
    assert {e.expires for e in stale.entries} == {TODAY + dt.timedelta(days=14)}


def test_without_a_source_nothing_is_read(tmp_path: Path) -> None:
    known = read_known_failures(None, tmp_path)
    assert known.entries == () and known.note == "" and known.variable() == {}


# -- vendor data -------------------------------------------------------------------------------
SECTION = ("ci:", "known_failures:\n  repo: vendor/torch-vendor\n  label: skipped\n"
           "  max_age_days: 7\nci:")


def test_a_vendor_declares_its_tracker(tmp_path: Path) -> None:
    folder = copy_vendor(tmp_path, "xpu", SECTION)
    vendor = load_vendor(folder, tmp_path)
    assert vendor.known_failures == IssueSource(repo="vendor/torch-vendor", label="skipped",
                                                max_age_days=7)
    assert load_vendor(REPO / "vendors" / "xpu", REPO).known_failures is None


def test_a_bad_tracker_is_one_located_problem(tmp_path: Path) -> None:
    folder = copy_vendor(tmp_path, "xpu", (SECTION[0], SECTION[1].replace(
        "vendor/torch-vendor", "not a repo")))
    problems = problems_of(folder, tmp_path)
    assert len(problems) == 1, problems
    assert "vendors/xpu/vendor.yaml:" in problems[0] and "known_failures.repo" in problems[0]


# -- the suite applies them ----------------------------------------------------------------
LAYER = '''
import pytest

LAYER = "ops"


@pytest.mark.parametrize("pair", ["tanh-bfloat16", "abs-bfloat16"])
def test_op_matches_cpu(pair):
    assert pair == "abs-bfloat16", "tanh differs from the CPU in 3 of 8 elements"
'''


def run_suite(folder: Path, variable: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    (folder / "test_ops.py").write_text(LAYER)
    (folder / "cell.json").write_text(json.dumps({"skips": []}))
    out = folder / "out"
    out.mkdir()
    env = {"PYTHONPATH": str(REPO / "verify"), "OOTA_VERIFY_OUT": str(out),
           "OOTA_CELL_FILE": str(folder / "cell.json"), "PATH": "/usr/bin:/bin",
           VARIABLE: variable}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "oota_suite", "-p",
                          "no:cacheprovider", "-c", str(REPO / "verify" / "pytest.ini"),
                          "--rootdir", str(folder), str(folder)],
                         capture_output=True, text=True, check=False, env=env, cwd=folder)
    return run, out / "tests.json"


def test_the_suite_skips_what_the_tracker_names_and_says_which_issue(tracker: Tracker,
                                                                    tmp_path: Path) -> None:
    source = IssueSource(repo=SOURCE.repo, label="skipped")
    known = read_known_failures(source, tmp_path / "cache", environ=env_for(tracker),
                                now=dt.datetime.now(dt.timezone.utc))
    run, results = run_suite(tmp_path, known.variable()[VARIABLE])
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads(results.read_text())
    tanh = next(t for t in data["tests"] if t["id"].endswith("[tanh-bfloat16]"))
    assert tanh["status"] == "skipped"
    assert "issues/12" in tanh["message"] and "tanh is off by 2 ulp" in tanh["message"]
    entries = {e["id"]: e for e in data["skips"]["entries"]}
    assert entries["test_ops.py::test_op_matches_cpu[tanh-bfloat16]"]["matched"] == 1
    assert set(data["skips"]["unmatched"]) == {"nn.functional.gelu", "gemma"}


@pytest.mark.parametrize("variable, words", [
    ("{not json", "OOTA_KNOWN_FAILURES is no JSON"),
    ('[{"id": "tanh"}]', "is no list of skip entries"),
    ('[{"id": "t", "reason": "r", "owner": "o", "expires": "soon"}]', "no date (YYYY-MM-DD)"),
])
def test_a_bad_variable_stops_the_suite_saying_why(tmp_path: Path, variable: str,
                                                   words: str) -> None:
    run, results = run_suite(tmp_path, variable)
    assert run.returncode == 4   # pytest's usage error: no test ran, none is reported passed
    assert not results.exists() or json.loads(results.read_text())["tests"] == []
    assert words in run.stdout + run.stderr


# -- a run passes them to the verify container ------------------------------------------------
class RecordingEngine(FakeEngine):
    """test_interrupts.py's engine, whose verify container ends at once having written
    nothing: the request it was given is what this test reads."""

    def run(self, request: RunRequest) -> RunOutcome:
        self.runs.append(request)
        return RunOutcome(exit_code=1, timed_out=False, output_tail="")


def test_a_verification_passes_the_trackers_entries_and_says_where_they_come_from(
        project: Project, tracker: Tracker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_API_URL", tracker.url)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    vendor_yaml = project.root / "vendors" / "cpu" / "vendor.yaml"
    text = vendor_yaml.read_text()
    assert text.count("\nverify:") == 1
    vendor_yaml.write_text(text.replace("\nverify:", "\nknown_failures: {repo: "
                                        "vendor/torch-vendor, label: skipped}\nverify:"))
    matrix = load_matrix(project.matrix)
    cells = plan(matrix, ["cpu"])[:1]
    engine = RecordingEngine()
    shown = io.StringIO()
    build_cells(matrix, cells, engine, Console(shown, live=False),
                BuildOptions(results_dir=project.root / "results", run_id="r-known"),
                build=False)
    (request,) = engine.runs
    passed = json.loads(request.env[VARIABLE])
    assert [e["id"] for e in passed] == [
        "test_ops.py::test_op_matches_cpu[tanh-bfloat16]", "nn.functional.gelu", "gemma"]
    assert {auth for _, auth in tracker.requests} == {""}   # no token set: none sent
    assert (f"{cells[0].id}: known failures: 3 entries from 3 open issues of "
            "vendor/torch-vendor labelled 'skipped' (read now)") in shown.getvalue()
    assert (project.root / ".oota-cache" / "known-failures").is_dir()


def test_the_command_reads_the_tracker_now_and_lists_what_the_next_run_applies(
        project: Project, tracker: Tracker) -> None:
    vendor_yaml = project.root / "vendors" / "cpu" / "vendor.yaml"
    vendor_yaml.write_text(vendor_yaml.read_text().replace(
        "\nverify:", "\nknown_failures: {repo: vendor/torch-vendor, label: skipped}\nverify:"))
    env = {**os.environ, "GITHUB_API_URL": tracker.url, "GITHUB_TOKEN": TOKEN}

    def command(*extra: str) -> subprocess.CompletedProcess[str]:
        return forkcli.run([sys.executable, "-m", "oota", "known-failures", "--vendor", "cpu",
                            *extra], cwd=project.root, env=env, capture_output=True,
                           text=True, check=False)

    listed = command()
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0] == (
        "skip   test_ops.py::test_op_matches_cpu[tanh-bfloat16]  (owner jane, expires "
        f"{dt.date.today() + dt.timedelta(days=14)}, "
        "https://github.com/vendor/torch-vendor/issues/12)")
    assert "(read now)" in listed.stderr and "issues/20: names no test" in listed.stderr
    as_json = command("--json")
    assert [e["id"] for e in json.loads(as_json.stdout)] == [
        "test_ops.py::test_op_matches_cpu[tanh-bfloat16]", "nn.functional.gelu", "gemma"]
    assert len(tracker.requests) == 4   # two pages each time: the command never reads the cache
    tracker.status = 500
    offline = command()
    assert offline.returncode == 1 and "offline (HTTP 500)" in offline.stderr
    assert len(offline.stdout.splitlines()) == 3    # the cached list, still shown
    unknown = forkcli.run([sys.executable, "-m", "oota", "known-failures", "--vendor", "cuda"],
                          cwd=project.root, env=env, capture_output=True, text=True)
    assert unknown.returncode == 2 and "--vendor cuda: not a vendor of" in unknown.stderr
