"""One typed request per task: a frozen dataclass whose fields are the task's flags.

Each field declares, with :func:`flag`, the flag's help, its default as invoke parses it, and
the check that turns what invoke parsed (a str, a bool, a list for a repeatable flag) into the
field's type (an :class:`~oota.errors.InputError`, exit 2, names a bad flag before the task
reads the matrix or contacts Docker); flags that exclude each other are checked in
``__post_init__``. ``tasks.py``'s invoke tasks, the ``oota`` command and ``--help`` are derived
from these classes (:func:`oota.tasking.task_of`); :func:`flags_of` lists them as data.

**Adding a flag** is one field here, in the request of each task that takes it; the task's body
reads it as ``r.name``. The field's name is the flag's (``ca_bundle`` is ``--ca-bundle``);
a flag without a value (``default=None``) may be left out, one with ``REQUIRED`` must be given,
and may be given without its name.
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from oota.api import flags as f
from oota.errors import InputError

if TYPE_CHECKING:   # large modules: the checks and options() that use them import them
    from oota.engine.base import RegistryAuth
    from oota.execute.build import BuildOptions
    from oota.execute.lock import LockOptions
    from oota.supply.signing import PrivateKey

REQUIRED: Any = inspect.Parameter.empty   # no default: invoke takes it positionally as well
Check = Callable[[Any], Any]
_FLAG = "oota.flag"


@dataclass(frozen=True, slots=True)
class Flag:
    """One flag: ``help`` for ``--help``; ``default`` as invoke parses it when the flag is not
    given (``REQUIRED``: it must be); ``check`` turns what invoke parsed into the field's value
    (None: as parsed); ``repeatable``: given any number of times, a list."""
    help: str
    default: Any = None
    check: Check | None = None
    repeatable: bool = False


def flag(help: str, default: Any = None, *, check: Check | None = None,
         repeatable: bool = False) -> Any:
    """A request's field that is a flag (its value comes from :func:`parse`)."""
    return field(metadata={_FLAG: Flag(help, default, check, repeatable)})


def flags_of(request: type) -> list[tuple[str, Flag]]:
    """``request``'s flags in the order ``--help`` lists them: the required first (invoke
    takes them by position too), then the rest as the class declares them."""
    found = [(x.name, x.metadata[_FLAG]) for x in fields(request) if _FLAG in x.metadata]
    return sorted(found, key=lambda item: item[1].default is not REQUIRED)


R = TypeVar("R")


def parse(request: type[R], **given: Any) -> R:
    """``request`` from the flags as invoke parsed them: each not given takes its default,
    each is checked (InputError naming a bad one)."""
    values = {}
    for name, spec in flags_of(request):
        value = given.pop(name, spec.default)
        if value is REQUIRED:
            raise InputError(f"--{name.replace('_', '-')} is required")
        values[name] = spec.check(value) if spec.check else value
    if given:
        raise TypeError(f"{request.__name__} has no flag {sorted(given)[0]!r}")
    return request(**values)


# -- the checks of this table (the others are oota.api.flags) -----------------------------------

def vendors(items: list[str] | None) -> list[str] | None:
    """``--vendor``, repeatable and comma-separable; None: every vendor."""
    return f.name_list("--vendor", items)


def cells(items: list[str] | None) -> list[str] | None:
    """``--cell``, repeatable and comma-separable; None: the vendors' default cells."""
    return f.name_list("--cell", items)


def results_folder(value: str) -> Path:
    """``--results``: the folder a run writes its results to."""
    return f.folder("--results", value)


def path_or_none(value: str | None) -> Path | None:
    return Path(value) if value else None


def window(value: str | None) -> dt.timedelta | None:
    """``history --since``: the window, None when not given (``history`` says where it
    applies, and digests the last ``DEFAULT_SINCE`` without it)."""
    return None if value is None else f.since(value)


def tuple_of(items: list[str] | None) -> tuple[str, ...]:
    return tuple(items or ())


def one_of(flag_name: str, choices: tuple[str, ...]) -> Check:
    def check(value: str) -> str:
        return f.choice(flag_name, value, choices)
    return check


# -- flags that several tasks take, with one meaning ------------------------------------------

MATRIX = "matrix file (default: matrix.yaml)"
FORMAT = "table or json"
HISTORY = ("where runs are kept: a database URL (sqlite:///file, postgresql://user@host/db; "
           "default: OOTA_HISTORY, else history.db beside matrix.yaml)")


