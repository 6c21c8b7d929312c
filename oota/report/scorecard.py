"""The quality-levels scorecard of every vendor and torch release in a report: each item of
PyTorch's rubric (:mod:`oota.report.rubric`) scored from the results
(:mod:`oota.report.scoreresults`) and the history (:mod:`oota.report.scorehistory`), or "not
measured here" with the reason. Pure: built from the report's data, written by
:mod:`oota.report.scorepages`.

A torch release's scorecard covers the vendor's release cells of that torch (every Python, OS
and platform of it in the report); nightly and release-candidate cells are no release and are
not scored (a candidate that does what its release does is shown as readiness for a same-day
release).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from oota import times
from oota.history.timeline import Timeline
from oota.report import rubric
from oota.report.data import Report
from oota.report.rows import CellGroup
from oota.report.scoredistributed import MEASURES as DISTRIBUTED
from oota.report.scorehistory import recovery, same_day
from oota.report.scoremodel import (
    Evidence,
    ItemScore,
    PartScore,
    Scorecard,
    VendorScores,
    not_measured,
)
from oota.report.scoreresults import MEASURES as RESULTS, Release, flaky
from oota.vocab import STATUSES

_PERF = ("oota times the device alone (the workload layer's latency and training steps per "
         "second), never PyTorch on the host CPU doing the same work, so 'not less than "
         "PyTorch on the CPU' cannot be checked")
# Why each item oota has no measure for is not measured here, in a sentence.
WHY_NOT: Mapping[str, str] = {
    "prereq.security": "oota does not scan for CVEs: PyTorch's Security Policy and the "
                       "vendor's advisories decide",
    "hardware.accessibility": "whether the hardware can be bought or rented is a market fact, "
                              "in no result",
    "hardware.stability": "the hardware's product quality and support are the vendor's facts, "
                          "in no result",
    "software.accessibility": "the stack's public installation and usage manuals are not "
                              "something a verification observes",
    "software.stability": "API and ABI versioning across a release series is not measured: "
                          "one image holds one version of the stack",
    "software.maintainability": "the stack's release cadence and its targeted fixes are in no "
                                "result",
    "features.modes": _PERF, "features.workloads": _PERF,
    "features.profiling": "the suite does not run PyTorch's profiler",
    "ux.binaries.package": "which package kinds the vendor publishes (PyPI, Conda, offline) "
                           "is its fact: oota installs what vendor.yaml names",
    "ux.binaries.size": "oota does not compare the vendor's package size with PyTorch's "
                        "default wheel",
    "ux.setup": "the vendor's documentation links and initialization logs are not judged",
    "ux.docs": "the vendor's guides and tutorials are not judged",
    "ux.debugging": "debug builds and debugging-utility support are not tested",
    "ux.profiler": "the suite does not run PyTorch's profiler or the vendor's",
    "ci.gating": "which upstream pull requests the lab's CI gates is the relay's "
                 "configuration, not in the results",
    "ci.cd": "the vendor's own nightly and release pipelines are not observed (oota's nightly "
             "cell verifies PyTorch's nightly with the vendor's stack)",
    "feedback.adopters": "users' feedback and how it was addressed are in no result",
    "maintenance.support": "security fixes following PyTorch's Security Policy are in no "
                           "result",
}


MEASURES = {**RESULTS, **DISTRIBUTED}
# What oota has a measure for, as 'item' (every part) or 'item/part' (the rest is "not measured
# here" whatever the results): the dynamo benchmarks item shows the models layer's coverage but
# is never scored from it; graph mode reads the compile layer (scoreresults._graph).
MEASURABLE = frozenset({*MEASURES} - {"testing.benchmarks"}
                       | {"ci.recovery", "ci.public", "ux.binaries/same_day"})


@dataclass(frozen=True, kw_only=True, slots=True)
class ScoreInput:
    """What the scorecards are made from besides the report: the history (None: none read),
    the public site the report is published at (``--public-url``), the test statuses oota
    knows (a ``flaky`` one, once it exists, is read), and each vendor's torch releases in the
    matrix (those without a result here are named, and hold no level)."""

    timeline: Timeline | None = None
    public_url: str | None = None
    statuses: frozenset[str] = field(default_factory=lambda: STATUSES)
    releases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def scorecards(report: Report, given: ScoreInput) -> tuple[VendorScores, ...]:
    """One :class:`VendorScores` per vendor of ``report`` that has a release cell."""
    found = (_vendor(v, report, given) for v in report.vendors)
    return tuple(scores for scores in found if scores.cards)


def _vendor(vendor: str, report: Report, given: ScoreInput) -> VendorScores:
    cards = tuple(_card(r, report, given) for r in releases(report, vendor))
    scored = {c.torch for c in cards}
    return VendorScores(vendor=vendor, generated_at=report.generated_at, cards=cards,
                        unscored=tuple(t for t in given.releases.get(vendor, ())
                                       if t not in scored))


def releases(report: Report, vendor: str) -> list[Release]:
    """The vendor's release cells grouped by torch, newest release first."""
    per: dict[str, list[CellGroup]] = {}
    for group in report.vendor_groups(vendor):
        coordinates = group.first.coordinates
        if not coordinates.get("channel"):
            per.setdefault(str(coordinates.get("torch")), []).append(group)
    ordered = sorted(per, key=_version, reverse=True)
    return [Release(vendor=vendor, torch=t, groups=tuple(per[t])) for t in ordered]


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def _card(release: Release, report: Report, given: ScoreInput) -> Scorecard:
    return Scorecard(vendor=release.vendor, torch=release.torch,
                     cells=tuple(g.id for g in release.groups), measurable=MEASURABLE,
                     items=tuple(ItemScore(item=item, parts=_parts(item, release, report, given))
                                 for item in rubric.ITEMS))


def _parts(item: rubric.Item, release: Release, report: Report,
           given: ScoreInput) -> tuple[PartScore, ...]:
    measure = MEASURES.get(item.key)
    if measure is not None:
        return measure(release)
    if item.key == "ci.flaky":
        return flaky(release, given.statuses)
    if item.key == "ci.recovery":
        return recovery(given.timeline, release.vendor, release.torch, _now(report))
    if item.key == "ci.public":
        return (public(given.public_url),)
    if item.key == "ux.binaries":
        package, size, _ = item.parts
        return (*(not_measured(p.key, p.label, p.points, WHY_NOT[f"{item.key}.{p.key}"])
                  for p in (package, size)),
                same_day(given.timeline, release.vendor, release.torch, report.candidates()))
    why = WHY_NOT[item.key]
    if item.parts:
        return tuple(not_measured(p.key, p.label, p.points, why) for p in item.parts)
    return (not_measured("", item.category, item.points, why),)


def public(url: str | None) -> PartScore:
    """CI/CD accessibility: the results are public where the report says it is published."""
    item = rubric.BY_KEY["ci.public"]
    if not url:
        return not_measured("", item.category, item.points, (
            "this report was not told where it is published (--public-url: the lab's public "
            "site, such as the nightly workflow's GitHub Pages site)"))
    return PartScore(key="", label=item.category, max=item.points, points=item.points,
                     how="the report is published at a public address (declared with "
                     "--public-url: check it there)",
                     evidence=(Evidence.of(f"published at {url}", source=url),))


def _now(report: Report) -> dt.datetime:
    try:
        return times.parse(report.generated_at)
    except times.BadTime:
        return dt.datetime.now(dt.timezone.utc)
