"""``crcr.json``: the report as the callback payload of PyTorch's Cross-Repository CI Relay
(RFC-0050, "Cross-Repository CI Relay for PyTorch Out-of-Tree Backends", pytorch/rfcs), so a
lab's results can be shown on PyTorch's HUD.

RFC-0050 has a downstream workflow report its run's ``conclusion`` and details URL to the
relay, through a reusable reporting action that fixes the payload's shape. The field names
here are that shape (version "1" of the ``workflow`` object the relay forwards to HUD):
``schema_version``, ``status``, ``conclusion`` (a GitHub check-run conclusion), the run's
``name``/``url``/``run_id``/``run_attempt``/``job_name``/``check_run_id``, ``started_at``/
``completed_at``, ``test_results`` (``passed``/``failed``/``skipped``/``total``) and
``artifact_url``; beside it, the dispatch envelope the relay sent (``event_type``,
``delivery_id``, ``payload``). A run that failed adds the failed tests
(``failed_tests_detail``) and a triage verdict from the history (``triage_verdict``):
:mod:`oota.report.relaydetail`. ``schema/crcr-v1.json`` describes the file; every payload is
checked against it before it is written.

What oota cannot know outside a CI run (the run's URL and ids, the dispatch envelope) is
null, and ``artifact_url`` is left out when no URL is known, as the relay allows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from oota import schemas
from oota.errors import EnvironmentProblem, InputError
from oota.files import SMALL_LIMIT, read_text
from oota.net import redact
from oota.report.data import Report
from oota.report.failures import FailedTest
from oota.report.relaydetail import add_details
from oota.report.triage import CellTriage
from oota.resources import shipped
from oota.results.jsonfields import JSON, JSONObject, json_object
from oota.vocab import MaybeStatus, worst

SCHEMA_FILE = shipped("schema") / "crcr-v1.json"
CRCR_FILE = "crcr.json"
SCHEMA_VERSION: Final = "1"

# Our statuses as the relay's conclusion (GitHub's check-run conclusions). A device test the
# host could not run is never a success ('neutral'); a run stopped by a signal is 'cancelled'.
# An error (oota or the environment broke) is a failed job, as the relay's own reporting takes
# it from the job's status; test_results keeps it apart from failed tests.
CONCLUSION: Final[Mapping[str, str]] = {
    "passed": "success", "failed": "failure", "error": "failure", "interrupted": "cancelled",
    "unsupported-here": "neutral", "cpu-fallback": "neutral", "not-claimed": "skipped",
    "skipped": "skipped", "": "neutral"}
# Which count of test_results each test status adds to; 'error' and 'interrupted' tests are
# only in 'total' (neither passed nor failed nor skipped).
_COUNT: Final[Mapping[str, str]] = {"passed": "passed", "failed": "failed",
                                    "skipped": "skipped", "unsupported-here": "skipped",
                                    "cpu-fallback": "skipped", "not-claimed": "skipped"}


class CrcrSchemaError(ValueError):
    """A payload that does not match schema/crcr-v1.json (a bug in oota when writing)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CiRun:
    """The CI run writing the payload, from GitHub Actions' standard variables; outside a CI
    run every field but the name is unknown."""

    name: str = "oota"
    url: str | None = None
    run_id: str | None = None
    run_attempt: str | None = None
    job_name: str | None = None
    event_type: str | None = None
    delivery_id: str | None = None
    upstream: JSONObject | None = None  # the upstream webhook payload the relay dispatched

    @property
    def check_run_id(self) -> str | None:
        # The relay's reporter names an attempt this way when the job's own id is not given.
        return f"{self.run_id}-{self.run_attempt}" if self.run_id and self.run_attempt else None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CiRun:
        server, repo, run = (env.get(k) for k in (
            "GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
        envelope = _dispatch(env)
        upstream = envelope.get("payload")
        return cls(name=env.get("GITHUB_WORKFLOW") or "oota",
                   url=f"{server}/{repo}/actions/runs/{run}" if server and repo and run else None,
                   run_id=run or None, run_attempt=env.get("GITHUB_RUN_ATTEMPT") or None,
                   job_name=env.get("GITHUB_JOB") or None,
                   event_type=_text(envelope, "event_type"),
                   delivery_id=_text(envelope, "delivery_id"),
                   upstream=upstream if isinstance(upstream, dict) else None)


def _text(data: JSONObject, key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def _dispatch(env: Mapping[str, str]) -> JSONObject:
    """The relay's envelope (client_payload) of a repository_dispatch event, else {}."""
    path = env.get("GITHUB_EVENT_PATH")
    if env.get("GITHUB_EVENT_NAME") != "repository_dispatch" or not path:
        return {}
    try:
        event = json_object(json.loads(read_text(Path(path), SMALL_LIMIT)), "event")
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: not JSON, not an object
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)[:200]
        raise EnvironmentProblem(f"GITHUB_EVENT_PATH {path}: cannot read the dispatch event "
                                 f"({why}); crcr.json needs its client_payload") from None
    client = event.get("client_payload")
    return client if isinstance(client, dict) else {}


def artifact_url(explicit: str | None, ci: CiRun) -> str | None:
    """``--artifact-url``, checked (it is published: no credentials), else the CI run's URL."""
    if explicit is None:
        return ci.url
    parts = urlsplit(explicit)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f"--artifact-url {explicit!r}: not an http(s) URL; give the page "
                         "where the results can be downloaded, e.g. the CI run's URL")
    if redact(explicit) != explicit:
        raise InputError(f"--artifact-url {redact(explicit)}: holds a credential; crcr.json "
                         "is published, so give a URL without one")
    return explicit


def conclusion(report: Report) -> str:
    """The relay's conclusion: from the worst cell; a result file that could not be read
    counts as an error (its cell's outcome is unknown)."""
    statuses: list[MaybeStatus] = [g.status for g in report.groups]
    statuses += ["error"] * len(report.problems)
    return CONCLUSION[worst(statuses)]


def count_tests(report: Report) -> dict[str, int]:
    """Tests by outcome, over every copy of every cell (each ran on its own host)."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "total": 0}
    for result in report.results:
        for test in result.tests:
            counts["total"] += 1
            if test.status in _COUNT:
                counts[_COUNT[test.status]] += 1
    return counts


def payload(report: Report, ci: CiRun, artifact: str | None, *,
            failures: Sequence[FailedTest] = (), triage: Sequence[CellTriage] = ()) -> JSONObject:
    """The callback body for the relay: the dispatch envelope and the run's ``workflow``, with
    the ``failures`` detailed and the failing cells' ``triage`` as the relay's verdict
    (:mod:`oota.report.relaydetail`)."""
    workflow: dict[str, JSON] = {
        "schema_version": SCHEMA_VERSION, "status": "completed",
        "conclusion": conclusion(report), "name": ci.name, "url": ci.url, "run_id": ci.run_id,
        "run_attempt": ci.run_attempt, "job_name": ci.job_name,
        "check_run_id": ci.check_run_id, "started_at": None,
        "completed_at": report.generated_at, "test_results": dict(count_tests(report))}
    if artifact:
        workflow["artifact_url"] = artifact
    body: JSONObject = {"event_type": ci.event_type, "delivery_id": ci.delivery_id,
                        "payload": ci.upstream, "workflow": workflow}
    add_details(workflow, body, failures, triage, report.generated_at)
    return body


def schema() -> Mapping[str, object]:
    return schemas.load(SCHEMA_FILE.name)


def validation_errors(data: Mapping[str, object]) -> list[str]:
    """Every way ``data`` breaks schema/crcr-v1.json, as 'path: message'."""
    return schemas.errors(SCHEMA_FILE.name, data)


def checked(data: JSONObject) -> JSONObject:
    problems = validation_errors(data)
    if problems:
        raise CrcrSchemaError("crcr.json does not match schema/crcr-v1.json:\n  "
                              + "\n  ".join(problems))
    return data
