"""The functions behind the invoke tasks: each takes parsed flags, does one job, returns data.

Nothing here prints results or exits; ``tasks.py`` formats the returned data and maps
exceptions (:mod:`oota.errors`) to exit codes.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from oota import github, lockfile
from oota.config.hostsfile import HostsFile, endpoint_of, load_hosts
from oota.config.matrix import Matrix, load_matrix
from oota.config.yamlsrc import did_you_mean
from oota.console import Console
from oota.engine.base import Endpoint, Engine, RegistryAuth, TlsFiles
from oota.engine.docker import DockerEngine
from oota.errors import (
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_HOST_LOST,
    EXIT_OK,
    EnvironmentProblem,
    InputError,
    OotaError,
)
from oota.execute import inplace
from oota.execute import judge as judging
from oota.execute import lock as locks
from oota.execute.attach import Signer
from oota.execute.bases import Base, parse_mirrors
from oota.execute.build import BuildOptions
from oota.execute.fleet import Down, Station, lost_hosts, run_on_stations
from oota.execute.hosts import HostCheck
from oota.execute.publish import Outcome as PublishOutcome
from oota.execute.publish import publish_cells
from oota.execute.pull import Pulled, pull_and_verify
from oota.files import SMALL_LIMIT, read_text
from oota.history import changes as history_changes
from oota.history import store as history_store
from oota.history.location import Location, locate
from oota.history.policy import policy_at
from oota.history.records import Origin, group_by_run, run_record
from oota.history.timeline import Timeline
from oota.lint import lint_project
from oota.net import find_ca_bundle, redact, redact_text
from oota.plan import Cell, plan, select
from oota.releases.command import Outcome as ReleaseOutcome
from oota.releases.command import run as run_release_check
from oota.releases.http import REQUEST_TIMEOUT
from oota.render import (
    Drift,
    cell_fingerprint,
    check,
    context_files,
    fingerprint,
    render_all,
    write_all,
)
from oota.report import crcr, hud
from oota.report.data import Report
from oota.report.hud import HudInput
from oota.report.write import EXTRA_FORMATS, Extras, ReportShrinks, write_report
from oota.results.model import Result, ResultFormatError
from oota.results.signed import Checker, key_id, sign_folder
from oota.results.store import RESULT_FILE, SIGNATURE_FILE, load, load_all
from oota.supply import signing
from oota.vocab import BAD, LAYERS

# Output formats of `matrix` and `hosts`.
FORMATS = ("table", "json")
# `matrix` also prints the job matrix of the shipped GitHub Actions workflow (oota/github.py).
MATRIX_FORMATS = (*FORMATS, "github")
MAX_JOBS = 64


# --- Flags: each task checks its own before it reads the matrix or contacts Docker. ---------

def choice(flag: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` when it is one of ``choices``; otherwise an InputError naming the valid ones."""
    if value not in choices:
        hint = did_you_mean(value, choices)
        raise InputError(f"{flag} {value!r} is not one of {', '.join(choices)}"
                         + (f"; {hint}" if hint and hint.startswith("did") else ""))
    return value


def name_list(flag: str, items: list[str] | None) -> list[str] | None:
    """Repeatable, comma-separable name flags (``--vendor a,b --vendor c``); None when absent."""
    if not items:
        return None
    found = [name.strip() for item in items for name in item.split(",") if name.strip()]
    if not found:
        raise InputError(f"{flag} needs a name, e.g. {flag}=cpu")
    return found


def layers(text: str) -> tuple[str, ...]:
    """``--layer device,models``: the suite's layers (:data:`oota.vocab.LAYERS`), in order."""
    found = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    for layer in found:
        if layer not in LAYERS:
            hint = did_you_mean(layer, LAYERS)
            raise InputError(f"--layer {layer!r} is not a layer of the verify suite "
                             f"({', '.join(LAYERS)})"
                             + (f"; {hint}" if hint and hint.startswith("did") else ""))
    return found


def folder(flag: str, value: str) -> Path:
    """A folder flag (created when missing): refused when it, or a parent of it, is a file."""
    path = Path(value)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        which = "is a file" if existing == path else f"is inside {existing}, which is a file"
        raise InputError(f"{flag} {value}: {which}; name a folder (it is created when missing)")
    return path


def index_url(value: str | None) -> str | None:
    """``--index-url``: an http(s) URL with a host (pip inside the build cannot read a host's
    file:// path)."""
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--index-url {redact(value)!r} is not an http(s) URL; give the index "
                         "root, e.g. https://pypi.org/simple (or a wheel folder: --find-links)")
    return value


def ca_bundle(value: str | None) -> str | None:
    """``--ca-bundle``: an existing file (InputError otherwise), as an absolute path."""
    found = find_ca_bundle(value) if value else None
    return str(found) if found else None


_REGISTRY = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")


def registry(value: str) -> str:
    """``--registry``: a registry host (``registry.lab:5000``), optionally with a path, and no
    scheme or credentials (InputError otherwise)."""
    if not _REGISTRY.match(value):
        raise InputError(f"--registry {redact_text(value)!r}: give a registry host and optional "
                         "path, e.g. registry.lab:5000 or ghcr.io/my-lab (no https://, no "
                         "user:password)")
    return value.rstrip("/")


