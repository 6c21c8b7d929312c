"""What makes a rebuild of unchanged inputs the same image (oota/execute/build.py): labels
without the clock or the run id, the inputs' commit as the creation time, and a seal that is
kept when a verification finds what it already says. No Docker: a fake engine."""

from __future__ import annotations

import io
import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import RUN_LABEL, SEALED_FROM_LABEL
from oota.execute.bases import Base
from oota.execute.build import BuildOptions, CellRun, Verified
from oota.execute.context import source_stamp
from oota.execute.samebytes import same_verification
from oota.execute.sources import resolve_sources
from oota.execute.verify import EXPECTED_IN_IMAGE, expected_results
from oota.plan import plan
from oota.results.assemble import assemble, cell_ref, now
from oota.results.model import Host, Image, Sealed, TestOutcome, VendorCheck
from oota.results.store import load, save


def _no_base(cell):
    raise AssertionError(f"{cell.id}: no base image is needed here")


def _git(root: Path, *args: str, date: str = "2026-01-02T03:04:05+00:00") -> str:
    env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


@pytest.fixture
def committed(project):
    _git(project.root, "init", "-q")
    _git(project.root, "add", "-A")
    _git(project.root, "commit", "-qm", "inputs")
    return project


def _inputs(project) -> list[Path]:
    return [project.matrix, project.root / "vendors" / "cpu"]


