"""The details crcr.json gives the relay beside its counts: the failed tests, and a triage
verdict from the history, each within the limits pytorch/test-infra sets.

* ``workflow.failed_tests_detail``: the ``failed-tests-detail`` input of test-infra's
  ``cross-repo-ci-relay-callback`` action: "a JSON array of failed/errored test details. Each
  element should have at minimum a name field. Supported fields: name, classname, message,
  stacktrace, duration. Per RFC-0054: capped at 1000 entries, message truncated to 1 KB,
  stacktrace truncated to 4 KB" (action.yml, read 2026-11-28). The action's script puts its
  ``test-results`` input into ``workflow.test_results``; this one goes beside it the same way.
* ``workflow.triage_verdict``: the action's ``triage-verdict`` input, which the relay reads as
  ``workflow.triage_verdict`` and validates (``utils/triage_verdict.py``, schema version 1:
  category, confidence and summary required; summary 1,000 characters, 10 evidence entries of
  1,000, 16 KiB in all; anything malformed drops the whole verdict).
* The whole body stays under the 2 MiB PyTorch's HUD accepts from the relay
  (``torchci/lib/crcr/crcrUtils.ts``, ``MAX_PAYLOAD_BYTES``), with room for the relay's own
  wrapping: stacks are left out first, then the last entries.

A run with nothing failed gives neither.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from oota import __version__
from oota.report.failures import FailedTest
from oota.report.triage import CellTriage, verdict_of
from oota.results.jsonfields import JSON, JSONObject

MAX_ENTRIES: Final = 1000
MESSAGE_BYTES: Final = 1024
STACK_BYTES: Final = 4096
PAYLOAD_BYTES: Final = 2 * 1024 * 1024  # HUD's limit on the relayed body
HEADROOM: Final = 64 * 1024  # the relay wraps the body with its own fields
SUMMARY_CHARS: Final = 1000
EVIDENCE_ENTRIES: Final = 10
SHORT_CHARS: Final = 200
EXCERPT_CHARS: Final = 1000
VERDICT_BYTES: Final = 16 * 1024
TRIAGE_SCHEMA: Final = 1


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` bytes of UTF-8, ending with '…' where it was cut."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit - 3].decode("utf-8", "ignore") + "…"


def _entry(failure: FailedTest, with_stack: bool) -> JSONObject:
    entry: JSONObject = {
        "name": failure.test,
        "classname": failure.cell + (f" @ {failure.origin}" if failure.origin else ""),
        "message": cut(f"{failure.status}: {failure.message}".strip(), MESSAGE_BYTES),
        "duration": round(failure.duration_s, 3)}
    if with_stack and failure.stack:
        entry["stacktrace"] = cut(failure.stack, STACK_BYTES)
    return entry


def _size(value: JSON) -> int:
    """Bytes of ``value`` in the body as sent: the action's script serialises it again with
    json.dumps' defaults (non-ASCII as \\u escapes), plus the ", " between entries."""
    return len(json.dumps(value).encode("ascii")) + 2


def detail(failures: Sequence[FailedTest], budget: int) -> list[JSON]:
    """The entries that fit in ``budget`` bytes: first every failure (up to
    :data:`MAX_ENTRIES`) with its message, as many as fit; then their stacks, in order, while
    room is left."""
    entries: list[JSONObject] = []
    for failure in failures[:MAX_ENTRIES]:
        entry = _entry(failure, with_stack=False)
        if _size(entry) > budget:
            break
        entries.append(entry)
        budget -= _size(entry)
    for i, failure in enumerate(failures[:len(entries)]):
        full = _entry(failure, with_stack=True)
        extra = _size(full) - _size(entries[i])
        if extra and extra <= budget:
            entries[i] = full
            budget -= extra
    return list(entries)


def triage_verdict(cells: Sequence[CellTriage], failures: Sequence[FailedTest],
                   analyzed_at: str, shown: int) -> JSONObject | None:
    """The relay's triage verdict for the job; None when nothing failed. ``shown``: how many
    of ``failures`` the payload details (the summary says when that is fewer)."""
    if not cells:
        return None
    category, confidence = verdict_of(cells)
    lines = [f"{c.cell}: {c.category} ({c.why})" for c in cells]
    if shown < len(failures):
        lines.append(f"{len(failures)} failures, {shown} detailed in failed_tests_detail")
    summary = "; ".join(lines)
    verdict: JSONObject = {
        "schema_version": TRIAGE_SCHEMA, "category": category, "confidence": confidence,
        "summary": summary if len(summary) <= SUMMARY_CHARS
        else summary[:SUMMARY_CHARS - 1] + "…",
        "analyzer": {"name": "oota", "version": __version__},
        "analyzed_at": analyzed_at}
    commits = {c.commit for c in cells if c.category == "upstream"}
    if category == "upstream" and len(commits) == 1 and "" not in commits:
        verdict["suspected_upstream"] = {
            "commit": commits.pop(), "reason": "the torch commit of the first failing run, "
                                               "where only PyTorch's side changed"}
    # Every text non-empty: the relay drops a verdict holding an empty one.
    evidence: list[JSON] = [{"job": f.cell[:SHORT_CHARS], "test": f.test[:SHORT_CHARS],
                             "excerpt": (f.message.strip() or f.status)[:EXCERPT_CHARS]}
                            for f in failures[:EVIDENCE_ENTRIES]]
    if evidence:
        verdict["evidence"] = evidence
    while _size(verdict) > VERDICT_BYTES and verdict.get("evidence"):
        kept = verdict["evidence"]
        verdict["evidence"] = kept[:-1] if isinstance(kept, list) else []
    return verdict


def add_details(workflow: JSONObject, envelope: JSONObject, failures: Sequence[FailedTest],
                cells: Sequence[CellTriage], analyzed_at: str) -> None:
    """``workflow`` (inside ``envelope``, the whole body) with the failed tests and the triage
    verdict, the body kept under :data:`PAYLOAD_BYTES` less :data:`HEADROOM`."""
    if not failures and not cells:
        return
    first = triage_verdict(cells, failures, analyzed_at, len(failures))
    budget = PAYLOAD_BYTES - HEADROOM - _size(envelope) - (_size(first) if first else 0)
    entries = detail(failures, budget)
    if entries:
        workflow["failed_tests_detail"] = entries
    verdict = triage_verdict(cells, failures, analyzed_at, len(entries))
    if verdict is not None:
        workflow["triage_verdict"] = verdict