_PATH = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")


def namespace(value: str) -> str:
    """``--namespace``: the repository path before ``<vendor>:<cell>`` (``oota``, ``lab/oota``)."""
    if not _PATH.match(value):
        raise InputError(f"--namespace {value!r}: lower-case path components separated by '/', "
                         "e.g. oota or my-lab/oota")
    return value


def registry_auth(path: str | None) -> RegistryAuth | None:
    """``--registry-auth FILE``: a JSON file ``{"username": ..., "password": ...}`` (keep it
    readable by you only); InputError naming what is wrong, never its content."""
    if path is None:
        return None
    try:
        data = json.loads(read_text(Path(path), SMALL_LIMIT))
    except (OSError, ValueError, RecursionError) as exc:
        # Never the JSON error's text: it quotes the file, which holds a password.
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise InputError(f"--registry-auth {path}: not a readable JSON file ({why})") from None
    if not (isinstance(data, dict) and isinstance(data.get("username"), str)
            and isinstance(data.get("password"), str) and data["username"]):
        raise InputError(f"--registry-auth {path}: expected {{\"username\": ..., \"password\": "
                         "...}")
    return RegistryAuth(username=data["username"], password=data["password"])


def check_here_flags(*, here: bool, python: str | None, cells: list[str] | None,
                     everything: bool, hosts: str | None = None, jobs: str = "1") -> None:
    """``verify --here`` verifies this environment as the one cell it matches: ``--cell`` and
    ``--all`` make no sense with it, nor do ``--hosts`` and ``--jobs`` (no engine is used),
    and ``--python`` none without it."""
    if here and (cells or everything):
        raise InputError("--cell and --all do not apply with --here: it verifies this "
                         "environment as the vendor's cell it matches")
    if here and (hosts is not None or jobs != "1"):
        raise InputError("--hosts and --jobs do not apply with --here: it verifies this "
                         "environment, without Docker")
    if not here and python is not None:
        raise InputError("--python applies only with --here (built images carry their own)")


def registry_mirrors(items: list[str] | None) -> tuple[tuple[str, str], ...]:
    """``--registry-mirror REGISTRY=MIRROR`` flags, validated (InputError, exit code 2)."""
    return tuple(parse_mirrors(items or []).items())


def build_options(*, results: str, layer: str = "", ca_bundle_file: str | None = None,
                  index: str | None = None, find_links: list[str] | None = None,
                  no_host_pip_config: bool = False, rebuild: bool = False, verify: bool = True,
                  registry_mirror: list[str] | None = None,
                  reverify: bool = False) -> BuildOptions:
    """The build and verify flags, every one checked (InputError, exit 2)."""
    return BuildOptions(results_dir=folder("--results", results),
                        ca_bundle=ca_bundle(ca_bundle_file), index_url=index_url(index),
                        find_links=tuple(find_links or ()),
                        use_host_pip_config=not no_host_pip_config, rebuild=rebuild,
                        verify=verify, layers=layers(layer),
                        registry_mirrors=registry_mirrors(registry_mirror), reverify=reverify)


def jobs(text: str | int) -> int:
    """``--jobs N``: how many cells the local engine runs at once (1 to 64)."""
    value = str(text).strip()
    if not value.isdigit() or len(value) > 3 or not 1 <= int(value) <= MAX_JOBS:
        raise InputError(f"--jobs {str(text)[:20]!r}: give a whole number from 1 to "
                         f"{MAX_JOBS}, e.g. --jobs 2")
    return int(value)


def lock_options(*, ca_bundle_file: str | None = None, index: str | None = None,
                 find_links: list[str] | None = None, no_host_pip_config: bool = False,
                 registry_mirror: list[str] | None = None,
                 upgrade: bool = False) -> locks.LockOptions:
    """The lock flags, every one checked (InputError, exit 2)."""
    return locks.LockOptions(ca_bundle=ca_bundle(ca_bundle_file), index_url=index_url(index),
                             find_links=tuple(find_links or ()),
                             use_host_pip_config=not no_host_pip_config,
                             registry_mirrors=registry_mirrors(registry_mirror), upgrade=upgrade)


# --- What the tasks do. -------------------------------------------------------------------

def cells_for(matrix_path: str, vendors: list[str] | None, ids: list[str] | None = None,
              everything: bool = True) -> tuple[Matrix, list[Cell]]:
    matrix = load_matrix(matrix_path)
    cells = plan(matrix, vendors or None)
    return matrix, select(matrix, cells, ids=ids, everything=everything)


def matrix_rows(matrix_path: str, vendors: list[str] | None) -> list[dict[str, Any]]:
    matrix, cells = cells_for(matrix_path, vendors)
    defaults = {c.id for c in select(matrix, cells)}
    rows = []
    for rendered in render_all(matrix, cells):
        cell = rendered.cell
        rows.append({"id": cell.id, **cell.coordinates(), "base": cell.base_image,
                     "tag": cell.tag, "default": cell.id in defaults,
                     "fingerprint": fingerprint(context_files(matrix, rendered))})
    return rows


