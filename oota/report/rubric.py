"""PyTorch's Compute Platform Quality Levels as data: every item of the rubric, its priority and
its points, in the document's own words (shortened, never reworded where it sets a bar).

Source: the document of pytorch/pytorch#167282 ("docs: PyTorch Compute Platform Quality
Levels"), proposed with the RFC pytorch/pytorch#167283, read on 2026-11-28. A platform is
**Stable** when it satisfies every P0 item and reaches 99 points of 124, **Unstable** at 86
points, **Engineering** below; a platform is listed at a level after grading there for two
consecutive PyTorch releases.

The document's sections list their items with points, and a total per section. One total
disagrees with its items: User Experience's items give 6 + 2 + 2 + 2 + 4 = 16 points where its
table says 14, so the items add up to 126 while the document (and its 99 and 86) count 124.
The scorecard scores the items as printed and judges levels against the document's 124.
Pure data; :mod:`oota.report.scorecard` scores it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

SOURCE: Final = ("PyTorch Compute Platform Quality Levels (pytorch/pytorch#167282, RFC "
                 "pytorch/pytorch#167283), read 2026-11-28")
DOC_URL: Final = "https://github.com/pytorch/pytorch/pull/167282"
RFC_URL: Final = "https://github.com/pytorch/pytorch/issues/167283"
TOTAL: Final = 124  # the document's total, which its levels are a share of
STABLE_POINTS: Final = 99  # "Reach 80% overall score (99 points out of 124)", with every P0
UNSTABLE_POINTS: Final = 86  # "Reach 70% overall score (86 points out of 124)"
RELEASES_HELD: Final = 2  # "grade as ... for 2 consecutive PyTorch releases"

Priority = Literal["P0", "P1", "P2"]
Level = Literal["Stable", "Unstable", "Engineering"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Part:
    """A line of an item that scores on its own ("torch.float16 : +1")."""

    key: str
    label: str
    points: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Item:
    """One row of the rubric. ``parts``: its lines that score apart (their points add up to
    ``points``); ``bands``: (share of test cases, points) for a coverage item, highest first."""

    key: str
    section: str
    number: int  # the document's ID within its section (Feature Support numbers from 2)
    category: str
    measured_by: str
    name: str = ""  # what the item is about, where its category is shared ("Usability")
    priority: Priority
    points: int
    parts: tuple[Part, ...] = ()
    bands: tuple[tuple[float, int], ...] = ()


def _parts(*lines: tuple[str, str, int]) -> tuple[Part, ...]:
    return tuple(Part(key=key, label=label, points=points) for key, label, points in lines)


_COVERAGE = ((1.0, 6), (0.8, 4), (0.5, 2))  # "50%: +2, 80%: +4, 100%: +6"
_DTYPES = ("float64", "float32", "float16", "bfloat16", "float8", "float4", "int64", "int32",
           "int16", "int8", "int4")
DTYPES: Final[tuple[str, ...]] = _DTYPES
_PERF = ("on reasonable performance level: in case of accelerators, not less than pytorch "
         "performance level on CPUs which can be used with the platform")

PREREQ, HARDWARE, SOFTWARE = "Prerequisites", "Compute Platform Hardware", "Software Stack"
FEATURES, TESTING, UX = "Feature Support", "Testing Coverage", "User Experience"
CICD, FEEDBACK, MAINTENANCE = "CI/CD", "Feedback adopters", "Maintenance"
SECTIONS: Final = (PREREQ, HARDWARE, SOFTWARE, FEATURES, TESTING, UX, CICD, FEEDBACK,
                   MAINTENANCE)

ITEMS: Final[tuple[Item, ...]] = (
    Item(key="prereq.stability", section=PREREQ, number=1, category="Prerequisite Stability",
         measured_by="Current source and binary release pass the essential PyTorch smoke "
         "testing (smoke_test.py) on: full environment setup with access to hardware; full "
         "environment without access to hardware; minimal OS environment without fully "
         "installed compute stack", priority="P0", points=8),
    Item(key="prereq.security", section=PREREQ, number=2, category="Prerequisite Security",
         measured_by="No CVE issues by PyTorch Security Policy for currently released source "
         "and binaries", priority="P0", points=8),
    Item(key="hardware.accessibility", section=HARDWARE,
         name="hardware", number=1, category="Accessibility",
         measured_by="Access to compute platform hardware is publicly obtained by end users or "
         "developers", priority="P1", points=4),
    Item(key="hardware.stability", section=HARDWARE,
         name="hardware", number=2, category="Stability",
         measured_by="Hardware is of product quality (released for mass production and "
         "long-term customer use) and is under active support", priority="P0", points=6),
    Item(key="software.accessibility", section=SOFTWARE,
         name="software stack", number=1, category="Accessibility",
         measured_by="The software stack is obtained through publicly available documentation "
         "with complete installation and usage manuals", priority="P1", points=4),
    Item(key="software.stability", section=SOFTWARE,
         name="software stack", number=2, category="Stability",
         measured_by="Stable features and user interface; compile and run time API versioning "
         "and ABI versioning for each release; backward compatible API and ABI within a "
         "major release series", priority="P0", points=4),
    Item(key="software.maintainability", section=SOFTWARE,
         name="software stack", number=3, category="Maintainability",
         measured_by="Regular releases with new features and APIs; release updates with "
         "targeted fixes for critical and CVE issues", priority="P0", points=4),
    Item(key="features.dtypes", section=FEATURES,
         name="data types", number=2, category="Usability",
         measured_by="Compute platform supports data type (+1 each); support can be "
         "implemented via simulation", priority="P1", points=11,
         parts=_parts(*((d, f"torch.{d}", 1) for d in _DTYPES))),
    Item(key="features.modes", section=FEATURES,
         name="eager and graph mode performance", number=3, category="Usability",
         measured_by=f"Eager mode and graph mode {_PERF}", priority="P1", points=2,
         parts=_parts(("eager", "Eager mode", 1), ("graph", "Graph mode", 1))),
    Item(key="features.workloads", section=FEATURES,
         name="inference and training performance", number=4, category="Usability",
         measured_by=f"Inference and training {_PERF}", priority="P1", points=2,
         parts=_parts(("inference", "Inference", 1), ("training", "Training", 1))),
    Item(key="features.distributed", section=FEATURES,
         name="distributed backend", number=5, category="Usability",
         measured_by="Compute platform supports distributed backend", priority="P1", points=1),
    Item(key="features.cpp_extension", section=FEATURES,
         name="C++ extension API", number=6, category="Usability",
         measured_by="Compute platform supports CPP Extension API to implement custom "
         "operations", priority="P1", points=1),
    Item(key="features.profiling", section=FEATURES,
         name="profiling", number=5, category="Debugability",
         measured_by="Compute platform supports profiling", priority="P1", points=1),
    Item(key="testing.unit", section=TESTING, number=1, category="UT",
         measured_by="PyTorch UT test cases for adapting new compute platforms: share of test "
         "coverage (excluding deprecated cases)", priority="P1", points=6, bands=_COVERAGE),
    Item(key="testing.benchmarks", section=TESTING, number=2, category="Benchmarks",
         measured_by="PyTorch test benchmarks (dynamo benchmarks): share of test coverage "
         "(excluding deprecated cases)", priority="P1", points=6, bands=_COVERAGE),
    Item(key="testing.modes", section=TESTING, number=3, category="Mode support",
         measured_by="One of the PyTorch basic modes, eager and/or graph mode, is tested",
         priority="P1", points=4,
         parts=_parts(("eager", "Eager mode", 2), ("graph", "Graph mode", 2))),
    Item(key="testing.ops", section=TESTING, number=4, category="Ops support",
         measured_by="Ops test coverage for adapting new compute platform: share of test "
         "coverage (excluding deprecated cases)", priority="P1", points=6, bands=_COVERAGE),
    Item(key="testing.distributed", section=TESTING, number=5, category="Distributed",
         measured_by="Distributed mode is tested (only for platforms targeting distributed "
         "usage)", priority="P1", points=4),
    Item(key="ux.binaries", section=UX, number=1, category="PyTorch binary distribution",
         measured_by="Binary distribution, its size, and its release date", priority="P2",
         points=6, parts=_parts(
             ("package", "At least one kind of PyPI, Conda or offline download package", 2),
             ("size", "Binary size comparable with PyTorch default wheel", 2),
             ("same_day", "Binary release on the same day as the PyTorch release", 2))),
    Item(key="ux.setup", section=UX, number=2, category="Easy Software setup",
         measured_by="Valid links to vendor documentation for prerequisites, setup and "
         "installation; actionable initialization logs", priority="P2", points=2),
    Item(key="ux.docs", section=UX, number=3, category="Documentation/examples starting points",
         measured_by="Getting started guide, environment setup guide, installation manual, "
         "user tutorials", priority="P2", points=2),
    Item(key="ux.debugging", section=UX, number=4, category="Debugging ability",
         measured_by="Debug build options, runtime error log messages, compatibility with "
         "PyTorch debugging utilities", priority="P2", points=2),
    Item(key="ux.profiler", section=UX, number=5, category="Profiler ability",
         measured_by="Performance profiling tools", priority="P2", points=4, parts=_parts(
             ("torch", "PyTorch native profiling support (torch.profile)", 2),
             ("custom", "Custom per-operator profiling tools", 2))),
    Item(key="ci.public", section=CICD,
         name="CI/CD and its results", number=1, category="Accessibility",
         measured_by="CI/CD is publicly accessible. Test results are transparent to the "
         "PyTorch open source community", priority="P0", points=2),
    Item(key="ci.gating", section=CICD, number=2, category="CI",
         measured_by="CI gates every PR relevant for the platform (or cadence testing, agreed "
         "with PyTorch maintainers)", priority="P1", points=4, parts=_parts(
             ("platform", "Proposed compute platform specific tests", 2),
             ("others", "Tests for other affected platforms", 2))),
    Item(key="ci.cd", section=CICD, number=3, category="CD",
         measured_by="CD supports preview (nightly builds) and release builds", priority="P1",
         points=4),
    Item(key="ci.flaky", section=CICD, number=4, category="Tests stability",
         measured_by="CI/CD configuration has less than 5% tests marked as flaky",
         priority="P1", points=4),
    Item(key="ci.recovery", section=CICD, number=5, category="CI/CD stability",
         measured_by="CI/CD has minimal outages with the recovery period not longer than 3 "
         "days", priority="P1", points=4),
    Item(key="feedback.adopters", section=FEEDBACK, number=1, category="Feedback adopters",
         measured_by="Users/teams have tried the platform, provided feedback and the feedback "
         "was addressed (50%, 80%, 100% addressed)", priority="P1", points=6,
         bands=_COVERAGE),
    Item(key="maintenance.support", section=MAINTENANCE, number=1, category="Support",
         measured_by="Critical and CVE fixes are committed following the Security Policy",
         priority="P1", points=4),
)
BY_KEY: Final = {item.key: item for item in ITEMS}
ITEM_POINTS: Final = sum(item.points for item in ITEMS)  # 126: see the module's docstring


def title(item: Item) -> str:
    """How a page names ``item``: its category, and what it is about where that is shared."""
    return f"{item.category} ({item.name})" if item.name else item.category


def band_points(item: Item, share: float) -> int:
    """The points a coverage ``share`` (0 to 1) earns on a banded item."""
    return next((points for floor, points in item.bands if share >= floor), 0)


def next_band(item: Item, share: float) -> tuple[float, int] | None:
    """The lowest band above ``share``: (its floor, its points), None at the top."""
    above = [(floor, points) for floor, points in item.bands if share < floor]
    return min(above) if above else None


def level_of(points: int, p0_met: bool) -> Level:
    """The level ``points`` reach; Stable also needs every P0 item met."""
    if points >= STABLE_POINTS and p0_met:
        return "Stable"
    return "Unstable" if points >= UNSTABLE_POINTS else "Engineering"


LEVEL_ORDER: Final[tuple[Level, ...]] = ("Engineering", "Unstable", "Stable")
