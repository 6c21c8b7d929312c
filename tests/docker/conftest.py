"""Docker integration tests: real Engine, real BuildKit builds, real containers.

One build and verification of the repository's default CPU cell (Debian 12, Python 3.11, the
real torch CPU wheel) serves every test of the run, whichever pytest-xdist worker runs it
(``built``: the first worker to ask makes it, the others wait for it and read it back). Images
go to ``oota-test`` namespaces with an ``oota.run`` label (an extra label: oota itself keeps
run ids out of images, so that rebuilds repeat), and are removed when the run ends (set
OOTA_KEEP=1 to keep them for debugging). The bootstrapped base image ``oota/base:*`` is a cache
and is kept.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import docker
import pytest
import yaml

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import IMAGE_RUN_LABEL, RUN_LABEL
from oota.engine.docker import DockerEngine
from oota.execute.bases import ensure_base
from oota.execute.build import BuildOptions
from oota.plan import plan, select
from tests import registry_server
from tests.engines import ExtraEngine

# The history tests' throw-away PostgreSQL server, for the history made of real runs.
from tests.history.conftest import postgres_database, postgres_server  # noqa: F401
from tests.runs import build_cells

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CELL = "cpu-torch2.13.0-py3.11-debian12"
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
# Test sessions that run at once on one Engine set OOTA_TEST_NAMESPACE apart: tags are shared
# by every session of an Engine, run labels are not. Each pytest-xdist worker tags under its
# own (``oota-test-gw0``): a worker's session removes the images of its run when it ends, so
# an image of the same inputs that the other worker found under a shared tag and took as up
# to date would be gone under that worker's tests. A second worker's build of such an image
# (the CUDA cell, used in both shares) is BuildKit's cached one.
NAMESPACE = os.environ.get("OOTA_TEST_NAMESPACE", "oota-test") + (f"-{_WORKER}" if _WORKER else "")
# What the workers of one run share (``shared``): the CPU image of ``built``, under a namespace
# and a run label of the run's own. The process that starts the workers sets the run's id before
# it starts them (they inherit it) and removes that image once they have all ended
# (``pytest_sessionfinish``): no worker can take it from under another's tests.
SHARED_RUN = os.environ.setdefault("OOTA_TEST_SHARED_RUN", f"test-{uuid.uuid4().hex[:10]}")
SHARED_NAMESPACE = os.environ.get("OOTA_TEST_NAMESPACE", "oota-test") + "-shared"
T = TypeVar("T")
# The ``shared`` values that are images, each under a run id of its own (a test that
# interrupts a verification of ``built`` removes the containers of built's run id: the
# reference cell's verification, made meanwhile by another worker, must not be among them);
# pytest_sessionfinish removes them all.
SHARED_IMAGES = {"built": SHARED_RUN, "reference": f"{SHARED_RUN}-reference"}
SHARED_FIXTURES = frozenset({"built", "reference_built"})

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")  # the Ryuk image cannot be pulled
# Every verification here runs the ops layer, on its must-pass operators only (a budget of 0 s):
# the same fixed set on any machine, so an outcome never depends on how far a faster or slower
# CI machine got in a wall-clock budget, and the many verifications of this suite stay short.
# The budget itself is tested in test_ops_layer.py (5 s); the full layer on refdev is measured
# by hand (docs/reference/verify-suite.md). oota passes the variable into each verify container
# (verify.FORWARDED).
os.environ.setdefault("OOTA_OPS_BUDGET_S", "0")
# The autograd, modules and optimizers layers likewise run their must-run entries only (the
# autograd layer's default; the others' budgets are tested in test_layers.py).
os.environ.setdefault("OOTA_AUTOGRAD_BUDGET_S", "0")
os.environ.setdefault("OOTA_MODULES_BUDGET_S", "0")
os.environ.setdefault("OOTA_OPTIMIZERS_BUDGET_S", "0")
# The compile layer likewise: the backend's registration and one fused chain in float32 (on the
# CPU cell, Inductor's first compile of a process, about 14 s; test_compile_layer.py runs the
# layer whole on refdev).
os.environ.setdefault("OOTA_COMPILE_BUDGET_S", "0")
# The distributed layer runs its collectives in float32 only (with the barrier and the DDP
# training): its cost is two ranks' start more than the collectives; the vendor's other dtypes
# are tested in test_layers.py.
os.environ.setdefault("OOTA_DISTRIBUTED_DTYPES", "float32")
# One worker process judges the pairs (OOTA_OPS_WORKERS=1, not one per core): with three tests
# verifying at once on two cores, each verification's extra workers (each importing torch and
# PyTorch's op_db) would cost CPU time and gain no wall time. test_reference.py compares one
# worker with two.
os.environ.setdefault("OOTA_OPS_WORKERS", "1")


# ``./oota.sh test`` runs this folder on three pytest-xdist workers (``-n 3 --dist loadscope``,
# scheduled by :func:`pytest_xdist_make_scheduler`), each taking one share of the files (SHARES):
# a build, a push or a verification mostly keeps one CPU busy and often waits on the network,
# so three at once keep the 2-core machine busy. The CPU and reference cells every share reads
# (``built``, ``reference_built``) are made once per run by whichever worker asks first, so a
# file may sit in any share: the shares are cut by measured time alone. Measured (a fresh
# clone, the whole folder, 2026-11-28, 2-core AMD host): the files of "reference" 957 s, "cpu"
# 834 s, "own" 820 s with the history runs in "reference", before the nightly and release
# candidate cells were made lean (lean_cpu_vendor, about 110 s less); the history runs moved to
# "own". The next run (fresh clone, 2026-11-28, .ci/run 1,094 s): reference 890 s, cpu 799 s,
# own 689 s; the get-started, installed-wheel and vendor-folder tests (121 s, on ``built`` or
# images of their own) moved to "own". Then (fewer fleet cells, the by-hand re-verification of
# two layers: about 130 s less in "cpu" and "own") the distributed layer's tests (about 80 s)
# moved to "own" too, which takes the tests that need no shared image first
# (:func:`pytest_collection_modifyitems`): it never waits for a cell another worker is making.
# That run (fresh clone, .ci/run 1,057 s, Docker tests 860 s): own 856 s, cpu 791 s,
# reference 777 s, balanced: the wall time now follows the three shares' CPU work together.
# Later (fresh clone, 2026-11-29, 2-core Intel, .ci/run 1,319 s, Docker tests 1,017 s): own
# 1,011 s, reference 865 s, cpu 782 s, the last three minutes with one share left running; the
# distributed layer's tests (60 s) and the installed wheel's (41 s) moved to "cpu".
# Then (2026-11-29 night, .ci/run 1,160 s, Docker tests 887 s: the nightly and release
# candidate now from BuildKit's cache, about 160 s less in "own"): cpu 880 s, reference 740 s,
# own 688 s, the last three minutes with "cpu" alone; the daily loop's tests (56 s, a tiny
# image on Engines of their own) and the installed wheel's (33 s) moved to "own".
# A file missing here goes to "cpu". Each worker's extra Engines take their own slices of the
# bridge (OOTA_TEST_ENGINE_BASE, 8 apart).
# tasks.py's test task starts one worker per share ("-n 3"): SHARES and "cpu".
SHARES = {
    "reference": frozenset({"test_judge.py", "test_reference.py", "test_workload.py",
                            "test_cuda_cell.py", "test_autograd_reference.py"}),
    "own": frozenset({"test_fleet.py", "test_nightly.py", "test_release_candidate.py",
                      "test_history_runs.py", "test_getstarted_install.py",
                      "test_vendor_from_folder.py", "test_daily_loop.py",
                      "test_installed_wheel.py"}),
}
if _WORKER.startswith("gw") and _WORKER[2:].isdigit():
    os.environ["OOTA_TEST_ENGINE_BASE"] = str(
        int(os.environ.get("OOTA_TEST_ENGINE_BASE", "0") or 0) + 8 * int(_WORKER[2:]))


def group_of(nodeid: str) -> str:
    """The worker's share a Docker test belongs to (see ``SHARES``)."""
    name = nodeid.split("::")[0].rsplit("/", 1)[-1]
    return next((share for share, files in SHARES.items() if name in files), "cpu")


