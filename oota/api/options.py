"""Every flag of every task in one table: its help, its default and its check.

A task in ``tasks.py`` names the flags it takes as the parameters of its body, with the type
the body receives; :func:`bind` gives invoke the signature, help and repeatable flags from this
table, and calls the body with each flag checked (an :class:`~oota.errors.InputError`, exit 2,
names a bad one before the task reads the matrix or contacts Docker).

**Adding a flag** is one entry here (help, default, check) and one parameter of the body
that uses it. The key is the flag's parameter name (``ca_bundle`` is ``--ca-bundle``); a task
whose flag means something else writes its own entry, ``"task.name"``, found first.
``tests/unit/test_options.py`` holds every body's parameter types to its flags' checks.
"""

from __future__ import annotations

import datetime as dt
import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oota.api import flags as f

if TYPE_CHECKING:   # large modules: the two functions that make these import them
    from oota.execute.build import BuildOptions
    from oota.execute.lock import LockOptions

REQUIRED: Any = inspect.Parameter.empty   # no default: invoke takes it positionally as well
Check = Callable[[Any], Any]


@dataclass(frozen=True)
class Flag:
    """One flag: ``help`` for ``--help``; ``default`` when it is not given (``REQUIRED``: it
    must be, and may be given without its name); ``check`` turns what invoke parsed (a str, a
    bool, or a list for a ``repeatable`` one) into what the task receives (None: as parsed)."""
    help: str
    default: Any = None
    check: Check | None = None
    repeatable: bool = False


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


def task_choice(flag: str, choices: tuple[str, ...]) -> Check:
    def check(value: str) -> str:
        return f.choice(flag, value, choices)
    return check


MATRIX = "matrix file (default: matrix.yaml)"
FORMAT = "table or json"
HISTORY = ("where runs are kept: a database URL (sqlite:///file, postgresql://user@host/db; "
           "default: OOTA_HISTORY, else history.db beside matrix.yaml)")
HOSTS = "hosts.yaml: run the cells on its Docker Engines (schema/hosts-v1.json)"
HOST = ("the Docker Engine holding the verified images, as hosts.yaml writes one (default: "
        "DOCKER_HOST, else the local socket)")

