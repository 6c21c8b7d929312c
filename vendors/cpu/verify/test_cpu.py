"""CPU vendor compat checks, run inside the image beside the shared verify/ suite.

The CPU cell must carry PyTorch's CPU build: the ``+cpu`` local version tag, and no CUDA or ROCm
runtime anywhere in the environment. PyPI's plain ``torch`` wheel is the CUDA build (it pulls
nvidia-* packages, ~5 GB): if it won over the CPU index, these tests say so.
"""

import importlib.metadata as md
import sys
from pathlib import Path

import torch
from packaging.version import Version

LAYER = "compat"
GPU_RUNTIME_LIBS = ("libcudart", "libcublas", "libcudnn", "libnccl", "libamdhip64", "librocblas",
                    "libtorch_cuda", "libc10_cuda", "libtorch_hip")


def test_torch_has_cpu_build_tag():
    assert Version(torch.__version__).local == "cpu", f"not the +cpu build: {torch.__version__}"


def test_cpu_build_has_no_gpu_runtime():
    # The +cpu wheel carries no CUDA or ROCm runtime; a CUDA build here means the wrong index won.
    assert torch.version.cuda is None, f"CUDA build installed: {torch.__version__}"
    assert torch.version.hip is None


def test_no_gpu_runtime_is_bundled():
    gpu_dists = sorted(d.metadata["Name"] for d in md.distributions()
                       if d.metadata["Name"].lower().startswith(("nvidia-", "cuda-", "triton")))
    site = Path(torch.__file__).resolve().parents[1]
    gpu_libs = sorted(str(p.relative_to(site)) for p in site.rglob("lib*.so*")
                      if p.name.startswith(GPU_RUNTIME_LIBS))
    assert not gpu_dists, f"GPU runtime distributions installed: {gpu_dists}"
    assert not gpu_libs, f"GPU runtime libraries in {sys.prefix}: {gpu_libs}"