# optionalhook: the hook is pytest-xdist's; a run without the plugin (-p no:xdist) still loads.
@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own loadscope scheduler
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class TwoShares(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return TwoShares(config, log)


# The cells too big for CI's time, each run only when a -m expression names its marker; CI
# checks a recording of each instead (tests/data/recordings/xla-cpu-*, tests/data/cells/cuda-*).
OPT_IN = {"xla": "the XLA cell is opt-in (a 7.9 GB image): -m xla",
          "cuda": "the CUDA cell is opt-in (about 6 GB of wheels): -m cuda"}


def pytest_collection_modifyitems(config, items):
    named = config.option.markexpr or ""
    # "own" takes the tests on cells of their own before those on the shared cells, which the
    # other two workers make first (a stable sort: every worker collects the same order).
    items.sort(key=lambda item: group_of(item.nodeid) == "own" and bool(
        SHARED_FIXTURES & set(getattr(item, "fixturenames", ()))))
    for item in items:
        if "tests/docker/" in str(item.path):
            item.add_marker(pytest.mark.docker)
        # The marker, not item.keywords: those hold every name above the test, and a word of
        # a module's name (test_xla_replay.py) would opt that module out too.
        for marker, reason in OPT_IN.items():
            if item.get_closest_marker(marker) and marker not in named:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def run_id() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def engine(run_id):
    try:
        eng = DockerEngine()
    except Exception as exc:  # noqa: BLE001 - any failure means: no engine here
        pytest.skip(f"no Docker Engine reachable: {exc}")
    yield eng
    if not os.environ.get("OOTA_KEEP"):
        eng.cleanup(run_id, images=True)


@pytest.fixture(scope="session")
def debian12_base(engine) -> str:
    """The bootstrapped Debian 12 base on the first Engine, made if no earlier test (or test
    session: oota bootstraps one base at a time per host) made it; its tag."""
    spec = load_matrix(REPO / "matrix.yaml").os["debian12"]
    return ensure_base(engine, spec.image, spec, REPO / ".oota-cache").ref


def shared_root(base: Path) -> Path:
    """Where the workers of a run keep what they share: beside their own temporary folders
    (a worker's is ``<run>/popen-gwN``), or in the session's own without pytest-xdist."""
    return (base.parent if _WORKER else base) / "shared"


def shared(tmp_path_factory, name: str, make: Callable[[Path], T]) -> T:
    """``make(folder)``'s value, made once for the whole run: the first worker to ask makes it
    (the others wait on a lock meanwhile) and keeps it in ``folder``; every later call, in any
    worker, reads it back. A make that raised leaves nothing, so the next caller tries again."""
    folder = shared_root(tmp_path_factory.getbasetemp()) / name
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / "value.pickle"
    with (folder / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not kept.exists():
            value = make(folder)
            kept.with_suffix(".part").write_bytes(pickle.dumps(value))
            kept.with_suffix(".part").rename(kept)
        value = pickle.loads(kept.read_bytes())
    return value  # type: ignore[no-any-return]


def pytest_sessionfinish(session) -> None:
    """In the process that started the workers (or the only one), once every test is done:
    the shared images go. Nothing to do when no test made them."""
    if _WORKER or os.environ.get("OOTA_KEEP") or not session.config.option.basetemp:
        return
    root = shared_root(Path(session.config.option.basetemp))
    made = [run for name, run in SHARED_IMAGES.items() if (root / name / "value.pickle").exists()]
    if not made:
        return
    try:
        engine = DockerEngine()
        for run in made:
            engine.cleanup(run, images=True)
    except Exception:  # noqa: BLE001 - no Engine left to clean: nothing of ours remains
        pass


@pytest.fixture(scope="session")
def marker_ca(tmp_path_factory) -> tuple[Path, str]:
    """The host's CA bundle plus a freshly made self-signed certificate with a unique name:
    the build must work with it, and not one byte of it may reach the image. One for the run,
    like the image ``built`` makes with it."""
    return shared(tmp_path_factory, "ca", _make_marker_ca)


def _make_marker_ca(folder: Path) -> tuple[Path, str]:
    marker = f"oota-marker-{uuid.uuid4().hex}"
    cert = folder / "marker.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", f"/CN={marker}", "-keyout", str(folder / "key.pem"),
                    "-out", str(cert)], check=True, capture_output=True, timeout=60)
    host = next((Path(os.environ[v]) for v in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
                 if os.environ.get(v) and Path(os.environ[v]).is_file()),
                Path("/etc/ssl/certs/ca-certificates.crt"))
    bundle = folder / "bundle.pem"
    bundle.write_bytes((host.read_bytes() if host.is_file() else b"") + b"\n" + cert.read_bytes())
    return bundle, cert.read_text()


