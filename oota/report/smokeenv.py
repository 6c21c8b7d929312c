"""Which of PyTorch's three smoke-test environments a cell's results cover.

The Compute Platform Quality Levels RFC (pytorch/pytorch#167282, prerequisite 1) asks that
PyTorch's smoke test pass on the full stack with the hardware, on the full stack without it,
and on a minimal OS without the compute stack. Each test of the smoke layer records the
environment its run was in (``data.environment``: a key of :data:`oota.vocab.SMOKE_ENVIRONMENTS`);
one run is in one environment, so a cell covers several only through copies made on several
hosts. Pure: built from the tests of one result or of every copy of a cell.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from oota.report.rows import Mark
from oota.results.jsonfields import JSONObject
from oota.vocab import SMOKE_ENVIRONMENTS, MaybeStatus, worst

SMOKE_LAYER = "smoke"


class _Test(Protocol):
    @property
    def layer(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def data(self) -> JSONObject: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class SmokeEnvironment:
    """One of the three environments: its key, its words, and the worst status of the smoke
    tests that ran in it ('' where none did: these results do not cover it)."""

    key: str
    label: str
    status: MaybeStatus = ""

    @property
    def covered(self) -> bool:
        return self.status == "passed"


def smoke_environments(tests: Iterable[_Test]) -> tuple[SmokeEnvironment, ...]:
    """The three environments, each with the status of the smoke tests that ran in it."""
    found: dict[str, list[MaybeStatus]] = {}
    for test in tests:
        key = test.data.get("environment") if test.layer == SMOKE_LAYER else None
        if isinstance(key, str):
            found.setdefault(key, []).append(_status(test.status))
    return tuple(SmokeEnvironment(key=key, label=label, status=worst(found.get(key, ())))
                 for key, label in SMOKE_ENVIRONMENTS)


def _status(text: str) -> MaybeStatus:
    known: dict[str, MaybeStatus] = {"passed": "passed", "failed": "failed", "error": "error",
                                     "skipped": "skipped", "interrupted": "interrupted",
                                     "unsupported-here": "unsupported-here",
                                     "cpu-fallback": "cpu-fallback",
                                     "not-claimed": "not-claimed"}
    return known.get(text, "")


def with_environments(mark: Mark, tests: Iterable[_Test]) -> Mark:
    """The smoke column's mark, its note naming the environments the tests passed in
    ('hardware', 'no-hardware, minimal-os'); the mark as it was where none did."""
    covered = [env.key for env in smoke_environments(tests) if env.covered]
    return replace(mark, note=", ".join(covered)) if covered and not mark.note else mark
