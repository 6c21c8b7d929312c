"""Times that oota reads from results and histories: RFC 3339 with an offset, within a range
a run can have, normalised to UTC.

A result (``started_at``, ``finished_at``) comes from another host, a pulled image or a hand
edit, and its times order the history, choose the newest run and go through date arithmetic:
``9999-12-31T23:59:59-23:59`` overflows when it is brought to UTC, ``<img src=x>`` is no time
at all. So a time is checked where it enters (the schema's ``date-time`` format, enforced by
:mod:`oota.schemas`) and stored in one form, UTC, which also sorts as text.
"""

from __future__ import annotations

import datetime as dt
import re

UTC = dt.timezone.utc
# The times a run of oota can have: none before 2000, none in the next century.
EARLIEST = dt.datetime(2000, 1, 1, tzinfo=UTC)
LATEST = dt.datetime(2100, 1, 1, tzinfo=UTC)
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))", re.ASCII)


class BadTime(ValueError):
    """Text that is not an RFC 3339 time of the range oota accepts; the message says why."""


def parse(text: object) -> dt.datetime:
    """``text`` as an aware datetime in UTC; :class:`BadTime` when it is not RFC 3339 with an
    offset (``2026-11-26T10:00:00+00:00``, ``...Z``) or lies outside 2000 to 2099."""
    if not isinstance(text, str):
        raise BadTime(f"expected a time as text, got {type(text).__name__}")
    found = _RFC3339.fullmatch(text)
    if found is None:
        raise BadTime(f"{_shown(text)} is not an RFC 3339 time with an offset "
                      "(like 2026-11-26T10:00:00+00:00)")
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = found.groups()
    if int(off_h or 0) > 23 or int(off_m or 0) > 59:
        raise BadTime(f"{_shown(text)} is not a time: its offset is not -23:59 to +23:59")
    try:
        offset = dt.timedelta(hours=int(off_h or 0), minutes=int(off_m or 0))
        zone = UTC if zulu else dt.timezone(-offset if sign == "-" else offset)
        local = dt.datetime(int(year), int(month), int(day), int(hour), int(minute),
                            int(second), int((fraction or "0")[:6].ljust(6, "0")), tzinfo=zone)
    except ValueError as exc:  # month 13, hour 24
        raise BadTime(f"{_shown(text)} is not a time: {exc}") from None
    if not EARLIEST <= local < LATEST:  # compared as instants: no overflow near year 1 or 9999
        raise BadTime(f"{_shown(text)} lies outside the times oota accepts "
                      f"({EARLIEST:%Y} to {LATEST.year - 1})")
    return local.astimezone(UTC)


def utc(text: str) -> str:
    """``text`` (checked by :func:`parse`) written in UTC: ``2026-11-26T10:00:00+00:00``, to
    the microsecond where it had a fraction."""
    when = parse(text)
    return when.isoformat(timespec="microseconds" if when.microsecond else "seconds")


def valid_or_raise(text: object) -> bool:
    """True when ``text`` is a time :func:`parse` accepts, else :class:`BadTime` saying why
    (the schema's ``date-time`` check: jsonschema shows the reason)."""
    parse(text)
    return True


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")