def made_by(run_id: str) -> tuple[tuple[str, str], ...]:
    """The labels of an image a test builds: a test's, and ``oota.image-run``, by which the end
    of the session (or the worker's) removes it. Not ``oota.run``: every container started from
    the image would inherit it, and the end of any run of that id (a test's build with the
    shared image's options) removed them, another worker's judge among them (exit 137)."""
    return (("oota.test", "true"), (IMAGE_RUN_LABEL, run_id))


@dataclass
class Built:
    results: list[dict]  # each result as its result.json holds it (Result.to_json())
    results_dir: Path
    tag: str
    options: BuildOptions


def copy_project(dest: Path) -> Path:
    """A throw-away copy of the project's inputs (matrix, vendors, templates, verify suite,
    oota.sh)."""
    for name in ("vendors", "verify", "templates/dockerfile", "locks"):
        shutil.copytree(REPO / name, dest / name,
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    shutil.copy(REPO / "matrix.yaml", dest / "matrix.yaml")
    # The checkout's own command too: generated files name the command of their project
    # (./oota.sh where it has one), so a copy without it would render other Dockerfile bytes,
    # another fingerprint, and the session's verifications would not hold there.
    shutil.copy2(REPO / "oota.sh", dest / "oota.sh")
    return dest / "matrix.yaml"


def lean_cpu_vendor(project: Path) -> None:
    """The copied project's CPU vendor without what only the layers after install, compat and
    device use: no model library (transformers), no models, no C++ extension for the smoke
    layer, no compiler for Inductor (nor the vector-ISA probes the builder compiles with it).
    For the tests that build cells of their own torch and verify those three layers only (the
    nightly, the release candidate): such an image builds without transformers' install and
    the extension's compiler and build, about 80 s less each on a loaded 2-core host
    (tests/docker CI run, 2026-11-28)."""
    path = project / "vendors" / "cpu" / "vendor.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["test_requirements"] = [r for r in data["test_requirements"]
                                 if not r.startswith("transformers")]
    verify = data["verify"]
    verify["models"] = []
    verify.pop("workload", None)
    verify.get("compile", {}).pop("models", None)
    verify.get("compile", {})["compiler"] = False
    verify["capabilities"]["cpp_extension"] = False
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    # The repository's locks pin the full requirements: with fewer, a cell builds unlocked.
    shutil.rmtree(project / "locks" / "cpu", ignore_errors=True)