def _vendor() -> Any:
    return flag("vendor name (repeatable)", check=vendors, repeatable=True)


def _cell() -> Any:
    return flag("cell id (repeatable)", check=cells, repeatable=True)


def _matrix() -> Any:
    return flag(MATRIX, "matrix.yaml")


def _all() -> Any:
    return flag("every cell of the vendor, not just its defaults", False)


def _ca_bundle() -> Any:
    return flag("CA bundle for TLS-intercepting proxies (default: PIP_CERT, REQUESTS_CA_BUNDLE, "
                "SSL_CERT_FILE, pip's cert)", check=f.ca_bundle)


def _index_url() -> Any:
    return flag("package index replacing the vendor's and the host's", check=f.index_url)


def _find_links() -> Any:
    return flag("wheel folder or URL (repeatable)", check=tuple_of, repeatable=True)


def _no_host_pip_config() -> Any:
    return flag("ignore the host's pip configuration", False)


def _registry_mirror() -> Any:
    return flag("REGISTRY=MIRROR: pull base images of REGISTRY from MIRROR (repeatable), e.g. "
                "vault.habana.ai=registry.lab:5000", check=f.registry_mirrors, repeatable=True)


def _results() -> Any:
    return flag("results folder (default: results)", f.DEFAULT_RESULTS, check=results_folder)


def _layer() -> Any:
    return flag("verify layers, comma-separated", "", check=f.layers)


def _hosts() -> Any:
    return flag("hosts.yaml: run the cells on its Docker Engines (schema/hosts-v1.json)")


def _jobs() -> Any:
    return flag("cells the local engine runs at once (default 1; with --hosts: each host's "
                "jobs)", "1", check=f.jobs)


def _history() -> Any:
    return flag(HISTORY)


def _no_history() -> Any:
    return flag("do not append this run to the history", False)


def _signing_key() -> Any:
    return flag("the lab's signing key (oota.key from `./oota.sh keygen`; its password in "
                "OOTA_SIGNING_PASSWORD): each result is signed (result.sig beside it)",
                check=f.signing_key)


def _registry_auth() -> Any:
    return flag("JSON file {username, password} (default: the engine's `docker login`)",
                check=f.registry_auth)


def _registry_ca() -> Any:
    return flag("PEM CA bundle the registry's TLS certificate chains to (default: the "
                "system's)", check=f.registry_ca)


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


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildRequest:
    vendor: list[str] | None = _vendor()
    cell: list[str] | None = _cell()
    matrix: str = _matrix()
    all: bool = _all()
    ca_bundle: str | None = _ca_bundle()
    index_url: str | None = _index_url()
    find_links: tuple[str, ...] = _find_links()
    no_host_pip_config: bool = _no_host_pip_config()
    rebuild: bool = flag("build even when an image with the same fingerprint exists", False)
    results: Path = _results()
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
        if self.hosts is not None and self.jobs != 1:
            raise InputError("--jobs is for the local engine; with --hosts each host's `jobs` "
                             "in the hosts file says how many cells it runs at once")

    def options(self) -> BuildOptions:
        """The options of the run these flags ask for."""
        from oota.execute.build import BuildOptions

        return BuildOptions(results_dir=self.results, ca_bundle=self.ca_bundle,
                            index_url=self.index_url, find_links=self.find_links,
                            use_host_pip_config=not self.no_host_pip_config,
                            rebuild=self.rebuild, verify=not self.no_verify, layers=self.layer,
                            registry_mirrors=self.registry_mirror, reverify=self.reverify)


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyRequest:
    vendor: list[str] | None = _vendor()
    cell: list[str] | None = _cell()
    matrix: str = _matrix()
    all: bool = _all()
    results: Path = _results()
    layer: tuple[str, ...] = _layer()
    here: bool = flag("verify a Python environment and this host's devices, without Docker",
                      False)
    python: str | None = flag("with --here: the interpreter whose torch is verified (default: "
                              "this one)")
    hosts: str | None = _hosts()
    jobs: int = _jobs()
    history: str | None = _history()
    no_history: bool = _no_history()
    key: PrivateKey | None = _signing_key()

    def __post_init__(self) -> None:
        f.check_here_flags(here=self.here, python=self.python, cells=self.cell,
                           everything=self.all, hosts=self.hosts, jobs=self.jobs)

    def options(self) -> BuildOptions:
        from oota.execute.build import BuildOptions

        return BuildOptions(results_dir=self.results, layers=self.layer)


