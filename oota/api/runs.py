"""The tasks that drive Engines: build and verify (on one Engine or a fleet), publish, pull,
probe the hosts, verify here, judge recordings again; and signing what a run wrote."""

from __future__ import annotations

import dataclasses
import logging
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from oota.api.cells import cells_for
from oota.api.flags import DEFAULT_JOBS, engine_endpoint, folder
from oota.api.tables import HostRow, host_row
from oota.config.hostsfile import HostsFile, load_hosts
from oota.config.matrix import Matrix, load_matrix
from oota.config.vendors import Vendor
from oota.console import Console
from oota.engine.base import Endpoint, Engine, RegistryAuth, TlsFiles
from oota.engine.docker import DockerEngine
from oota.errors import (
    EXIT_FAILED,
    EXIT_HOST_LOST,
    EXIT_OK,
    EnvironmentProblem,
    InputError,
    OotaError,
)
from oota.execute import inplace, judge as judging
from oota.execute.attach import Signer
from oota.execute.bases import Base
from oota.execute.build import BuildOptions
from oota.execute.fleet import Down, Station, lost_hosts, run_on_stations
from oota.execute.hosts import HostCheck
from oota.execute.publish import Outcome as PublishOutcome, publish_cells
from oota.execute.pull import Pulled, pull_and_verify
from oota.plan import Cell, plan, select
from oota.project import Project, command_name
from oota.render import cell_manifest
from oota.results.model import Result
from oota.results.signed import check_recording, key_id, sign_recording, sign_result
from oota.results.store import CASES_FILE, SIGNATURE_FILE
from oota.supply import signing
from oota.vocab import BAD


@dataclass(frozen=True, kw_only=True, slots=True)
class Ran:
    """What a build or verify run gives the task: each cell's result, the hosts that stopped
    answering (or never answered) on the way, and the earlier results some cells' folders
    keep instead of this run's (cell id -> result; :class:`~oota.execute.fleet.Outcomes`).
    The stages after the run (sign, record in the history, report) take these values."""

    results: list[Result]
    lost: tuple[str, ...] = ()
    kept: Mapping[str, Result] = field(default_factory=dict)

    def written(self) -> list[Result]:
        """The results this run wrote into the results folder (what it signs)."""
        return [r for r in self.results if r.cell.id not in self.kept]

    def held(self) -> list[Result]:
        """What the results folder holds for the run's cells now (what the report shows)."""
        return [self.kept.get(r.cell.id, r) for r in self.results]


def _nothing() -> None:
    return None


def build(matrix_path: str, vendors: list[str] | None, ids: list[str] | None, everything: bool,
          options: BuildOptions, console: Console, *, build_images: bool = True,
          hosts_file: str | None = None, jobs: int = DEFAULT_JOBS,
          hold: Callable[[], None] = _nothing) -> Ran:
    """Build (optionally) and verify the selected cells: on the local engine, ``jobs`` at once,
    or on the engines of ``hosts_file`` (hosts.yaml; each host's own ``jobs``). ``hold`` is
    called once the input is checked and the Engines reached, before the run writes
    (:class:`~oota.results.store.Writer`)."""
    matrix, cells = cells_for(matrix_path, vendors, ids, everything)
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
    hold()
    run = run_on_stations(matrix, cells, stations, console, options, build=build_images,
                          down=down)
    return Ran(results=run.results, kept=run.kept, lost=tuple(lost_hosts(stations))
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
            key: str | None = None, ca: Path | None = None, hosts_file: str | None = None,
            host: str | None = None, hold: Callable[[], None] = _nothing
            ) -> list[PublishOutcome]:
    """Push the selected cells' verified images to ``registry`` with their SBOM, provenance
    and (with ``key``, the lab's private key) signature; refuse the others. Each image is
    pushed from the Engine that verified it, among those of ``hosts_file`` (``--hosts``) or
    ``host`` (``--host``; default: the environment's Engine; not both: the request refuses
    that)."""
    signer = Signer(key=signing.load_private(Path(key), signing.password_from_env())
                    if key else None, auth=auth, ca=ca)
    matrix, cells = cells_for(matrix_path, vendors, ids, everything)
    if not cells:
        console.warn("no cells selected")
        return []
    engines = _publishing_engines(matrix, cells, console, hosts_file, host)
    if signer.key is None:
        console.warn("no --key: the images are published unsigned "
                     f"(`{command_name()} keygen` makes a key)")
    hold()  # each push is recorded in its cell's result.json
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


