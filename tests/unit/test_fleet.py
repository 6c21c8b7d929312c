"""The fleet's scheduling, host loss and reuse of verifications, with fake engines: no Docker.

The real thing (dockerds on loopback TCP, one killed mid-run) is tests/docker/test_fleet.py.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from oota.api import flags, requests
from oota.api.fields import parse
from oota.api.runs import Ran, build, exit_code_for
from oota.config.hostsfile import load_hosts
from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import BuildRequest, Endpoint, RunOutcome, RunRequest
from oota.errors import InputError, MatrixError, StepFailed
from oota.execute.build import BuildOptions, CellRun
from oota.execute.fleet import Station, _Watch, lost_hosts, run_on_stations
from oota.execute.interrupts import Interrupted, signals_as_interrupts
from oota.execute.samebytes import host_identity
from oota.execute.verify import forwarded_env, passed_env
from oota.lockfile import lock_path
from oota.plan import plan
from oota.results.assemble import assemble, cell_ref, now
from oota.results.model import Host, Image, Sealed, Stage, TestOutcome, VendorCheck
from oota.results.store import load, save
from tests import forkcli

REPO = Path(__file__).resolve().parents[2]


class FakeEngine:
    """An engine that 'builds' in a moment (no verify: the runs here build only), and can be
    made to die on its next build, as a host whose daemon is killed."""

    local = False

    def __init__(self, name: str, *, dies: bool = False, build_s: float = 0.2) -> None:
        self.endpoint = Endpoint(name=name, url=f"tcp://127.0.0.1:{2375 + len(name)}")
        self.dies, self.build_s, self.dead = dies, build_s, False
        self.built: list[str] = []
        self.lock = threading.Lock()

    def facts(self) -> dict[str, str]:
        return {"engine": self.endpoint.name, "endpoint": self.endpoint.where(),
                "docker_server": "fake", "arch": "x86_64"}

    def alive(self) -> bool:
        return not self.dead

    def abort(self) -> None:
        pass

    def image_labels(self, ref: str) -> dict[str, str] | None:
        return {}   # every image 'exists' (bases are local) and is built from other inputs

    def image_id(self, ref: str) -> str | None:
        return f"sha256:{self.endpoint.name}"

    def build_output(self, ref: str) -> str | None:
        return f"sha256:{self.endpoint.name}"

    def build(self, request: BuildRequest, on_step) -> str:
        time.sleep(self.build_s)
        if self.dies:
            self.dead = True
            raise StepFailed(f"docker build of {request.tag} exited with 1: Cannot connect to "
                             "the Docker daemon")
        with self.lock:
            self.built.append(request.tag)
        return f"sha256:{self.endpoint.name}"

    def run(self, request: RunRequest) -> RunOutcome:  # pragma: no cover - nothing is verified
        raise AssertionError("no verify in these runs")

    def cleanup(self, run_id: str, *, images: bool) -> int:
        return 0


def _run(project, tmp_path, stations, run_id="r-fleet", fold=False):
    matrix = load_matrix(project.matrix)
    cells = plan(matrix, ["cpu"])
    options = BuildOptions(results_dir=tmp_path / "results", run_id=run_id, verify=False,
                           use_host_pip_config=False)
    shown = io.StringIO()
    results = run_on_stations(matrix, cells, stations, Console(shown, live=False, fold=fold),
                              options).results
    return cells, results, shown.getvalue()


def test_on_github_actions_each_cells_stage_folds_its_outcome_just_after(project, tmp_path):
    cells, results, shown = _run(project, tmp_path, [Station("a", FakeEngine("a"))], fold=True)
    lines = shown.splitlines()
    for cell in cells:
        opened = lines.index(f"::group::{cell.id}: build")
        closed = lines.index("::endgroup::", opened)
        assert not any(line.startswith("::group::") for line in lines[opened + 1:closed])
        assert lines[closed + 1].startswith(f"ok   {cell.id}: build passed")
    assert shown.count("::group::") == shown.count("::endgroup::") == len(cells)


def test_cells_run_side_by_side_fold_nothing(project, tmp_path):
    stations = [Station("a", FakeEngine("a", build_s=0.2)), Station("b", FakeEngine("b"))]
    _, results, shown = _run(project, tmp_path, stations, fold=True)
    assert results and "::group::" not in shown and "::endgroup::" not in shown


def test_cells_spread_over_the_hosts_and_each_result_names_its_host(project, tmp_path):
    a, b = FakeEngine("a", build_s=0.5), FakeEngine("b", build_s=0.5)
    stations = [Station("a", a, vendors=frozenset({"cpu"})),
                Station("b", b, vendors=frozenset({"cpu"}))]
    cells, results, shown = _run(project, tmp_path, stations)
    assert [r.cell.id for r in results] == [c.id for c in cells]   # matrix order, always
    assert all(r.status == "passed" for r in results)
    assert {r.host.text("engine") for r in results} == {"a", "b"}
    assert len(a.built) == len(b.built) == 1
    assert f"{cells[0].id} on a" in shown or f"{cells[0].id} on b" in shown
    assert lost_hosts(stations) == []


def test_a_host_that_dies_loses_its_cell_to_another_host_once(project, tmp_path):
    a, b = FakeEngine("a", dies=True), FakeEngine("b", build_s=0.5)
    stations = [Station("a", a, vendors=frozenset({"cpu"})),
                Station("b", b, vendors=frozenset({"cpu"}))]
    cells, results, _ = _run(project, tmp_path, stations)
    assert all(r.status == "passed" for r in results), [r.message for r in results]
    assert {r.host.text("engine") for r in results} == {"b"}
    retried = [r for r in results if r.host.text("retried_after")]
    assert [r.host.text("retried_after") for r in retried] == ["host a stopped answering"]
    [lost] = lost_hosts(stations)
    assert lost.startswith("a: host a stopped answering during build (docker build of ")
    assert exit_code_for(Ran(results=results, lost=tuple(lost_hosts(stations)))) == 4


def test_without_another_host_the_cells_end_in_error_saying_why(project, tmp_path):
    a = FakeEngine("a", dies=True)
    stations = [Station("a", a, vendors=frozenset({"cpu"}))]
    cells, results, _ = _run(project, tmp_path, stations)
    first, second = results
    assert first.status == "error"
    assert first.stages["build"].message.startswith("host a stopped answering during build")
    assert "verify" not in first.stages
    assert second.status == "error"
    assert second.message.startswith("schedule: no host of vendor cpu is left to run it (a: "
                                     "host a stopped answering during build")
    assert (tmp_path / "results" / cells[1].id / "result.json").is_file()
    assert exit_code_for(Ran(results=results, lost=tuple(lost_hosts(stations)))) == 1


def test_a_run_that_verified_nothing_keeps_the_earlier_pass(project, tmp_path):
    """The only host dies: the cell it never reached ends in error for this run (exit 1),
    but its passed result from an earlier run stays on disk, not replaced by that error."""
    matrix = load_matrix(project.matrix)
    second = plan(matrix, ["cpu"])[1]
    earlier = assemble(cell=cell_ref(second.coordinates(), id=second.id,
                                     fingerprint="sha256:" + "1" * 64),
                       stages={"verify": Stage(status="passed", duration_s=1.0)},
                       tests=(TestOutcome(id="t::a", layer="install", status="passed",
                                          duration_s=0.1),),
                       host=Host(facts={"engine": "a"}), started_at=now(), run_id="earlier")
    save(tmp_path / "results" / second.id, earlier)
    _, results, shown = _run(project, tmp_path, [Station("a", FakeEngine("a", dies=True),
                                                        vendors=frozenset({"cpu"}))])
    assert results[1].status == "error" and results[1].message.startswith("schedule: no host")
    assert load(tmp_path / "results" / second.id / "result.json") == earlier
    assert f"{second.id}: its earlier result (passed, run earlier) is kept in" in shown


def test_jobs_run_cells_of_one_engine_at_once(project, tmp_path):
    engine = FakeEngine("local", build_s=1.0)
    started = time.monotonic()
    _, results, _ = _run(project, tmp_path, [Station("local", engine, jobs=2)])
    assert all(r.status == "passed" for r in results)
    assert time.monotonic() - started < 1.9   # two one-second builds side by side


# -- a verification that still holds -----------------------------------------------------------

def _cell_run(project, tmp_path, engine, **options):
    matrix = load_matrix(project.matrix)
    cell = plan(matrix, ["cpu"])[0]
    host = Host(facts={"engine": "a", "docker_server": "fake", "arch": "x86_64"},
                vendor_check=VendorCheck(supported=True, reasons=(), facts={}))
    return CellRun(matrix, cell, engine, Console(io.StringIO(), live=False),
                   BuildOptions(results_dir=tmp_path / "results", **options), _no_base, host)


# The build stage's record of an image that is up to date.
UP_TO_DATE = Stage(status="passed", detail={"up_to_date": True}, duration_s=0.0)


def _no_base(cell):
    raise AssertionError(f"{cell.id}: no base image is needed here")


def _previous(run: CellRun, *, sealed_id: str, status_test: str = "passed",
              host: Host | None = None) -> None:
    tests = (TestOutcome(id="test_install.py::test_torch_imports", layer="install",
                         status=status_test, duration_s=0.1),)
    result = assemble(cell=cell_ref(run.cell.coordinates(), id=run.cell.id,
                                    fingerprint=run.inputs.fingerprint),
                      stages={"verify": Stage(status="passed", duration_s=3.0)}, tests=tests,
                      host=host or run.host, started_at=now(), run_id="r-before",
                      image=Image(tag=run.inputs.tag,
                                  sealed=Sealed(id=sealed_id, at="2026-11-20T10:00:00")))
    save(run.folder, result)


def test_an_unchanged_verified_image_on_the_same_host_is_not_verified_again(project, tmp_path):
    engine = FakeEngine("a")
    run = _cell_run(project, tmp_path, engine)
    _previous(run, sealed_id="sha256:a")
    previous = run._verification_that_holds(UP_TO_DATE).previous
    assert previous is not None and previous.run_id == "r-before"
    verify, verified = run._reuse(previous)
    assert verify.detail == {"reused": {"run_id": "r-before",
                                        "verified_at": "2026-11-20T10:00:00"}}
    assert verify.message.startswith("the verification of 2026-11-20T10:00:00 (run r-before) "
                                     "holds")
    assert [t.id for t in verified.tests] == ["test_install.py::test_torch_imports"]


@pytest.mark.parametrize("change", ["other image", "failed before", "other host", "reverify",
                                    "layers", "a pass_env switch set"])
def test_anything_changed_means_verifying_again(project, tmp_path, change):
    engine = FakeEngine("a")
    options = {"reverify": change == "reverify"}
    if change == "layers":
        options = {"layers": ("install",)}
    run = _cell_run(project, tmp_path, engine, **options)
    if change == "a pass_env switch set":
        run.env = {"REFDEV_WRONG_OP": "tanh"}
    host = None
    if change == "other host":
        host = Host(facts={**run.host.facts, "docker_server": "29.0"},
                    vendor_check=run.host.vendor_check)
        assert host_identity(host) != host_identity(run.host)
    _previous(run, sealed_id="sha256:other" if change == "other image" else "sha256:a",
              status_test="failed" if change == "failed before" else "passed", host=host)
    assert run._verification_that_holds(UP_TO_DATE).previous is None


def test_a_build_that_ends_in_error_verifies_nothing(project, tmp_path):
    """A stale lock (an input error of the cell) stops the build: the image the tag still names
    was built from other inputs, so it is not verified (FakeEngine.run would say so)."""
    matrix = load_matrix(project.matrix)
    cell = plan(matrix, ["cpu"])[0]
    lock = lock_path(matrix, cell)
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("# oota-lock-inputs: sha256:0000\n")
    host = Host(facts={"engine": "a", "docker_server": "fake", "arch": "x86_64"},
                vendor_check=VendorCheck(supported=True, reasons=(), facts={}))
    run = CellRun(matrix, cell, FakeEngine("a"), Console(io.StringIO(), live=False),
                  BuildOptions(results_dir=tmp_path / "results", use_host_pip_config=False),
                  _no_base, host)
    result = run.run(build=True)
    assert result.status == "error"
    assert "is stale" in result.stages["build"].message
    assert "verify" not in result.stages
    # What the cell asked pip for is in its result even so: the history's blame names a pin.
    assert result.requested[0] == f"torch=={cell.torch}+cpu"


# -- hosts.yaml and the flags ------------------------------------------------------------------

def test_hosts_file_problems_are_all_located(tmp_path):
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts:\n"
                     "  gpu-a:\n"
                     "    endpoint: tcp://gpu-a.lab:2376\n"
                     "    vendors: [cdua]\n"
                     "  gpu-b:\n"
                     "    endpoint: ssh://oota@gpu-b.lab\n"
                     "    context: gpu-b\n"
                     "    vendors: [cuda]\n"
                     "    jobs: 0\n"
                     "  gpu-c:\n"
                     "    endpoint: https://gpu-c.lab\n"
                     "    vendors: [cuda]\n"
                     "    tls: {ca: ca.pem, cert: cert.pem, key: key.pem}\n")
    with pytest.raises(MatrixError) as info:
        load_hosts(hosts, ("cpu", "cuda"))
    at = f"{hosts}:"
    assert info.value.problems == [
        f"{at}4:15: hosts.gpu-a.vendors[0]: 'cdua' is not a vendor of the matrix; did you mean "
        "'cuda'?",
        f"{at}5:3: hosts.gpu-b: give exactly one of endpoint and context; e.g. endpoint: "
        "tcp://gpu-a.lab:2376, or context: gpu-a",
        f"{at}9:5: hosts.gpu-b.jobs: 0 is not allowed here; e.g. '2'",
        f"{at}11:5: hosts.gpu-c.endpoint: 'https://gpu-c.lab' is not allowed here; e.g. "
        "'tcp://gpu-a.lab:2376'",
        f"{at}13:5: hosts.gpu-c.tls: TLS files belong to a tcp:// endpoint; remove tls, or use "
        "endpoint: tcp://HOST:2376",
        *(f"{at}13:{col}: hosts.gpu-c.tls.{key}: {tmp_path / name} does not exist; paths are "
          "relative to the hosts file"
          for col, key, name in ((11, "ca", "ca.pem"), (23, "cert", "cert.pem"),
                                 (39, "key", "key.pem")))]


def test_a_good_hosts_file_is_typed(tmp_path):
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / "certs").mkdir(exist_ok=True)
        (tmp_path / "certs" / name).write_text("x")
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts:\n"
                     "  gpu-a: {endpoint: 'tcp://gpu-a.lab:2376', vendors: [cuda, cpu], jobs: 2,\n"
                     "          tls: {ca: certs/ca.pem, cert: certs/cert.pem,\n"
                     "                key: certs/key.pem}}\n"
                     "  laptop: {context: desktop-linux, vendors: [cpu]}\n")
    fleet = load_hosts(hosts, ("cpu", "cuda"))
    a, laptop = fleet.hosts
    assert (a.name, a.url, a.jobs, a.vendors) == ("gpu-a", "tcp://gpu-a.lab:2376", 2,
                                                  ("cuda", "cpu"))
    assert a.tls == tuple(tmp_path / "certs" / n for n in ("ca.pem", "cert.pem", "key.pem"))
    assert (laptop.context, laptop.jobs) == ("desktop-linux", 1)
    assert [h.name for h in fleet.serving("cpu")] == ["gpu-a", "laptop"]


def test_a_vendor_no_host_takes_is_refused_before_anything_runs(project, tmp_path):
    hosts = tmp_path / "hosts.yaml"
    project.add_vendor("other", (project.root / "vendors" / "cpu" / "vendor.yaml").read_text()
                       .replace("name: cpu", "name: other"))
    project.matrix.write_text(project.matrix.read_text() + "  other:\n    os: [debian12]\n"
                              "    python: ['3.11']\n    torch: ['2.13.0']\n")
    hosts.write_text("hosts:\n  lab: {endpoint: 'tcp://127.0.0.1:1', vendors: [other]}\n")
    options = BuildOptions(results_dir=tmp_path / "results")
    with pytest.raises(InputError, match=r"no host takes the cells of cpu; add the vendor"):
        build(str(project.matrix), ["cpu"], None, True, options, Console(io.StringIO()),
                  hosts_file=str(hosts))


@pytest.mark.parametrize("text", ["0", "65", "two", "-1", ""])
def test_bad_jobs_are_refused(text):
    with pytest.raises(InputError, match=r"--jobs .*: give a whole number from 1 to 64"):
        flags.jobs(text)


@pytest.mark.parametrize("request_class", [requests.BuildRequest, requests.VerifyRequest])
def test_jobs_and_hosts_do_not_mix(request_class):
    """Checked once, by the request, before the matrix is read."""
    with pytest.raises(InputError, match="--jobs is for the local engine"):
        parse(request_class, vendor=["cpu"], jobs="2", hosts="hosts.yaml")


def test_the_hosts_schema_is_published():
    assert Path(__file__).resolve().parents[2].joinpath("schema", "hosts-v1.json").is_file()


def test_a_silent_engine_gets_its_docker_commands_stopped(monkeypatch):
    """A hung daemon's commands would wait for their own deadlines; the watch stops them."""
    monkeypatch.setattr(_Watch, "EVERY_S", 0.05)

    class Hung(FakeEngine):
        aborted = threading.Event()

        def alive(self) -> bool:
            return False

        def abort(self) -> None:
            self.aborted.set()

    hung, fine = Hung("hung"), FakeEngine("fine")
    shown = io.StringIO()
    with _Watch([Station("hung", hung), Station("fine", fine)], Console(shown, live=False)):
        assert Hung.aborted.wait(5)
    assert "host hung: no answer for 3 pings; stopping its docker commands" in shown.getvalue()
    assert "host fine" not in shown.getvalue()


