"""A deliberately wrong operator, for testing verification suites against refdev.

Set ``REFDEV_WRONG_OP`` to an aten operator name (``tanh``, ``mul.Tensor``) before importing
torch_refdev, and that operator's refdev kernel computes the right result on the host and then
adds 1 to every floating-point output. Nothing else changes: a verification suite that compares
refdev with the CPU must report exactly that operator (oota's ops layer is tested this way).
Unset (the default), nothing is registered.
"""

import os

import torch
from torch.utils._pytree import tree_map

VARIABLE = "REFDEV_WRONG_OP"

# The registration lives as long as this library object: kept for the process's lifetime.
_libraries = []


def _to_host(value):
    return value.cpu() if isinstance(value, torch.Tensor) else value


def _wrong_kernel(op):
    def kernel(*args, **kwargs):
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        host_args, host_kwargs = tree_map(_to_host, (args, kwargs))
        result = op(*host_args, **host_kwargs)

        def back(value):
            if not isinstance(value, torch.Tensor):
                return value
            wrong = value + 1 if value.is_floating_point() else value
            return wrong.to(device)

        return tree_map(back, result)

    return kernel


def install(name):
    """Make aten operator ``name`` (``packet`` or ``packet.overload``) wrong on refdev."""
    packet, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.aten, packet), overload or "default")
    library = torch.library.Library("aten", "IMPL")
    library.impl(name, _wrong_kernel(op), "PrivateUse1")
    _libraries.append(library)


def install_from_environment(environ=os.environ):
    name = environ.get(VARIABLE, "").strip()
    if name:
        install(name)
