"""One verification, two Engines, one sealed image id (issue 32, item 10): a cell built and
verified on one Engine, then built on another from the same inputs, reuses that verification
there and seals it into the same image, byte for byte: the same sealed image id on both, also
after a --reverify on the first that finds the same outcome (it keeps the seal, with the run
and time that made it).

Two extra dockerds on loopback (tests/engines.py) and the small ``fleet`` vendor
(tests/fleet_vendor.py: oota's real suite on the host's torch 2.13.0+cpu wheel). Each Engine
builds the cell's image (a few minutes here): opt-in, ``-m two_engines``. In every run the
canonical bytes are checked without Docker (tests/unit/test_reproducible.py) and on the
session's real CPU verification (tests/docker/test_cpu_cell.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from oota.vocab import UNRUN_KEY
from tests import fleet_vendor
from tests.engines import ExtraEngine

pytestmark = pytest.mark.two_engines

REPO = Path(__file__).resolve().parents[2]
BASE = "oota/base:debian12"
SDK = "1.0"
CELL = fleet_vendor.cell_id(SDK)
# Apart from the other tests' extra Engines (test_fleet: e1, e2; test_daily_loop: e4, e5).
FIRST, SECOND = 6, 7


def build(project: Path, name: str, engine: ExtraEngine, results: Path,
          *extra: str) -> dict:
    """``oota build --cell CELL`` on ``engine`` alone (a hosts file naming it ``name``), as a
    user runs it; the cell's result.json."""
    folder = project / name
    folder.mkdir(exist_ok=True)
    hosts = fleet_vendor.hosts_file(folder, {name: engine.url})
    proc = subprocess.run([sys.executable, "-m", "oota", "-r", str(REPO), "build", "--matrix",
                           str(project / "project" / "matrix.yaml"), "--cell", CELL,
                           "--hosts", str(hosts), "--results", str(results), "--no-history",
                           *extra], cwd=project, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-3000:])
    return json.loads((results / CELL / "result.json").read_text())


def image_id(engine: ExtraEngine, tag: str) -> str:
    return engine.docker("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip()


def test_a_verification_reused_on_another_engine_gives_the_same_sealed_image_id(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if "two_engines" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("opt-in: -m two_engines (the cell is built on each of two Engines: "
                    "minutes on a 2-core machine)")
    assert request.getfixturevalue("debian12_base") == BASE
    extra_engines = request.getfixturevalue("extra_engines")
    first, second = extra_engines(FIRST), extra_engines(SECOND)
    for engine in (first, second):
        engine.load_from_first(BASE)
    fleet_vendor.make_project(tmp_path / "project", [SDK])
    results = tmp_path / "results"

    made = build(tmp_path, "e6", first, results)
    sealed = made["image"]["sealed"]
    tag = made["image"]["tag"]
    assert made["status"] == "passed" and "reused" not in made["stages"]["verify"].get(
        "detail", {})
    assert image_id(first, tag) == sealed["id"]
    # The ops layer's folded entry (the pairs its budget left unrun) is among what is sealed.
    assert any(UNRUN_KEY in t.get("data", {}) for t in made["tests"])

    # The same inputs on the other Engine: the same build output, so the verification holds
    # there; sealed with it, it is the same image.
    reused = build(tmp_path, "e7", second, results)
    verify = reused["stages"]["verify"]
    assert verify["detail"]["reused"] == {"run_id": sealed["run_id"],
                                          "verified_at": sealed["at"]}, verify
    assert reused["image"]["id"] == made["image"]["id"]      # the same build output
    assert image_id(second, tag) == sealed["id"] == reused["image"]["sealed"]["id"]

    # --reverify on the first Engine finds the same outcome: the seal, its run and its time
    # are kept, and a reuse on the second Engine still seals the same image.
    again = build(tmp_path, "e6", first, results, "--reverify")
    assert again["run_id"] != made["run_id"]
    kept = again["image"]["sealed"]
    assert (kept["id"], kept["at"], kept["run_id"]) == (sealed["id"], sealed["at"],
                                                        sealed["run_id"])
    elsewhere = build(tmp_path, "e7", second, results)
    assert image_id(second, tag) == sealed["id"] == elsewhere["image"]["sealed"]["id"]
