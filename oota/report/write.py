"""Writing ``reports/``: every file into a temporary folder beside it, then swapped in whole.

A reader (a browser, a web server, a CI artifact upload) sees the previous report or the new
one, never index.html pointing at cell pages that are not there yet; a failure or Ctrl-C
midway leaves the previous report as it was. Because the folder is replaced whole, it must
hold nothing but a report: ``--out`` naming a folder with other files is refused.

The report is read from one results folder, or merged from several (``--merge``); extra
outputs (``--format crcr``: crcr.json for PyTorch's cross-repository CI relay) are written
beside the standard ones.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oota.errors import InputError
from oota.files import REPORT_LIMIT, exclusive, read_bytes, write_atomic, write_json
from oota.project import command_name
from oota.report import crcr, getstarted, hud, scorepages
from oota.report.data import Accept, Report, collect, collect_merged
from oota.report.failures import failed_tests
from oota.report.htmlpages import cell_page, to_html
from oota.report.jsondoc import to_json
from oota.report.markdown import to_markdown
from oota.report.parity import load as load_reference, parity_table
from oota.report.rows import Links
from oota.report.scorecard import ScoreInput
from oota.report.triage import triage
from oota.results.store import RESULT_FILE

# Where each cell's result files are copied, so the report works copied alone to a static host.
FILES = "files"
# Everything a report folder holds; anything else in --out is someone else's file.
REPORT_ENTRIES = frozenset({"index.html", "matrix.md", "results.json", "compare.json", "cells",
                            "start", FILES, crcr.CRCR_FILE, hud.HUD_FILE, hud.DIGEST_FILE,
                            scorepages.SCORE_DIR})
# The outputs --format adds to the standard ones.
EXTRA_FORMATS = ("crcr",)
_NEW, _OLD = "new", "old"


@dataclass(frozen=True, kw_only=True, slots=True)
class Extras:
    """What ``--format`` adds: crcr.json, with the CI run it describes and its artifact URL;
    and what the scorecards take beside the results: where the report is published
    (``--public-url``) and the matrix's releases."""

    formats: tuple[str, ...] = ()
    ci: crcr.CiRun = field(default_factory=crcr.CiRun)
    artifact_url: str | None = None
    public_url: str | None = None
    # Each vendor's torch releases in the matrix, newest first (the scorecards name those
    # without a result); empty where the matrix is not read.
    releases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def _relative(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()


def check_folders(results_dir: Path, out_dir: Path) -> None:
    """Refuse, before anything is read or written, what would lose files or write nonsense."""
    if not results_dir.is_dir():
        what = "is not a folder" if results_dir.exists() else "no such results folder"
        raise InputError(f"--results {results_dir}: {what} (run `{command_name()} build` or "
                         f"`{command_name()} verify` first, or name the folder that holds the "
                         "result files)")
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir}: is a file, not a folder; name a folder for the "
                         "report (default: reports)")
    if out_dir.is_dir():
        foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in REPORT_ENTRIES)
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise InputError(f"--out {out_dir}: holds files that are not part of a report "
                             f"({shown}); the report replaces this folder whole, so name an "
                             "empty folder or a report folder")


def check_merge_folders(folders: Sequence[Path]) -> None:
    """Each --merge DIR must be a results folder (or one cell's folder) holding a result."""
    for folder in folders:
        if not folder.is_dir():
            what = "is not a folder" if folder.exists() else "no such results folder"
            raise InputError(f"--merge {folder}: {what} (name a folder of unpacked results, "
                             "e.g. artifacts/results-A holding <cell-id>/result.json)")
        if not (folder / RESULT_FILE).is_file() and not any(folder.glob(f"*/{RESULT_FILE}")):
            raise InputError(f"--merge {folder}: holds no result files (<cell-id>/"
                             f"{RESULT_FILE}); was the artifact unpacked into it, one folder "
                             "per artifact?")


def _file_folders(report: Report) -> dict[str, str]:
    """Each copy's folder -> where its files go in the report: files/<cell-id>, or
    files/<cell-id>.<n> for the n-th copy of a cell merged from several hosts."""
    return {row.folder: f"{FILES}/{row.id}" + (f".{n}" if group.several else "")
            for group in report.groups for n, row in enumerate(group.copies, 1) if row.folder}


def _copy_files(report: Report, folder: Path) -> None:
    """The result files the pages link (result.json, junit.xml, the logs), into the report:
    linked where the file system allows, else copied. Only regular files: a results folder
    from elsewhere (a CI artifact) may hold a symbolic link to a file of this host, which must
    not be published."""
    where = _file_folders(report)
    for row in report.rows:
        if not row.folder:
            continue
        dest = folder / where[row.folder]
        dest.mkdir(parents=True, exist_ok=True)
        for name in row.files:
            source = Path(row.folder) / name
            if source.is_symlink() or not source.is_file():
                continue
            try:
                os.link(source, dest / name, follow_symlinks=False)
            except OSError:
                _copy(source, dest / name)