FLAGS: dict[str, Flag] = {
    # -- choosing cells (most tasks) ---------------------------------------------------------
    "vendor": Flag("vendor name (repeatable)", check=vendors, repeatable=True),
    "cell": Flag("cell id (repeatable)", check=cells, repeatable=True),
    "matrix": Flag(MATRIX, "matrix.yaml"),
    "all": Flag("every cell of the vendor, not just its defaults", False),
    # -- building: where packages come from ---------------------------------------------------
    "ca_bundle": Flag("CA bundle for TLS-intercepting proxies (default: PIP_CERT, "
                      "REQUESTS_CA_BUNDLE, SSL_CERT_FILE, pip's cert)", check=f.ca_bundle),
    "index_url": Flag("package index replacing the vendor's and the host's",
                      check=f.index_url),
    "find_links": Flag("wheel folder or URL (repeatable)", check=tuple_of, repeatable=True),
    "no_host_pip_config": Flag("ignore the host's pip configuration", False),
    "registry_mirror": Flag("REGISTRY=MIRROR: pull base images of REGISTRY from MIRROR "
                            "(repeatable), e.g. vault.habana.ai=registry.lab:5000",
                            check=f.registry_mirrors, repeatable=True),
    # -- building and verifying ------------------------------------------------------------
    "rebuild": Flag("build even when an image with the same fingerprint exists", False),
    "results": Flag("results folder (default: results)", f.DEFAULT_RESULTS,
                    check=results_folder),
    "layer": Flag("verify layers, comma-separated", "", check=f.layers),
    "no_verify": Flag("build only", False),
    "hosts": Flag(HOSTS),
    "jobs": Flag("cells the local engine runs at once (default 1; with --hosts: each host's "
                 "jobs)", "1", check=f.jobs),
    "reverify": Flag("verify up-to-date images even when their last verification still holds",
                     False),
    "history": Flag(HISTORY),
    "no_history": Flag("do not append this run to the history", False),
    "key": Flag("the lab's signing key (oota.key from `./oota.sh keygen`; its password in "
                "OOTA_SIGNING_PASSWORD): each result is signed (result.sig beside it)",
                check=f.signing_key),
    "here": Flag("verify a Python environment and this host's devices, without Docker", False),
    "python": Flag("with --here: the interpreter whose torch is verified (default: this one)"),
    # -- registries: publish and pull ------------------------------------------------------
    "registry_auth": Flag("JSON file {username, password} (default: the engine's "
                          "`docker login`)", check=f.registry_auth),
    "registry_ca": Flag("PEM CA bundle the registry's TLS certificate chains to (default: the "
                        "system's)", check=f.registry_ca),
    "publish.registry": Flag("where to push: a registry host and optional path, e.g. "
                             "registry.lab:5000", REQUIRED, check=f.registry),
    "publish.namespace": Flag("repository prefix in the registry (default: oota): "
                              "REGISTRY/NS/VENDOR:CELL", "oota", check=f.namespace),
    "publish.key": Flag("the lab's signing key (oota.key from `./oota.sh keygen`; its "
                        "password in OOTA_SIGNING_PASSWORD); without it images are published "
                        "unsigned"),
    "publish.hosts": Flag("hosts.yaml: push each image from the Engine of the file that "
                          "verified it"),
    "publish.results": Flag("results folder (default: results)", f.DEFAULT_RESULTS, check=Path),
    "host": Flag(HOST),
    "keygen.out": Flag("folder for oota.key (private, mode 0600) and oota.pub (default: .)",
                       "."),
    "pull.ref": Flag("the published image, REGISTRY/NAMESPACE/VENDOR:CELL, e.g. "
                     "registry.lab:5000/oota/cpu:cpu-torch2.13.0-py3.11-debian12", REQUIRED),
    "pull.key": Flag("the lab's public key (oota.pub): the signature must verify with it"),
    "pull.host": Flag("the Docker Engine to pull into and re-verify on, as hosts.yaml writes "
                      "one: unix:///PATH, tcp://HOST:PORT, ssh://USER@HOST or a docker context "
                      "name (default: DOCKER_HOST, else the local socket)"),
    "pull.workdir": Flag("where the run's log and results go (default: .oota-cache/pull beside "
                         "the matrix)", check=path_or_none),
    # -- matrix, generate, hosts, lint, lock -----------------------------------------------
    "matrix.format": Flag("table, json, or github: the job matrix of .github/workflows/oota.yml, "
                          "one line of JSON for fromJSON", "table",
                          check=task_choice("--format", f.MATRIX_FORMATS)),
    "matrix.all": Flag("with --format github: every cell, not just the vendors' defaults",
                       False),
    "generate.check": Flag("only compare; exit 1 and show the diff when stale", False),
    "hosts.format": Flag(FORMAT, "table", check=task_choice("--format", f.FORMATS)),
    "lock.check": Flag("only report fresh/stale/missing per cell; exit 1 when a lock is stale",
                       False),
    "lock.upgrade": Flag("resolve every pin afresh (default: keep the existing lock's pins "
                         "that still fit)", False),
    # -- report ----------------------------------------------------------------------------
    "report.results": Flag("results folder (default: results)", f.DEFAULT_RESULTS),
    "report.out": Flag("report folder", "reports"),
    "report.compare": Flag("an earlier run's results folder: list what changed per cell"),
    "report.merge": Flag("a results folder to merge (repeatable: runners' or hosts' artifacts "
                         "side by side); a cell found in several is kept once per host, shown "
                         "agreeing or not", repeatable=True),
    "report.format": Flag("extra outputs, a comma list: crcr (crcr.json, the callback payload "
                          "of PyTorch's cross-repository CI relay)"),
    "report.artifact_url": Flag("where the results can be downloaded, for crcr.json (default "
                                "in GitHub Actions: the run's page)"),
    "report.history": Flag("the history the HUD shows (hud.html, hud.md) and, with --merge, "
                           "where the merged run is appended: " + HISTORY),
    "report.no_history": Flag("no HUD, and with --merge: do not append the run to the history",
                              False),
    "report.hud_runs": Flag("how many runs the HUD shows, newest first (default 50)", "50",
                            check=f.hud_runs),
    "report.key": Flag("a lab's public key (oota.pub; repeatable): each result's signature "
                       "(result.sig) must check with one of them, or the result is refused; "
                       "merge lists the unsigned", repeatable=True),
    "report.replace": Flag("replace the report in --out even when these results hold fewer "
                           "than it shows (otherwise refused, exit 2)", False),
    "report.matrix": Flag(MATRIX + "; its folder holds history.db and the get-started pages "
                          "judge staleness against it", "matrix.yaml"),
    # -- history ---------------------------------------------------------------------------
    "history.action": Flag("import (load results folders), query (where outcomes changed) or "
                           "digest (what broke, was fixed, is overdue or flaky, as Markdown)",
                           REQUIRED, check=task_choice("history", f.HISTORY_ACTIONS)),
    "history.dir": Flag("import: a results folder, one result.json per cell folder "
                        "(repeatable)", repeatable=True),
    "history.vendor": Flag("query: one vendor's cells"),
    "history.cell": Flag("query: one cell id"),
    "history.test": Flag("query: one test id (e.g. test_device.py::test_matmul)"),
    "history.format": Flag(FORMAT, "table", check=task_choice("--format", f.HISTORY_FORMATS)),
    "history.since": Flag("digest: the window, in hours, days or weeks: 24h, 3d, 1w (default "
                          "24h)", check=window),
    "history.matrix": Flag(MATRIX + "; its folder holds history.db", "matrix.yaml"),
    # -- release-check ---------------------------------------------------------------------
    "release_check.vendor": Flag("vendor name (repeatable; default: all)", check=vendors,
                                 repeatable=True),
    "release_check.torch": Flag("the release to check, e.g. 2.15 (the newest 2.15.x) or 2.15.0 "
                                "(default: the newest on the index); N-1 is derived"),
    "release_check.format": Flag("table, json or markdown", "table"),
    "release_check.index_url": Flag("index root or simple URL (mirrors); "
                                    "https://user:password@host/simple sends basic auth, shown "
                                    "as user:***@host", "https://pypi.org"),
    "release_check.update": Flag("rewrite the torch axes of matrix.yaml to N and N-1 (comments "
                                 "kept; rules naming a removed release move to its "
                                 "replacement; refused if the result would not load)", False),
    "release_check.timeout": Flag("seconds one index request may take in all, connect to last "
                                  "byte (default 60; the whole check gets 5 times that)"),
    "release_check.fail_on_gap": Flag("exit 1 when any vendor has a gap (for CI); default "
                                      "exit 0", False),
    # -- judge -----------------------------------------------------------------------------
    "judge.path": Flag("a recording (cases.pt beside an accelerator's result), or a folder: "
                       "every *.pt under it", REQUIRED),
    "judge.python": Flag("an interpreter with torch to judge with (default: this one if it "
                         "has torch)"),
    "judge.image": Flag("an image with torch to judge in (default: the CPU vendor's default "
                        "cell)"),
    "judge.check": Flag("exit 1 when a verdict or message differs from the recorded one",
                        False),
    "judge.quiet": Flag("print failed and moved cases only", False),
    # -- test ------------------------------------------------------------------------------
    "test.docker": Flag("also run the Docker tests (default: yes)", True),
    "test.k": Flag("pytest -k", ""),
}