@dataclass(frozen=True, kw_only=True, slots=True)
class PublishRequest:
    registry: str = flag("where to push: a registry host and optional path, e.g. "
                         "registry.lab:5000", REQUIRED, check=f.registry)
    vendor: list[str] | None = _vendor()
    cell: list[str] | None = _cell()
    matrix: str = _matrix()
    all: bool = _all()
    results: Path = flag("results folder (default: results)", f.DEFAULT_RESULTS, check=Path)
    registry_auth: RegistryAuth | None = _registry_auth()
    namespace: str = flag("repository prefix in the registry (default: oota): "
                          "REGISTRY/NS/VENDOR:CELL", "oota", check=f.namespace)
    key: str | None = flag("the lab's signing key (oota.key from `./oota.sh keygen`; its "
                           "password in OOTA_SIGNING_PASSWORD); without it images are "
                           "published unsigned")
    registry_ca: Path | None = _registry_ca()
    hosts: str | None = flag("hosts.yaml: push each image from the Engine of the file that "
                             "verified it")
    host: str | None = flag("the Docker Engine holding the verified images, as hosts.yaml "
                            "writes one (default: DOCKER_HOST, else the local socket)")

    def __post_init__(self) -> None:
        if self.hosts is not None and self.host is not None:
            raise InputError("--hosts and --host exclude each other: give the hosts file, or "
                             "one Engine")


@dataclass(frozen=True, kw_only=True, slots=True)
class KeygenRequest:
    out: str = flag("folder for oota.key (private, mode 0600) and oota.pub (default: .)", ".")


@dataclass(frozen=True, kw_only=True, slots=True)
class PullRequest:
    ref: str = flag("the published image, REGISTRY/NAMESPACE/VENDOR:CELL, e.g. "
                    "registry.lab:5000/oota/cpu:cpu-torch2.13.0-py3.11-debian12", REQUIRED)
    key: str | None = flag("the lab's public key (oota.pub): the signature must verify with it")
    registry_auth: RegistryAuth | None = _registry_auth()
    registry_ca: Path | None = _registry_ca()
    workdir: Path | None = flag("where the run's log and results go (default: .oota-cache/pull "
                                "beside the matrix)", check=path_or_none)
    host: str | None = flag("the Docker Engine to pull into and re-verify on, as hosts.yaml "
                            "writes one: unix:///PATH, tcp://HOST:PORT, ssh://USER@HOST or a "
                            "docker context name (default: DOCKER_HOST, else the local socket)")
    matrix: str = _matrix()


@dataclass(frozen=True, kw_only=True, slots=True)
class HostsRequest:
    vendor: list[str] | None = _vendor()
    matrix: str = _matrix()
    format: str = flag(FORMAT, "table", check=one_of("--format", f.FORMATS))
    hosts: str | None = _hosts()


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportRequest:
    results: str = flag("results folder (default: results)", f.DEFAULT_RESULTS,
                        check=f.report_folder("--results"))
    out: str = flag("report folder", "reports", check=f.report_folder("--out"))
    compare: str | None = flag("an earlier run's results folder: list what changed per cell")
    merge: list[str] | None = flag("a results folder to merge (repeatable: runners' or hosts' "
                                   "artifacts side by side); a cell found in several is kept "
                                   "once per host, shown agreeing or not", repeatable=True)
    format: str | None = flag("extra outputs, a comma list: crcr (crcr.json, the callback "
                              "payload of PyTorch's cross-repository CI relay)")
    artifact_url: str | None = flag("where the results can be downloaded, for crcr.json "
                                    "(default in GitHub Actions: the run's page)")
    history: str | None = flag("the history the HUD shows (hud.html, hud.md) and, with "
                               "--merge, where the merged run is appended: " + HISTORY)
    no_history: bool = flag("no HUD, and with --merge: do not append the run to the history",
                            False)
    hud_runs: int = flag("how many runs the HUD shows, newest first (default 50)", "50",
                         check=f.hud_runs)
    key: list[str] | None = flag("a lab's public key (oota.pub; repeatable): each result's "
                                 "signature (result.sig) must check with one of them, or the "
                                 "result is refused; merge lists the unsigned", repeatable=True)
    replace: bool = flag("replace the report in --out even when these results hold fewer than "
                         "it shows (otherwise refused, exit 2)", False)
    matrix: str = flag(MATRIX + "; its folder holds history.db and the get-started pages judge "
                       "staleness against it", "matrix.yaml")
    parity: str | None = flag("a reference recording (cases.pt of PyTorch's own stack on known-"
                              "good hardware, or a folder of them): the operators table sets "
                              "each operator × dtype beside it (its recorded verdicts)")
    public_url: str | None = flag("where this report is published (the lab's public site): the "
                                  "scorecards' public-results item cites it",
                                  check=f.public_url)


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryRequest:
    action: str = flag("import (load results folders), query (where outcomes changed) or "
                       "digest (what broke, was fixed, is overdue or flaky, as Markdown)",
                       REQUIRED, check=one_of("history", f.HISTORY_ACTIONS))
    dir: list[str] | None = flag("import: a results folder, one result.json per cell folder "
                                 "(repeatable)", repeatable=True)
    vendor: str | None = flag("query: one vendor's cells")
    cell: str | None = flag("query: one cell id")
    test: str | None = flag("query: one test id (e.g. test_device.py::test_matmul)")
    format: str = flag(FORMAT, "table", check=one_of("--format", f.HISTORY_FORMATS))
    since: dt.timedelta | None = flag("digest: the window, in hours, days or weeks: 24h, 3d, "
                                      "1w (default 24h)", check=window)
    history: str | None = _history()
    matrix: str = flag(MATRIX + "; its folder holds history.db", "matrix.yaml")

    def __post_init__(self) -> None:
        f.check_history_flags(self.action, dirs=self.dir, selection={
            "vendor": self.vendor, "cell": self.cell, "test": self.test}, fmt=self.format,
            window=self.since)


