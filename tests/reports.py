"""The report as data from typed results, for tests: no file is read or written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from oota.report.compare import Comparison
from oota.report.data import Report, build_from
from oota.report.rows import Loaded
from oota.results.model import Result


def build_report(results: Sequence[Result], problems: Sequence[str], *,
                 generated_at: str | None = None,
                 files: Mapping[str, tuple[str, ...]] | None = None,
                 comparison: Comparison | None = None) -> Report:
    """:func:`oota.report.data.build_from` over results read from no folder."""
    return build_from([Loaded(result=r, files=(files or {}).get(r.cell.id, ())) for r in results],
                      problems, generated_at=generated_at, comparison=comparison)