def _copy(source: Path, target: Path) -> None:
    """``source`` copied to ``target``; an error names the target (a full disk is the
    report's, not the results folder's)."""
    try:
        shutil.copyfile(source, target, follow_symlinks=False)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(target)) from exc


def _links(report: Report, results_dir: Path, page_dir: Path, up: str = "") -> Links:
    """Each copy's files, in the report's files/ (``up``: '../' from cells/, the pages in
    ``page_dir``); a row read from no folder links to the results folder instead."""
    return Links(results_rel=_relative(results_dir, page_dir), folders={
        source: up + target for source, target in _file_folders(report).items()})


def _write_files(report: Report, folder: Path, results_dir: Path, out_dir: Path,
                 extras: Extras, history: hud.HudInput | None,
                 current: Mapping[str, str] | None = None) -> None:
    """Every file of the report into ``folder``, the result files it links included, so the
    folder works alone (copied to any static host).
    ``history``: what the HUD (hud.html, hud.md) shows; None writes none. ``current``: each
    cell's fingerprint from today's inputs, so the get-started pages can say which are stale."""
    links = _links(report, results_dir, out_dir)
    _copy_files(report, folder)
    if history is not None:
        _write_hud(folder, history, {r.cell.id: r.run_id for r in report.results})
    scored = scorepages.write(folder, report, _file_folders(report), ScoreInput(
        timeline=history.timeline if history else None, public_url=extras.public_url,
        releases=extras.releases))
    write_atomic(folder / "matrix.md", to_markdown(report))
    write_atomic(folder / "index.html", to_html(report, links, hud=history is not None,
                                                scorecards=scored))
    write_json(folder / "results.json", to_json(report, links))
    if report.comparison is not None:
        write_json(folder / "compare.json", report.comparison.to_json())
    if "crcr" in extras.formats:
        write_json(folder / crcr.CRCR_FILE, crcr.checked(crcr.payload(
            report, extras.ci, extras.artifact_url, failures=failed_tests(report),
            triage=triage(report.groups, history.timeline if history else None))))
    cell_links = _links(report, results_dir, out_dir / "cells", "../")
    (folder / "cells").mkdir()
    for group in report.groups:
        write_atomic(_within(folder / "cells", f"{group.id}.html"), cell_page(group, cell_links))
    (folder / "start").mkdir()
    for page in getstarted.start_pages(report, current):
        write_atomic(_within(folder / "start", f"{page.vendor}.html"),
                     getstarted.to_html(page, report.generated_at))
        for cell in page.cells:  # the requirements file a locked cell's pip command reads
            if cell.pip.file_name:
                write_atomic(folder / "start" / page.vendor / cell.pip.file_name,
                             cell.pip.file_text.encode("utf-8"))


def _within(folder: Path, name: str) -> Path:
    """``folder/name``, refused unless it is a file directly in ``folder``: names come from
    result files, and the schema's patterns are the first line of defence, this the second."""
    path = folder / name
    if path.parent.resolve() != folder.resolve() or name in (".", ".."):
        raise InputError(f"a result names a page {name!r} outside the report; refused")
    return path


def _write_hud(folder: Path, history: hud.HudInput, current: dict[str, str | None]) -> None:
    page = hud.build(history, current)
    write_atomic(folder / hud.HUD_FILE, hud.to_html(page))
    write_atomic(folder / hud.DIGEST_FILE, hud.to_markdown(page.digest, page.regressions))


# How long a report waits for another one being written into the same folder.
LOCK_WAIT_S = 300


def _leftovers(out_dir: Path, kind: str) -> list[Path]:
    return sorted(out_dir.parent.glob(f".{out_dir.name}.{kind}-*"))


def _recover(out_dir: Path) -> None:
    """What a killed run left beside the report: its half-written folder goes; a previous
    report it had moved aside but not yet replaced goes back."""
    for stale in _leftovers(out_dir, _NEW):
        shutil.rmtree(stale, ignore_errors=True)
    for old in _leftovers(out_dir, _OLD):
        if not out_dir.exists():
            old.rename(out_dir)
        else:
            shutil.rmtree(old, ignore_errors=True)


def _swap(new: Path, out_dir: Path) -> None:
    """Put ``new`` in the place of ``out_dir``; on any failure ``out_dir`` stays as it was."""
    if not out_dir.exists():
        new.rename(out_dir)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.{_OLD}-", dir=out_dir.parent))
    out_dir.replace(old)  # an empty folder: replaced
    try:
        new.rename(out_dir)
    except BaseException:
        old.rename(out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)