def sign_results(ran: Ran, results_dir: str | Path,
                 key: signing.PrivateKey | None) -> list[str]:
    """Sign each result this run wrote (``result.sig`` beside it), from memory; lines for
    stderr. A folder that kept an earlier result is left as it is."""
    if key is None:
        return []
    written = ran.written()
    recordings = 0
    for result in written:
        folder = Path(results_dir) / result.cell.id
        sign_result(folder, result, key)
        if (folder / CASES_FILE).is_file():
            sign_recording(folder / CASES_FILE, key)
            recordings += 1
    return [f"signed {len(written)} result(s) with key {key_id(key.public_key())} "
            f"({SIGNATURE_FILE} beside each result.json)"
            + (f" and {recordings} recording(s) ({CASES_FILE}.sig)" if recordings else "")]


def keygen(out: str) -> signing.KeyFiles:
    """A new signing key pair in ``out`` (``oota.key``, encrypted with OOTA_SIGNING_PASSWORD
    when set, and ``oota.pub``)."""
    where = folder("--out", out)
    where.mkdir(parents=True, exist_ok=True)
    return signing.generate(where, signing.password_from_env())


def pull(reference: str, *, key: str | None, auth: RegistryAuth | None, ca: Path | None,
         workdir: Path, host: str | None = None, layers: tuple[str, ...] = ()) -> Pulled:
    """Check ``reference``'s signature and provenance, pull it by digest, re-verify it on the
    Engine ``host`` names (``--host``: as a hosts.yaml endpoint or context; default: the
    environment's engine), every layer or ``layers`` only. The checks talk to the registry, the
    pull and the run to the Engine."""
    endpoint = engine_endpoint(host)
    public = signing.load_public(Path(key)) if key else None
    return pull_and_verify(DockerEngine(endpoint), reference, key=public, auth=auth,
                           ca=ca, workdir=workdir, layers=layers)


def exit_code_for(ran: Ran) -> int:
    """0 when there are results and none failed, errored or was interrupted (oota.vocab.BAD);
    4 when that holds but a host stopped answering during the run (its cells were retried on
    other hosts); 1 otherwise."""
    results = ran.results
    if not results or any(r.status in BAD for r in results):
        return EXIT_FAILED
    return EXIT_HOST_LOST if ran.lost else EXIT_OK


def hosts(matrix_path: str, vendors: list[str] | None, console: Console,
          hosts_file: str | None = None) -> list[HostRow]:
    """Probe each engine for every selected vendor's hardware, on the host that would run its
    cells (the local engine, or each host of ``hosts_file`` that takes the vendor). No cell is
    built; on an engine of another machine the probe runs in the vendor's base image, which is
    made available there first."""
    matrix = load_matrix(matrix_path)
    names = vendors or list(matrix.vendors)
    cells = [select(matrix, plan(matrix, [name]))[:1] or plan(matrix, [name])[:1]
             for name in names]
    firsts = [c[0] for c in cells if c]
    rows: list[HostRow] = []
    if hosts_file is None:
        try:
            stations = [Station("", DockerEngine(), cache=matrix.root / ".oota-cache")]
        except OotaError as exc:
            return [host_row("local", cell.vendor.name, None, str(exc)) for cell in firsts]
    else:
        fleet = load_hosts(Path(hosts_file), tuple(matrix.vendors))
        stations, down = _stations(fleet, firsts, console, matrix.root / ".oota-cache")
        rows += [host_row(d.name, name, None, d.why) for d in down for name in names
                 if name in d.vendors]
    workdir = matrix.root / ".oota-cache"
    for station in stations:
        for cell in firsts:
            if not station.serves(cell.vendor.name):
                continue

            def base_for(c: Cell, s: Station = station) -> Base:
                return s.base(c, console, workdir, {})

            check = station.check(cell, console, base_for, f"hosts-{uuid.uuid4().hex[:8]}")
            rows.append(host_row(station.name, cell.vendor.name, check, "",
                                 _toolkit_verdicts(matrix, cell.vendor, check)))
    return rows


def _toolkit_verdicts(matrix: Matrix, vendor: Vendor, check: HostCheck
                      ) -> tuple[tuple[str, str], ...]:
    """For each toolkit version of the vendor's cells (CUDA 12.6, 13.0, 13.2), what its
    published driver rules say of this host's driver."""
    if vendor.toolkit is None or not vendor.host.driver.rules:
        return ()
    versions = sorted({str(c.toolkit) for c in plan(matrix, [vendor.name]) if c.toolkit},
                      key=Version)
    verdicts = []
    for version in versions:
        verdict = check.for_cell(version, vendor)
        verdicts.append((f"{vendor.toolkit.name} {version}", verdict.reason or verdict.note))
    return tuple(verdicts)