def matrix_text(matrix_path: str, vendors: list[str] | None, fmt: str,
                everything: bool = False) -> str:
    """`invoke matrix`'s output (``fmt`` is one of :data:`MATRIX_FORMATS`). ``github``: the
    workflow's job matrix, one line, of the vendors' default cells (what ``invoke build``
    picks) or with ``everything`` of every cell; the table and JSON list every cell, with its
    ``default`` column, so ``everything`` is refused there."""
    if fmt == "github":
        matrix, cells = cells_for(matrix_path, vendors, everything=everything)
        return github.matrix_json([github.job_for(cell, cell_fingerprint(matrix, cell))
                                   for cell in cells])
    if everything:
        raise InputError(f"--all applies only with --format github; --format {fmt} lists "
                         "every cell already (its 'default' column marks the default ones)")
    return format_rows(matrix_rows(matrix_path, vendors), fmt)


def format_rows(rows: list[dict[str, Any]], fmt: str) -> str:
    """`invoke matrix`'s output: a table, or JSON (``fmt`` is one of :data:`FORMATS`)."""
    if fmt == "json":
        return json.dumps(rows, indent=2)
    headers = ("id", "vendor", "torch", "python", "toolkit_version", "os", "default")
    table = [[str(r.get(h) if r.get(h) is not None else "-") for h in headers] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h)
              for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in table]
    return "\n".join(out)


def generate(matrix_path: str, vendors: list[str] | None, *, check_only: bool
             ) -> tuple[list[Path], Drift | None]:
    matrix, cells = cells_for(matrix_path, vendors)
    rendered = render_all(matrix, cells)
    names = vendors or list(matrix.vendors) + _vendor_dirs_not_in(matrix)
    if check_only:
        return [], check(matrix, rendered, names)
    return write_all(rendered), None


def _vendor_dirs_not_in(matrix: Matrix) -> list[str]:
    """Generated folders under images/ of vendors the matrix no longer has (stale output)."""
    if not matrix.images_dir.is_dir():
        return []
    return [p.name for p in sorted(matrix.images_dir.iterdir())
            if p.is_dir() and p.name != "templates" and p.name not in matrix.vendors]


@dataclass(frozen=True, kw_only=True, slots=True)
class Ran:
    """What a build or verify run gives the task: each cell's result, and the hosts that
    stopped answering (or never answered) on the way."""

    results: list[Result]
    lost: tuple[str, ...] = ()


def build(matrix_path: str, vendors: list[str] | None, ids: list[str] | None, everything: bool,
          options: BuildOptions, console: Console, *, build_images: bool = True,
          hosts_file: str | None = None, jobs: int = 1) -> Ran:
    """Build (optionally) and verify the selected cells: on the local engine, ``jobs`` at once,
    or on the engines of ``hosts_file`` (hosts.yaml)."""
    matrix, cells = cells_for(matrix_path, vendors, ids, everything)
    if hosts_file is not None and jobs != 1:
        raise InputError("--jobs is for the local engine; with --hosts each host's `jobs` in "
                         "the hosts file says how many cells it runs at once")
    fleet = load_hosts(Path(hosts_file), tuple(matrix.vendors)) if hosts_file else None
    if fleet is not None:
        _check_served(fleet, cells)
    if not cells:
        console.warn("no cells selected")
        return Ran(results=[])
    console.info(f"{len(cells)} cell(s): " + ", ".join(c.id for c in cells))
    if fleet is None:
        stations = [Station("", DockerEngine(), jobs=jobs, cache=matrix.root / ".oota-cache")]
        down: tuple[Down, ...] = ()
    else:
        stations, down = _stations(fleet, cells, console, matrix.root / ".oota-cache")
    logging.getLogger("oota").debug("engines ready")
    results = run_on_stations(matrix, cells, stations, console, options, build=build_images,
                              down=down)
    return Ran(results=results, lost=tuple(lost_hosts(stations))
               + tuple(f"{d.name}: {d.why}" for d in down))


def _check_served(fleet: HostsFile, cells: list[Cell]) -> None:
    """Every selected cell's vendor has a host in the hosts file (InputError, exit 2)."""
    unserved = sorted({c.vendor.name for c in cells if not fleet.serving(c.vendor.name)})
    if unserved:
        raise InputError(f"{fleet.file}: no host takes the cells of "
                         f"{', '.join(unserved)}; add the vendor to a host's `vendors`, or "
                         "leave its cells out (--vendor)")


def _stations(fleet: HostsFile, cells: list[Cell], console: Console, cache: Path
              ) -> tuple[list[Station], tuple[Down, ...]]:
    """An engine for each host the selected cells need; a host whose engine does not answer
    is left out (its cells go to the other hosts of their vendor), and said so."""
    needed = {c.vendor.name for c in cells}
    stations, down = [], []
    for entry in fleet.hosts:
        if not needed & set(entry.vendors):
            continue
        tls = TlsFiles(ca=entry.tls[0], cert=entry.tls[1], key=entry.tls[2]) if entry.tls \
            else None
        endpoint = Endpoint(name=entry.name, url=entry.url, context=entry.context, tls=tls)
        try:
            engine = DockerEngine(endpoint)
        except OotaError as exc:
            why = str(exc).splitlines()[0]
            console.warn(f"host {entry.name}: left out of this run: {why}")
            down.append(Down(name=entry.name, vendors=frozenset(entry.vendors),
                             why=f"did not answer at the start ({why})"))
            continue
        console.info(f"host {entry.name}: {endpoint.where()} ({entry.jobs} at once; "
                     f"{', '.join(entry.vendors)})")
        stations.append(Station(entry.name, engine, vendors=frozenset(entry.vendors),
                                jobs=entry.jobs, cache=cache))
    return stations, tuple(down)