def flag_of(task: str, name: str, table: Mapping[str, Flag] = FLAGS) -> Flag:
    """The entry of ``task``'s flag ``name``: the task's own, else the shared one."""
    found = table.get(f"{task}.{name}") or table.get(name)
    if found is None:
        raise TypeError(f"task {task!r} takes {name!r}, which oota/api/options.py's FLAGS "
                        f"does not hold: add {name!r} (or {task + '.' + name!r}) there")
    return found


@dataclass(frozen=True)
class Bound:
    """What invoke needs for one task: its body with the table's signature (and each flag
    checked before the body runs), the help of each flag, and the repeatable ones."""
    body: Callable[..., None]
    help: dict[str, str]
    iterable: tuple[str, ...]


def bind(body: Callable[..., None], table: Mapping[str, Flag] = FLAGS) -> Bound:
    """The task ``body`` (``def build(c, vendor, cell, ...)``, no defaults) bound to its
    flags in ``table``: the parameters after the context are its flags, in the order
    ``--help`` lists them."""
    task = body.__name__
    params = list(inspect.signature(body).parameters.values())
    given = {p.name: flag_of(task, p.name, table) for p in params[1:]}
    required = [name for name, flag in given.items() if flag.default is REQUIRED]
    late = next((name for name in required if list(given).index(name) >= len(required)), None)
    if late is not None:
        raise TypeError(f"task {task!r}: its required flag {late!r} comes before the flags "
                        "with a default (invoke takes required flags by position too)")
    signature = inspect.Signature([
        params[0].replace(annotation=inspect.Parameter.empty),
        *(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=flag.default)
          for name, flag in given.items())])

    @functools.wraps(body)
    def checked(*args: Any, **kwargs: Any) -> None:
        parsed = signature.bind(*args, **kwargs)
        parsed.apply_defaults()
        values = dict(parsed.arguments)
        context = values.pop(params[0].name)
        body(context, **{name: flag.check(values[name]) if flag.check else values[name]
                         for name, flag in given.items()})

    checked.__signature__ = signature  # type: ignore[attr-defined]  # read by invoke
    return Bound(body=checked, help={name: flag.help for name, flag in given.items()},
                 iterable=tuple(name for name, flag in given.items() if flag.repeatable))


def build_options(*, results: Path, layer: tuple[str, ...], ca_bundle: str | None = None,
                  index_url: str | None = None, find_links: tuple[str, ...] = (),
                  no_host_pip_config: bool = False, rebuild: bool = False,
                  no_verify: bool = False,
                  registry_mirror: tuple[tuple[str, str], ...] = (),
                  reverify: bool = False) -> BuildOptions:
    """The build and verify flags, checked, as the options of a run."""
    from oota.execute.build import BuildOptions

    return BuildOptions(results_dir=results, ca_bundle=ca_bundle, index_url=index_url,
                        find_links=find_links, use_host_pip_config=not no_host_pip_config,
                        rebuild=rebuild, verify=not no_verify, layers=layer,
                        registry_mirrors=registry_mirror, reverify=reverify)


def lock_options(*, ca_bundle: str | None, index_url: str | None, find_links: tuple[str, ...],
                 no_host_pip_config: bool, registry_mirror: tuple[tuple[str, str], ...],
                 upgrade: bool) -> LockOptions:
    """The lock flags, checked, as the options of a lock."""
    from oota.execute.lock import LockOptions

    return LockOptions(ca_bundle=ca_bundle, index_url=index_url, find_links=find_links,
                       use_host_pip_config=not no_host_pip_config,
                       registry_mirrors=registry_mirror, upgrade=upgrade)
