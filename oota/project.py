"""The project a task works on: the folder of its matrix file, and where that project keeps
its results, reports, history and cache.

One rule for every task (docs/reference/tasks.md, "Where a task reads and writes"):

- a folder **given on the command line** is read as the user typed it: a relative path is
  relative to the current folder, as any command-line tool reads one;
- a folder **not given** lives in the project, the folder of ``--matrix``: ``results/``,
  ``reports/``, ``history.db`` and ``.oota-cache/`` beside the matrix file.

``oota build --vendor=cpu`` in a checkout (``--matrix`` left at ``matrix.yaml``) therefore
writes ``results/``, ``reports/`` and ``history.db`` in the current folder, as it always did;
``oota build --matrix lab/matrix.yaml`` writes them in ``lab/``, the same folder every later
``report``, ``history``, ``publish`` or ``pull`` with that ``--matrix`` reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_MATRIX = "matrix.yaml"
RESULTS = "results"
REPORTS = "reports"
CACHE = ".oota-cache"


@dataclass(frozen=True, kw_only=True, slots=True)
class Project:
    """Where one task reads and writes: ``matrix`` as given, and the folders the task's flags
    named or the project's defaults (see the module's rule)."""

    matrix: Path
    results: Path
    reports: Path

    @classmethod
    def of(cls, matrix: str | Path = DEFAULT_MATRIX, *, results: str | Path | None = None,
           reports: str | Path | None = None) -> Project:
        """The project of ``matrix``: ``results`` and ``reports`` as the flags gave them (None:
        the project's own, beside the matrix)."""
        root = Path(matrix).parent
        return cls(matrix=Path(matrix),
                   results=Path(results) if results is not None else root / RESULTS,
                   reports=Path(reports) if reports is not None else root / REPORTS)

    @property
    def root(self) -> Path:
        """The matrix's folder: the project's defaults live here (``.`` for ``matrix.yaml``,
        so paths shown stay as short as the user's)."""
        return self.matrix.parent

    @property
    def cache(self) -> Path:
        """``.oota-cache/`` beside the matrix: build contexts, base images, pulled images' runs."""
        return self.root / CACHE


def command_name(folder: Path | None = None) -> str:
    """The command a user of ``folder`` (default: the current one) types to run oota:
    ``./oota.sh`` in a checkout that has it (it sets up the environment first), else ``oota``
    (an installed wheel: ``oota init`` writes no oota.sh)."""
    return "./oota.sh" if ((folder or Path.cwd()) / "oota.sh").is_file() else "oota"
