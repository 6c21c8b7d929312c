"""The release manager's go/no-go table: each release candidate's cell (``torch: test``, the
candidate from PyTorch's test index) beside the current release's cell of the same
coordinates, per layer, with what changed between them.

The anchor is pytorch/test-infra's binary validation (validate-binaries, its smoke test):
the candidate installs from the test channel and must do what the release does. A layer is
'no-go' when the candidate does worse there than the release (a pass that became a failure or
an error), 'go' when it does as well or better, and '–' when neither ran it. The candidate's
verdict is 'no-go' if any layer is; 'no release to compare' when the report holds no release
cell of its coordinates. Pure: built from the report's cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from oota.report.rows import COLUMNS, CellGroup
from oota.vocab import MaybeStatus

CANDIDATE_CHANNEL = "test"
GO, NO_GO = "go", "no-go"
_BAD = ("failed", "error", "interrupted")


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerVerdict:
    layer: str
    release: MaybeStatus
    candidate: MaybeStatus
    verdict: str                     # go | no-go | "" (neither ran it)


@dataclass(frozen=True, kw_only=True, slots=True)
class CandidateRow:
    vendor: str
    candidate: str                   # the candidate cell's id
    release: str                     # the release cell's id ('' when the report has none)
    candidate_torch: str             # the torch the candidate cell installed
    release_torch: str
    layers: tuple[LayerVerdict, ...]
    changed: tuple[str, ...]         # 'torch 2.15.0 → 2.16.0', 'test_x: passed → failed'

    def at(self, layer: str) -> LayerVerdict | None:
        return next((v for v in self.layers if v.layer == layer), None)

    @property
    def verdict(self) -> str:
        if not self.release:
            return "no release to compare"
        return NO_GO if any(v.verdict == NO_GO for v in self.layers) else GO


def candidate_rows(groups: Sequence[CellGroup]) -> tuple[CandidateRow, ...]:
    """A row per candidate cell of the report, with its release sibling when there is one."""
    return tuple(_row(group, _release_for(group, groups)) for group in groups
                 if group.first.coordinates.get("channel") == CANDIDATE_CHANNEL)


def _key(group: CellGroup) -> tuple[str | None, ...]:
    c = group.first.coordinates
    return (group.vendor, c.get("os"), c.get("python"), c.get("toolkit"),
            c.get("toolkit_version"), c.get("platform"))


def _release_for(candidate: CellGroup, groups: Sequence[CellGroup]) -> CellGroup | None:
    """The newest release cell of the candidate's coordinates."""
    siblings = [g for g in groups if not g.first.coordinates.get("channel")
                and _key(g) == _key(candidate)]
    return max(siblings, key=lambda g: _version(str(g.first.coordinates.get("torch"))),
               default=None)


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def _row(candidate: CellGroup, release: CellGroup | None) -> CandidateRow:
    layers = tuple(_layer(column, candidate, release) for column in COLUMNS)
    return CandidateRow(
        vendor=candidate.vendor, candidate=candidate.id, release=release.id if release else "",
        candidate_torch=candidate.first.torch.version or "?",
        release_torch=(release.first.torch.version or "?") if release else "",
        layers=tuple(v for v in layers if v.release or v.candidate),
        changed=_changes(candidate, release) if release else ())


def _layer(column: str, candidate: CellGroup, release: CellGroup | None) -> LayerVerdict:
    now = candidate.layers[column].status if column in candidate.layers else ""
    before = release.layers[column].status if release and column in release.layers else ""
    if not now and not before:
        return LayerVerdict(layer=column, release="", candidate="", verdict="")
    worse = now in _BAD and before not in _BAD
    return LayerVerdict(layer=column, release=before, candidate=now,
                        verdict=NO_GO if worse else GO)


def _changes(candidate: CellGroup, release: CellGroup) -> tuple[str, ...]:
    """What differs: torch and the other installed packages, then each test whose outcome
    did (a test only one of them ran is left out: the suites may differ)."""
    new, old = candidate.first, release.first
    out = []
    if new.torch.version != old.torch.version:
        out.append(f"torch {old.torch.version} → {new.torch.version}")
    for name in sorted(set(new.packages) & set(old.packages)):
        was, now = old.packages[name].version, new.packages[name].version
        if name != "torch" and was != now:
            out.append(f"{name} {was} → {now}")
    before = {t.id: t.status for t in old.tests}
    for test in new.tests:
        if test.id in before and before[test.id] != test.status:
            out.append(f"{test.id}: {before[test.id]} → {test.status}")
    return tuple(out)
