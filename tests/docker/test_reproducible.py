"""A fully cached rebuild of an unchanged cell is the same image: no clock and no run id in its
labels, and the sealed image (the build output plus its verification) stays in place."""

from __future__ import annotations

import dataclasses

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import SEALED_FROM_LABEL
from oota.execute.build import build_cells
from oota.plan import plan, select

from .conftest import DEFAULT_CELL, REPO


def _rebuild(built, engine, tmp_path, *, verify: bool) -> dict:
    options = dataclasses.replace(built.options, results_dir=tmp_path, rebuild=True,
                                  verify=verify, run_id=built.options.run_id)
    matrix = load_matrix(REPO / "matrix.yaml")
    cells = select(matrix, plan(matrix, ["cpu"]), ids=[DEFAULT_CELL])
    (result,) = build_cells(matrix, cells, engine, Console(), options)
    return result


def test_a_rebuild_of_an_unchanged_cell_is_the_same_image(built, engine, tmp_path):
    first = built.results[0]["image"]
    sealed, output = first["sealed"]["id"], first["digest"]
    assert engine.image_labels(built.tag)[SEALED_FROM_LABEL] == output

    result = _rebuild(built, engine, tmp_path / "build", verify=False)
    assert result["stages"]["build"]["status"] == "passed"
    assert "up_to_date" not in result["stages"]["build"].get("detail", {})
    assert engine.image_id(built.tag) == sealed      # the very image, seal and all
    assert engine.image_digest(built.tag) == output  # made from the same build output

