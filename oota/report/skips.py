"""Each vendor's skip debt: its skip list's entries across its cells, their age, what expires
soon, what matched nothing, the share linked to an issue, and the expected failures (``kind:
xfail``) whose tests passed: entries to remove."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from oota.results.jsonfields import JSONObject
from oota.results.model import Result, SkipRule

EXPIRY_WINDOW_DAYS = 30


@dataclass(frozen=True, kw_only=True, slots=True)
class SkipEntry:
    id: str
    reason: str
    owner: str
    added: str | None
    expires: str
    age_days: int | None
    days_left: int | None
    matched: int
    expired: bool
    issue: str = ""
    kind: str = "skip"

    @property
    def expires_soon(self) -> bool:
        return (not self.expired and self.days_left is not None
                and self.days_left <= EXPIRY_WINDOW_DAYS)


@dataclass(frozen=True, kw_only=True, slots=True)
class SkipDebt:
    vendor: str
    entries: tuple[SkipEntry, ...]
    unmatched: tuple[str, ...]  # entries that matched no test in any of the vendor's cells
    unexpected_pass: tuple[str, ...] = ()  # expected failures whose tests passed in a cell

    @property
    def ages(self) -> list[int]:
        return [e.age_days for e in self.entries if e.age_days is not None]

    @property
    def oldest_days(self) -> int | None:
        return max(self.ages) if self.ages else None

    @property
    def median_days(self) -> float | None:
        return statistics.median(self.ages) if self.ages else None

    @property
    def expiring_soon(self) -> int:
        return sum(e.expires_soon for e in self.entries)

    @property
    def expired(self) -> int:
        return sum(e.expired for e in self.entries)

    @property
    def linked(self) -> int:
        """Entries that name the issue tracking them."""
        return sum(bool(e.issue) for e in self.entries)

    @property
    def linked_share(self) -> str:
        """'3 of 4 (75%)', or '–' without entries."""
        if not self.entries:
            return "–"
        return f"{self.linked} of {len(self.entries)} ({self.linked / len(self.entries):.0%})"

    @property
    def expected_failures(self) -> int:
        return sum(e.kind == "xfail" for e in self.entries)

    @property
    def undated(self) -> int:
        return sum(e.age_days is None for e in self.entries)

    def to_json(self) -> JSONObject:
        return {"vendor": self.vendor, "entries": len(self.entries),
                "oldest_days": self.oldest_days, "median_days": self.median_days,
                "undated": self.undated, "expiring_within_30_days": self.expiring_soon,
                "expired": self.expired, "unmatched": list(self.unmatched),
                "linked_to_issue": self.linked, "expected_failures": self.expected_failures,
                "unexpected_pass": list(self.unexpected_pass),
                "items": [{"id": e.id, "reason": e.reason, "owner": e.owner, "added": e.added,
                           "expires": e.expires, "age_days": e.age_days,
                           "days_left": e.days_left, "matched": e.matched,
                           "expired": e.expired, "issue": e.issue or None, "kind": e.kind}
                          for e in self.entries]}


def date_of(text: str | None) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(text)[:10])
    except ValueError:
        return None


def _skip_entry(rule: SkipRule, matched: int, flagged: bool, today: dt.date) -> SkipEntry:
    added, expires = date_of(rule.added), date_of(rule.expires)
    days_left = (expires - today).days if expires else None
    return SkipEntry(id=rule.id, reason=rule.reason, owner=rule.owner, added=rule.added,
                     expires=rule.expires, age_days=(today - added).days if added else None,
                     days_left=days_left, matched=matched,
                     expired=flagged or (days_left is not None and days_left < 0),
                     issue=rule.issue or "", kind=rule.kind or "skip")


def skip_debt(vendor: str, results: Sequence[Result], today: dt.date) -> SkipDebt:
    """A vendor's skip list across its cells (each cell carries the vendor's list)."""
    entries: dict[str, SkipRule] = {}
    matched: dict[str, int] = {}
    expired: set[str] = set()
    unmatched: list[set[str]] = []
    unexpected: set[str] = set()
    for result in results:
        if result.skips is None:
            continue
        for rule in result.skips.entries:
            entries[rule.id] = rule
            matched[rule.id] = matched.get(rule.id, 0) + rule.matched
        expired |= set(result.skips.expired)
        unmatched.append(set(result.skips.unmatched))
        unexpected |= set(result.skips.unexpected_pass)
    never = set.intersection(*unmatched) if unmatched else set()
    return SkipDebt(vendor=vendor, unmatched=tuple(sorted(never)),
                    unexpected_pass=tuple(sorted(unexpected)), entries=tuple(
        _skip_entry(e, matched[i], i in expired, today) for i, e in sorted(entries.items())))
