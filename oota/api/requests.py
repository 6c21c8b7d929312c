"""One typed request per task: a frozen dataclass whose fields are the task's flags.

Each field declares, with :func:`~oota.api.fields.flag` (or ``repeated``, ``required``), the
flag's help, its default (the field's value when the flag is not given, of the field's type:
mypy checks it) and the check that turns what the user typed into the field's type (an
:class:`~oota.errors.InputError`, exit 2, names a bad flag before the task reads the matrix or
contacts Docker); flags checked against each other are checked here only, in
``__post_init__``. ``tasks.py``'s invoke tasks, the ``oota`` command, ``--help`` and
docs/reference/tasks.md are derived from these classes (:func:`oota.tasking.task_of`).

**Adding a flag** is one field here, in the request of each task that takes it; the task's body
reads it as ``r.name``. The field's name is the flag's (``ca_bundle`` is ``--ca-bundle``).

**Folders**: a folder flag left out is the project's (beside ``--matrix``); one given is read
as typed, relative to the current folder (:mod:`oota.project`); a request's ``project()``
says which folders a task uses.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from oota.api import flags as f
from oota.api.fields import flag, repeated, required
from oota.api.vendorrequests import InitRequest, KnownFailuresRequest, LintRequest
from oota.errors import InputError
from oota.project import DEFAULT_MATRIX, Project

if TYPE_CHECKING:   # large modules: the checks and options() that use them import them
    from oota.engine.base import RegistryAuth
    from oota.execute.build import BuildOptions
    from oota.execute.lock import LockOptions
    from oota.supply.signing import PrivateKey

# -- the checks of this table (the others are oota.api.flags) -----------------------------------

def vendors(items: list[str]) -> list[str] | None:
    """``--vendor``, repeatable and comma-separable; None: every vendor."""
    return f.name_list("--vendor", items)


def cells(items: list[str]) -> list[str] | None:
    """``--cell``, repeatable and comma-separable; None: the vendors' default cells."""
    return f.name_list("--cell", items)


def results_folder(value: str) -> Path:
    """``--results``: the folder a run writes its results to."""
    return f.folder("--results", value)


def tuple_of(items: list[str]) -> tuple[str, ...]:
    return tuple(items)


def list_of(items: list[str]) -> list[str]:
    return list(items)


