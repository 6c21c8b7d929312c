"""Where a cell or a test changed outcome, and what changed in its inputs: pure, over the
outcomes the store reads back in time order (``history query``, and the HUD's blame later)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from oota.console import inert
from oota.history.records import Inputs
from oota.results.jsonfields import JSONObject
from oota.vocab import Status


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    """A cell's (or one of its tests') outcome in one run."""

    run_key: str
    origin: str
    started_at: str
    cell_id: str
    test_id: str | None
    status: Status
    message: str
    inputs: Inputs


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """``after`` differs from ``before``, the outcome of the same cell (or test) in the run
    before; ``changed`` lists the inputs that differ between the two runs."""

    cell_id: str
    test_id: str | None
    run_key: str
    origin: str
    when: str
    before: Status
    after: Status
    before_run: str
    before_when: str
    message: str
    changed: tuple[str, ...]

    def to_json(self) -> JSONObject:
        return {"cell": self.cell_id, "test": self.test_id, "run": self.run_key,
                "origin": self.origin, "when": self.when, "before": self.before,
                "after": self.after, "before_run": self.before_run,
                "before_when": self.before_when, "message": self.message,
                "changed": list(self.changed)}


def changes(points: Iterable[Point]) -> list[Change]:
    """Every change of outcome in ``points`` (oldest first, as read), newest first."""
    last: dict[tuple[str, str | None], Point] = {}
    found: list[Change] = []
    for point in points:
        key = (point.cell_id, point.test_id)
        before = last.get(key)
        last[key] = point
        if before is not None and before.status != point.status:
            found.append(Change(
                cell_id=point.cell_id, test_id=point.test_id, run_key=point.run_key,
                origin=point.origin, when=point.started_at, before=before.status,
                after=point.status, before_run=before.run_key, before_when=before.started_at,
                message=point.message, changed=tuple(point.inputs.differences(before.inputs))))
    found.reverse()
    return found


def table(found: list[Change]) -> str:
    """``history query``'s table: a line per change, newest first, every value shown inert
    (:func:`~oota.console.inert`: it came from a result, which anyone may have written)."""
    if not found:
        return "no change of outcome in the history for this selection"
    rows = [tuple(inert(v) for v in (
        c.when[:19].replace("T", " "), c.run_key[:16], c.cell_id, c.test_id or "-",
        f"{c.before} -> {c.after}", "; ".join(c.changed) or "no recorded input changed"))
        for c in found]
    headers = ("when", "run", "cell", "test", "outcome", "what changed")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers[:-1])]
    lines = ["  ".join([*(h.ljust(w) for h, w in zip(headers, widths, strict=False)),
                        headers[-1]])]
    lines += ["  ".join([*(v.ljust(w) for v, w in zip(r, widths, strict=False)), r[-1]])
              for r in rows]
    return "\n".join(lines)