def publish(matrix_path: str, vendors: list[str] | None, ids: list[str] | None,
            everything: bool, console: Console, *, registry: str, results_dir: Path,
            namespace: str = "oota", auth: RegistryAuth | None = None,
            key: str | None = None, ca: str | None = None, hosts_file: str | None = None,
            host: str | None = None) -> list[PublishOutcome]:
    """Push the selected cells' verified images to ``registry`` with their SBOM, provenance
    and (with ``key``, the lab's private key) signature; refuse the others. Each image is
    pushed from the Engine that verified it, among those of ``hosts_file`` (``--hosts``) or
    ``host`` (``--host``; default: the environment's Engine)."""
    if hosts_file is not None and host is not None:
        raise InputError("--hosts and --host exclude each other: give the hosts file, or one "
                         "Engine")
    signer = Signer(key=signing.load_private(Path(key), signing.password_from_env())
                    if key else None, auth=auth, ca=registry_ca(ca))
    matrix, cells = cells_for(matrix_path, vendors, ids, everything)
    if not cells:
        console.warn("no cells selected")
        return []
    engines = _publishing_engines(matrix, cells, console, hosts_file, host)
    if signer.key is None:
        console.warn("no --key: the images are published unsigned (`./oota.sh keygen` makes a key)")
    return publish_cells(matrix, cells, engines[0], console, results_dir=results_dir,
                         registry=registry, namespace=namespace, local_namespace="oota",
                         auth=auth, signer=signer, run_id=f"publish-{uuid.uuid4().hex[:10]}",
                         others=engines[1:])


def _publishing_engines(matrix: Matrix, cells: list[Cell], console: Console,
                        hosts_file: str | None, host: str | None) -> list[Engine]:
    """The Engines a publish looks for verified images on: those of the hosts file that
    answer (EnvironmentProblem when none does), ``--host``'s, or the environment's."""
    if hosts_file is None:
        return [DockerEngine(engine_endpoint(host))]
    fleet = load_hosts(Path(hosts_file), tuple(matrix.vendors))
    stations, down = _stations(fleet, cells, console, matrix.root / ".oota-cache")
    if not stations:
        raise EnvironmentProblem(f"{hosts_file}: no host answers (" + "; ".join(
            f"{d.name}: {d.why}" for d in down) + ")")
    return [s.engine for s in stations]


def registry_ca(path: str | None) -> Path | None:
    """``--registry-ca FILE``: the CA bundle the registry's TLS certificate chains to."""
    if path is None:
        return None
    if not Path(path).is_file():
        raise InputError(f"--registry-ca {path}: no such file (a PEM CA bundle)")
    return Path(path)


def signing_key(path: str | None) -> signing.PrivateKey | None:
    """``--key FILE`` of build and verify: the lab's private key (its password in
    OOTA_SIGNING_PASSWORD), loaded before the run (InputError, exit 2, when it is not one)."""
    return signing.load_private(Path(path), signing.password_from_env()) if path else None


def sign_results(results: Sequence[Result], results_dir: str,
                 key: signing.PrivateKey | None) -> list[str]:
    """Sign each result this run wrote (``result.sig`` beside it); lines for stderr. A result
    file that is not this run's (an earlier one kept) is left as it is."""
    if key is None:
        return []
    signed = 0
    for result in results:
        folder = Path(results_dir) / result.cell.id
        try:
            on_disk = load(folder / RESULT_FILE)
        except ResultFormatError:
            continue
        if (on_disk.run_id, on_disk.started_at) == (result.run_id, result.started_at):
            sign_folder(folder, key)
            signed += 1
    return [f"signed {signed} result(s) with key {key_id(key.public_key())} ({SIGNATURE_FILE} "
            "beside each result.json)"]


def keygen(out: str) -> signing.KeyFiles:
    """A new signing key pair in ``out`` (``oota.key``, encrypted with OOTA_SIGNING_PASSWORD
    when set, and ``oota.pub``)."""
    where = folder("--out", out)
    where.mkdir(parents=True, exist_ok=True)
    return signing.generate(where, signing.password_from_env())


def pull(reference: str, *, key: str | None, auth: RegistryAuth | None, ca: str | None,
         workdir: Path, host: str | None = None) -> Pulled:
    """Check ``reference``'s signature and provenance, pull it by digest, re-verify it on the
    Engine ``host`` names (``--host``: as a hosts.yaml endpoint or context; default: the
    environment's engine). The checks talk to the registry, the pull and the run to the Engine."""
    endpoint = engine_endpoint(host)
    public = signing.load_public(Path(key)) if key else None
    return pull_and_verify(DockerEngine(endpoint), reference, key=public, auth=auth,
                           ca=registry_ca(ca), workdir=workdir)