class ReportShrinks(InputError):
    """The new report would hold fewer results than the one it replaces; ``what`` says how."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(f"{what}; nothing written (a report is replaced only by one holding at "
                         "least the results it had): check the results folder, write elsewhere "
                         "with --out, or replace it anyway with --replace")


def shown_results(out_dir: Path) -> Counter[str] | None:
    """How many results (copies) of each cell the report in ``out_dir`` shows; None when there
    is none, or its results.json is not a report oota can read (then nothing is lost)."""
    try:
        data = json.loads(read_bytes(out_dir / "results.json", REPORT_LIMIT))
        cells = data["cells"] if data.get("schema", "").startswith("oota.report/") else None
        return Counter({str(c["id"]): len(c.get("copies") or [c]) for c in cells or []}) \
            if cells is not None else None
    except (OSError, ValueError, LookupError, TypeError, AttributeError, RecursionError):
        return None


def check_not_less(out_dir: Path, report: Report) -> None:
    """Refuse (ReportShrinks) a report that holds fewer results of any cell than the report it
    would replace: an empty or mistaken --results, folders whose results are all corrupt, or
    a verify of one cell into another folder must not wipe a lab's report."""
    before = shown_results(out_dir)
    if not before:
        return
    after = Counter({group.id: len(group.copies) for group in report.groups})
    lost = sorted(cell for cell, n in before.items() if after[cell] < n)
    if lost:
        named = ", ".join(lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
        why = f" (refused: {report.problems[0]})" if report.problems else ""
        raise ReportShrinks(f"{out_dir}/ shows {sum(before.values())} result(s) of "
                            f"{len(before)} cell(s); these results hold {sum(after.values())}, "
                            f"without {named}{why}")


def read_report(results_dir: Path, out_dir: Path, previous_dir: Path | None = None, *,
                merge: Sequence[Path] = (), accept: Accept | None = None,
                replace: bool = False,
                unverified: Mapping[str, tuple[str, ...]] | None = None,
                parity: Path | None = None) -> Report:
    """The report as data, read from ``results_dir`` (and an earlier run's, to compare), or
    from every ``merge`` folder instead; ``accept`` may refuse a result file (its signature),
    which then counts as unreadable. ``unverified`` maps cell ids to the unverified vendor
    facts each rests on (marked); ``parity``: a reference recording to set the operators
    beside. A report holding fewer results than the one in ``out_dir`` is refused
    (ReportShrinks) unless ``replace``."""
    target = out_dir.resolve() if out_dir.is_symlink() else out_dir
    if merge:
        if previous_dir is not None:
            raise InputError("--compare takes one results folder; use it without --merge "
                             "(compare each runner's folder) or merge first")
        check_merge_folders(merge)
        check_folders(merge[0], target)
        report = collect_merged(merge, accept)
    else:
        check_folders(results_dir, target)
        report = collect(results_dir, previous_dir, accept)
    report = marked(report, unverified)
    if parity is not None:
        report = dataclasses.replace(report, parity=parity_table(
            load_reference(parity), report.groups, report.vendors))
    if not replace:
        check_not_less(target, report)
    return report


def marked(report: Report, unverified: Mapping[str, tuple[str, ...]] | None) -> Report:
    """``report`` with its cells' unverified vendor facts (cell id -> facts) to mark."""
    if not unverified:
        return report
    return dataclasses.replace(report, unverified={
        g.id: unverified[g.id] for g in report.groups if unverified.get(g.id)})


def write_pages(report: Report, out_dir: Path, results_dir: Path, *,
                extras: Extras | None = None, hud_input: hud.HudInput | None = None,
                current: Mapping[str, str] | None = None) -> None:
    """Write ``report`` (its result files linked from ``results_dir``) into a new folder and
    swap it in for ``out_dir``. ``hud_input``: the history the HUD shows (None: no HUD);
    ``current`` maps cell ids to today's fingerprints (None: staleness is not judged)."""
    target = out_dir.resolve() if out_dir.is_symlink() else out_dir  # keep the link, fill it
    target.parent.mkdir(parents=True, exist_ok=True)
    # One writer at a time: a second report into the same folder waits for the first, and
    # the folders a writer finds beside the report are a dead writer's (a live one holds it).
    with exclusive(target.parent / f".{target.name}.lock", f"the report {out_dir}",
                   LOCK_WAIT_S):
        _recover(target)
        new = Path(tempfile.mkdtemp(prefix=f".{target.name}.{_NEW}-", dir=target.parent))
        try:
            os.chmod(new, 0o755)  # mkdtemp makes 0700; reports are served by static servers
            _write_files(report, new, results_dir, target, extras or Extras(), hud_input,
                         current)
            _swap(new, target)
        except BaseException:
            shutil.rmtree(new, ignore_errors=True)
            raise


def write_report(results_dir: Path, out_dir: Path, previous_dir: Path | None = None, *,
                 merge: Sequence[Path] = (), extras: Extras | None = None,
                 hud_input: hud.HudInput | None = None,
                 current: Mapping[str, str] | None = None,
                 accept: Accept | None = None, replace: bool = False,
                 unverified: Mapping[str, tuple[str, ...]] | None = None) -> Report:
    """:func:`read_report`, then :func:`write_pages`: the report of a results folder (or of
    the ``merge`` folders), swapped in for ``out_dir``."""
    report = read_report(results_dir, out_dir, previous_dir, merge=merge, accept=accept,
                         replace=replace, unverified=unverified)
    write_pages(report, out_dir, merge[0] if merge else results_dir, extras=extras,
                hud_input=hud_input, current=current)
    return report
