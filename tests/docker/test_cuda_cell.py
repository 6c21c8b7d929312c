"""A CUDA cell on a host without a GPU: built, verified to install level, never called passed.

Opt-in (-m cuda): its build downloads about 6 GB of CUDA wheels, more than CI's time allows
beside the rest. CI checks the same on the recording of such a build
(tests/data/cells/cuda-no-gpu-2026-11-28, tests/unit/test_cuda_cell_recording.py); run this
to record a new one (its result.json, gzipped, replaces the recording's)."""

from __future__ import annotations

import pytest

from tests.cudacell import check_install_level, check_smoke_without_gpu

pytestmark = pytest.mark.cuda


def test_cuda_cell_is_verified_to_install_level(cuda_built):
    (result,) = cuda_built.results
    check_install_level(result)


def test_the_cuda_cells_smoke_layer_without_a_gpu(cuda_built):
    (result,) = cuda_built.results
    check_smoke_without_gpu(result)
