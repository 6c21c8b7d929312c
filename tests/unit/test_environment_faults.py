"""An environment's fault is not the stack's failure: a base image whose registry does not
answer, or a full disk, makes a cell an 'error' (said once, in full, where it happened), never
'failed'; the history does not blame anyone for it, and the next run tries it again."""

from __future__ import annotations

import datetime as dt

import pytest

from oota.errors import StepFailed
from oota.execute.faults import disk_full, unreachable
from oota.execute.fleet import Station
from oota.history.records import Inputs
from oota.history.timeline import CellSeries, Outcome, RunHead, judge
from oota.results.model import CellRef
from tests.unit.test_fleet import FakeEngine, _run

# What the Docker Engine 20.10 of this project's hosts answered for a Gaudi base image on a
# host without access to vault.habana.ai (2026-11-26).
NO_REGISTRY = ('500 Server Error for http+docker://localhost/v1.41/images/create?tag=latest&'
               'fromImage=vault.habana.ai%2Fgaudi-docker: Internal Server Error ("Get "https://'
               'vault.habana.ai/v2/": dial tcp: lookup vault.habana.ai on 10.255.255.53:53: no '
               'such host")')


@pytest.mark.parametrize(("why", "environment"), [
    (NO_REGISTRY, True),
    ("Get https://registry.lab:5000/v2/: dial tcp 10.0.0.9:5000: connect: connection refused",
     True),
    ("Get https://quay.io/v2/: net/http: TLS handshake timeout", True),
    ("404 Client Error: Not Found (\"manifest for debian:bookwrom-slim not found: manifest "
     "unknown\")", False),
    ("pull access denied for oota/private, repository does not exist or may require 'docker "
     "login'", False),
], ids=["dns", "refused", "tls-timeout", "wrong-name", "denied"])
def test_an_unreachable_registry_is_told_from_a_wrong_image(why: str, environment: bool) -> None:
    assert unreachable(why) is environment


def test_a_full_disk_is_recognised_in_a_steps_log() -> None:
    log = "#9 ERROR: failed to copy files: write /var/lib/docker/x: no space left on device"
    assert disk_full(log) == "the disk is full (no space left on device)"
    assert disk_full("ERROR: No matching distribution found for torch==9.9") == ""


class NoRegistry(FakeEngine):
    """An engine without the base image, whose registry does not answer."""

    def image_labels(self, ref: str) -> dict[str, str] | None:
        return None

    def pull(self, ref: str) -> str | None:
        return NO_REGISTRY


class FullDisk(FakeEngine):
    def build(self, request, on_step) -> str:  # type: ignore[no-untyped-def]
        raise StepFailed(f"docker build of {request.tag} exited with 1",
                         log_tail="#12 ERROR: write /var/lib/docker/overlay2/x: no space left "
                                  "on device")


def test_an_unreachable_base_image_is_an_error_said_once(project, tmp_path) -> None:
    engine = NoRegistry("a")
    cells, results, shown = _run(project, tmp_path, [Station("a", engine)])
    assert [r.status for r in results] == ["error", "error"]
    build = results[0].stages["build"]
    assert build.status == "error"
    assert build.message == ("base image debian:bookworm-slim could not be pulled: its registry "
                             "docker.io did not answer")
    assert engine.built == []
    # The Engine's answer is said once per base, on the base's line; each cell's line says
    # only that its build is an error.
    assert shown.count("no such host") == 2, shown   # debian12's base and debian13's
    assert shown.count("base image debian:bookworm-slim is not available") == 1
    assert f"ERR  {cells[0].id}: build error (" in shown


def test_a_full_disk_is_an_error_not_a_failure(project, tmp_path) -> None:
    _, results, _ = _run(project, tmp_path, [Station("a", FullDisk("a"))])
    assert {r.status for r in results} == {"error"}
    assert results[0].stages["build"].message == "the disk is full (no space left on device)"


def _outcome(run: int, status: str) -> Outcome:
    head = RunHead(id=run, key=f"r{run}", origin="build",
                   started_at=(dt.datetime(2026, 11, 26, tzinfo=dt.timezone.utc)
                               + dt.timedelta(hours=run)).isoformat())
    return Outcome(run=head, status=status, message="", inputs=Inputs())  # type: ignore[arg-type]


def test_the_history_blames_no_one_for_an_error() -> None:
    """passed, error, error, passed: no failure episode, nothing broke or was fixed; a failure
    after the errors is blamed on what changed since the last pass."""
    cell = CellRef(id="c", vendor="cpu", os="debian12", python="3.11", torch="2.13.0",
                   toolkit=None, toolkit_version=None, fingerprint="sha256:0")
    state = judge(CellSeries(cell=cell, outcomes=tuple(
        _outcome(i, s) for i, s in enumerate(("passed", "error", "error", "passed")))))
    assert state.episodes == () and state.failing is None
    state = judge(CellSeries(cell=cell, outcomes=tuple(
        _outcome(i, s) for i, s in enumerate(("passed", "error", "failed")))))
    assert state.failing is not None and state.failing.first.run.id == 2
    assert state.failing.blame.good is not None and state.failing.blame.good.run.id == 0