def engine_endpoint(host: str | None) -> Endpoint:
    """``--host``: one Docker Engine, written as a host of hosts.yaml writes its endpoint or
    context (InputError otherwise); None: the environment's engine."""
    if host is None:
        return Endpoint()
    url, context = endpoint_of(host, "--host")
    return Endpoint(name=host, url=url, context=context)


def exit_code_for(ran: Ran) -> int:
    """0 when there are results and none failed, errored or was interrupted (oota.vocab.BAD);
    4 when that holds but a host stopped answering during the run (its cells were retried on
    other hosts); 1 otherwise."""
    results = ran.results
    if not results or any(r.status in BAD for r in results):
        return EXIT_FAILED
    return EXIT_HOST_LOST if ran.lost else EXIT_OK


DEFAULT_RESULTS = "results"


def report_formats(text: str | None) -> tuple[str, ...]:
    """``--format crcr``: the extra outputs (a comma list of :data:`EXTRA_FORMATS`)."""
    names = tuple(dict.fromkeys(x.strip() for x in (text or "").split(",") if x.strip()))
    return tuple(choice("--format", name, EXTRA_FORMATS) for name in names)


def report(results_dir: str, out_dir: str, previous_dir: str | None = None, *,
           merge: list[str] | None = None, formats: str | None = None,
           artifact_url: str | None = None, env: Mapping[str, str] | None = None,
           history: Callable[[Report], HudInput | None] | None = None,
           accept: Callable[[Path], str] | None = None, replace: bool = False,
           matrix: str = "matrix.yaml") -> Report:
    """Write the report from ``results_dir``, or from every ``merge`` folder; ``formats`` adds
    outputs (crcr.json, described by the CI run of ``env``: GitHub Actions' variables);
    ``history`` gives, once the results are read, what the HUD shows (None: no HUD)."""
    if merge and results_dir != DEFAULT_RESULTS:
        raise InputError(f"--merge and --results {results_dir} exclude each other: name every "
                         "folder to merge with --merge")
    extra = report_formats(formats)
    if artifact_url is not None and "crcr" not in extra:
        raise InputError("--artifact-url goes into crcr.json only; add --format crcr")
    ci = crcr.CiRun.from_env(env or {}) if "crcr" in extra else crcr.CiRun()
    extras = Extras(formats=extra, ci=ci, artifact_url=crcr.artifact_url(artifact_url, ci))
    return write_report(Path(results_dir), Path(out_dir),
                        Path(previous_dir) if previous_dir else None,
                        merge=[Path(m) for m in merge or []], extras=extras, history=history,
                        current=current_fingerprints(Path(matrix)), accept=accept,
                        replace=replace)


class _TodayFingerprints(Mapping[str, str]):
    """Each cell's fingerprint from today's inputs, rendered when asked for: a report asks for
    its own cells only, not for every cell of the matrix."""

    def __init__(self, matrix: Matrix) -> None:
        self._matrix = matrix
        self._cells = {cell.id: cell for cell in plan(matrix)}
        self._known: dict[str, str] = {}

    def __getitem__(self, cell_id: str) -> str:
        if cell_id not in self._known:
            cell = self._cells[cell_id]  # KeyError: not a cell of today's matrix
            try:
                self._known[cell_id] = cell_fingerprint(self._matrix, cell)
            except OotaError as exc:
                raise KeyError(cell_id) from exc
        return self._known[cell_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._cells)

    def __len__(self) -> int:
        return len(self._cells)


def current_fingerprints(matrix_file: Path) -> Mapping[str, str] | None:
    """Each cell's fingerprint from today's inputs, so the get-started pages can say which
    verifications are stale; None where the matrix is absent or unreadable (a report of
    results copied elsewhere then judges no staleness rather than failing)."""
    if not matrix_file.is_file():
        return None
    try:
        return _TodayFingerprints(load_matrix(matrix_file))
    except OotaError as exc:
        logging.getLogger("oota").debug("no staleness on the get-started pages: %s", exc)
        return None


def hosts(matrix_path: str, vendors: list[str] | None, console: Console,
          hosts_file: str | None = None) -> list[dict[str, Any]]:
    """Probe each engine for every selected vendor's hardware, on the host that would run its
    cells (the local engine, or each host of ``hosts_file`` that takes the vendor). No cell is
    built; on an engine of another machine the probe runs in the vendor's base image, which is
    made available there first."""
    matrix = load_matrix(matrix_path)
    names = vendors or list(matrix.vendors)
    cells = [select(matrix, plan(matrix, [name]))[:1] or plan(matrix, [name])[:1]
             for name in names]
    firsts = [c[0] for c in cells if c]
    rows: list[dict[str, Any]] = []
    if hosts_file is None:
        try:
            stations = [Station("", DockerEngine(), cache=matrix.root / ".oota-cache")]
        except OotaError as exc:
            return [_host_row("local", cell.vendor.name, None, str(exc)) for cell in firsts]
    else:
        fleet = load_hosts(Path(hosts_file), tuple(matrix.vendors))
        stations, down = _stations(fleet, firsts, console, matrix.root / ".oota-cache")
        rows += [_host_row(d.name, name, None, d.why) for d in down for name in names
                 if name in d.vendors]
    workdir = matrix.root / ".oota-cache"
    for station in stations:
        for cell in firsts:
            if not station.serves(cell.vendor.name):
                continue

            def base_for(c: Cell, s: Station = station) -> Base:
                return s.base(c, console, workdir, {})

            check = station.check(cell, console, base_for, f"hosts-{uuid.uuid4().hex[:8]}")
            rows.append(_host_row(station.name, cell.vendor.name, check, ""))
    return rows


