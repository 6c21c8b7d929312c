"""A reused image keeps the log of the build that made it (results/<cell>/build.log:
docs/guides/results.md), and the package sources that build used."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import SEALED_FROM_LABEL, BuildRequest
from oota.execute.bases import Base
from oota.execute.build import BuildOptions, CellRun
from oota.execute.buildinfo import NOT_KEPT, BuildRecords
from oota.plan import plan
from oota.results.model import Host, Result
from oota.results.software import Sources
from tests.unit.test_fleet import FakeEngine


class _Remembering(FakeEngine):
    """Builds write their log, and the built image keeps its labels (so the next run finds it
    up to date)."""

    def __init__(self) -> None:
        super().__init__("local", build_s=0)
        self.labels: dict[str, str] = {}

    def image_labels(self, ref: str) -> dict[str, str] | None:
        return dict(self.labels)

    def build(self, request: BuildRequest, on_step: Any) -> str:
        request.log_path.write_text(f"#1 FROM base\n#2 built by {request.tag}\n")
        self.labels = dict(request.labels)
        return str(super().build(request, on_step))


class _Sealed(_Remembering):
    """The tag names a sealed image (verification results on the build output
    ``sha256:local``): a rebuild that reproduces that output leaves the tag there."""

    def image_labels(self, ref: str) -> dict[str, str] | None:
        return {**self.labels, SEALED_FROM_LABEL: "sha256:local"} if self.labels else None

    def build(self, request: BuildRequest, on_step: Any) -> str:
        super().build(request, on_step)
        return "sha256:sealed"

    def image_id(self, ref: str) -> str | None:
        return "sha256:sealed"


def _run(project, engine: FakeEngine, results: Path, run_id: str, *,
         rebuild: bool = False) -> Result:
    matrix = load_matrix(project.matrix)
    cell = plan(matrix, ["cpu"])[0]
    options = BuildOptions(results_dir=results, run_id=run_id, verify=False,
                           use_host_pip_config=False, rebuild=rebuild)
    return CellRun(matrix, cell, engine, Console(io.StringIO(), live=False), options,
                   lambda c: Base(ref="debian:bookworm-slim", how="local"),
                   Host(facts=engine.facts())).run(build=True)


def test_a_reused_image_shows_the_log_and_sources_of_the_build_that_made_it(project, tmp_path):
    engine = _Remembering()
    first = _run(project, engine, tmp_path / "results", "r-first")
    folder = tmp_path / "results" / first.cell.id
    log = (folder / "build.log").read_text()
    assert first.stages["build"].detail["image"] == "sha256:local"
    again = _run(project, engine, tmp_path / "results", "r-again")
    build = again.stages["build"]
    assert build.detail["up_to_date"] is True
    assert (build.detail["built_by"], build.log) == ("r-first", "build.log")
    assert (folder / "build.log").read_text() == log
    assert again.sources == first.sources and again.sources is not None
    assert again.image is not None and first.image is not None
    assert again.image.base == first.image.base  # the base the image was built on
    # Another results folder (a CI job's fresh one) gets the same log from the cache.
    other = _run(project, engine, tmp_path / "elsewhere", "r-other")
    assert (tmp_path / "elsewhere" / other.cell.id / "build.log").read_text() == log


def test_after_a_rebuild_of_a_sealed_image_the_next_run_finds_its_log(project, tmp_path):
    """The log is kept under the build output's id, the one the sealed image's label names
    and an up-to-date run looks it up by (it was kept under the sealing's id, and lost)."""
    engine = _Sealed()
    first = _run(project, engine, tmp_path / "results", "r-rebuild", rebuild=True)
    log = (tmp_path / "results" / first.cell.id / "build.log").read_text()
    kept = sorted(p.name for p in BuildRecords(project.root, first.cell.id).folder.iterdir())
    assert kept == ["local.json", "local.log"]
    again = _run(project, engine, tmp_path / "elsewhere", "r-again")
    build = again.stages["build"]
    assert build.detail["up_to_date"] is True and build.detail["built_by"] == "r-rebuild"
    assert (tmp_path / "elsewhere" / first.cell.id / "build.log").read_text() == log


def test_an_image_built_elsewhere_says_its_log_is_not_here(project, tmp_path):
    engine = _Remembering()
    first = _run(project, engine, tmp_path / "results", "r-first")
    for kept in BuildRecords(project.root, first.cell.id).folder.iterdir():
        kept.unlink()
    again = _run(project, engine, tmp_path / "results", "r-again")
    assert again.stages["build"].detail["build_log"] == NOT_KEPT
    assert again.stages["build"].log is None
    assert not (tmp_path / "results" / first.cell.id / "build.log").exists()


def test_only_the_newest_builds_of_a_cell_are_kept(tmp_path):
    records = BuildRecords(tmp_path, "cell-a", keep_last=2)
    log = tmp_path / "build.log"
    for n in range(4):
        log.write_text(f"build {n}")
        records.keep(f"sha256:{n:064x}", log, run_id=f"r{n}", sources=Sources(index_url="x"))
    kept = sorted(p.name for p in records.folder.iterdir())
    assert len(kept) == 4 and kept[0].startswith("0" * 63 + "2")
    restored = records.restore(f"sha256:{3:064x}", tmp_path)
    assert restored.detail["built_by"] == "r3" and restored.sources == Sources(index_url="x")
    assert (tmp_path / "build.log").read_text() == "build 3"