@pytest.mark.parametrize(("argv", "message"), [
    (["build", "--jobs", "0"], "error: --jobs '0': give a whole number from 1 to 64"),
    (["build", "--hosts", "missing.yaml"], "error: missing.yaml: file not found"),
    (["verify", "--here", "--jobs", "2"], "error: --hosts and --jobs do not apply with --here"),
])
def test_fleet_flags_are_checked_before_docker_is_contacted(project, argv, message):
    """Exit 2, one line, nothing written (DOCKER_HOST points nowhere: it must not matter)."""
    env = {**os.environ, "DOCKER_HOST": "tcp://127.0.0.1:1", "PYTHONPATH": str(REPO)}
    proc = forkcli.run([sys.executable, "-m", "oota", "-r", str(REPO), *argv], env=env,
                       capture_output=True, text=True, cwd=project.root, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[0].startswith(message), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (project.root / "results").exists()


def test_sigterm_in_a_parallel_run_interrupts_every_running_cell(project, tmp_path):
    """Each running cell's docker command is stopped, its result says interrupted, and the
    run ends with the interruption (exit 130 in the task layer)."""

    class Slow(FakeEngine):
        def __init__(self, name: str) -> None:
            super().__init__(name)
            self.stopped, self.building = threading.Event(), threading.Event()

        def build(self, request: BuildRequest, on_step) -> str:
            self.building.set()
            if self.stopped.wait(30):   # a long build, until the run stops the CLI
                raise StepFailed(f"docker build of {request.tag} exited with -15")
            raise AssertionError("the build was never stopped")

        def abort(self) -> None:
            self.stopped.set()

    a, b = Slow("a"), Slow("b")
    stations = [Station("a", a, vendors=frozenset({"cpu"})),
                Station("b", b, vendors=frozenset({"cpu"}))]

    def sigterm_once_both_build() -> None:
        # Not after a fixed delay: on a loaded machine a cell may not have started by then.
        if a.building.wait(30) and b.building.wait(30):
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=sigterm_once_both_build, daemon=True).start()
    with pytest.raises(Interrupted), signals_as_interrupts():
        _run(project, tmp_path, stations, run_id="r-stop")
    for cell in plan(load_matrix(project.matrix), ["cpu"]):
        result = load(tmp_path / "results" / cell.id / "result.json")
        assert result.status == "interrupted"
        assert result.stages["build"].message == "interrupted by SIGTERM during build"


