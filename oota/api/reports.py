"""The ``report`` task, and the report that a build or verify writes after its run: results
(and their signatures) in, reports/ out, with the HUD of the history."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

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
from oota.report.data import Report
from oota.report.hud import HudInput
from oota.report.write import Extras, ReportShrinks, write_report
from oota.results.signed import Checker
from oota.supply import signing


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
                        replace=replace, unverified=unverified_facts(Path(matrix)))


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
