"""``invoke release-check`` as one call: check the flags (before any network access), run
the check, optionally update matrix.yaml, and write the result in the asked format."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from oota.config.matrix import load_matrix
from oota.errors import InputError
from oota.net import redact
from oota.releases.check import checked_vendors, release_check
from oota.releases.http import REQUEST_TIMEOUT, Http
from oota.releases.index import DEFAULT_INDEX
from oota.releases.output import check_format, format_check
from oota.releases.update import update_companions, update_matrix


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    text: str                        # what the task prints
    gaps: int                        # rows without a working stack


def run(matrix_path: str | Path, *, torch: str | None = None, index_url: str = DEFAULT_INDEX,
        fmt: str = "table", update: bool = False, vendors: list[str] | None = None,
        timeout: float | str = REQUEST_TIMEOUT, http: Http | None = None) -> Outcome:
    """The check, formatted; with ``update`` also rewrite the matrix's torch axes and the
    companions cache. ``http``: the client to ask the index with (a recorded index in tests)."""
    check_format(fmt)
    seconds = parse_timeout(timeout)
    check_index_url(index_url)
    matrix = load_matrix(matrix_path)
    checked_vendors(matrix, vendors)
    check = release_check(matrix, index_url=index_url, torch=torch, vendors=vendors,
                          http=http or Http(timeout=seconds))
    result = update_matrix(matrix, check) if update else None
    found = check.companions
    cache = update_companions(matrix.root / "vendors", found.cache, found.changed) \
        if update and found is not None else None
    drift = check.companions.drift if check.companions else ()
    return Outcome(text=format_check(check, fmt, result, cache),
                   gaps=len(check.gaps) + len(drift))


def parse_timeout(value: float | str) -> float:
    """``--timeout``: seconds above 0 (a flag arrives as text)."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise InputError(f"--timeout {value}: expected a number of seconds above 0, e.g. 60")
    return seconds


def check_index_url(url: str) -> None:
    """``--index-url``: an http(s) URL with a host; anything else is an input error before
    any network access (the message shows it redacted)."""
    try:
        parts = urlsplit(url)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname) \
            and (parts.port is None or parts.port > 0)
    except ValueError:  # a bad IPv6 literal or port
        usable = False
    if not usable:
        raise InputError(f"--index-url {redact(url)}: expected an http(s) URL such as "
                         "https://pypi.org or https://user:password@mirror.example/simple")
