"""The one place a :class:`~oota.results.model.Result` is put together, for an image's run
(``oota/execute/build.py``) and for ``verify --here`` (``oota/execute/inplace.py``) alike:
the status, summary and message are derived here and nowhere else.

It also reads what the in-image suite writes (``tests.json``, ``installed.json``) into the
model, so the two callers cannot read it differently either.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from oota import __version__
from oota.files import RESULT_LIMIT, read_text
from oota.results.jsonfields import ResultFormatError, json_object, status_of
from oota.results.model import CellRef, Host, Image, Result, Skips, Stage, TestOutcome
from oota.results.software import Installed, Requirements, Sources
from oota.vocab import BAD, STATUSES, Status, normalized, run_status

TESTS_FILE = "tests.json"
INSTALLED_FILE = "installed.json"


def now() -> str:
    """The time results are stamped with: UTC, to the second, ISO 8601."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def cell_ref(coordinates: Mapping[str, str | None], *, id: str, fingerprint: str) -> CellRef:
    """A cell's reference from its coordinates (``Cell.coordinates()`` or a cell.json)."""
    return CellRef.from_json({**coordinates, "id": id, "fingerprint": fingerprint})


# -- derived fields ---------------------------------------------------------------------------

def overall_status(tests: Iterable[TestOutcome], stages: Mapping[str, Stage]) -> Status:
    """The worst status of any stage or test (oota.vocab.STATUS_ORDER), never ``passed``
    without a passed test of a layer that uses the device where the run has such layers
    (:func:`oota.vocab.run_status`); a run that recorded nothing at all is an error."""
    found = run_status(((t.layer, t.status) for t in tests), (s.status for s in stages.values()))
    return status_of(found, "status") if found else "error"


def summarize(tests: Iterable[TestOutcome], stages: Mapping[str, Stage]) -> dict[str, int]:
    """How many tests ended in each status, plus the stages that went wrong."""
    counts: dict[str, int] = {}
    for test in tests:
        counts[test.status] = counts.get(test.status, 0) + 1
    for stage in stages.values():
        if stage.status in BAD:
            counts[stage.status] = counts.get(stage.status, 0) + 1
    return counts


def first_problem(stages: Mapping[str, Stage]) -> str:
    """'<stage>: <first line of its message>' of the first stage that went wrong, or ''."""
    for name, stage in stages.items():
        if stage.status in BAD:
            line = (stage.message.splitlines() or [""])[0]
            return f"{name}: {line}"
    return ""


def assemble(*, cell: CellRef, stages: Mapping[str, Stage], tests: Iterable[TestOutcome],
             host: Host, started_at: str, finished_at: str | None = None,
             run_id: str | None = None, image: Image | None = None,
             installed: Installed | None = None, sources: Sources | None = None,
             skips: Skips | None = None, requested: tuple[str, ...] = (),
             requirements: Requirements | None = None) -> Result:
    """The result of one cell's run; status, summary and message follow from its parts."""
    tests = tuple(tests)
    stages = dict(stages)
    return Result(cell=cell, status=overall_status(tests, stages),
                  summary=summarize(tests, stages), message=first_problem(stages),
                  stages=stages, tests=tests, host=host, oota_version=__version__,
                  started_at=started_at, finished_at=finished_at or now(), run_id=run_id,
                  image=image, installed=installed, sources=sources, skips=skips,
                  requested=requested, requirements=requirements)


# -- what the suite wrote ---------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class SuiteOutput:
    """The suite's files, read: ``found`` is False when it wrote no tests.json at all."""

    found: bool = False
    tests: tuple[TestOutcome, ...] = ()
    installed: Installed | None = None
    skips: Skips | None = None
    duration_s: float = 0.0


def suite_test(raw: object, where: str) -> TestOutcome:
    """One entry of tests.json: the host check's skips get their own status; a status the
    vocabulary does not know is an error (saying which), never a pass."""
    data = json_object(raw, where)
    status, message = str(data.get("status") or "error"), str(data.get("message") or "")
    if status not in STATUSES:
        status, message = "error", f"the suite wrote an unknown status {status!r}: {message}"
    status, message = normalized(status, message)
    return TestOutcome.from_json({"id": str(data.get("id")),
                                  "layer": str(data.get("layer") or "vendor"), "status": status,
                                  "duration_s": data.get("duration_s") or 0.0,
                                  "message": message, "data": data.get("data") or {}}, where)


def _read_json(path: Path) -> object:
    try:
        return json.loads(read_text(path, RESULT_LIMIT))
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: bad UTF-8 or JSON
        raise ResultFormatError(f"{path.name} is unreadable: {exc}") from None


def read_suite_output(folder: Path) -> SuiteOutput:
    """``tests.json`` and ``installed.json`` that ``oota-verify --out folder`` wrote.

    Raises ResultFormatError (naming the file and key) when they are not what the suite writes.
    """
    tests_file = folder / TESTS_FILE
    if not tests_file.exists():
        return SuiteOutput()
    data = json_object(_read_json(tests_file), TESTS_FILE)
    raw_tests = data.get("tests") or []
    if not isinstance(raw_tests, list):
        raise ResultFormatError(f"{TESTS_FILE}: tests: expected a list")
    installed_file = folder / INSTALLED_FILE
    installed = (Installed.from_json(_read_json(installed_file), INSTALLED_FILE)
                 if installed_file.exists() else None)
    skips = Skips.from_json(data["skips"], f"{TESTS_FILE}: skips") if data.get("skips") else None
    duration = data.get("duration_s") or 0.0
    return SuiteOutput(
        found=True, installed=installed, skips=skips,
        duration_s=float(duration) if isinstance(duration, (int, float)) else 0.0,
        tests=tuple(suite_test(t, f"{TESTS_FILE}: tests[{i}]")
                    for i, t in enumerate(raw_tests)))
