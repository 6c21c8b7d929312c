"""PyTorch/XLA compat: torch_xla is the build for the torch release installed beside it.

torch-xla's wheels declare no requirement on torch, and its native module links torch's C++
API: torch_xla 2.8.1 beside torch 2.9.0 fails on import ("_XLAC...so: undefined symbol:
_ZNK3c1010TensorImpl35is_non_overlapping_and_dense_customEv"), which the shared compat layer's
native-module check catches. Here: the two are of one release series. The torch commit a wheel
was built against (``torch_xla.version.__torch_gitrev__``, pytorch/xla's ``.torch_commit``) is
recorded, not compared: torch_xla 2.9.0 was built against cbe1a35 of 2025-10-22, not against
v2.9.0's own commit, so a commit check would fail every release pairing PyTorch/XLA publishes.
"""

from __future__ import annotations

import importlib.metadata as md

from packaging.version import Version

LAYER = "compat"


def test_torch_xla_series_is_torchs(cell, record_data):
    import torch
    import torch_xla.version

    record_data(torch_xla=md.version("torch-xla"), torch=torch.__version__,
                torch_xla_built_on=str(getattr(torch_xla.version, "__torch_gitrev__", "")),
                torch_commit=torch.version.git_version)
    xla = Version(md.version("torch-xla")).release[:2]
    torch_series = Version(cell["torch"]).release[:2]
    assert xla == torch_series, (
        f"torch-xla {md.version('torch-xla')} is of the {xla[0]}.{xla[1]} series, the cell's "
        f"torch {cell['torch']} of {torch_series[0]}.{torch_series[1]}")


# NVIDIA's driver library, which no image carries: PyPI's torch is the CUDA build, and its
# libcaffe2_nvrtc.so needs libcuda.so.1. torch loads it only for CUDA, which a PJRT cell never
# uses, so here it is no fault (the shared test_torch_native_modules_load counts it as one on a
# vendor without that driver; skips.yaml points it here).
_CUDA_DRIVER = "libcuda.so"


def test_torch_native_modules_load_but_for_cuda_driver_parts(record_data):
    from test_compat import _TORCH_OWN, _load_all, _native_files

    paths = [p for p in _native_files("torch") if _TORCH_OWN.match(p.name)]
    failures = _load_all(paths)
    cuda_only = sorted(name for name, why in failures.items() if _CUDA_DRIVER in why)
    record_data(native_modules=len(paths), need_cuda_driver=cuda_only)
    assert paths and not {n: w for n, w in failures.items() if n not in cuda_only}, failures