def test_suite_settings_are_passed_on_into_the_verify_container():
    assert forwarded_env({"OOTA_OPS_BUDGET_S": "30", "HOME": "/root"}) == {
        "OOTA_OPS_BUDGET_S": "30"}
    assert forwarded_env({"OOTA_OPS_BUDGET_S": " "}) == {}


def test_a_vendor_names_the_variables_its_verify_container_gets():
    matrix = load_matrix(REPO / "matrix.yaml")
    reference, cpu = matrix.vendors["reference"].vendor, matrix.vendors["cpu"].vendor
    environ = {"REFDEV_SLOW_OP": "mm:20", "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "x"}
    assert passed_env(reference, environ) == {"REFDEV_SLOW_OP": "mm:20"}
    assert passed_env(cpu, environ) == {}   # the CPU vendor names none


# -- engine identities ---------------------------------------------------------------------------

class Identified(FakeEngine):
    def __init__(self, name: str, engine_id: str, daemon: str = "vm") -> None:
        super().__init__(name)
        self.engine_id, self.daemon = engine_id, daemon

    def facts(self) -> dict[str, str]:
        return {**super().facts(), "engine_id": self.engine_id, "daemon_name": self.daemon}


def test_an_engine_keeps_its_hosts_file_name_in_runs_without_one(tmp_path):
    cache = tmp_path / ".oota-cache"
    assert Station("", Identified("local", "id-main"), cache=cache).name == "vm"
    named = Station("main", Identified("main", "id-main"), vendors=frozenset({"cpu"}),
                    cache=cache)
    assert named.facts["engine"] == "main" and named.facts["engine_id"] == "id-main"
    default = Station("", Identified("local", "id-main"), cache=cache)
    assert (default.name, default.facts["engine"], default.engine.endpoint.name) == \
        ("main", "main", "main")
    # Another Engine of the same machine is not given that name.
    assert Station("", Identified("local", "id-other"), cache=cache).name == "vm"


@pytest.mark.parametrize("status", ["passed", "failed", "error", "interrupted"])
def test_the_pass_env_switches_are_recorded_however_the_verification_ended(project, tmp_path,
                                                                           status):
    """The blame of a failing run must see the fault injected into it, not only a pass's."""
    import datetime as dt

    run = _cell_run(project, tmp_path, FakeEngine("a"))
    run.env = {"REFDEV_WRONG_OP": "tanh"}
    verify = run._record("verify", dt.datetime.now(), status,
                         "" if status == "passed" else "why", None)
    assert verify.detail["env"] == {"REFDEV_WRONG_OP": "tanh"}
    build = run._record("build", dt.datetime.now(), status, "", None)
    assert "env" not in build.detail
