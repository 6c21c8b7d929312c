"""The recording of a CUDA cell built and verified on a host without a GPU (README beside it):
what tests/docker/test_cuda_cell.py checks on a real build (opt-in, 6 GB of wheels), checked
here on every run, and oota's own reading of it: the file is a valid result, and loading it
judges it again to the status it recorded, never passed."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from oota.results import store
from tests.conftest import REPO
from tests.cudacell import check_install_level, check_smoke_without_gpu

RECORDING = REPO / "tests" / "data" / "cells" / "cuda-no-gpu-2026-11-28" / "result.json.gz"


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    return json.loads(gzip.decompress(RECORDING.read_bytes()))


def test_the_recorded_cell_is_verified_to_install_level(recorded) -> None:
    check_install_level(recorded)


def test_the_recorded_smoke_layer_without_a_gpu(recorded) -> None:
    check_smoke_without_gpu(recorded)


def test_oota_reads_the_recording_as_unsupported_here(recorded, tmp_path: Path) -> None:
    assert store.validation_errors(recorded) == []
    path = tmp_path / recorded["cell"]["id"] / "result.json"
    path.parent.mkdir()
    path.write_text(json.dumps(recorded), encoding="utf-8")
    result = store.load(path)
    assert result.status == "unsupported-here"
    assert store.inconsistency(result) == ""
