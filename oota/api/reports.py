"""The ``report`` task, and the report that a build or verify writes after its run: results
(and their signatures) in, reports/ out, with the HUD of the history."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from oota.api.flags import DEFAULT_RESULTS, report_formats
from oota.api.history import History, hud_source, record_history
from oota.config.matrix import Matrix, load_matrix
from oota.errors import (
    InputError,
    OotaError,
)
from oota.history.location import Location
from oota.plan import plan
from oota.render import (
    cell_fingerprint,
)
from oota.report import crcr, hud
from oota.report.data import Report, collect_run
from oota.report.hud import HudInput
from oota.report.write import (
    Extras,
    ReportShrinks,
    check_folders,
    check_not_less,
    marked,
    read_report,
    write_pages,
)
from oota.results.model import Result
from oota.results.signed import Checker
from oota.supply import signing


def _extras(results_dir: str, merge: list[str] | None, formats: str | None,
            artifact_url: str | None, env: Mapping[str, str] | None,
            public_url: str | None = None) -> Extras:
    """The report task's flags checked against each other, and what ``--format`` adds."""
    if merge and results_dir != DEFAULT_RESULTS:
        raise InputError(f"--merge and --results {results_dir} exclude each other: name every "
                         "folder to merge with --merge")
    extra = report_formats(formats)
    if artifact_url is not None and "crcr" not in extra:
        raise InputError("--artifact-url goes into crcr.json only; add --format crcr")
    ci = crcr.CiRun.from_env(env or {}) if "crcr" in extra else crcr.CiRun()
    return Extras(formats=extra, ci=ci, artifact_url=crcr.artifact_url(artifact_url, ci),
                  public_url=public_url)


def report(results_dir: str, out_dir: str, previous_dir: str | None = None, *,
           merge: list[str] | None = None, formats: str | None = None,
           artifact_url: str | None = None, env: Mapping[str, str] | None = None,
           accept: Callable[[Path], str] | None = None, replace: bool = False,
           matrix: str = "matrix.yaml", parity: str | None = None,
           public_url: str | None = None) -> Report:
    """Write the report (no HUD) from ``results_dir``, or from every ``merge`` folder;
    ``formats`` adds outputs (crcr.json, described by the CI run of ``env``: GitHub Actions'
    variables); ``parity`` and ``public_url`` as for :func:`report_with_history`."""
    extras = _extras(results_dir, merge, formats, artifact_url, env, public_url)
    rep = _read(results_dir, out_dir, previous_dir, merge, accept, replace, matrix, parity)
    _write(rep, out_dir, results_dir, merge, extras, None, matrix)
    return rep


def _read(results_dir: str, out_dir: str, previous_dir: str | None, merge: list[str] | None,
          accept: Callable[[Path], str] | None, replace: bool, matrix: str,
          parity: str | None = None) -> Report:
    return read_report(Path(results_dir), Path(out_dir),
                       Path(previous_dir) if previous_dir else None,
                       merge=[Path(m) for m in merge or []], accept=accept, replace=replace,
                       unverified=unverified_facts(Path(matrix)),
                       parity=Path(parity) if parity else None)


def _write(rep: Report, out_dir: str, results_dir: str, merge: list[str] | None,
           extras: Extras, source: HudInput | None, matrix: str) -> None:
    extras = dataclasses.replace(extras, releases=matrix_releases(Path(matrix)))
    write_pages(rep, Path(out_dir), Path(merge[0] if merge else results_dir), extras=extras,
                hud_input=source, current=current_fingerprints(Path(matrix)))


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