@pytest.fixture(scope="session")
def built(engine, marker_ca, tmp_path_factory) -> Built:
    """The default CPU cell, built and verified once for the whole run (``shared``): under the
    run's shared namespace and run id, so it lives until every worker is done. A test that
    changes its results copies them first. Its build is forced (``rebuild=True``; with
    BuildKit's cache of unchanged inputs it takes seconds): an image of the same inputs left
    under the tag (OOTA_KEEP=1 of an earlier run) would otherwise be taken as up to date, with
    no build log and no build that saw this run's CA bundle, which test_cpu_cell.py checks."""
    def make(folder: Path) -> Built:
        options = BuildOptions(results_dir=folder / "results", ca_bundle=str(marker_ca[0]),
                               run_id=SHARED_RUN, namespace=SHARED_NAMESPACE, rebuild=True,
                               extra_labels=made_by(SHARED_RUN))
        matrix = load_matrix(REPO / "matrix.yaml")
        cells = select(matrix, plan(matrix, ["cpu"]), ids=[DEFAULT_CELL])
        results = [r.to_json() for r in build_cells(matrix, cells, engine, Console(), options)]
        return Built(results=results, results_dir=options.results_dir,
                     tag=options.tag_for(cells[0]), options=options)

    return shared(tmp_path_factory, "built", make)


