"""Known failures kept in a tracker: skip entries read from a GitHub repository's open issues
that carry a label (``known_failures`` in vendor.yaml), as Intel's torch-xpu-ops keeps its
known failures in issues labelled ``skipped``.

An issue names the tests it covers in its body, one per line under a line ``Cases:`` (up to the
next blank line), each as skips.yaml's ``id`` takes it (a test id, an operator, a model, an
fnmatch pattern); list markers and backticks around a line are dropped. An issue without that
section whose title is ``DISABLED <id>`` (PyTorch's convention for disabled tests) covers that
id. Each id becomes a skip entry (``kind`` from the vendor's data): its reason the issue's
title, its owner the issue's first assignee (else its author), its issue the issue's address,
and it expires ``max_age_days`` after the day the issues were read: a list nobody reads again
ends as an entry nobody renews does, by failing the run.

This module is the data (the vendor's source, and issues to entries); reading the issues, with
a cache for offline runs, is :mod:`oota.execute.issueskips`. The entries are not part of an
image: oota passes them to the verify container (``OOTA_KNOWN_FAILURES``), so an issue opened
or closed needs no rebuild, and ``skips.yaml`` stays the file a vendor reviews.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from oota.config.skips import KINDS, SkipEntry

API = "https://api.github.com"
DEFAULT_MAX_AGE_DAYS = 14
_CASES = re.compile(r"^\s*(?:#+\s*)?cases\s*:\s*$", re.IGNORECASE)
_DISABLED = re.compile(r"^DISABLED\s+(\S+)\s*$")
_MARKER = re.compile(r"^(?:[-*+]\s+|\d+[.)]\s+)")


@dataclass(frozen=True, kw_only=True, slots=True)
class IssueSource:
    """Where a vendor keeps its known failures: ``repo``'s open issues labelled ``label``."""

    repo: str                          # owner/name on GitHub
    label: str
    kind: str = "skip"                 # one of skips.KINDS, for every entry it gives
    max_age_days: int = DEFAULT_MAX_AGE_DAYS
    api: str = API                     # the REST API's root (GitHub Enterprise: its own)

    @property
    def words(self) -> str:
        return f"open issues of {self.repo} labelled '{self.label}'"

    def issues_url(self, page: int) -> str:
        from urllib.parse import quote

        return (f"{self.api.rstrip('/')}/repos/{self.repo}/issues?state=open&per_page=100"
                f"&labels={quote(self.label, safe='')}&page={page}")


def issue_source(data: Mapping[str, Any] | None) -> IssueSource | None:
    """``known_failures`` of a vendor.yaml the schema checked (None where it has none)."""
    if not data:
        return None
    return IssueSource(repo=str(data["repo"]), label=str(data["label"]),
                       kind=str(data.get("kind", "skip")),
                       max_age_days=int(data.get("max_age_days", DEFAULT_MAX_AGE_DAYS)),
                       api=str(data.get("api", API)))


@dataclass(frozen=True, kw_only=True, slots=True)
class Issue:
    """What oota keeps of an issue (the cache holds these, not GitHub's whole answer)."""

    number: int
    title: str
    body: str
    url: str
    owner: str

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "title": self.title, "body": self.body, "url": self.url,
                "owner": self.owner}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Issue:
        return cls(number=int(data["number"]), title=str(data["title"]),
                   body=str(data.get("body") or ""), url=str(data["url"]),
                   owner=str(data.get("owner") or ""))

    @classmethod
    def from_github(cls, data: Mapping[str, Any]) -> Issue | None:
        """One item of GitHub's issues list; None for a pull request (the list holds those)."""
        if data.get("pull_request") is not None:
            return None
        assignees = [a.get("login") for a in data.get("assignees") or [] if a.get("login")]
        author = (data.get("user") or {}).get("login") or ""
        return cls(number=int(data["number"]), title=str(data.get("title") or ""),
                   body=str(data.get("body") or ""), url=str(data.get("html_url") or ""),
                   owner=str(assignees[0] if assignees else author))


def cases(issue: Issue) -> tuple[list[str], list[str]]:
    """The ids ``issue`` covers, and the lines of its Cases section that are no id."""
    ids: list[str] = []
    bad: list[str] = []
    inside = False
    for line in issue.body.splitlines():
        if not inside:
            inside = bool(_CASES.match(line))
            continue
        text = _MARKER.sub("", line.strip()).strip("`").strip()
        if not text:
            if ids or bad:
                break
            continue
        if any(c.isspace() or unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in text):
            bad.append(text[:80])
        elif text not in ids:
            ids.append(text)
    if not inside:
        title = _DISABLED.match(issue.title.strip())
        if title:
            ids.append(title.group(1))
    return ids, bad


@dataclass(frozen=True, kw_only=True, slots=True)
class IssueEntries:
    """The entries a list of issues gives, and what in them could not be read."""

    entries: tuple[SkipEntry, ...]
    problems: tuple[str, ...]


def entries_from(issues: Iterable[Issue], source: IssueSource, read_on: dt.date,
                 file_ids: Iterable[str] = ()) -> IssueEntries:
    """Skip entries from ``issues`` read on ``read_on``; an id the vendor's skips.yaml already
    names (``file_ids``) or an earlier issue gave is left out, and said."""
    taken = set(file_ids)
    entries: list[SkipEntry] = []
    problems: list[str] = []
    kind = source.kind if source.kind in KINDS else "skip"
    expires = read_on + dt.timedelta(days=source.max_age_days)
    for issue in sorted(issues, key=lambda i: i.number):
        ids, bad = cases(issue)
        problems += [f"{issue.url}: '{text}' is no test id (one id per line, no spaces)"
                     for text in bad]
        if not ids and not bad:
            problems.append(f"{issue.url}: names no test (no 'Cases:' section, no title "
                            "'DISABLED <id>')")
        for test_id in ids:
            if test_id in taken:
                problems.append(f"{issue.url}: '{test_id}' is named already (skips.yaml or an "
                                "earlier issue): left out")
                continue
            taken.add(test_id)
            entries.append(SkipEntry(
                id=test_id, reason=issue.title.strip() or f"issue #{issue.number}",
                owner=issue.owner or "unassigned", expires=expires, added=None,
                issue=issue.url, kind=kind, where=issue.url))
    return IssueEntries(entries=tuple(entries), problems=tuple(problems))