def _host_row(host: str, vendor: str, check: HostCheck | None, error: str) -> dict[str, Any]:
    """One line of `invoke hosts`; ``answered`` False: the host's engine did not answer."""
    if check is None:
        return {"host": host, "vendor": vendor, "supported": False, "answered": False,
                "driver": None, "reasons": [error.splitlines()[0]], "facts": {}}
    return {"host": host, "vendor": vendor, "supported": check.supported, "answered": True,
            "driver": check.driver, "reasons": list(check.reasons), "facts": check.facts}


def hosts_exit_code(rows: list[dict[str, Any]]) -> int:
    """`invoke hosts`: 0 when every host answered, 4 when some did not, 3 when none did (the
    probe found nothing out: an environment problem, as for a build)."""
    silent = [row for row in rows if not row.get("answered", True)]
    if not silent:
        return EXIT_OK
    return EXIT_HOST_LOST if len(silent) < len(rows) else EXIT_ENVIRONMENT


def format_hosts(rows: list[dict[str, Any]], fmt: str) -> str:
    """`invoke hosts`'s output: a line per vendor, or JSON (``fmt`` is one of :data:`FORMATS`)."""
    if fmt == "json":
        return json.dumps(rows, indent=2)
    lines = []
    for row in rows:
        state = "available" if row["supported"] else \
            "unsupported here" if row.get("answered", True) else "no answer"
        driver = f" (driver {row['driver']})" if row["driver"] else ""
        reasons = "" if row["supported"] else ": " + "; ".join(row["reasons"])
        lines.append(f"{row['host']:<12} {row['vendor']:<10} {state}{driver}{reasons}")
    return "\n".join(lines)


def verify_here(matrix_path: str, vendors: list[str] | None, results_dir: Path,
                suite_layers: tuple[str, ...], python: str | None) -> Result:
    """``verify --here``: one vendor's suites against ``python`` (default: this interpreter)."""
    if not vendors or len(vendors) != 1:
        raise InputError("--here needs exactly one --vendor (the vendor whose checks apply)")
    matrix = load_matrix(matrix_path)
    plan(matrix, vendors)
    return inplace.verify_here(matrix, vendors[0], results_dir, layers=suite_layers,
                               python=python or sys.executable)


def judge(paths: Sequence[str], *, python: str | None, image: str | None,
          matrix_path: str, check: bool) -> judging.Replay:
    """``judge``: recorded cases judged again by the checkout's judge, with ``python`` (it
    must have torch), else this interpreter when it has torch, else in ``image`` (default:
    the CPU vendor's default cell as ``build`` tags it) on the environment's engine."""
    files = judging.recordings(paths)
    if python is not None and image is not None:
        raise InputError("--python and --image name two places to judge in: give one")
    if python is not None:
        if not judging.has_torch(python):
            raise InputError(f"--python {python}: it cannot import torch; name an interpreter "
                             "that has torch")
        return judging.with_python(python, files, check)
    if image is None and judging.has_torch(sys.executable):
        return judging.with_python(sys.executable, files, check)
    return judging.in_image(DockerEngine(), image or default_torch_image(matrix_path), files,
                            check)


def default_torch_image(matrix_path: str) -> str:
    """The tag ``build --vendor=cpu`` gives the CPU vendor's default cell: an image with torch
    and nothing else that ``judge`` needs."""
    matrix = load_matrix(matrix_path)
    if "cpu" not in matrix.vendors:
        raise InputError(f"{matrix_path} has no cpu vendor to take an image with torch from: "
                         "pass --image or --python")
    cells = select(matrix, plan(matrix, ["cpu"]))
    return BuildOptions(results_dir=Path("results")).tag_for(cells[0])


def lint(matrix_path: str) -> list[str]:
    return lint_project(matrix_path)


def release_check(matrix_path: str, *, torch: str | None, index_url: str, fmt: str, update: bool,
                  vendors: list[str] | None, timeout: str | None) -> ReleaseOutcome:
    """``invoke release-check``: the formatted check and how many gaps it found."""
    return run_release_check(matrix_path, torch=torch, index_url=index_url, fmt=fmt,
                             update=update, vendors=vendors,
                             timeout=timeout or REQUEST_TIMEOUT)


def lock_status(matrix_path: str, vendors: list[str] | None
                ) -> list[tuple[str, lockfile.Status, Path]]:
    """``invoke lock --check``: every cell's lock status, no Docker needed."""
    matrix, cells = cells_for(matrix_path, vendors)
    return [(c.id, lockfile.lock_status(matrix, c), lockfile.lock_path(matrix, c))
            for c in cells]


def lock(matrix_path: str, vendors: list[str] | None, ids: list[str] | None, everything: bool,
         console: Console, options: locks.LockOptions) -> list[locks.LockOutcome]:
    matrix, cells = cells_for(matrix_path, vendors, ids, everything)
    return locks.lock_cells(matrix, cells, console, options)


