"""The fleet on real Engines: two more dockerds on loopback TCP stand in for a lab's hosts.

The cells are the small ``fleet`` vendor's (tests/fleet_vendor.py): oota's real suite on the
host's torch 2.13.0+cpu wheel, one cheap layer per cell. The whole command runs as a user runs
it (``oota build --hosts hosts.yaml``), in a subprocess, and one Engine is killed while it is
building a cell.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from oota.config.vendors import load_vendor
from oota.engine.base import Endpoint
from oota.engine.docker import DockerEngine
from oota.execute.hosts import check_vendor_in
from tests import fleet_vendor
from tests.engines import ExtraEngine, free_port

REPO = Path(__file__).resolve().parents[2]
OOTA = [sys.executable, "-m", "oota", "-r", str(REPO)]
BASE = "oota/base:debian12"
# Two cells: one per host; e2's, lost with it, is retried on e1 after its own. (A third cell
# for e1 tested nothing more and cost about 45 s of a loaded CI run.)
SDKS = ["1.0", "2.0"]


@pytest.fixture(scope="module")
def engines(debian12_base, extra_engines):
    """The session's extra Engines e1 and e2, each with the Debian 12 base copied in."""
    assert debian12_base == BASE
    started = [extra_engines(index) for index in (1, 2)]
    for extra in started:
        extra.load_from_first(BASE)
    return {f"e{i}": e for i, e in enumerate(started, 1)}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    fleet_vendor.make_project(root / "project", SDKS)
    return root


def _results(folder: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in folder.glob("*/result.json")}


