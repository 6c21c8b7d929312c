"""A history made of real runs, as a lab's would be: the CPU cell broken on purpose (its torch pin
changed in vendor.yaml) and fixed again, then refdev's matrix multiply made slow on purpose
(REFDEV_SLOW_OP) for two runs. Every run is appended to an SQLite history and to a real
PostgreSQL one, and both must tell the same story: the first bad run blamed on the changed pin,
the fix, and the latency flagged suspicious after one slow run and a regression after two.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.execute.build import BuildOptions
from oota.history.location import locate
from oota.history.policy import judge, policy_at
from oota.history.records import run_record
from oota.history.store import append, open_store, read_timeline
from oota.history.timeline import CellState, states
from oota.plan import plan, select
from oota.results.model import Result
from tests.docker.conftest import DEFAULT_CELL, REPO, Built, copy_project, made_by
from tests.history.helpers import invoke
from tests.runs import build_cells

REFERENCE_CELL = "reference-torch2.13.0-py3.11-debian12"
PIN = '  - "torch=={torch}+cpu"'
CHANGED_PIN = '  - "torch==2.12.0+cpu"'
BLAME = "requirement torch==2.13.0+cpu -> torch==2.12.0+cpu"


class Lab:
    """A copy of the project whose runs go to both histories. A vendor's cell is the image of
    ``images[vendor]`` (the run's ``built`` and ``reference_built``): the same tag and run label,
    so the lab finds that image up to date instead of building another."""

    def __init__(self, root: Path, engine, run_id: str, urls: list[str],
                 images: dict[str, Built]) -> None:
        self.matrix_file = copy_project(root / "project")
        self.engine, self.run_id, self.urls, self.images = engine, run_id, urls, images
        self.results_dir = root / "results"
        self.runs = 0

    def run(self, vendor: str, *, build: bool = True, layers: tuple[str, ...] = ()) -> Result:
        self.runs += 1
        image = self.images[vendor].options
        options = BuildOptions(results_dir=self.results_dir, run_id=f"{self.run_id}-h{self.runs}",
                               namespace=image.namespace, layers=layers,
                               extra_labels=made_by(image.run_id))
        matrix = load_matrix(self.matrix_file)
        cells = select(matrix, plan(matrix, [vendor]))
        results = build_cells(matrix, cells, self.engine, Console(io.StringIO(), live=False),
                              options, build=build)
        for url in self.urls:
            append(open_store(locate(url, {}, REPO)), run_record(
                results, "build" if build else "verify", None))
        (result,) = results
        return result

    def state(self, url: str, cell: str) -> CellState:
        timeline = read_timeline(open_store(locate(url, {}, REPO)))
        return next(s for s in states(timeline) if s.cell.id == cell)

    def verdict(self, url: str, metric: str = "latency_median_s") -> str:
        timeline = read_timeline(open_store(locate(url, {}, REPO)))
        (series,) = [m for m in timeline.metrics if m.cell_id == REFERENCE_CELL
                     and m.name == metric and m.test_id.endswith("[llama]")]
        rule = policy_at(REPO).rule(metric)
        assert rule is not None
        return judge([(p.value, p.good) for p in series.points], rule).verdict


def test_a_broken_pin_is_blamed_and_a_slowed_operator_flagged_after_two_runs(
        built, reference_built, engine, run_id, tmp_path, monkeypatch, postgres_database):
    urls = [f"sqlite:///{tmp_path / 'history.db'}", postgres_database]
    lab = Lab(tmp_path, engine, run_id, urls, {"cpu": built, "reference": reference_built})
    vendor_yaml = lab.matrix_file.parent / "vendors" / "cpu" / "vendor.yaml"
    pinned = vendor_yaml.read_text(encoding="utf-8")
    assert PIN in pinned

    # Run 1 is the run's verified image as it is: with its result in the lab's results folder
    # its verification holds (reused, every test's outcome kept), so the suite does not run a
    # second time.
    shutil.copytree(built.results_dir / DEFAULT_CELL, lab.results_dir / DEFAULT_CELL)
    first = lab.run("cpu")
    assert first.status == "passed" and "reused" in first.stages["verify"].detail
    # The pin changed and its lock deleted, as a vendor would to try another torch: the build
    # runs unlocked and pip finds no such torch. A stale lock alone would be an input error
    # ('error'), which the history neither counts as a breakage nor blames.
    lock = lab.matrix_file.parent / "locks" / "cpu" / f"{DEFAULT_CELL}.txt"
    locked = lock.read_bytes()
    vendor_yaml.write_text(pinned.replace(PIN, CHANGED_PIN), encoding="utf-8")
    lock.unlink()
    broken = lab.run("cpu")
    assert broken.status == "failed", broken.message
    assert "verify" not in broken.stages  # the image of the old pin is not judged
    for url in urls:
        failing = lab.state(url, DEFAULT_CELL).failing
        assert failing is not None and not failing.flaky
        assert failing.first.run.key == f"{run_id}-h2" and failing.blame.good is not None
        assert failing.blame.good.run.key == f"{run_id}-h1"
        assert BLAME in failing.blame.changed, failing.blame.changed
        # Nothing the broken build never resolved is blamed (torch, the installed packages).
        assert not [c for c in failing.blame.changed if c.endswith("-> -")], failing.blame

    vendor_yaml.write_text(pinned, encoding="utf-8")
    lock.write_bytes(locked)
    # The fix is checked by the install layer (the pin, torch's version and source): the whole
    # suite ran on this very image in run 1.
    assert lab.run("cpu", layers=("install",)).status == "passed"
    for url in urls:
        state = lab.state(url, DEFAULT_CELL)
        assert state.failing is None
        (episode,) = state.episodes
        assert episode.fixed_by is not None and episode.fixed_by.run.key == f"{run_id}-h3"
        digest = invoke("history", "digest", "--since", "24h", "--history", url)
        assert digest.returncode == 0, digest.stderr
        assert "1 cell fixed since yesterday" in digest.stdout, digest.stdout
        assert f"first bad run `{run_id}-h2` after `{run_id}-h1` passed" in digest.stdout
        assert BLAME in digest.stdout

    # refdev's workload: three normal runs make the baseline, then mm waits 5 ms per call.
    for _ in range(3):
        assert lab.run("reference", build=False, layers=("workload",)).status == "passed"
    # The last of them has two good runs before it: below the policy's min_runs (3).
    assert {lab.verdict(url) for url in urls} == {"insufficient data"}
    monkeypatch.setenv("REFDEV_SLOW_OP", "mm:5")
    slow = lab.run("reference", build=False, layers=("workload",))
    assert slow.status == "passed"  # slow, not wrong
    assert slow.stages["verify"].detail == {"env": {"REFDEV_SLOW_OP": "mm:5"}}
    assert {lab.verdict(url) for url in urls} == {"suspicious"}
    assert lab.run("reference", build=False, layers=("workload",)).status == "passed"
    assert {lab.verdict(url) for url in urls} == {"regression"}
    for url in urls:
        digest = invoke("history", "digest", "--since", "24h", "--history", url)
        assert f"`{REFERENCE_CELL}`: llama latency\\_median\\_s" in digest.stdout, \
            digest.stdout
