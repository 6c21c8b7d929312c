"""What failed in a report, for a reader elsewhere (the relay's callback): each failed, errored
or interrupted test of every copy of every cell, with its message and the first lines of its
stack, and each stage that failed a cell without a test saying why (a build that broke).

The stack is the test's section of pytest's FAILURES in the copy's ``verify.log`` (the suite's
own output, beside result.json): the result keeps a failure's message, not its traceback.
Reading the logs is the only I/O here; a copy without a readable log has messages only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oota.files import RESULT_LIMIT, read_text
from oota.report.data import Report
from oota.report.rows import CellRow
from oota.vocab import BAD

LOG_FILE: Final = "verify.log"
STACK_LINES: Final = 30  # the first lines of a test's stack that are kept
# pytest's header of one test's failure section: "____ test_x[param] ____".
_HEADER = re.compile(r"^_+ (\S.*?) _+$")
_END = re.compile(r"^(={3,} .*|-{3,} .*)$")


@dataclass(frozen=True, kw_only=True, slots=True)
class FailedTest:
    cell: str
    origin: str  # the copy's host ('' for a cell with one copy)
    test: str  # the test's id, or 'stage build' for a stage that failed the cell
    status: str
    message: str
    duration_s: float
    stack: str = ""


def failed_tests(report: Report, *, logs: bool = True) -> list[FailedTest]:
    """Every failure of every copy, in the report's order; with ``logs``, each test's stack
    from its copy's verify.log."""
    found: list[FailedTest] = []
    for group in report.groups:
        for row in group.copies:
            origin = row.origin if group.several else ""
            stacks = _stacks(row) if logs else {}
            found += _of_row(row, origin, stacks)
    return found


def _of_row(row: CellRow, origin: str, stacks: dict[str, str]) -> list[FailedTest]:
    tests = [FailedTest(cell=row.id, origin=origin, test=t.id, status=t.status,
                        message=t.message, duration_s=t.duration_s,
                        stack=stacks.get(t.id.rpartition("::")[2], ""))
             for t in row.tests if t.status in BAD]
    if tests or row.status not in BAD:
        return tests
    stages = [(name, s) for name, s in row.stages.items() if s.status in BAD]
    return [FailedTest(cell=row.id, origin=origin, test=f"stage {name}", status=s.status,
                       message=s.message or row.message, duration_s=s.duration_s)
            for name, s in stages] or [
        FailedTest(cell=row.id, origin=origin, test="cell", status=row.status,
                   message=row.message, duration_s=0.0)]


def _stacks(row: CellRow) -> dict[str, str]:
    """The copy's verify.log's failure sections, by test name ('test_x[param]')."""
    if not row.folder or LOG_FILE not in row.files:
        return {}
    try:
        text = read_text(Path(row.folder) / LOG_FILE, RESULT_LIMIT)
    except (OSError, ValueError):  # too large, unreadable, not UTF-8: messages only
        return {}
    return sections(text.splitlines())


def sections(lines: Iterable[str]) -> dict[str, str]:
    """pytest's FAILURES sections of a log, each as its first :data:`STACK_LINES` lines."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        header = _HEADER.match(line)
        if header:
            current = found.setdefault(header.group(1), [])
        elif _END.match(line):
            current = None
        elif current is not None and len(current) < STACK_LINES:
            current.append(line)
    return {name: "\n".join(lines).strip("\n") for name, lines in found.items()}
