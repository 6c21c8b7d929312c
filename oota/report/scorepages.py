"""The scorecard's files in a report: ``scorecard/<vendor>.html`` (from
``templates/scorecard.html.j2``, autoescaped) and ``scorecard/<vendor>.json`` beside it,
checked against ``schema/scorecard-v1.json`` before it is written. The data is
:mod:`oota.report.scorecard`'s; this only lays it out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from oota import __version__, schemas
from oota.files import write_atomic, write_json
from oota.report import rubric
from oota.report.data import Report
from oota.report.scorecard import ScoreInput, scorecards
from oota.report.scoremodel import VendorScores
from oota.report.templating import html_environment
from oota.results.jsonfields import JSONObject

SCORE_DIR: Final = "scorecard"
SCHEMA_FILE: Final = "scorecard-v1.json"


class ScorecardSchemaError(ValueError):
    """A scorecard that does not match schema/scorecard-v1.json (a bug in oota when writing)."""


def result_files(report: Report, folders: Mapping[str, str]) -> dict[str, list[str]]:
    """Each cell's result.json files as the report holds them (``folders``: each copy's
    folder -> its place under the report, ``files/<cell-id>``), relative to the report."""
    found: dict[str, list[str]] = {}
    for group in report.groups:
        for row in group.copies:
            if row.folder in folders:
                found.setdefault(group.id, []).append(f"{folders[row.folder]}/result.json")
    return found


def to_json(scores: VendorScores, files: dict[str, list[str]]) -> JSONObject:
    """The vendor's scorecard as JSON, checked against the schema."""
    data = scores.to_json(files)
    problems = schemas.errors(SCHEMA_FILE, data)
    if problems:
        raise ScorecardSchemaError(f"scorecard/{scores.vendor}.json does not match "
                                   f"schema/{SCHEMA_FILE}:\n  " + "\n  ".join(problems))
    return data


def to_html(scores: VendorScores, files: dict[str, list[str]]) -> str:
    """scorecard/<vendor>.html; links go up one folder, to the report's cells and files."""
    return html_environment().get_template("scorecard.html.j2").render(
        title=f"Quality levels: {scores.vendor} — oota", scores=scores, files=files,
        rubric=rubric, sections=_sections(), version=__version__)


def _sections() -> Sequence[tuple[str, Sequence[str]]]:
    """The rubric's sections with their items' keys, in the document's order."""
    return [(section, [i.key for i in rubric.ITEMS if i.section == section])
            for section in rubric.SECTIONS]


def write(folder: Path, report: Report, folders: Mapping[str, str],
          given: ScoreInput) -> tuple[str, ...]:
    """Every vendor's scorecard into ``folder``/scorecard/; the vendors written."""
    found = scorecards(report, given)
    if not found:
        return ()
    files = result_files(report, folders)
    (folder / SCORE_DIR).mkdir()
    for scores in found:
        write_json(_within(folder / SCORE_DIR, f"{scores.vendor}.json"), to_json(scores, files))
        write_atomic(_within(folder / SCORE_DIR, f"{scores.vendor}.html"),
                     to_html(scores, files))
    return tuple(s.vendor for s in found)


def _within(folder: Path, name: str) -> Path:
    """``folder/name``, refused unless it is a file directly in ``folder`` (a vendor's name
    comes from result files; the schema's patterns are the first line of defence)."""
    path = folder / name
    if path.parent.resolve() != folder.resolve() or name.startswith("."):
        raise ScorecardSchemaError(f"a result names a vendor {name!r} outside the report; "
                                   "refused")
    return path