def _build(project: Path, hosts: Path, results: Path, *extra: str,
           on_line=None) -> tuple[int, str, str]:
    """``oota build --all --hosts HOSTS`` in the project (``--cell`` among ``extra``: those
    cells only); (exit code, stdout, stderr). Every progress line goes to ``on_line`` as it
    comes."""
    which = [] if "--cell" in extra else ["--all"]
    argv = [*OOTA, "build", "--matrix", str(project / "project" / "matrix.yaml"), *which,
            "--hosts", str(hosts), "--results", str(results), *extra]
    out: list[str] = []
    err: list[str] = []
    with subprocess.Popen(argv, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        stdout = proc.stdout
        reader = threading.Thread(target=lambda: out.append(stdout.read()), daemon=True)
        reader.start()
        for line in proc.stderr:
            err.append(line)
            if on_line is not None:
                on_line(line)
        code = proc.wait(timeout=1800)
        reader.join(60)
    return code, "".join(out), "".join(err)


def test_cells_spread_over_two_hosts_and_a_lost_hosts_cell_is_retried(engines, project):
    hosts = fleet_vendor.hosts_file(project, {name: e.url for name, e in engines.items()})
    results = project / "results"
    killed = threading.Event()

    def kill_e2_once_it_builds(line: str) -> None:
        # e2's first cell: it has a whole image to build (torch's install alone takes over a
        # minute), so 6 s later it is checking the host or has begun the build. (20 s, as
        # before, cost the run the CPU of e2's work of those 20 s, thrown away with it.)
        if " on e2" in line and line.strip().startswith("[") and not killed.is_set():
            killed.set()
            threading.Timer(6, engines["e2"].kill).start()

    code, out, err = _build(project, hosts, results, on_line=kill_e2_once_it_builds)

    assert killed.is_set(), err[-3000:]
    assert code == 4, (out, err[-3000:])   # every cell passed, but a host was lost
    assert "host lost  e2: host e2 stopped answering during" in out
    found = _results(results)
    assert sorted(found) == sorted(fleet_vendor.cell_id(s) for s in SDKS)
    assert {cell: r["status"] for cell, r in found.items()} == dict.fromkeys(found, "passed")
    retried = [r for r in found.values() if r["host"].get("retried_after")]
    assert len(retried) == 1, {c: r["host"] for c, r in found.items()}
    assert retried[0]["host"]["retried_after"] == "host e2 stopped answering"
    assert retried[0]["host"]["engine"] == "e1"
    # Each result names the host it ran on, and e1 ran the cells e2 could not.
    assert {r["host"]["engine"] for r in found.values()} <= {"e1", "e2"}
    assert all(r["host"]["endpoint"] == engines[r["host"]["engine"]].url
               for r in found.values())
    # The report has every cell, beside the matrix (oota/project.py).
    matrix_md = (project / "project" / "reports" / "matrix.md").read_text()
    assert all(fleet_vendor.cell_id(s) in matrix_md for s in SDKS)


def test_an_unchanged_matrix_reuses_its_verifications_and_one_change_rebuilds_one_cell(
        engines, project):
    """After the run above, on e1 alone (which has every image now)."""
    e1 = engines["e1"]
    hosts = fleet_vendor.hosts_file(project, {"e1": e1.url})
    results = project / "results-e1"
    # The run above's results: e1 verified every cell there (e2 died in its first build), so
    # they hold on e1; a cell they do not cover is verified now.
    shutil.copytree(project / "results", results)
    code, out, err = _build(project, hosts, results)
    assert code == 0, (out, err[-3000:])

    code, out, err = _build(project, hosts, results)   # nothing changed
    assert code == 0, (out, err[-3000:])
    found = _results(results)
    assert len(found) == len(SDKS)
    for result in found.values():
        verify = result["stages"]["verify"]
        assert verify["status"] == "passed"
        assert "reused" in verify["detail"], verify
        assert "holds" in verify["message"] and "--reverify" in verify["message"]
        assert result["stages"]["build"]["detail"]["up_to_date"] is True
        assert result["tests"], "a reused verification keeps every test's outcome"
    assert err.count("the verification of") == len(SDKS)

    fleet_vendor.set_sdks(project / "project" / "matrix.yaml", [*SDKS[:-1], "5.0"])
    code, out, err = _build(project, hosts, results)
    assert code == 0, (out, err[-3000:])
    found = {cell: r for cell, r in _results(results).items() if cell != fleet_vendor.cell_id(
        SDKS[-1])}
    changed = found.pop(fleet_vendor.cell_id("5.0"))
    assert "up_to_date" not in changed["stages"]["build"]["detail"]
    assert "reused" not in changed["stages"]["verify"].get("detail", {})
    assert all("reused" in r["stages"]["verify"]["detail"] for r in found.values())

    # --reverify runs the suite again though the verification holds (one cell shows it).
    again = fleet_vendor.cell_id(SDKS[0])
    sealed = _results(results)[again]["image"]["sealed"]
    code, out, err = _build(project, hosts, results, "--reverify", "--cell", again)
    assert code == 0, (out, err[-3000:])
    after = _results(results)[again]
    assert "reused" not in after["stages"]["verify"].get("detail", {})
    # It found the same outcome (the layers' budgets of 0 s folded entries into one each, which
    # are not compared): the seal is kept, and the result pairs the seal's time with the seal's
    # run, not its own, on the Engine the cell is on.
    assert any(t["id"].endswith("[unrun-by-budget]") for t in after["tests"])
    assert after["run_id"] != sealed["run_id"]
    assert after["image"]["sealed"] == sealed
    inspect = engines["e1"].docker("image", "inspect", "--format", "{{.Id}}",
                                   after["image"]["tag"])
    assert inspect.stdout.strip() == sealed["id"]


def test_a_host_that_never_answers_leaves_its_cells_to_the_others(engines, project):
    dead = f"tcp://127.0.0.1:{free_port()}"
    hosts = fleet_vendor.hosts_file(project, {"e1": engines["e1"].url, "gone": dead})
    code, out, err = _build(project, hosts, project / "results-e1")
    assert code == 4, (out, err[-3000:])
    assert "host gone: left out of this run: cannot reach a Docker Engine at " + dead in err
    assert "host lost  gone: did not answer at the start" in out
    assert all(r["status"] == "passed" and r["host"]["engine"] == "e1"
               for r in _results(project / "results-e1").values())


def test_the_host_check_runs_on_the_host_of_the_engine(engines, tmp_path):
    folder = tmp_path / "vendors" / "probed"
    (folder / "verify").mkdir(parents=True)
    (folder / "Dockerfile.j2").write_text('{% extends "base.Dockerfile.j2" %}\n')
    spec = fleet_vendor.VENDOR_YAML.replace("name: fleet", "name: probed")
    host = """\
    host:
      devices: [/dev/null, /dev/oota-no-such-accelerator]
      probe: [sh, -c, "echo 580.65.06, Test GPU"]
    """
    (folder / "vendor.yaml").write_text(_dedent(spec) + _dedent(host))
    vendor = load_vendor(folder)
    engine = DockerEngine(Endpoint(name="e1", url=engines["e1"].url))
    assert not engine.local
    check = check_vendor_in(engine, vendor, engine.facts(), BASE, "test-probe")
    assert check.reasons == ("missing device nodes on host e1: /dev/oota-no-such-accelerator",)

    (folder / "vendor.yaml").write_text(
        _dedent(spec) + _dedent(host).replace(", /dev/oota-no-such-accelerator", ""))
    check = check_vendor_in(engine, load_vendor(folder), engine.facts(), BASE, "test-probe")
    assert check.supported and check.driver == "580.65.06"
    assert check.facts["checked_on"] == "e1"


def _dedent(text: str) -> str:
    return "\n".join(line[4:] if line.startswith("    ") else line
                     for line in text.splitlines()) + "\n"


def test_an_engine_reports_whether_it_still_answers(engines):
    """What the scheduler asks after a stage failed; a killed engine says no within seconds."""
    extra = ExtraEngine(engines["e1"].root.parent / "short-lived", 3).start()
    try:
        engine = DockerEngine(Endpoint(name="short", url=extra.url))
        assert engine.alive()
        extra.kill()
        started = time.monotonic()
        assert not engine.alive()
        assert time.monotonic() - started < 10
    finally:
        extra.remove()


def test_hosts_probes_each_host_of_the_file(engines, project):
    """Hosts named by URL and by docker context; one that never answers is said to be so."""
    dead = f"tcp://127.0.0.1:{free_port()}"
    context = f"oota-test-{engines['e1'].port}"
    subprocess.run(["docker", "context", "create", context, "--docker",
                    f"host={engines['e1'].url}"], check=True, capture_output=True)
    try:
        hosts = project / "hosts-context.yaml"
        hosts.write_text(f"hosts:\n"
                         f"  e1: {{endpoint: '{engines['e1'].url}', vendors: [fleet]}}\n"
                         f"  via-context: {{context: {context}, vendors: [fleet]}}\n"
                         f"  gone: {{endpoint: '{dead}', vendors: [fleet]}}\n")
        proc = subprocess.run([*OOTA, "hosts", "--matrix",
                               str(project / "project" / "matrix.yaml"), "--hosts", str(hosts),
                               "--format", "json"], cwd=project, capture_output=True, text=True,
                              timeout=300)
    finally:
        subprocess.run(["docker", "context", "rm", "-f", context], capture_output=True)
    # Exit 4: two hosts answered, one did not (docs/reference/exit-codes.md); the table still
    # lists all.
    assert proc.returncode == 4, proc.stderr
    rows = {row["host"]: row for row in json.loads(proc.stdout)}
    assert rows["e1"]["supported"] and rows["e1"]["vendor"] == "fleet"
    assert rows["via-context"]["supported"]
    assert f"host via-context: context {context}" in proc.stderr
    assert not rows["gone"]["supported"] and rows["gone"]["answered"] is False
    assert rows["gone"]["reasons"][0].startswith("did not answer at the start")
