"""The words oota and its in-image suite share: statuses and their order, the suite's layers,
and how the suite marks a test the host could not run.

Standard library only, no imports from oota: this file is also shipped into every image
(beside ``oota-verify``) so the suite in the image and the toolkit outside it can never
disagree on what a status means or which one wins.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

Status = Literal["passed", "failed", "error", "skipped", "unsupported-here", "interrupted"]

# Every status, worst first: the status of a layer, a cell or a run is the first of these that
# any of its parts has. 'interrupted' (the run was stopped by a signal) and 'error' (oota or the
# environment broke) outrank 'failed' (the stack is wrong); 'unsupported-here' (the host lacks
# the hardware) is never shown as a pass; 'skipped' wins only when nothing else ran.
STATUS_ORDER: Final[tuple[Status, ...]] = (
    "interrupted", "error", "failed", "unsupported-here", "passed", "skipped")
STATUSES: Final[frozenset[str]] = frozenset(STATUS_ORDER)
# Statuses that make a run's exit code 1 (README: exit codes).
BAD: Final[frozenset[str]] = frozenset({"interrupted", "error", "failed"})

# The in-image suite's layers, in report order (verify/oota_suite.py, oota-verify). 'workload'
# (training stability, latency, throughput) runs only for vendors that ask for it.
LAYERS: Final[tuple[str, ...]] = (
    "install", "compat", "device", "ops", "models", "workload", "vendor", "skips")

# How the suite words a skip caused by the host check (no hardware here), so that oota can
# give it its own status instead of 'skipped'.
UNSUPPORTED_PREFIX: Final = "unsupported-here: "
# How a test the ops layer's time budget left unrun begins its skip reason. Which operators a
# budget reaches depends on the host's speed, so two runs are not compared on those tests.
BUDGET_PREFIX: Final = "time budget of "


def worst(statuses: Iterable[str]) -> str:
    """The status that wins among ``statuses`` (``""`` when there are none)."""
    present = set(statuses)
    return next((status for status in STATUS_ORDER if status in present), "")


def normalized(status: str, message: str) -> tuple[str, str]:
    """(status, message) with the suite's unsupported-here skips given their own status."""
    if status == "skipped" and message.startswith(UNSUPPORTED_PREFIX):
        return "unsupported-here", message.removeprefix(UNSUPPORTED_PREFIX)
    return status, message
