"""refdev: a reference PyTorch out-of-tree backend (PrivateUse1) in host memory.

Importing this package registers the ``refdev`` device with PyTorch::

    import torch, torch_refdev
    x = torch.randn(2, 2, device="refdev")
    y = torch.ones(2, 2).refdev()            # or .to("refdev:1")
    torch.refdev.memory_allocated()

Memory is host memory owned by the refdev allocator.  Allocation, copies,
resizing, filling and views have native kernels; every other aten operator is
computed on the host by a fallback that copies inputs to CPU and results back.
Tensors of another device (other than 0-dim CPU scalars) are rejected.

Streams are real queues (csrc/stream.cpp): the default stream runs work at
once; a side stream (``torch.Stream(device="refdev")``) holds its kernels'
writes until it next runs, so another stream sees them only after waiting
(``wait_stream``, ``wait_event``) or a synchronize.  Random numbers come from
the CPU generator: refdev's random kernels run on the host.

The package is compiled against one torch build; ``check_torch_abi()`` (run on
import, before the C++ library is loaded) raises a clear error when a
different torch is loaded.
"""

import os
import sys

import torch

__version__ = "0.1.0"

try:
    from ._build_info import TORCH_BUILT_WITH
except ImportError:  # not built through setup.py (e.g. a raw source tree)
    TORCH_BUILT_WITH = None

__all__ = [
    "TORCH_BUILT_WITH",
    "__version__",
    "check_torch_abi",
    "current_device",
    "device",
    "device_count",
    "empty_cache",
    "fallback_op_counts",
    "get_device_name",
    "get_rng_state",
    "initial_seed",
    "is_available",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "memory_allocated",
    "memory_stats",
    "reset_fallback_op_counts",
    "reset_peak_memory_stats",
    "set_device",
    "set_rng_state",
    "synchronize",
]


def check_torch_abi(built_with=None, loaded=None):
    """Raise RuntimeError unless the loaded torch is the one refdev was built with.

    The C++ extension links against torch's C++ ABI, which is only stable for
    the exact build it was compiled with.  ``built_with`` defaults to
    ``torch_refdev.TORCH_BUILT_WITH`` and ``loaded`` to ``torch.__version__``.
    Set ``REFDEV_SKIP_ABI_CHECK=1`` to bypass the check (at your own risk).
    """
    if built_with is None:
        built_with = globals().get("TORCH_BUILT_WITH")
    if loaded is None:
        loaded = torch.__version__
    if built_with is None:
        return  # unknown build: nothing to compare against
    if os.environ.get("REFDEV_SKIP_ABI_CHECK", "") not in ("", "0"):
        return
    if str(built_with) != str(loaded):
        raise RuntimeError(
            f"torch_refdev was built against torch {built_with} but torch "
            f"{loaded} is loaded; rebuild oota-refdev against the installed "
            "torch (pip wheel --no-build-isolation ...) or install the torch "
            "it was built with"
        )


# Check before loading the C++ library so that a mismatch gives the message
# above rather than an undefined-symbol error from the dynamic loader.
check_torch_abi()

try:
    from . import _C
except ImportError as exc:
    raise ImportError(
        f"torch_refdev: failed to load the refdev C++ extension ({exc}); it was "
        f"built against torch {TORCH_BUILT_WITH}, torch {torch.__version__} is "
        "loaded"
    ) from exc

if TORCH_BUILT_WITH is None:
    TORCH_BUILT_WITH = _C.torch_built_with()
    check_torch_abi()


# ---------------------------------------------------------------------------
# Device module (registered as torch.refdev)
# ---------------------------------------------------------------------------

def _device_index(device=None):
    """Normalize None / int / "refdev:1" / torch.device to a device index."""
    if device is None:
        return _C.current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "refdev":
            raise ValueError(f"expected a refdev device, got {device}")
        return _C.current_device() if device.index is None else device.index
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    raise TypeError(f"invalid refdev device: {device!r}")


def is_available():
    """True when at least one refdev device exists."""
    return _C.device_count() > 0