def build_default(engine, tmp_path_factory, vendor: str, run_id: str,
                  namespace: str = NAMESPACE, results_dir: Path | None = None,
                  rebuild: bool = False) -> Built:
    """Build and verify the vendor's default cell of the repository's matrix, for real, under
    ``namespace`` and ``run_id``."""
    results_dir = results_dir or tmp_path_factory.mktemp(f"results-{vendor}")
    options = BuildOptions(results_dir=results_dir, run_id=run_id, namespace=namespace,
                           rebuild=rebuild,
                           extra_labels=made_by(run_id))
    matrix = load_matrix(REPO / "matrix.yaml")
    [cell] = select(matrix, plan(matrix, [vendor]))
    [result] = build_cells(matrix, [cell], engine, Console(), options)
    return Built(results=[result.to_json()], results_dir=results_dir,
                 tag=options.tag_for(cell), options=options)


@pytest.fixture(scope="session")
def reference_built(engine, tmp_path_factory) -> Built:
    """The reference vendor's default cell, built and verified once for the whole run
    (``shared``, like ``built``): any worker's share may hold the files that use it. Forced
    (``rebuild=True``) for the same reason as ``built``: test_reference.py reads its build log."""
    return shared(tmp_path_factory, "reference", lambda folder: build_default(
        engine, tmp_path_factory, "reference", SHARED_IMAGES["reference"], SHARED_NAMESPACE,
        folder / "results", rebuild=True))


@pytest.fixture(scope="session")
def cuda_built(engine, run_id, tmp_path_factory) -> Built:
    """The CUDA vendor's default cell, opt-in (-m cuda): about 6 GB of wheels."""
    return build_default(engine, tmp_path_factory, "cuda", run_id)


@pytest.fixture(scope="session")
def docker_client():
    return docker.from_env()


@pytest.fixture(scope="session", autouse=True)
def _remove_leftover_containers(run_id):
    yield
    if os.environ.get("OOTA_KEEP"):
        return
    try:
        client = docker.from_env()
        run_filter = {"label": f"{RUN_LABEL}={run_id}"}
        for container in client.containers.list(all=True, filters=run_filter):
            container.remove(force=True)
    except docker.errors.DockerException:
        pass


@pytest.fixture(scope="session")
def extra_engines(tmp_path_factory) -> Iterator[Callable[[int], ExtraEngine]]:
    """More Docker Engines on loopback (tests/engines.py), standing in for a lab's hosts: one set
    for the session, each started when a test first asks for it (``extra_engines(1)`` is e1)
    and removed at the end. test_fleet.py uses e1 and e2 (and kills e2); test_publish.py pulls
    into e1."""
    why = ExtraEngine.usable()
    if why:
        pytest.skip(f"no extra Docker Engines here: {why}")
    root = tmp_path_factory.mktemp("engines")
    started: dict[int, ExtraEngine] = {}

    def get(index: int) -> ExtraEngine:
        if index not in started:
            started[index] = ExtraEngine(root / f"e{index}", index)  # removed even if it fails
            started[index].start()
        return started[index]

    try:
        yield get
    finally:
        for extra in started.values():
            extra.kill()  # its data is thrown away: no graceful shutdown to wait for
            extra.remove()


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """A plain-HTTP registry on 127.0.0.1 (the Engine trusts loopback registries)."""
    if not registry_server.available():
        pytest.skip("docker-registry is not installed (scripts/ensure-env.sh installs it)")
    server = registry_server.start(tmp_path_factory.mktemp("registry"))
    yield server.host
    server.stop()


@pytest.fixture(scope="session")
def secure_registry(tmp_path_factory) -> registry_server.Server:
    """A registry on 127.0.0.1 with htpasswd auth and TLS from a test CA. The Engine treats
    127.0.0.0/8 as an insecure registry (TLS without verification), so it pushes and pulls
    with no CA installed in /etc/docker; oota's own client is given the CA."""
    if not registry_server.available():
        pytest.skip("docker-registry is not installed (scripts/ensure-env.sh installs it)")
    server = registry_server.start(tmp_path_factory.mktemp("secure-registry"), secure=True)
    yield server
    server.stop()
