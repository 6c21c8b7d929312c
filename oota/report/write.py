"""Writing ``reports/``: every file into a temporary folder beside it, then swapped in whole.

A reader (a browser, a web server, a CI artifact upload) sees the previous report or the new
one, never index.html pointing at cell pages that are not there yet; a failure or Ctrl-C
midway leaves the previous report as it was. Because the folder is replaced whole, it must
hold nothing but a report: ``--out`` naming a folder with other files is refused.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from oota.errors import InputError
from oota.files import write_atomic, write_json
from oota.report.data import Report, collect
from oota.report.htmlpages import cell_page, to_html
from oota.report.jsondoc import to_json
from oota.report.markdown import to_markdown

# Everything a report folder holds; anything else in --out is someone else's file.
REPORT_ENTRIES = frozenset({"index.html", "matrix.md", "results.json", "compare.json", "cells"})
_NEW, _OLD = "new", "old"


def _relative(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()


def check_folders(results_dir: Path, out_dir: Path) -> None:
    """Refuse, before anything is read or written, what would lose files or write nonsense."""
    if not results_dir.is_dir():
        what = "is not a folder" if results_dir.exists() else "no such results folder"
        raise InputError(f"--results {results_dir}: {what} (run `invoke build` or `invoke "
                         "verify` first, or name the folder that holds the result files)")
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


def _write_files(report: Report, folder: Path, results_dir: Path, out_dir: Path) -> None:
    """Every file of the report into ``folder``; links are made for where it will end up."""
    rel = _relative(results_dir, out_dir)
    write_atomic(folder / "matrix.md", to_markdown(report))
    write_atomic(folder / "index.html", to_html(report, rel))
    write_json(folder / "results.json", to_json(report, rel))
    if report.comparison is not None:
        write_json(folder / "compare.json", report.comparison.to_json())
    cells_rel = _relative(results_dir, out_dir / "cells")
    (folder / "cells").mkdir()
    for row in report.rows:
        write_atomic(folder / "cells" / f"{row.id}.html", cell_page(row, cells_rel))


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


def write_report(results_dir: Path, out_dir: Path, previous_dir: Path | None = None) -> Report:
    """Read the results (and an earlier run's, to compare), write the report, swap it in."""
    target = out_dir.resolve() if out_dir.is_symlink() else out_dir  # keep the link, fill it
    check_folders(results_dir, target)
    report = collect(results_dir, previous_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    _recover(target)
    new = Path(tempfile.mkdtemp(prefix=f".{target.name}.{_NEW}-", dir=target.parent))
    try:
        os.chmod(new, 0o755)  # mkdtemp makes 0700; reports are served by static web servers
        _write_files(report, new, results_dir, target)
        _swap(new, target)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    return report