def one_of(flag_name: str, choices: tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        return f.choice(flag_name, value, choices)
    return check


# -- flags that several tasks take, with one meaning ------------------------------------------

MATRIX = "matrix file"
PROJECT = ("matrix file; its folder is the project's: results/, reports/, history.db and "
           ".oota-cache/ are beside it unless a flag names another place")
FORMAT = "table or json"
HISTORY = ("where runs are kept: a database URL (sqlite:///file, postgresql://user@host/db; "
           "default: OOTA_HISTORY, else history.db beside the matrix)")
RESULTS = "results folder (default: results/ beside the matrix)"
REPORTS = "report folder (default: reports/ beside the matrix)"


def _vendor() -> list[str] | None:
    return repeated("vendor name (repeatable)", None, check=vendors)


def _cell() -> list[str] | None:
    return repeated("cell id (repeatable)", None, check=cells)


def _matrix(help: str = MATRIX) -> str:
    return flag(help, DEFAULT_MATRIX)


def _all() -> bool:
    return flag("every cell of the vendor, not just its defaults", False)


def _ca_bundle() -> str | None:
    return flag("CA bundle for TLS-intercepting proxies (default: PIP_CERT, REQUESTS_CA_BUNDLE, "
                "SSL_CERT_FILE, pip's cert)", None, check=f.ca_bundle)


def _index_url() -> str | None:
    return flag("package index replacing the vendor's and the host's", None, check=f.index_url)


def _find_links() -> tuple[str, ...]:
    return repeated("wheel folder or URL (repeatable)", (), check=tuple_of)


def _no_host_pip_config() -> bool:
    return flag("ignore the host's pip configuration", False)


def _registry_mirror() -> tuple[tuple[str, str], ...]:
    return repeated("REGISTRY=MIRROR: pull base images of REGISTRY from MIRROR (repeatable), "
                    "e.g. vault.habana.ai=registry.lab:5000", (), check=f.registry_mirrors)


def _results() -> Path | None:
    return flag(RESULTS, None, check=results_folder)


def _layer() -> tuple[str, ...]:
    return flag("verify layers, comma-separated (default: every layer)", (), check=f.layers)


def _hosts() -> str | None:
    return flag("hosts.yaml: run the cells on its Docker Engines (schema/hosts-v1.json)", None)


def _jobs() -> int:
    return flag(f"cells the local engine runs at once (default {f.DEFAULT_JOBS}; with --hosts: "
                "each host's jobs)", f.DEFAULT_JOBS, check=f.jobs)


def _history(help: str = HISTORY) -> str | None:
    return flag(help, None)


def _no_history(help: str = "do not append this run to the history") -> bool:
    return flag(help, False)


def _signing_key() -> PrivateKey | None:
    return flag("the lab's signing key (oota.key, made by the keygen task; its password in "
                "OOTA_SIGNING_PASSWORD): each result is signed (result.sig beside it)", None,
                check=f.signing_key)


def _registry_auth() -> RegistryAuth | None:
    return flag("JSON file {username, password} (default: the engine's `docker login`)", None,
                check=f.registry_auth)


def _registry_ca() -> Path | None:
    return flag("PEM CA bundle the registry's TLS certificate chains to (default: the "
                "system's)", None, check=f.registry_ca)


def _project(matrix: str, results: Path | str | None, reports: str | None = None, *,
             created: bool = True) -> Project:
    """The project of a request: its folders, each checked as its flag would be (a default
    too: a link inside the project may take it elsewhere)."""
    project = Project.of(matrix, results=results, reports=reports)
    if created:
        f.folder("--results", str(project.results))
    else:
        f.within_project("--results", project.results)
    f.within_project("--out", project.reports)
    return project


# -- the requests, one per task ---------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class MatrixRequest:
    vendor: list[str] | None = _vendor()
    matrix: str = _matrix()
    format: str = flag("table, json, or github: the job matrix of .github/workflows/oota.yml, "
                       "one line of JSON for fromJSON", "table",
                       check=one_of("--format", f.MATRIX_FORMATS))
    all: bool = flag("with --format github: every cell, not just the vendors' defaults", False)


@dataclass(frozen=True, kw_only=True, slots=True)
class GenerateRequest:
    vendor: list[str] | None = _vendor()
    matrix: str = _matrix()
    check: bool = flag("only compare; exit 1 and show the diff when stale", False)


def _history_flags(history: str | None, off: bool) -> None:
    if history is not None and off:
        raise InputError("--history and --no-history exclude each other")


def _jobs_flags(hosts: str | None, jobs: int) -> None:
    if hosts is not None and jobs != f.DEFAULT_JOBS:
        raise InputError("--jobs is for the local engine; with --hosts each host's `jobs` in "
                         "the hosts file says how many cells it runs at once")


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildRequest:
    vendor: list[str] | None = _vendor()
    cell: list[str] | None = _cell()
    matrix: str = _matrix(PROJECT)
    all: bool = _all()
    ca_bundle: str | None = _ca_bundle()
    index_url: str | None = _index_url()
    find_links: tuple[str, ...] = _find_links()
    no_host_pip_config: bool = _no_host_pip_config()
    rebuild: bool = flag("build even when an image with the same fingerprint exists", False)
    results: Path | None = _results()
    layer: tuple[str, ...] = _layer()
    no_verify: bool = flag("build only", False)
    registry_mirror: tuple[tuple[str, str], ...] = _registry_mirror()
    hosts: str | None = _hosts()
    jobs: int = _jobs()
    reverify: bool = flag("verify up-to-date images even when their last verification still "
                          "holds", False)
    history: str | None = _history()
    no_history: bool = _no_history()
    key: PrivateKey | None = _signing_key()

    def __post_init__(self) -> None:
        _jobs_flags(self.hosts, self.jobs)
        _history_flags(self.history, self.no_history)

    def project(self) -> Project:
        return _project(self.matrix, self.results)

    def options(self) -> BuildOptions:
        """The options of the run these flags ask for."""
        from oota.execute.build import BuildOptions

        return BuildOptions(results_dir=self.project().results, ca_bundle=self.ca_bundle,
                            index_url=self.index_url, find_links=self.find_links,
                            use_host_pip_config=not self.no_host_pip_config,
                            rebuild=self.rebuild, verify=not self.no_verify, layers=self.layer,
                            registry_mirrors=self.registry_mirror, reverify=self.reverify)


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyRequest:
    vendor: list[str] | None = _vendor()
    cell: list[str] | None = _cell()
    matrix: str = _matrix(PROJECT)
    all: bool = _all()
    results: Path | None = _results()
    layer: tuple[str, ...] = _layer()
    here: bool = flag("verify a Python environment and this host's devices, without Docker",
                      False)
    python: str | None = flag("with --here: the interpreter whose torch is verified (default: "
                              "this one)", None)
    hosts: str | None = _hosts()
    jobs: int = _jobs()
    history: str | None = _history()
    no_history: bool = _no_history()
    key: PrivateKey | None = _signing_key()

    def __post_init__(self) -> None:
        f.check_here_flags(here=self.here, python=self.python, cells=self.cell,
                           everything=self.all, hosts=self.hosts, jobs=self.jobs)
        _jobs_flags(self.hosts, self.jobs)
        _history_flags(self.history, self.no_history)

    def project(self) -> Project:
        return _project(self.matrix, self.results)

    def options(self) -> BuildOptions:
        from oota.execute.build import BuildOptions

        return BuildOptions(results_dir=self.project().results, layers=self.layer)


@dataclass(frozen=True, kw_only=True, slots=True)
class PublishRequest:
    registry: str = required("where to push: a registry host and optional path, e.g. "
                             "registry.lab:5000", check=f.registry)
    vendor: list[str] | None = _vendor()
    cell: list[str] | None = _cell()
    matrix: str = _matrix(PROJECT)
    all: bool = _all()
    results: Path | None = flag(RESULTS, None, check=Path)
    registry_auth: RegistryAuth | None = _registry_auth()
    namespace: str = flag("repository prefix in the registry (default: oota): "
                          "REGISTRY/NS/VENDOR:CELL", "oota", check=f.namespace)
    key: str | None = flag("the lab's signing key (oota.key, made by the keygen task; its "
                           "password in OOTA_SIGNING_PASSWORD); without it images are "
                           "published unsigned", None)
    registry_ca: Path | None = _registry_ca()
    hosts: str | None = flag("hosts.yaml: push each image from the Engine of the file that "
                             "verified it", None)
    host: str | None = flag("the Docker Engine holding the verified images, as hosts.yaml "
                            "writes one (default: DOCKER_HOST, else the local socket)", None)

    def __post_init__(self) -> None:
        if self.hosts is not None and self.host is not None:
            raise InputError("--hosts and --host exclude each other: give the hosts file, or "
                             "one Engine")

    def project(self) -> Project:
        return _project(self.matrix, self.results, created=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class KeygenRequest:
    out: str = flag("folder for oota.key (private, mode 0600) and oota.pub (default: .)", ".")


@dataclass(frozen=True, kw_only=True, slots=True)
class PullRequest:
    ref: str = required("the published image, REGISTRY/NAMESPACE/VENDOR:CELL, e.g. "
                        "registry.lab:5000/oota/cpu:cpu-torch2.13.0-py3.11-debian12", check=str)
    key: str | None = flag("the lab's public key (oota.pub): the signature must verify with it",
                           None)
    registry_auth: RegistryAuth | None = _registry_auth()
    registry_ca: Path | None = _registry_ca()
    workdir: Path | None = flag("where the run's log and results go (default: .oota-cache/pull "
                                "beside the matrix)", None, check=Path)
    host: str | None = flag("the Docker Engine to pull into and re-verify on, as hosts.yaml "
                            "writes one: unix:///PATH, tcp://HOST:PORT, ssh://USER@HOST or a "
                            "docker context name (default: DOCKER_HOST, else the local socket)",
                            None)
    layer: tuple[str, ...] = _layer()
    matrix: str = _matrix(PROJECT)

    def project(self) -> Project:
        return Project.of(self.matrix)


@dataclass(frozen=True, kw_only=True, slots=True)
class HostsRequest:
    vendor: list[str] | None = _vendor()
    matrix: str = _matrix()
    format: str = flag(FORMAT, "table", check=one_of("--format", f.FORMATS))
    hosts: str | None = _hosts()


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportRequest:
    results: str | None = flag(RESULTS, None, check=str)
    out: str | None = flag(REPORTS, None, check=str)
    compare: str | None = flag("an earlier run's results folder: list what changed per cell",
                               None)
    merge: list[str] | None = repeated("a results folder to merge (repeatable: runners' or "
                                       "hosts' artifacts side by side); a cell found in several "
                                       "is kept once per host, shown agreeing or not", None,
                                       check=list_of)
    format: str | None = flag("extra outputs, a comma list: crcr (crcr.json, the callback "
                              "payload of PyTorch's cross-repository CI relay)", None)
    artifact_url: str | None = flag("where the results can be downloaded, for crcr.json "
                                    "(default in GitHub Actions: the run's page)", None)
    history: str | None = _history("the history the HUD shows (hud.html, hud.md) and, with "
                                   "--merge, where the merged run is appended: " + HISTORY)
    no_history: bool = _no_history("no HUD, and with --merge: do not append the run to the "
                                   "history")
    hud_runs: int = flag("how many runs the HUD shows, newest first", 50, check=f.hud_runs)
    key: list[str] | None = repeated("a lab's public key (oota.pub; repeatable): each "
                                     "result's signature (result.sig) must check with one of "
                                     "them, or the result is refused; merge lists the unsigned",
                                     None, check=list_of)
    replace: bool = flag("replace the report in --out even when these results hold fewer than "
                         "it shows (otherwise refused, exit 2)", False)
    matrix: str = _matrix(PROJECT + "; the get-started pages judge staleness against it")
    parity: str | None = flag("a reference recording (cases.pt of PyTorch's own stack on known-"
                              "good hardware, or a folder of them): the operators table sets "
                              "each operator × dtype beside it (its recorded verdicts)", None)
    public_url: str | None = flag("where this report is published (the lab's public site): the "
                                  "scorecards' public-results item cites it", None,
                                  check=f.public_url)

    def __post_init__(self) -> None:
        if self.merge and self.results is not None:
            raise InputError(f"--merge and --results {self.results} exclude each other: name "
                             "every folder to merge with --merge")
        if self.artifact_url is not None and "crcr" not in f.report_formats(self.format):
            raise InputError("--artifact-url goes into crcr.json only; add --format crcr")
        _history_flags(self.history, self.no_history)

    def project(self) -> Project:
        return _project(self.matrix, self.results, self.out, created=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryRequest:
    action: str = required("import (load results folders), query (where outcomes changed) or "
                           "digest (what broke, was fixed, is overdue or flaky, as Markdown)",
                           check=one_of("history", f.HISTORY_ACTIONS))
    dir: list[str] | None = repeated("import: a results folder, one result.json per cell "
                                     "folder (repeatable)", None, check=list_of)
    vendor: str | None = flag("query: one vendor's cells", None)
    cell: str | None = flag("query: one cell id", None)
    test: str | None = flag("query: one test id (e.g. test_device.py::test_matmul)", None)
    format: str = flag(FORMAT, "table", check=one_of("--format", f.HISTORY_FORMATS))
    since: dt.timedelta | None = flag("digest: the window, in hours, days or weeks: 24h, 3d, "
                                      "1w (default 24h)", None, check=f.since)
    history: str | None = _history()
    matrix: str = _matrix(PROJECT)

    def __post_init__(self) -> None:
        f.check_history_flags(self.action, dirs=self.dir, selection={
            "vendor": self.vendor, "cell": self.cell, "test": self.test}, fmt=self.format,
            window=self.since)

    def project(self) -> Project:
        return Project.of(self.matrix)


@dataclass(frozen=True, kw_only=True, slots=True)
class ReleaseCheckRequest:
    vendor: list[str] | None = repeated("vendor name (repeatable; default: all)", None,
                                        check=vendors)
    matrix: str = _matrix()
    torch: str | None = flag("the release to check, e.g. 2.15 (the newest 2.15.x) or 2.15.0 "
                             "(default: the newest on the index); N-1 is derived", None)
    format: str = flag("table, json or markdown", "table")
    index_url: str = flag("index root or simple URL (mirrors); https://user:password@host/simple "
                          "sends basic auth, shown as user:***@host", "https://pypi.org",
                          check=f.index_url)
    update: bool = flag("rewrite the torch axes of matrix.yaml to N and N-1 (comments kept; "
                        "rules naming a removed release move to its replacement; refused if "
                        "the result would not load)", False)
    timeout: str | None = flag("seconds one index request may take in all, connect to last "
                               "byte (default 60; the whole check gets 5 times that)", None)
    fail_on_gap: bool = flag("exit 1 when any vendor has a gap (for CI); default exit 0", False)


@dataclass(frozen=True, kw_only=True, slots=True)
class LockRequest:
    vendor: list[str] | None = _vendor()
    cell: list[str] | None = _cell()
    matrix: str = _matrix()
    all: bool = _all()
    check: bool = flag("only report fresh/stale/missing per cell; exit 1 when a lock is stale",
                       False)
    ca_bundle: str | None = _ca_bundle()
    index_url: str | None = _index_url()
    find_links: tuple[str, ...] = _find_links()
    no_host_pip_config: bool = _no_host_pip_config()
    registry_mirror: tuple[tuple[str, str], ...] = _registry_mirror()
    upgrade: bool = flag("resolve every pin afresh (default: keep the existing lock's pins that "
                         "still fit)", False)

    def options(self) -> LockOptions:
        """The options of the lock these flags ask for."""
        from oota.execute.lock import LockOptions

        return LockOptions(ca_bundle=self.ca_bundle, index_url=self.index_url,
                           find_links=self.find_links,
                           use_host_pip_config=not self.no_host_pip_config,
                           registry_mirrors=self.registry_mirror, upgrade=self.upgrade)


@dataclass(frozen=True, kw_only=True, slots=True)
class JudgeRequest:
    path: str = required("a recording (cases.pt beside an accelerator's result), or a folder: "
                         "every *.pt under it", check=str)
    python: str | None = flag("an interpreter with torch to judge with (default: this one if it "
                              "has torch)", None)
    image: str | None = flag("an image with torch to judge in (default: the CPU vendor's default "
                             "cell)", None)
    check: bool = flag("exit 1 when a verdict (its status) differs from the recorded one "
                       "(whatever the verdicts), 0 when none does; a message alone that "
                       "differs is counted, not a move", False)
    quiet: bool = flag("print failed and moved cases only", False)
    key: list[str] | None = repeated("a lab's public key (oota.pub; repeatable): a recording's "
                                     "signature (cases.pt.sig) must check with one of them, or "
                                     "it is refused; the unsigned are listed", None,
                                     check=list_of)
    matrix: str = _matrix()


@dataclass(frozen=True, kw_only=True, slots=True)
class TestRequest:
    __test__ = False  # not a pytest test class, despite its name

    docker: bool = flag("also run the Docker tests (default: yes)", True)
    k: str = flag("pytest -k", "")


REQUESTS: tuple[type, ...] = (
    MatrixRequest, GenerateRequest, BuildRequest, VerifyRequest, PublishRequest, KeygenRequest,
    PullRequest, HostsRequest, ReportRequest, HistoryRequest, ReleaseCheckRequest, LockRequest,
    JudgeRequest, InitRequest, LintRequest, KnownFailuresRequest, TestRequest)
