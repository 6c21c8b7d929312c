"""CPU vendor smoke tests, run inside the image beside the shared verify/ suite."""

import torch


def test_cpu_build_has_no_gpu_runtime():
    # The +cpu wheel carries no CUDA or ROCm runtime; a CUDA build here means the wrong index won.
    assert torch.version.cuda is None, f"CUDA build installed: {torch.__version__}"
    assert torch.version.hip is None
