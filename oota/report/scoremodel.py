"""The scorecard as data: each item of the quality-levels rubric (:mod:`oota.report.rubric`)
with the points it earned and the evidence they rest on, or "not measured here" with the
reason; per vendor and torch release, the level those points reach. Built by
:mod:`oota.report.scorecard`, written by :mod:`oota.report.scorepages`.

A part earns points only with evidence: a measured part has ``points`` (0 included, when the
evidence shows the bar missed), an unmeasured one has ``points`` None and says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from packaging.version import InvalidVersion, Version

from oota.report import rubric
from oota.report.rubric import Item, Level
from oota.results.jsonfields import JSON, JSONObject

SCHEMA_ID: Final = "oota.scorecard/1"
TESTS_SHOWN: Final = 20  # test ids an evidence line names; the rest are counted
RAISED: Final = 3  # the items that would raise the score most

ItemStatus = Literal["scored", "partly measured", "not measured"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Evidence:
    """What a score rests on: a sentence, and where to check it: the cells whose result files
    hold it, test ids (the first :data:`TESTS_SHOWN`, with how many more), the history's runs,
    or a source outside the results (PyPI's release dates)."""

    text: str
    cells: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    more_tests: int = 0
    runs: tuple[str, ...] = ()
    source: str = ""

    @classmethod
    def of(cls, text: str, *, cells: Sequence[str] = (), tests: Sequence[str] = (),
           runs: Sequence[str] = (), source: str = "") -> Evidence:
        shown = tuple(dict.fromkeys(tests))
        return cls(text=text, cells=tuple(dict.fromkeys(cells)), tests=shown[:TESTS_SHOWN],
                   more_tests=max(len(shown) - TESTS_SHOWN, 0), runs=tuple(dict.fromkeys(runs)),
                   source=source)

    def to_json(self, files: dict[str, list[str]]) -> JSONObject:
        """``files``: each cell's result files as the report links them."""
        return {"text": self.text, "cells": list(self.cells),
                "result_files": [f for cell in self.cells for f in files.get(cell, [])],
                "tests": list(self.tests), "more_tests": self.more_tests,
                "runs": list(self.runs), "source": self.source or None}


@dataclass(frozen=True, kw_only=True, slots=True)
class PartScore:
    """One scoring line of an item (the whole item where it has no parts)."""

    key: str
    label: str
    max: int
    points: int | None  # None: not measured here
    how: str  # how it was computed, or why it was not measured
    evidence: tuple[Evidence, ...] = ()
    share: float | None = None  # a coverage item's measured share (0 to 1)

    @property
    def measured(self) -> bool:
        return self.points is not None

    def to_json(self, files: dict[str, list[str]]) -> JSONObject:
        return {"key": self.key, "label": self.label, "max": self.max, "points": self.points,
                "measured": self.measured, "how": self.how, "share": self.share,
                "evidence": [e.to_json(files) for e in self.evidence]}


def not_measured(key: str, label: str, points: int, why: str) -> PartScore:
    return PartScore(key=key, label=label, max=points, points=None, how=why)


@dataclass(frozen=True, kw_only=True, slots=True)
class ItemScore:
    item: Item
    parts: tuple[PartScore, ...]

    @property
    def points(self) -> int:
        return sum(p.points or 0 for p in self.parts)

    @property
    def unmeasured(self) -> int:
        """The points of the parts not measured here."""
        return sum(p.max for p in self.parts if not p.measured)

    @property
    def gain(self) -> int:
        """What the measured parts miss: the points their evidence says are not earned."""
        return sum(p.max - (p.points or 0) for p in self.parts if p.measured)

    @property
    def status(self) -> ItemStatus:
        measured = [p.measured for p in self.parts]
        return "scored" if all(measured) else "partly measured" if any(measured) \
            else "not measured"

    @property
    def met(self) -> bool | None:
        """For a P0 item: True when every point is earned, False when the evidence shows a
        miss, None when that cannot be told."""
        if self.gain:
            return False
        return True if self.status == "scored" else None

    def to_json(self, files: dict[str, list[str]]) -> JSONObject:
        item = self.item
        return {"key": item.key, "section": item.section, "id": item.number,
                "category": item.category, "measured_by": item.measured_by,
                "priority": item.priority, "max": item.points, "points": self.points,
                "status": self.status, "unmeasured_points": self.unmeasured,
                "parts": [p.to_json(files) for p in self.parts]}


@dataclass(frozen=True, kw_only=True, slots=True)
class Scorecard:
    """One vendor's score for one torch release, over its cells in the report."""

    vendor: str
    torch: str
    cells: tuple[str, ...]
    items: tuple[ItemScore, ...]
    # What oota has a measure for: 'item' (all its parts) or 'item/part'.
    measurable: frozenset[str] = frozenset()

    def open_parts(self, score: ItemScore) -> tuple[PartScore, ...]:
        """The parts of ``score`` oota can measure that these results left unmeasured."""
        return tuple(p for p in score.parts if not p.measured and (
            score.item.key in self.measurable or f"{score.item.key}/{p.key}" in self.measurable))

    def to_measure(self) -> tuple[ItemScore, ...]:
        """The items with parts oota can measure that these results left unmeasured."""
        return tuple(s for s in self.items if self.open_parts(s))

    @property
    def points(self) -> int:
        return sum(s.points for s in self.items)

    @property
    def unmeasured(self) -> int:
        return sum(s.unmeasured for s in self.items)

    @property
    def p0(self) -> bool | None:
        """Every P0 item met (True), one missed (False), or not all of them measured (None)."""
        found = [s.met for s in self.items if s.item.priority == "P0"]
        return False if False in found else None if None in found else True

    @property
    def level(self) -> Level:
        """The level the points with evidence reach."""
        return rubric.level_of(self.points, self.p0 is True)

    @property
    def best(self) -> Level:
        """The highest level these results leave open: every unmeasured point earned."""
        return rubric.level_of(self.points + self.unmeasured, self.p0 is not False)

    def raise_most(self) -> tuple[ItemScore, ...]:
        """The measured items whose evidence shows the most points to earn, P0 first among
        equals, then the rubric's order."""
        order = {item.key: i for i, item in enumerate(rubric.ITEMS)}
        open_ = [s for s in self.items if s.gain]
        open_.sort(key=lambda s: (-s.gain, s.item.priority, order[s.item.key]))
        return tuple(open_[:RAISED])

    def to_json(self, files: dict[str, list[str]]) -> JSONObject:
        raised: list[JSON] = [{"key": s.item.key, "category": s.item.category,
                               "gain": s.gain, "evidence": [
                                   e.to_json(files) for p in s.parts if p.measured
                                   and p.points != p.max for e in p.evidence]}
                              for s in self.raise_most()]
        return {"torch": self.torch, "cells": list(self.cells), "level": self.level,
                "best_possible": self.best, "points": self.points,
                "unmeasured_points": self.unmeasured, "p0_met": self.p0, "raise": raised,
                "measurable": [{"key": s.item.key,
                                "points": sum(p.max for p in self.open_parts(s)),
                                "why": [p.how for p in self.open_parts(s)]}
                               for s in self.to_measure()],
                "items": [s.to_json(files) for s in self.items]}


@dataclass(frozen=True, kw_only=True, slots=True)
class VendorScores:
    """A vendor's scorecards, newest torch release first, and the level its two newest
    releases both reach (the rubric's "two consecutive PyTorch releases"). ``unscored``: the
    matrix's releases of the vendor with no release cell in the report."""

    vendor: str
    cards: tuple[Scorecard, ...]
    generated_at: str
    unscored: tuple[str, ...] = ()

    def _newest(self) -> list[str]:
        found = {c.torch for c in self.cards} | set(self.unscored)
        return sorted(found, key=_version, reverse=True)[:rubric.RELEASES_HELD]

    @property
    def held(self) -> tuple[Level, tuple[str, ...]] | None:
        """(level, releases) held over the two newest releases; None where fewer than two
        are scored, or one of the two newest (of the matrix too) has no result here."""
        newest = self._newest()
        cards = [c for c in self.cards if c.torch in newest]
        if len(newest) < rubric.RELEASES_HELD or len(cards) < len(newest):
            return None
        level = min((c.level for c in cards), key=rubric.LEVEL_ORDER.index)
        return level, tuple(c.torch for c in cards)

    @property
    def held_note(self) -> str:
        """Why no level is held, in a sentence ('' where one is)."""
        if self.held is not None:
            return ""
        missing = [t for t in self._newest() if t not in {c.torch for c in self.cards}]
        if missing:
            return (f"torch {' and '.join(missing)}, among the two newest releases of the "
                    f"matrix, {'has' if len(missing) == 1 else 'have'} no result in this "
                    f"report: a level counts once held for {rubric.RELEASES_HELD} consecutive "
                    "releases")
        return (f"one torch release in these results: a level counts once held for "
                f"{rubric.RELEASES_HELD} consecutive releases")

    def to_json(self, files: dict[str, list[str]]) -> JSONObject:
        held = self.held
        return {"schema": SCHEMA_ID, "vendor": self.vendor, "generated_at": self.generated_at,
                "rubric": {"source": rubric.SOURCE, "url": rubric.DOC_URL,
                           "rfc": rubric.RFC_URL, "total": rubric.TOTAL,
                           "items_total": rubric.ITEM_POINTS, "stable": rubric.STABLE_POINTS,
                           "unstable": rubric.UNSTABLE_POINTS},
                "held": {"level": held[0], "releases": list(held[1])} if held else None,
                "held_note": self.held_note, "unscored_releases": list(self.unscored),
                "releases": [c.to_json(files) for c in self.cards]}


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")