def test_the_creation_time_is_the_inputs_commit_not_the_clock(committed, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    stamp = source_stamp(committed.root, _inputs(committed))
    assert stamp.created == "2026-01-02T03:04:05+00:00"
    assert stamp.revision == _git(committed.root, "rev-parse", "HEAD")


def test_a_commit_that_does_not_touch_the_inputs_changes_nothing(committed, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    before = source_stamp(committed.root, _inputs(committed))
    (committed.root / "README.md").write_text("unrelated\n")
    _git(committed.root, "add", "README.md")
    _git(committed.root, "commit", "-qm", "docs", date="2026-02-01T00:00:00+00:00")
    assert source_stamp(committed.root, _inputs(committed)) == before


def test_uncommitted_inputs_are_marked_dirty(committed):
    (committed.root / "vendors" / "cpu" / "skips.yaml").write_text("# edited\n")
    assert source_stamp(committed.root, _inputs(committed)).revision.endswith("-dirty")


def test_source_date_epoch_wins(committed, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    assert source_stamp(committed.root, _inputs(committed)).created == "1970-01-01T00:00:00+00:00"


def test_without_git_there_is_no_creation_time(project, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(project.root.parent))
    stamp = source_stamp(project.root, _inputs(project))
    assert stamp.labels() == {"org.opencontainers.image.revision": ""}


# -- a cell's build request and its seal --------------------------------------------------------

class SealedImage:
    """An engine holding one sealed image whose /opt/oota/expected.json is ``sealed``, as the
    seal writes it (``canonical`` False: as an older oota did, keys in any order)."""

    def __init__(self, sealed: dict[str, object] | None, *, canonical: bool = True):
        self.sealed, self.canonical = sealed, canonical
        self.seals: list[dict[str, str]] = []

    def image_labels(self, ref: str) -> dict[str, str]:
        return {SEALED_FROM_LABEL: "sha256:build"} if self.sealed else {}

    def image_id(self, ref: str) -> str:
        return "sha256:sealed"

    def read_file(self, image: str, path: str, *, run_id: str = "") -> bytes:
        assert path == EXPECTED_IN_IMAGE
        if not self.canonical:
            return json.dumps(self.sealed, indent=2).encode() + b"\n"
        return json.dumps(self.sealed, indent=2, sort_keys=True).encode() + b"\n"

    def seal(self, image: str, files: dict[str, bytes], labels: dict[str, str], *,
             run_id: str = "") -> str:
        self.seals.append(labels)
        return "sha256:resealed"


TESTS = (TestOutcome(id="install::torch", layer="install", status="passed", duration_s=1.0),)


def _cell_run(project, tmp_path, engine, run_id: str = "r1") -> CellRun:
    matrix = load_matrix(project.matrix)
    cell = plan(matrix, ["cpu"])[0]
    options = BuildOptions(results_dir=tmp_path / "results", run_id=run_id)
    run = CellRun(matrix, cell, engine, Console(io.StringIO(), live=False), options, _no_base,
                  Host(facts={"arch": "x86_64"},
                       vendor_check=VendorCheck(supported=True, reasons=(), facts={})))
    return run


def _verified(run: CellRun) -> Verified:
    return Verified(image=Image(tag=run.inputs.tag), tests=TESTS)


def test_build_labels_hold_no_run_id_and_no_clock(committed, tmp_path):
    sources = resolve_sources(vendor_index="", use_host_config=False, probe=False)
    base = Base(ref="debian:bookworm-slim", how="local")
    labels = []
    for run_id in ("r1", "r2"):
        run = _cell_run(committed, tmp_path, SealedImage(None), run_id)
        work = tmp_path / run_id
        work.mkdir()
        labels.append(run._request(work, sources, base).labels)
    assert labels[0] == labels[1]
    assert RUN_LABEL not in labels[0]
    assert labels[0]["org.opencontainers.image.created"] == "2026-01-02T03:04:05+00:00"


def test_a_verification_that_finds_what_the_seal_says_keeps_the_image(project, tmp_path):
    earlier = _cell_run(project, tmp_path, SealedImage(None))
    sealed = dict(expected_results(earlier.cell, TESTS, None, earlier.host, "r0").document)
    sealed["verified_at"] = "2026-01-01T00:00:00+00:00"
    engine = SealedImage(sealed)
    run = _cell_run(project, tmp_path, engine)
    verified = run._seal(_verified(run))
    assert engine.seals == []
    # The seal's time with the seal's run (r0), not this run's: one verification, one pair.
    assert verified.image.sealed == Sealed(id="sha256:sealed", file=EXPECTED_IN_IMAGE,
                                      at="2026-01-01T00:00:00+00:00", run_id="r0")


def test_a_seal_of_an_older_non_canonical_form_is_sealed_anew(project, tmp_path):
    """Kept, it would give the same verification another image id than a reseal elsewhere."""
    earlier = _cell_run(project, tmp_path, SealedImage(None))
    sealed = dict(expected_results(earlier.cell, TESTS, None, earlier.host, "r0").document)
    engine = SealedImage(dict(reversed(sealed.items())), canonical=False)
    run = _cell_run(project, tmp_path, engine)
    verified = run._seal(_verified(run))
    assert engine.seals and verified.image.sealed is not None
    assert verified.image.sealed.id == "sha256:resealed"


def test_a_different_outcome_is_sealed_anew(project, tmp_path):
    earlier = _cell_run(project, tmp_path, SealedImage(None))
    failed = (replace(TESTS[0], status="failed"),)
    sealed = dict(expected_results(earlier.cell, failed, None, earlier.host, "r0").document)
    engine = SealedImage(sealed)
    run = _cell_run(project, tmp_path, engine)
    verified = run._seal(_verified(run))
    assert engine.seals and engine.seals[0]["oota.verified"] == "passed"
    assert verified.image.sealed is not None and verified.image.sealed.id == "sha256:resealed"


def test_a_verification_differing_only_in_what_the_ops_budget_reached_keeps_the_seal():
    budget = {"status": "skipped", "message": "time budget of 20 s spent (OOTA_OPS_BUDGET_S)"}
    base = {"schema": "oota.expected/v1", "cell": "c", "status": "passed", "run_id": "r1",
            "verified_at": "then", "summary": {"passed": 2, "skipped": 1}}
    sealed = {**base, "tests": [{"id": "a", "status": "passed"},
                                {"id": "op[mul]", **budget}, {"id": "op[add]", "status": "passed"}]}
    now = {**base, "run_id": "r2", "verified_at": "now", "summary": {"passed": 2, "skipped": 1},
           "tests": [{"id": "a", "status": "passed"}, {"id": "op[mul]", "status": "passed"},
                     {"id": "op[add]", **budget}]}
    assert same_verification(sealed, now)
    failed = {**now, "tests": [{"id": "a", "status": "failed"}, *now["tests"][1:]]}
    assert not same_verification(sealed, failed)


def _folded(pairs: int, operators: int) -> TestOutcome:
    return TestOutcome(id="test_ops.py::test_op_runs[unrun-by-budget]", layer="ops",
                       status="skipped", duration_s=0.1,
                       message=f"time budget of 20 s spent (OOTA_OPS_BUDGET_S): {pairs} "
                               f"operator×dtype pairs of {operators} operators not run",
                       data={"unrun_pairs": pairs, "unrun_operators": operators})


def _op(name: str, status: str = "passed") -> TestOutcome:
    return TestOutcome(id=f"test_ops.py::test_op_runs[{name}-float32]", layer="ops",
                       status=status, duration_s=0.1, data={"op": name, "samples": 4})


def test_a_folded_verification_differing_only_in_what_the_budget_reached_keeps_the_seal(
        project, tmp_path):
    """Each run folds the pairs its budget left unrun into one test: a pair that ran in one
    and is in the other's fold is no difference. The image keeps the fold's count."""
    earlier = _cell_run(project, tmp_path, SealedImage(None))
    sealed = dict(expected_results(earlier.cell, (*TESTS, _op("add"), _op("mul"), _folded(
        10, 9)), None, earlier.host, "r0").document)
    assert sealed["tests"][-1]["data"] == {"unrun_pairs": 10, "unrun_operators": 9}
    assert "data" not in sealed["tests"][1]  # measurements stay out of the image
    now = dict(expected_results(earlier.cell, (*TESTS, _op("add"), _folded(11, 10)), None,
                                earlier.host, "r1").document)
    assert same_verification(sealed, now)
    broken = dict(expected_results(earlier.cell, (*TESTS, _op("add", "failed"), _folded(
        11, 10)), None, earlier.host, "r1").document)
    assert not same_verification(sealed, broken)


def test_the_sealed_bytes_are_the_same_made_fresh_or_read_back_from_the_result(project,
                                                                               tmp_path):
    """A fresh verification writes the folded ops entry's keys as the suite gave them; a
    reseal on another Engine reads them back from result.json (sorted): the sealed file, and
    so the sealed image id, must be the same bytes."""
    run = _cell_run(project, tmp_path, SealedImage(None))
    tests = (*TESTS, _op("add"), _folded(2891, 640))
    assert list(tests[-1].data) == ["unrun_pairs", "unrun_operators"]
    fresh = expected_results(run.cell, tests, None, run.host, "r0",
                             verified_at="2026-01-01T00:00:00+00:00")
    folder = tmp_path / "result"
    save(folder, assemble(cell=cell_ref(run.cell.coordinates(), id=run.cell.id,
                                        fingerprint=run.inputs.fingerprint),
                          stages={}, tests=tests, host=run.host, started_at=now(),
                          run_id="r0"))
    back = load(folder / "result.json")
    again = expected_results(run.cell, back.tests, None, back.host, "r0",
                             verified_at="2026-01-01T00:00:00+00:00")
    assert again.to_bytes() == fresh.to_bytes()