@dataclass(frozen=True, kw_only=True, slots=True)
class ReleaseCheckRequest:
    vendor: list[str] | None = flag("vendor name (repeatable; default: all)", check=vendors,
                                    repeatable=True)
    matrix: str = _matrix()
    torch: str | None = flag("the release to check, e.g. 2.15 (the newest 2.15.x) or 2.15.0 "
                             "(default: the newest on the index); N-1 is derived")
    format: str = flag("table, json or markdown", "table")
    index_url: str = flag("index root or simple URL (mirrors); https://user:password@host/simple "
                          "sends basic auth, shown as user:***@host", "https://pypi.org")
    update: bool = flag("rewrite the torch axes of matrix.yaml to N and N-1 (comments kept; "
                        "rules naming a removed release move to its replacement; refused if "
                        "the result would not load)", False)
    timeout: str | None = flag("seconds one index request may take in all, connect to last "
                               "byte (default 60; the whole check gets 5 times that)")
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
    path: str = flag("a recording (cases.pt beside an accelerator's result), or a folder: every "
                     "*.pt under it", REQUIRED)
    python: str | None = flag("an interpreter with torch to judge with (default: this one if it "
                              "has torch)")
    image: str | None = flag("an image with torch to judge in (default: the CPU vendor's default "
                             "cell)")
    check: bool = flag("exit 1 when a verdict (its status) differs from the recorded one "
                       "(whatever the verdicts), 0 when none does; a message alone that "
                       "differs is counted, not a move", False)
    quiet: bool = flag("print failed and moved cases only", False)
    key: list[str] | None = flag("a lab's public key (oota.pub; repeatable): a recording's "
                                 "signature (cases.pt.sig) must check with one of them, or it "
                                 "is refused; the unsigned are listed", repeatable=True)
    matrix: str = _matrix()


@dataclass(frozen=True, kw_only=True, slots=True)
class InitRequest:
    vendor: str = flag("the new vendor's name: vendors/NAME/ is written (a name of lower-case "
                       "letters, digits, '.', '_' and '-')", REQUIRED)
    matrix: str = flag(MATRIX + "; written with the vendor's one cell when it does not exist",
                       "matrix.yaml")


@dataclass(frozen=True, kw_only=True, slots=True)
class LintRequest:
    matrix: str = _matrix()


@dataclass(frozen=True, kw_only=True, slots=True)
class TestRequest:
    __test__ = False  # not a pytest test class, despite its name

    docker: bool = flag("also run the Docker tests (default: yes)", True)
    k: str = flag("pytest -k", "")


REQUESTS: tuple[type, ...] = (
    MatrixRequest, GenerateRequest, BuildRequest, VerifyRequest, PublishRequest, KeygenRequest,
    PullRequest, HostsRequest, ReportRequest, HistoryRequest, ReleaseCheckRequest, LockRequest,
    JudgeRequest, InitRequest, LintRequest, TestRequest)