def matrix_releases(matrix_file: Path) -> dict[str, tuple[str, ...]]:
    """Each vendor's torch releases in today's matrix (its release cells'), newest first; {}
    where the matrix is absent or unreadable (the scorecards then name no missing release)."""
    if not matrix_file.is_file():
        return {}
    try:
        cells = plan(load_matrix(matrix_file))
    except OotaError as exc:
        logging.getLogger("oota").debug("no matrix releases for the scorecards: %s", exc)
        return {}
    found: dict[str, set[Version]] = {}
    for cell in cells:
        if cell.channel is None and cell.torch is not None:
            found.setdefault(cell.vendor.name, set()).add(cell.torch)
    return {vendor: tuple(str(v) for v in sorted(versions, reverse=True))
            for vendor, versions in found.items()}


def unverified_facts(matrix_file: Path) -> dict[str, tuple[str, ...]]:
    """Per cell of today's matrix, the unverified vendor facts it rests on ({} where the
    matrix is absent or unreadable: nothing is marked then)."""
    if not matrix_file.is_file():
        return {}
    try:
        cells = plan(load_matrix(matrix_file))
    except OotaError as exc:
        logging.getLogger("oota").debug("no unverified facts marked: %s", exc)
        return {}
    return {c.id: tuple(f.sentence for f in facts) for c in cells
            if (facts := c.unverified_facts())}


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
                        matrix: str = "matrix.yaml", parity: str | None = None,
                        public_url: str | None = None) -> Reported:
    """:func:`report`, appending a merged run to ``target`` and writing the HUD of the
    history at ``shown`` (None: ``--no-history``) over its last ``hud_runs`` runs. Results
    are checked against their signatures with the public ``keys`` (``--key``: one whose
    signature does not check is refused). ``parity``: a reference recording for the operators
    table; ``public_url``: where the report is published (the scorecards cite it). Read,
    record, then write: the HUD shows the run just appended."""
    extras = _extras(results_dir, merge, formats, artifact_url, env, public_url)
    checker = Checker(keys=tuple(signing.load_public(Path(k)) for k in keys or ()))
    rep = _read(results_dir, out_dir, previous_dir, merge, checker, replace, matrix, parity)
    notes = record_history(target, rep.results)
    source, why = hud_source(shown, hud_runs, target.root)
    notes.extend([why] if why else [])
    _write(rep, out_dir, results_dir, merge, extras, source, matrix)
    said = checker.summary() if rep.merged or keys else []
    return Reported(report=rep, hud=source is not None, notes=tuple(notes),
                    signatures=tuple(said))


@dataclass(frozen=True, kw_only=True, slots=True)
class Finished:
    """The report after a build or verify: how many cells it shows (None: ``reports/`` was
    left as it was, the notes say why), whether it has a HUD, lines for stderr."""

    cells: int | None
    hud: bool
    notes: tuple[str, ...]


def finish_report(ran: Sequence[Result], results_dir: str, target: History,
                  out_dir: str = "reports") -> Finished:
    """The report a build or verify writes after appending its run to ``target``: the run's
    results as they are in memory (``ran``: what the results folder holds for its cells),
    beside the folder's other cells, with the HUD of that history (this run included) over
    its last runs, as ``invoke report`` would. When these results hold less than ``reports/``
    shows (a verify of one cell into another folder), ``reports/`` is left as it was: the
    cells' outcomes are the run's, not the report."""
    source, why = hud_source(target.location, hud.DEFAULT_RUNS, target.root)
    out = Path(out_dir)
    check_folders(Path(results_dir), out)
    rep = marked(collect_run(Path(results_dir), ran), unverified_facts(Path("matrix.yaml")))
    try:
        check_not_less(out, rep)
    except ReportShrinks as exc:
        return Finished(cells=None, hud=False, notes=(
            f"note: {out_dir}/ left as it was: {exc.what}; `invoke report --results "
            f"{results_dir} --out OTHER` writes a report of these results",))
    write_pages(rep, out, Path(results_dir), hud_input=source,
                extras=Extras(releases=matrix_releases(Path("matrix.yaml"))),
                current=current_fingerprints(Path("matrix.yaml")))
    return Finished(cells=len(rep.results), hud=source is not None, notes=(why,) if why else ())