def verify_here(matrix_path: str, vendors: list[str] | None, results_dir: Path,
                suite_layers: tuple[str, ...], python: str | None,
                hold: Callable[[], None] = _nothing) -> Result:
    """``verify --here``: one vendor's suites against ``python`` (default: this interpreter)."""
    if not vendors or len(vendors) != 1:
        raise InputError("--here needs exactly one --vendor (the vendor whose checks apply)")
    matrix = load_matrix(matrix_path)
    plan(matrix, vendors)
    return inplace.verify_here(matrix, vendors[0], results_dir, layers=suite_layers,
                               python=python or sys.executable, hold=hold)


def judge(paths: Sequence[str], *, python: str | None, image: str | None,
          matrix_path: str, check: bool, keys: Sequence[str] = ()) -> judging.Replay:
    """``judge``: recorded cases judged again by the checkout's judge, with ``python`` (it
    must have torch), else this interpreter when it has torch, else in ``image`` (default:
    the CPU vendor's default cell as ``build`` tags it) on the environment's engine. With
    ``keys`` (the labs' public keys), each recording's signature must check with one of them,
    or nothing is judged; the unsigned ones are named in the replay's ``signatures``."""
    files = judging.recordings(paths)
    signatures = _recording_signatures(files, keys)
    replay = _judged(files, python=python, image=image, matrix_path=matrix_path, check=check)
    return dataclasses.replace(replay, signatures=signatures)


def _recording_signatures(files: Sequence[Path], keys: Sequence[str]) -> tuple[str, ...]:
    if not keys:
        return ()
    public = [signing.load_public(Path(key)) for key in keys]
    lines, unsigned = [], []
    for path in files:
        try:
            how = check_recording(path, public)
        except ValueError as exc:
            raise InputError(f"{exc}; refused") from None
        if how:
            lines.append(f"{path}: {how}")
        else:
            unsigned.append(str(path))
    return (f"signatures: {len(lines)} recording(s) signed by --key, {len(unsigned)} "
            "unsigned", *(f"  unsigned: {path}" for path in unsigned))


def vendor_specs(matrix_path: str) -> dict[str, Any]:
    """Each vendor's verify section as its cells' cell.json holds it (tolerances, the judge's
    overrides, compare_as): the replay takes the one a recording's cell names, from this
    checkout's data. {} where the matrix cannot be read (a recording judged outside a
    project: oota's own numbers apply)."""
    try:
        matrix = load_matrix(matrix_path)
        cells = plan(matrix)
    except (InputError, OSError):
        return {}
    found: dict[str, Any] = {}
    for cell in cells:
        found.setdefault(cell.vendor.name, cell_manifest(cell)["verify"])
    return found


def _judged(files: Sequence[Path], *, python: str | None, image: str | None,
            matrix_path: str, check: bool) -> judging.Replay:
    vendors = vendor_specs(matrix_path)
    if python is not None and image is not None:
        raise InputError("--python and --image name two places to judge in: give one")
    if python is not None:
        if not judging.has_torch(python):
            raise InputError(f"--python {python}: it cannot import torch; name an interpreter "
                             "that has torch")
        return judging.with_python(python, files, check, vendors)
    if image is None and judging.has_torch(sys.executable):
        return judging.with_python(sys.executable, files, check, vendors)
    return judging.in_image(DockerEngine(), image or default_torch_image(matrix_path), files,
                            check, vendors)


def default_torch_image(matrix_path: str) -> str:
    """The tag ``build`` gives the default cell of the matrix's first vendor whose device is
    the CPU (vendor.yaml ``device: cpu``, no extension): an image with torch and nothing else
    that ``judge`` needs."""
    matrix = load_matrix(matrix_path)
    plain = [name for name, vm in matrix.vendors.items()
             if vm.vendor.device == "cpu" and not vm.vendor.verify.extensions]
    if not plain:
        raise InputError(f"{matrix_path} has no vendor with device: cpu to take an image with "
                         "torch from: pass --image or --python")
    cells = select(matrix, plan(matrix, plain[:1]))
    return BuildOptions(results_dir=Project.of(matrix_path).results).tag_for(cells[0])