# --- History: every run kept (oota/history). ----------------------------------------------

HISTORY_FORMATS = FORMATS


@dataclass(frozen=True, kw_only=True, slots=True)
class History:
    """Where a run is appended (``location`` None: ``--no-history``), as what, and the project
    whose git revision it records."""

    location: Location | None
    origin: Origin
    root: Path


def history_location(flag: str | None, *, off: bool = False, root: Path | None = None,
                     env: Mapping[str, str] | None = None) -> Location | None:
    """The store ``--history``/``OOTA_HISTORY`` name (default: history.db in ``root``), or
    None with ``--no-history``. A URL that cannot be a store is InputError (exit 2)."""
    if off and flag:
        raise InputError("--history and --no-history exclude each other")
    if off:
        return None
    return locate(flag, os.environ if env is None else env, root or Path.cwd())


def history_target(flag: str | None, off: bool, origin: Origin, root: Path, *,
                   used: bool = True, env: Mapping[str, str] | None = None) -> History:
    """The flags of a task that appends its run (checked before the run starts). ``used``
    False: this invocation appends nothing (a report without --merge: its build or verify
    added the run already; it still reads the history for its HUD)."""
    location = history_location(flag, off=off, root=root, env=env)
    return History(location=location if used else None, origin=origin, root=root)


def record_history(target: History, results: Sequence[Result]) -> list[str]:
    """Append ``results`` as one run (lines for stderr). A history that cannot be written is a
    warning: the results are on disk already, and the run's exit code is its own."""
    location = target.location
    if location is None or not results:
        return []
    run = run_record(results, target.origin, git_revision(target.root))
    try:
        done = history_store.append(history_store.open_store(location), run)
    except history_store.HistoryUnavailable as exc:
        return [f"warning: {exc}; the results are in their folder (import them later with "
                "`./oota.sh history import`)"]
    return [f"history: run {done.run_key} ({target.origin}, {done.added} cell(s) added) in "
            f"{location.shown}"]


def git_revision(root: Path) -> str | None:
    """The commit the project is at (None outside a git checkout, or without git)."""
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], text=True,
                              capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


HISTORY_ACTIONS = ("import", "query", "digest")


@dataclass(frozen=True, kw_only=True, slots=True)
class Reported:
    """A report written, and lines for stderr: the run appended, the HUD left out and why;
    ``signatures``: what the results' signatures said (merged reports, or with ``--key``)."""

    report: Report
    hud: bool
    notes: tuple[str, ...]
    signatures: tuple[str, ...] = ()


def report_with_history(results_dir: str, out_dir: str, previous_dir: str | None, *,
                        merge: list[str] | None, formats: str | None,
                        artifact_url: str | None, env: Mapping[str, str], target: History,
                        shown: Location | None, hud_runs: int,
                        keys: list[str] | None = None, replace: bool = False,
                        matrix: str = "matrix.yaml") -> Reported:
    """:func:`report`, appending a merged run to ``target`` and writing the HUD of the
    history at ``shown`` (None: ``--no-history``) over its last ``hud_runs`` runs. Results
    are checked against their signatures with the public ``keys`` (``--key``: one whose
    signature does not check is refused)."""
    checker = Checker(keys=tuple(signing.load_public(Path(k)) for k in keys or ()))
    notes: list[str] = []
    made: list[HudInput] = []

    def history(rep: Report) -> HudInput | None:
        notes.extend(record_history(target, rep.results))  # the HUD then shows this run too
        source, why = hud_source(shown, hud_runs, target.root)
        notes.extend([why] if why else [])
        made.extend([source] if source else [])
        return source

    rep = report(results_dir, out_dir, previous_dir, merge=merge, formats=formats,
                 artifact_url=artifact_url, env=env, history=history, accept=checker,
                 replace=replace, matrix=matrix)
    said = checker.summary() if rep.merged or keys else []
    return Reported(report=rep, hud=bool(made), notes=tuple(notes), signatures=tuple(said))


@dataclass(frozen=True, kw_only=True, slots=True)
class Finished:
    """The report after a build or verify: how many cells it shows (None: ``reports/`` was
    left as it was, the notes say why), whether it has a HUD, lines for stderr."""

    cells: int | None
    hud: bool
    notes: tuple[str, ...]


def finish_report(results_dir: str, target: History) -> Finished:
    """The report a build or verify writes after appending its run to ``target``: the HUD
    shows that history (with this run) over its last runs, as ``invoke report`` would. When
    these results hold less than ``reports/`` shows (a verify of one cell into another
    folder), ``reports/`` is left as it was: the cells' outcomes are the run's, not the report."""
    source, why = hud_source(target.location, hud.DEFAULT_RUNS, target.root)
    try:
        rep = report(results_dir, "reports", history=lambda _: source)
    except ReportShrinks as exc:
        return Finished(cells=None, hud=False, notes=(
            f"note: reports/ left as it was: {exc.what}; `invoke report --results "
            f"{results_dir} --out OTHER` writes a report of these results",))
    return Finished(cells=len(rep.results), hud=source is not None, notes=(why,) if why else ())


