"""Reading a vendor's known failures from its tracker (:mod:`oota.config.issueskips`).

GitHub's REST API lists the open issues with the vendor's label (``GET
/repos/{repo}/issues?state=open&labels=...``, 100 a page, at most ``MAX_PAGES`` pages; pull
requests, which the list also holds, are left out). ``GITHUB_TOKEN`` (else ``GH_TOKEN``), where
set, goes to the API's origin only, as a bearer token; no redirect is followed, so it goes
nowhere else. ``GITHUB_API_URL`` (set by GitHub Actions; tests point it at a local server)
names the API where the vendor's data does not.

What was read is kept in ``.oota-cache/known-failures/`` (the issues, not GitHub's whole
answer) and used as is for ``FRESH_S`` (a run verifying many cells asks once). Offline, or
with the API refusing, the last list read decides, and the note says from when; with none,
skips.yaml alone decides, and the note says so. Never an error: a tracker that cannot be read
is a note on the console and in the log, not a failed cell.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path

from oota import httpio
from oota.config.issueskips import Issue, IssueSource, entries_from
from oota.config.skips import SKIPS_FILE, SkipEntry, load_skips
from oota.config.vendors import Vendor
from oota.files import write_json
from oota.net import find_ca_bundle, redact_text

FORMAT = "oota.known-failures/v1"
VARIABLE = "OOTA_KNOWN_FAILURES"      # the entries, as JSON, for the verify suite
FRESH_S = 600.0
MAX_PAGES = 10
REQUEST_S = 30.0
PAGE_LIMIT = 8 * httpio.MIB
# The most the variable may hold (a process's environment has room for far more; a list this
# long is a tracker used for something else).
MAX_VARIABLE = 256 * 1024
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


@dataclass(frozen=True, kw_only=True, slots=True)
class KnownFailures:
    """The entries a vendor's tracker gives this run, and how they were read."""

    entries: tuple[SkipEntry, ...] = ()
    note: str = ""                    # one line for the console: where the entries come from
    problems: tuple[str, ...] = ()    # issues that name no test, ids named twice, ...
    read_now: bool = False            # the tracker answered (not the cache, not nothing)

    def variable(self) -> dict[str, str]:
        """The verify container's environment for these entries (empty when none)."""
        if not self.entries:
            return {}
        return {VARIABLE: json.dumps([e.to_json() for e in self.entries], sort_keys=True)}


def cache_file(source: IssueSource, cache_dir: Path) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{source.repo}+{source.label}")
    return cache_dir / "known-failures" / f"{slug}.json"


def api_root(source: IssueSource, environ: Mapping[str, str]) -> str:
    """The vendor's ``api`` where it names one, else ``GITHUB_API_URL``, else GitHub's."""
    from oota.config.issueskips import API

    if source.api != API:
        return source.api
    return (environ.get("GITHUB_API_URL") or API).rstrip("/")


def read_known_failures(source: IssueSource | None, cache_dir: Path, *,
                        file_ids: Iterable[str] = (),
                        environ: Mapping[str, str] = os.environ,
                        now: dt.datetime | None = None,
                        fresh_s: float = FRESH_S) -> KnownFailures:
    """The skip entries of ``source``'s open issues for a run at ``now`` (none without one);
    a list read less than ``fresh_s`` ago is used as it is."""
    if source is None:
        return KnownFailures()
    now = now or dt.datetime.now(dt.timezone.utc)
    path = cache_file(source, cache_dir)
    cached = _cached(path, source)
    age = (now - cached[0]).total_seconds() if cached else None
    if cached and age is not None and 0 <= age < fresh_s:
        read_at, issues = cached
        how = f"read {int(age)} s ago"
    else:
        try:
            issues = _fetch(source, environ)
        except _Unreadable as exc:
            if not cached:
                return KnownFailures(note=f"known failures: {source.words} could not be read "
                                          f"({exc}) and never were: skips.yaml alone decides")
            read_at, issues = cached
            how = f"offline ({exc}): the list read {read_at:%Y-%m-%d %H:%M} UTC"
        else:
            read_at, how = now, "read now"
            write_json(path, {"format": FORMAT, "repo": source.repo, "label": source.label,
                              "read_at": now.isoformat(timespec="seconds"),
                              "issues": [i.to_json() for i in issues]})
    got = entries_from(issues, source, read_at.date(), file_ids)
    known = KnownFailures(entries=got.entries, problems=got.problems,
                          read_now=how == "read now",
                          note=f"known failures: {len(got.entries)} entries from "
                               f"{len(issues)} {source.words} ({how})")
    if len(known.variable().get(VARIABLE, "")) > MAX_VARIABLE:
        return KnownFailures(problems=got.problems, note=(
            f"known failures: {source.words} give {len(got.entries)} entries, more than "
            f"{MAX_VARIABLE // 1024} KiB to pass to the suite: none applied; split the label"))
    return known


