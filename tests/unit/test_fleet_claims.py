"""The fleet's claims as a user reads them: pull's counts line however the log ends, host
names kept as written (the default Engine's reserved name refused with the reason), a merged
run dated by the merge, and the reuse message naming the Engine that verified the cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from oota.config.hostsfile import load_hosts
from oota.errors import MatrixError
from oota.execute.build import _sameness
from oota.execute.pull import _counts
from oota.history.records import run_record
from oota.results.model import Host
from tests.unit.test_report import make_result, typed


@pytest.mark.parametrize("log", [
    "test_x.py::test_y PASSED [100%]\noota-verify: 58 passed, 2 skipped in 3.1s\n",
    "test_x.py::test_y PASSED [100%]oota-verify: 58 passed, 2 skipped in 3.1s\n",
    "....PASSED [100%]oota-verify: 58 passed, 2 skipped in 3.1s",
], ids=["own-line", "glued-to-pytest", "no-final-newline"])
def test_the_counts_line_is_found_however_the_log_ends(log: str) -> None:
    assert _counts(log) == "58 passed, 2 skipped in 3.1s"


def test_a_host_named_local_is_refused_with_the_reason(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts:\n  local:\n    endpoint: tcp://127.0.0.1:2375\n    vendors: [cpu]\n")
    with pytest.raises(MatrixError, match="'local' is the name of the Engine of a run without "
                       "a hosts file, .* would be renamed.*name the host after its machine"):
        load_hosts(hosts, ("cpu",))


def test_a_merged_run_is_dated_by_the_merge_not_its_earliest_result() -> None:
    results = typed([make_result("cpu"), make_result("cpu", python="3.13")])
    merged = run_record(results, "merge", None)
    assert merged.started_at > results[0].started_at
    imported = run_record(results, "import", None)
    assert imported.started_at == "2026-11-21T11:00:00+00:00"


def test_a_reused_verification_names_the_engine_it_was_made_on() -> None:
    e1 = Host(facts={"engine": "e1", "engine_id": "id-e1"})
    e2 = Host(facts={"engine": "e2", "engine_id": "id-e2"})
    assert _sameness(e1, Host(facts={"engine": "main", "engine_id": "id-e1"})) == \
        "same image, suite and host"
    assert _sameness(e1, e2) == ("same image and suite, on the same kind of host: it was "
                                 "verified on e1, this run is on e2")