def is_initialized():
    return True


def init():
    """Initialization is eager; kept for API parity with torch.cuda."""


def _lazy_init():
    pass


def _is_in_bad_fork():
    return False


def device_count():
    """Number of refdev devices (env REFDEV_DEVICE_COUNT, default 2)."""
    return _C.device_count()


def current_device():
    return _C.current_device()


def set_device(device):
    _C.set_device(_device_index(device))


class device:
    """Context manager that changes the current refdev device."""

    def __init__(self, device):
        self.idx = -1 if device is None else _device_index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _C.current_device()
        if self.idx != -1:
            _C.set_device(self.idx)

    def __exit__(self, *exc_info):
        if self.idx != -1:
            _C.set_device(self.prev_idx)
        return False


def synchronize(device=None):
    """Complete the queued work of every stream of ``device``."""
    _C.synchronize(_device_index(device))


def get_device_name(device=None):
    return f"refdev reference device {_device_index(device)} (host memory)"


def memory_stats(device=None):
    """Allocator statistics: allocated/peak bytes, allocation counters.

    ``torch.accelerator.memory_stats()`` gives the same figures in the shape of
    CUDA's caching allocator's."""
    return _C.memory_stats(_device_index(device))


def memory_allocated(device=None):
    """Bytes currently allocated by refdev tensors on ``device``."""
    return _C.memory_stats(_device_index(device))["allocated_bytes"]


def max_memory_allocated(device=None):
    """Peak allocated bytes since start or the last reset_peak_memory_stats()."""
    return _C.memory_stats(_device_index(device))["peak_allocated_bytes"]


def memory_reserved(device=None):
    """No caching allocator: reserved memory equals allocated memory."""
    return memory_allocated(device)


def max_memory_reserved(device=None):
    return max_memory_allocated(device)


def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory_stats(_device_index(device))


def reset_accumulated_memory_stats(device=None):
    _C.reset_accumulated_memory_stats(_device_index(device))


def empty_cache():
    """No caching allocator: freed memory is returned immediately.

    (``REFDEV_LEAK_ALLOC=1`` makes the allocator leak on purpose: nothing
    brings that memory back.)"""


def fallback_op_counts():
    """{aten operator: calls} of the operators computed by the host fallback."""
    return _C.fallback_op_counts()


def reset_fallback_op_counts():
    _C.reset_fallback_op_counts()


# Random numbers: refdev kernels that draw random numbers run on the host
# through the fallback and use the CPU generator, so these act on it, and
# torch.Generator(device="refdev") is a CPU generator.

def manual_seed(seed):
    torch.default_generator.manual_seed(int(seed))


def manual_seed_all(seed):
    torch.default_generator.manual_seed(int(seed))


def seed():
    torch.default_generator.seed()


def seed_all():
    torch.default_generator.seed()


def initial_seed():
    return torch.default_generator.initial_seed()


def get_rng_state(device=None):
    return torch.default_generator.get_state()


def set_rng_state(new_state, device=None):
    torch.default_generator.set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    for state in new_states:
        set_rng_state(state)


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation=True):
    return True


# ---------------------------------------------------------------------------
# Registration with PyTorch
# ---------------------------------------------------------------------------

def _register():
    if torch._C._get_privateuse1_backend_name() != "refdev":
        torch.utils.rename_privateuse1_backend("refdev")
    if not hasattr(torch, "refdev"):
        torch._register_device_module("refdev", sys.modules[__name__])
    if not hasattr(torch.Tensor, "refdev"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_storage=True
        )


_register()

# Testing aids, off unless REFDEV_WRONG_OP or REFDEV_SLOW_OP names an operator (_faults.py).
from . import _faults  # noqa: E402

_faults.install_from_environment()

# torch.compile: the 'refdev' Dynamo backend and the device's DeviceInterface (_compile.py).
from . import _compile  # noqa: E402

_compile.register()

# refccl, refdev's c10d backend: torch.distributed's collectives on refdev tensors.
from . import _distributed  # noqa: E402

_distributed.register()
