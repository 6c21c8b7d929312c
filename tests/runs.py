"""A run of cells on one Engine, as the Docker tests start it (``build`` and ``verify`` go
through :func:`oota.api.runs.build`, which also reads hosts.yaml)."""

from __future__ import annotations

from oota.config.matrix import Matrix
from oota.console import Console
from oota.engine.base import Engine
from oota.execute.build import BuildOptions
from oota.execute.fleet import Station, run_on_stations
from oota.plan import Cell
from oota.results.model import Result


def build_cells(matrix: Matrix, cells: list[Cell], engine: Engine, console: Console,
                options: BuildOptions, *, build: bool = True, jobs: int = 1) -> list[Result]:
    """Build (optionally) and verify every cell on one engine, ``jobs`` at once."""
    station = Station("", engine, jobs=jobs, cache=matrix.root / ".oota-cache")
    return run_on_stations(matrix, cells, [station], console, options, build=build).results
