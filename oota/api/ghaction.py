"""The build step of oota's GitHub Action (action.yml): ``oota build`` with the step's inputs,
then the job summary and an error annotation per failed cell.

action.yml runs ``python -I -m oota.api.ghaction`` with the inputs in the environment (never
in the script's text). ``args`` is parsed here, not by a shell: a JSON list of strings
(``["--layer", "device,ops"]``), or a string split as a POSIX shell splits words (``shlex``:
quotes group, nothing is expanded or run), so ``--results "my results"`` is two arguments.
The command is an argv list. This module is the action's entry point: it writes the step's
summary, outputs and workflow commands (``::error::`` lines on stdout), which is its job.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from oota.errors import EXIT_BAD_INPUT, InputError
from oota.project import Project

FAILED = ("failed", "error")
SUMMARY_LIMIT = 1_000_000   # GitHub takes 1 MiB of summary per step


def parse_args(text: str) -> list[str]:
    """The ``args`` input as argv items: a JSON list of strings, or shell-like words."""
    text = text.strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise InputError(f"args: not a JSON list ({exc}); give a list of strings, e.g. "
                             '["--jobs", "2"], or the flags as words') from None
        if not (isinstance(items, list) and all(isinstance(x, str) for x in items)):
            raise InputError('args: a JSON list must hold strings only, e.g. ["--jobs", "2"]')
        return items
    try:
        return shlex.split(text)
    except ValueError as exc:   # an unclosed quote
        raise InputError(f"args: {exc} in {text!r}; close the quote") from None


def _escape(text: str, *, prop: bool = False) -> str:
    """``text`` as a workflow command's message (or property) carries it."""
    out = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return out.replace(":", "%3A").replace(",", "%2C") if prop else out


def _cells(reports: Path) -> list[dict[str, object]]:
    data = json.loads((reports / "results.json").read_text(encoding="utf-8"))
    return [c for c in data.get("cells", []) if isinstance(c, dict)]


def error_lines(reports: Path) -> list[str]:
    """An ``::error::`` workflow command per failed or errored cell of the report."""
    lines = []
    for cell in _cells(reports):
        if cell.get("status") in FAILED:
            cell_id, message = str(cell.get("id")), str(cell.get("message") or "")
            text = f"{cell_id}: {cell.get('status')}" + (f": {message}" if message else "")
            lines.append(f"::error title={_escape(f'oota {cell_id}', prop=True)}::"
                         f"{_escape(text)}")
    return lines


def summary(reports: Path | None, code: int) -> str:
    """The job summary: the exit code, and the report's cells × layers tables (None: the
    build wrote no report, and the summary says so)."""
    head = f"## oota build: exit {code}\n\n"
    if reports is None:
        return head + "No report was written by this run (see the step's log).\n"
    text = (reports / "matrix.md").read_text(encoding="utf-8")
    sections = text.split("\n## ")
    tables = [s for s in sections[1:] if s.split("\n", 1)[0].endswith("cells × layers")]
    body = head + "".join(f"### {s.rstrip()}\n\n" for s in tables)
    return body if len(body.encode()) <= SUMMARY_LIMIT else \
        head + f"The report's tables exceed GitHub's summary limit: see {reports}/matrix.md\n"


def _stamp(path: Path) -> tuple[int, int] | None:
    """What tells a report this run wrote from one left by an earlier run (None: absent)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


def _append(env: Mapping[str, str], name: str, text: str) -> None:
    if env.get(name):
        with open(env[name], "a", encoding="utf-8") as file:
            file.write(text)


def main(env: Mapping[str, str] = os.environ) -> int:
    """Run the build the step's inputs ask for, then report it to GitHub; its exit code."""
    try:
        extra = parse_args(env.get("OOTA_ARGS", ""))
    except InputError as exc:
        print(f"::error title=oota action::{_escape(str(exc))}")
        return EXIT_BAD_INPUT
    matrix = env.get("OOTA_MATRIX") or "matrix.yaml"
    # -I: the current folder, a checkout of oota or a repository with an oota/ folder, must
    # not shadow the oota installed in the action's environment.
    argv = [sys.executable, "-I", "-m", "oota", "build", "--vendor", env["OOTA_VENDOR"],
            "--matrix", matrix, *extra]
    reports = Project.of(matrix).reports.resolve()
    before = _stamp(reports / "results.json")
    code = subprocess.call(argv)
    written = _stamp(reports / "results.json") not in (None, before)
    for line in error_lines(reports) if written else []:
        print(line)
    _append(env, "GITHUB_STEP_SUMMARY", summary(reports if written else None, code))
    _append(env, "GITHUB_OUTPUT", f"report={reports}\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
