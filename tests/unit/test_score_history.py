"""The scorecard's items the history measures (oota/report/scorehistory.py): recovery within 3
days, and a pass on PyTorch's release day; and the release days' table against PyPI's record."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import re
from pathlib import Path

import pytest

from oota.history.records import Inputs
from oota.history.timeline import CellSeries, Outcome, RunHead, Timeline
from oota.report import torchreleases
from oota.report.gonogo import CandidateRow
from oota.report.scorehistory import recovery, same_day
from oota.results.model import CellRef

INDEX = Path(__file__).parent / "data" / "pypi-index.json.gz"
T0 = dt.datetime(2026, 11, 1, 6, 0, tzinfo=dt.timezone.utc)
CELL = "reference-torch2.13.0-py3.11-debian12"
INPUTS = Inputs(torch="2.13.0", fingerprint="f1", host="lab", suite="0.1.0")


def timeline(marks: list[tuple[float, str]], *, cell: str = CELL, torch: str = "2.13.0",
             start: dt.datetime = T0) -> Timeline:
    """Outcomes at ``hours`` after ``start``: P passed, F failed (failing test_x), E error."""
    heads, outcomes = [], []
    for i, (hours, mark) in enumerate(marks):
        head = RunHead(id=i + 1, key=f"r{i + 1}", origin="verify",
                       started_at=(start + dt.timedelta(hours=hours)).isoformat())
        heads.append(head)
        status = {"P": "passed", "F": "failed", "E": "error"}[mark]
        outcomes.append(Outcome(run=head, status=status, message="", inputs=INPUTS,  # type: ignore[arg-type]
                                failed_tests=("test_ops.py::test_x",) if mark == "F" else ()))
    ref = CellRef(id=cell, vendor=cell.split("-")[0], os="debian12", python="3.11",
                  torch=torch, toolkit=None, toolkit_version=None, fingerprint="f1")
    return Timeline(runs=tuple(heads), metrics=(),
                    cells=(CellSeries(cell=ref, outcomes=tuple(outcomes)),))


def score(marks: list[tuple[float, str]], now_h: float) -> tuple[int | None, str]:
    (part,) = recovery(timeline(marks), "reference", "2.13.0", T0 + dt.timedelta(hours=now_h))
    return part.points, part.how


def test_failures_fixed_within_three_days_earn_the_points() -> None:
    points, how = score([(0, "P"), (24, "F"), (30, "F"), (34, "P"), (100, "P")], now_h=101)
    assert points == 4 and "longest 10.0 h" in how and "100.0 h of runs" in how


def test_a_failure_fixed_after_three_days_loses_them() -> None:
    (part,) = recovery(timeline([(0, "P"), (24, "F"), (60, "F"), (104, "P")]), "reference",
                       "2.13.0", T0 + dt.timedelta(hours=110))
    assert part.points == 0 and "longer than 72 h" in part.how
    outage = part.evidence[1]
    assert outage.runs == ("r2", "r4") and "80.0 h" in outage.text
    assert outage.tests == ("test_ops.py::test_x",)


def test_still_failing_past_three_days_loses_them() -> None:
    assert score([(0, "P"), (24, "F")], now_h=100)[0] == 0


def test_what_cannot_be_known_yet_is_not_measured() -> None:
    points, how = score([(0, "P"), (90, "F")], now_h=100)  # failing 10 h: not over yet
    assert points is None and "not fixed yet" in how
    points, how = score([(0, "P"), (20, "P")], now_h=21)  # 20 h of history: too short
    assert points is None and "covers 20.0 h" in how
    (part,) = recovery(None, "reference", "2.13.0", T0)
    assert part.points is None and "holds no run of these cells" in part.how


def test_errors_and_flaky_failures_are_no_outage() -> None:
    """An error is the environment's; one failure between two passes with the same inputs is
    flaky (the HUD's rule), not an outage of the stack."""
    points, how = score([(0, "P"), (10, "E"), (20, "F"), (30, "P"), (100, "P")], now_h=101)
    assert points == 4 and how == "no failure over 100.0 h of runs"


def released_at(version: str, hours: float) -> dt.datetime:
    when = torchreleases.released(version)
    assert when is not None
    return when + dt.timedelta(hours=hours)


def test_a_pass_on_the_release_day_earns_the_same_day_points() -> None:
    day = released_at("2.13.0", 0).replace(hour=0, minute=30)
    part = same_day(timeline([(0, "F"), (20, "P")], start=day), "reference", "2.13.0", ())
    assert part.points == 2 and part.evidence[0].runs == ("r2",)
    assert "2026-07-08" in part.evidence[0].source


def test_a_failure_on_the_release_day_is_evidence_too() -> None:
    day = released_at("2.13.0", 0).replace(hour=1)
    part = same_day(timeline([(0, "F"), (30, "P")], start=day), "reference", "2.13.0", ())
    assert part.points == 0 and part.evidence[0].tests == ("test_ops.py::test_x",)


def test_a_history_that_misses_the_release_day_measures_nothing() -> None:
    later = released_at("2.13.0", 24 * 40)
    candidate = CandidateRow(vendor="reference", candidate="reference-torchtest-py3.11-debian12",
                             release="reference-torch2.13.0-py3.11-debian12",
                             candidate_torch="2.14.0", release_torch="2.13.0", layers=(),
                             changed=())
    part = same_day(timeline([(0, "P")], start=later), "reference", "2.13.0", (candidate,))
    assert part.points is None and "40 days after" in part.how
    assert "release candidate reference-torchtest-py3.11-debian12" in part.evidence[1].text
    unknown = same_day(timeline([(0, "P")]), "reference", "9.9.9", ())
    assert unknown.points is None and "not in oota's table" in unknown.how


def test_release_days_agree_with_the_recorded_index() -> None:
    """The table is PyPI's: each release's first upload-time in the recorded simple index."""
    recorded = json.loads(gzip.decompress(INDEX.read_bytes()))
    page = json.loads(recorded["pages"]["https://pypi.org/simple/torch/"]["body"])
    first: dict[str, str] = {}
    for entry in page["files"]:
        found = re.match(r"torch-(\d+\.\d+\.\d+)-", entry["filename"])
        if found and entry.get("upload-time"):
            version = found.group(1)
            first[version] = min(first.get(version, entry["upload-time"]), entry["upload-time"])
    assert torchreleases.RELEASED, "the table is empty"
    for version, when in torchreleases.RELEASED.items():
        assert first[version][:19] + "Z" == when, version
    assert torchreleases.released("2.15.0") == dt.datetime(2026, 10, 28, 15, 16, 25,
                                                          tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("version", ["2.9.0", "2.13.0", "2.14.1", "2.15.0"])
def test_the_matrix_releases_are_in_the_table(version: str) -> None:
    assert torchreleases.released(version) is not None