def hud_runs(value: str | int) -> int:
    """``--hud-runs N``: how many runs the HUD shows (a whole number, 1 or more)."""
    text = str(value).strip()
    if not text.isdigit() or len(text) > 9 or int(text) < 1:
        raise InputError(f"--hud-runs {str(value)[:20]!r} is not a number of runs; give 1 or "
                         f"more, e.g. --hud-runs {hud.DEFAULT_RUNS}")
    return int(text)


def since(value: str) -> dt.timedelta:
    """``--since 24h``, ``3d`` or ``1w``: the digest's window."""
    try:
        return hud.parse_since(value)
    except ValueError:
        raise InputError(f"--since {value[:40]!r} is not a window; give hours, days or weeks up "
                         f"to {hud.LONGEST_SINCE_DAYS} days, e.g. --since 24h, --since 3d or "
                         "--since 1w") from None


def hud_source(location: Location | None, runs: int, root: Path,
               now: dt.datetime | None = None) -> tuple[HudInput | None, str]:
    """The history the HUD shows, or None and why not (a line for stderr; "" with
    ``--no-history``). A history file that does not exist is not created by reading it."""
    if location is None:
        return None, ""
    try:
        timeline = _timeline(location)
    except history_store.HistoryUnavailable as exc:
        return None, f"no HUD: {exc}"
    if timeline is None or not timeline.runs:
        return None, (f"no HUD: the history {location.shown} holds no run yet (build, verify "
                      "or `./oota.sh history import` add runs)")
    return HudInput(timeline=timeline, policy=policy_at(root), runs=runs,
                    now=now or dt.datetime.now(dt.timezone.utc)), ""


def _timeline(location: Location) -> Timeline | None:
    file = location.file
    if file is not None and not file.is_file():
        return None
    return history_store.read_timeline(history_store.open_store(location))


def history_digest(location: Location | None, *, window: dt.timedelta, root: Path,
                   now: dt.datetime | None = None) -> str:
    """``history digest``: the Markdown digest of the last ``window`` (hud.md's text)."""
    if location is None:
        raise InputError("history digest with --no-history has nothing to read")
    source, why = hud_source(location, hud.DEFAULT_RUNS, root, now)
    if source is None:
        raise history_store.HistoryUnavailable(why.removeprefix("no HUD: "))
    page = hud.build(replace(source, since=window), {})
    return hud.to_markdown(page.digest, page.regressions)


def check_history_flags(action: str, *, dirs: list[str] | None, selection: dict[str, str | None],
                        fmt: str, window: str | None = None) -> None:
    """``history ACTION``'s flags: each applies to one action (InputError, exit 2)."""
    choice("history", action, HISTORY_ACTIONS)
    given = [f"--{name}" for name, value in selection.items() if value]
    if action != "query" and (given or fmt != "table"):
        raise InputError(f"{(given or ['--format'])[0]} applies to `history query`; "
                         f"`history {action}` takes {_TAKES[action]}")
    if action != "import" and dirs:
        raise InputError(f"--dir applies to `history import`; `history {action}` takes "
                         f"{_TAKES[action]}")
    if action != "digest" and window is not None:
        raise InputError(f"--since applies to `history digest`; `history {action}` takes "
                         f"{_TAKES[action]}")


_TAKES = {"import": "--dir", "query": "--vendor, --cell and --test",
          "digest": "--since (e.g. --since 24h)"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Imported:
    """What ``history import`` did: a line per run appended, and results it could not read."""

    appended: tuple[history_store.Appended, ...]
    problems: tuple[str, ...]


def history_import(location: Location | None, folders: list[str] | None) -> Imported:
    """Load result folders (``results/<cell>/result.json``) into the history, a run per run
    id they carry; results already there are left alone."""
    if location is None:
        raise InputError("history import with --no-history has nowhere to write")
    if not folders:
        raise InputError("name a results folder to import: --dir results (repeatable)")
    missing = [f for f in folders if not Path(f).is_dir()]
    if missing:
        raise InputError(f"--dir {missing[0]}: no such folder; name a results folder (one "
                         "result.json per cell folder in it)")
    store = history_store.open_store(location)
    appended: list[history_store.Appended] = []
    problems: list[str] = []
    for folder in folders:
        results, bad = load_all(Path(folder))
        problems += bad or ([] if results else [f"{folder}: no */result.json in it"])
        appended += [history_store.append(store, run_record(group, "import", None))
                     for group in group_by_run(results)]
    return Imported(appended=tuple(appended), problems=tuple(problems))


def history_query(location: Location | None, *, vendor: str | None, cell: str | None,
                  test: str | None, fmt: str) -> str:
    """Every run where the selection changed outcome, newest first, with what changed in
    its inputs: a table, or JSON (``fmt`` is one of :data:`HISTORY_FORMATS`)."""
    if location is None:
        raise InputError("history query with --no-history has nothing to read")
    choice("--format", fmt, HISTORY_FORMATS)
    store = history_store.open_store(location)
    found = history_changes.changes(history_store.outcomes(store, vendor=vendor, cell=cell,
                                                           test=test))
    if fmt == "json":
        return json.dumps([c.to_json() for c in found], indent=2)
    return history_changes.table(found)
