"""Why a cell failed, from the history, in the relay's words: ``flake``, ``infra``,
``backend``, ``upstream`` or ``unknown`` (pytorch/test-infra's triage verdict, schema version
1: ``aws/lambda/cross_repo_ci_relay/utils/triage_verdict.py``).

* ``infra``: the cell's outcome is ``error``: the environment or oota broke, not the stack.
* ``flake``: a test marked flaky (a ``flaky`` status, once the suite has one); or nothing
  recorded changed since the cell last passed and the same tests failed before in a failure
  the history proved flaky (one failure between two passes with the same inputs).
* ``upstream`` or ``backend``: the history's blame of the failure (what changed between the
  last pass and the first failing run) names PyTorch's side only (torch, its commit, the torch
  requirement) or the vendor's only (toolkit, base image, the vendor's packages and
  requirements, its pass_env switches).
* ``unknown``: anything else: no history, never passed, nothing recorded changed, only oota
  or the host changed, or both sides changed.

Pure: over the report's cells and the :class:`~oota.history.timeline.Timeline`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from oota.history.timeline import CellState, Timeline, judge
from oota.report.rows import CellGroup
from oota.report.scoreresults import FLAKY
from oota.vocab import BAD

Category = Literal["upstream", "backend", "infra", "flake", "unknown"]
Confidence = Literal["high", "medium", "low"]
# A requirement line naming torch itself (not torch-npu, torchvision, ...).
_TORCH = re.compile(r"^torch(?![\w.-])")
_HEX = re.compile(r"^[0-9a-fA-F]{7,40}$")


@dataclass(frozen=True, kw_only=True, slots=True)
class CellTriage:
    cell: str
    category: Category
    confidence: Confidence
    why: str
    commit: str = ""  # for upstream: the torch commit the failing run had, when known


def side(change: str) -> str:
    """'upstream', 'backend' or 'neutral' (oota, the host, the fingerprint) of one blame line
    (:meth:`oota.history.records.Inputs.differences`)."""
    if change.startswith(("torch ", "torch commit ")):
        return "upstream"
    if change.startswith("requirement "):
        old, _, new = change.removeprefix("requirement ").partition(" -> ")
        return "upstream" if _TORCH.match(old) or _TORCH.match(new) else "backend"
    return "neutral" if change.startswith(("fingerprint ", "oota ", "host ")) else "backend"


def cell_triage(group: CellGroup, state: CellState | None) -> CellTriage:
    """Why ``group`` (a failing cell of the report) failed; ``state``: its history."""
    if group.status == "error":
        return CellTriage(cell=group.id, category="infra", confidence="high",
                          why=f"error: {_error_of(group)}")
    if any(t.status == FLAKY for row in group.copies for t in row.tests):
        return CellTriage(cell=group.id, category="flake", confidence="high",
                          why="a test is marked flaky")
    episode = state.failing if state else None
    if state is None or episode is None:
        return CellTriage(cell=group.id, category="unknown", confidence="low",
                          why="no history of this failure")
    blame = episode.blame
    if blame.good is None:
        return CellTriage(cell=group.id, category="unknown", confidence="low",
                          why=blame.line())
    sides = {side(c) for c in blame.changed} - {"neutral"}
    if sides == {"upstream"}:
        commit = episode.first.inputs.torch_git or ""
        return CellTriage(cell=group.id, category="upstream", confidence="high",
                          why=blame.line(), commit=commit if _HEX.match(commit) else "")
    if sides == {"backend"}:
        return CellTriage(cell=group.id, category="backend", confidence="high",
                          why=blame.line())
    if not sides and _flaky_before(state, episode.first.failed_tests) and not blame.changed:
        return CellTriage(cell=group.id, category="flake", confidence="medium",
                          why=f"{blame.line()}; the same tests failed before and passed again "
                          "with the same inputs")
    return CellTriage(cell=group.id, category="unknown", confidence="low", why=blame.line())


def _error_of(group: CellGroup) -> str:
    """What broke: the cell's message, else its first errored test's."""
    row = group.worst_copy
    test = next((t for t in row.tests if t.status == "error"), None)
    return row.message or (f"{test.id}: {test.message}" if test else "the environment broke")


def _flaky_before(state: CellState, failing: Sequence[str]) -> bool:
    return any(e.flaky and set(failing) & set(e.first.failed_tests) for e in state.episodes)


def triage(groups: Sequence[CellGroup], timeline: Timeline | None) -> list[CellTriage]:
    """Each failing cell's triage (cells that failed, errored or were interrupted)."""
    states: Mapping[str, CellState] = {
        s.cell.id: judge(s) for s in (timeline.cells if timeline else ())}
    return [cell_triage(g, states.get(g.id)) for g in groups if g.status in BAD]


def verdict_of(cells: Sequence[CellTriage]) -> tuple[Category, Confidence]:
    """One verdict for the job: the side the stack's failures agree on (upstream or backend),
    with less confidence when other cells failed for other reasons; else infra, flake or
    unknown, in that order."""
    sides = {c.category for c in cells} & {"upstream", "backend"}
    if len(sides) == 2:
        return "unknown", "low"
    if sides:
        category: Category = "upstream" if "upstream" in sides else "backend"
        alone = all(c.category == category for c in cells)
        return category, "high" if alone and all(c.confidence == "high" for c in cells) else \
            "medium"
    others: tuple[Category, ...] = ("infra", "flake")
    for other in others:
        if any(c.category == other for c in cells):
            return other, "high" if all(c.category == other for c in cells) else "low"
    return "unknown", "low"