def known_for(vendor: Vendor, cache_dir: Path, *, fresh_s: float = FRESH_S) -> KnownFailures:
    """``vendor``'s known failures for a run (none without ``known_failures``), its skips.yaml
    deciding for the tests it names."""
    if vendor.known_failures is None:
        return KnownFailures()
    listed = load_skips(vendor.folder / SKIPS_FILE).entries
    return read_known_failures(vendor.known_failures, cache_dir,
                               file_ids=[e.id for e in listed], fresh_s=fresh_s)


def _cached(path: Path, source: IssueSource) -> tuple[dt.datetime, list[Issue]] | None:
    """The list read last time (when it is this source's and whole), else None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT or (data.get("repo"), data.get("label")) != (
                source.repo, source.label):
            return None
        read_at = dt.datetime.fromisoformat(str(data["read_at"]))
        if read_at.tzinfo is None:
            return None
        return read_at, [Issue.from_json(i) for i in data["issues"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


class _Unreadable(Exception):
    """The tracker did not give its list (one line: why)."""


def _fetch(source: IssueSource, environ: Mapping[str, str]) -> list[Issue]:
    root = api_root(source, environ)
    url: str | None = IssueSource(repo=source.repo, label=source.label,
                                  api=root).issues_url(page=1)
    token = (environ.get("GITHUB_TOKEN") or environ.get("GH_TOKEN") or "").strip()
    issues: list[Issue] = []
    for _ in range(MAX_PAGES):
        if url is None:
            return issues
        if not url.startswith(root + "/"):
            raise _Unreadable(f"the next page lies outside {root}")
        body, link = _get(url, token)
        try:
            page = json.loads(body)
        except ValueError:
            raise _Unreadable(f"{redact_text(url)}: the answer is no JSON") from None
        if not isinstance(page, list):
            raise _Unreadable(f"{redact_text(url)}: the answer is no list of issues")
        issues += [i for i in (Issue.from_github(x) for x in page if isinstance(x, dict)) if i]
        match = _NEXT.search(link)
        url = match.group(1) if match else None
    if url is not None:
        raise _Unreadable(f"more than {MAX_PAGES * 100} issues carry the label")
    return issues


def _get(url: str, token: str) -> tuple[bytes, str]:
    """The body and Link header of one page."""
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
               "User-Agent": "oota-known-failures"}
    request = urllib.request.Request(url, headers=headers)
    if token:
        request.add_unredirected_header("Authorization", f"Bearer {token}")
    tls = _tls() if url.startswith("https:") else None
    try:
        with httpio.Watchdog(REQUEST_S) as watchdog:
            with httpio.opener(watchdog, tls=tls, follow=False).open(
                    request, timeout=REQUEST_S) as resp:
                body = httpio.read_body(resp, PAGE_LIMIT)
                link = str(resp.headers.get("Link") or "")
            if watchdog.expired:
                raise _Unreadable(f"no whole answer within {REQUEST_S:g} s")
    except urllib.error.HTTPError as exc:
        exc.close()
        hint = {401: "; GITHUB_TOKEN is refused", 403: "; rate-limited or refused (set "
                "GITHUB_TOKEN)", 404: "; no such repository, or a private one"}.get(exc.code, "")
        raise _Unreadable(f"HTTP {exc.code}{hint}") from None
    except httpio.TooLargeAnswer as exc:
        raise _Unreadable(f"a page is {exc}") from None
    except (urllib.error.URLError, OSError, ValueError, HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise _Unreadable(redact_text(str(reason).splitlines()[0][:200]
                                      if str(reason) else type(exc).__name__)) from None
    return body, link


def _tls() -> ssl.SSLContext:
    ca = find_ca_bundle(None)
    return ssl.create_default_context(cafile=str(ca) if ca else None)
