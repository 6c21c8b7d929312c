"""Deliberate faults of refdev, for testing verification suites and histories against it.

``REFDEV_WRONG_OP``: an aten operator name (``tanh``, ``mul.Tensor``). That operator's refdev
kernel computes the right result on the host and then adds 1 to every floating-point output.
A verification suite that compares refdev with the CPU must report exactly that operator
(oota's ops layer is tested this way).

``REFDEV_SLOW_OP``: ``NAME:MILLISECONDS`` (``mm:20``). That operator's refdev kernel waits that
long before computing the right result on the host: the results stay right, the operator gets
slow. A latency regression to be caught (oota's history is tested this way).

``REFDEV_SCALE_OP``: ``NAME:FACTOR`` (``mm:1.001``). That operator's refdev kernel computes the
right result on the host and multiplies every floating-point output by FACTOR: a small bias
in an operator a model uses (its forward and its gradients), which a training curve judged
against float64 must catch (oota's workload layer is tested this way).

``REFDEV_FOREACH_DROP_LAST``: in-place foreach operators, comma-separated
(``_foreach_addcdiv_``, every overload). Their refdev kernel computes the right results on the
host and writes them back to every tensor of the list but the last, which keeps its old value:
a foreach path that drops the last tensor, which an optimizer's foreach step must not pass
(oota's optimizers layer is tested this way). torch.optim's default implementation on refdev
is foreach (PyTorch's foreach device list holds the PrivateUse1 backend's name): an operator
the default SGD step uses (``_foreach_add_``) breaks every training step on refdev, while
``_foreach_addcdiv_`` (Adam's update) breaks only the steps that call it.

``REFDEV_SKIP_PARAM_GROUP``: an index (``1``). Every ``torch.optim`` step leaves the refdev
parameters of that parameter group as they were before the step (a global step hook puts their
values back; the optimizer's state still moves), as a vendor's patched optimizer that forgets a
group would. An optimizer with fewer groups (the models layer's SGD has one) is untouched.

A wrong gradient needs no switch of its own: ``REFDEV_WRONG_OP=tanh_backward`` makes the
backward pass of ``tanh`` wrong and its forward right (autograd calls that operator on refdev).

All are read once, when torch_refdev is imported. Unset (the default), nothing is registered.
"""

import os
import time

import torch
from torch.utils._pytree import tree_map

WRONG_VARIABLE = "REFDEV_WRONG_OP"
SLOW_VARIABLE = "REFDEV_SLOW_OP"
SCALE_VARIABLE = "REFDEV_SCALE_OP"
DROP_LAST_VARIABLE = "REFDEV_FOREACH_DROP_LAST"
SKIP_GROUP_VARIABLE = "REFDEV_SKIP_PARAM_GROUP"
VARIABLE = WRONG_VARIABLE  # the first fault's name, kept for callers that use it

# The registrations (and hooks) live as long as these objects: kept for the process's lifetime.
_libraries = []
_hooks = []


def _to_host(value):
    return value.cpu() if isinstance(value, torch.Tensor) else value


def _on_host(op, args, kwargs, change):
    """``op`` computed on host copies of the arguments, its tensors changed by ``change`` and
    moved back to the device of the first tensor argument."""
    device = next(a.device for a in args if isinstance(a, torch.Tensor))
    host_args, host_kwargs = tree_map(_to_host, (args, kwargs))
    result = op(*host_args, **host_kwargs)

    def back(value):
        return change(value).to(device) if isinstance(value, torch.Tensor) else value

    return tree_map(back, result)


def _wrong_kernel(op):
    def kernel(*args, **kwargs):
        return _on_host(op, args, kwargs,
                        lambda value: value + 1 if value.is_floating_point() else value)

    return kernel


def _slow_kernel(op, seconds):
    def kernel(*args, **kwargs):
        time.sleep(seconds)
        return _on_host(op, args, kwargs, lambda value: value)

    return kernel


def _scaled_kernel(op, factor):
    def kernel(*args, **kwargs):
        return _on_host(op, args, kwargs,
                        lambda value: value * factor if value.is_floating_point() else value)

    return kernel


def _drop_last_kernel(op):
    def kernel(tensors, *args, **kwargs):
        host = [t.cpu() for t in tensors]
        host_args, host_kwargs = tree_map(_to_host, (args, kwargs))
        op(host, *host_args, **host_kwargs)
        for tensor, value in zip(tensors[:-1], host[:-1], strict=True):
            tensor.copy_(value)

    return kernel


def _register(name, make_kernel):
    packet, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.aten, packet), overload or "default")
    library = torch.library.Library("aten", "IMPL")
    library.impl(name, make_kernel(op), "PrivateUse1")
    _libraries.append(library)


def install_drop_last(name):
    """Make every overload of the in-place foreach operator ``name`` (``_foreach_add_``) leave
    the last tensor of its list unchanged on refdev."""
    if not (name.startswith("_foreach_") and name.endswith("_")):
        raise ValueError(f"{DROP_LAST_VARIABLE}={name!r}: expected in-place foreach operators, "
                         "e.g. _foreach_add_")
    packet = getattr(torch.ops.aten, name)
    for overload in packet.overloads():
        _register(name if overload == "default" else f"{name}.{overload}", _drop_last_kernel)


def install_skip_group(index):
    """Make every torch.optim step leave the refdev parameters of group ``index`` unchanged."""
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    held = {}

    def before(optimizer, args, kwargs):
        groups = optimizer.param_groups
        device = torch._C._get_privateuse1_backend_name()
        held[id(optimizer)] = [(p, p.detach().clone()) for p in
                               (groups[index]["params"] if index < len(groups) else [])
                               if p.device.type == device]

    def after(optimizer, args, kwargs):
        with torch.no_grad():
            for param, value in held.pop(id(optimizer), []):
                param.copy_(value)

    _hooks.extend([register_optimizer_step_pre_hook(before),
                   register_optimizer_step_post_hook(after)])


def parse_group(text):
    """``INDEX`` as a whole number >= 0; a ValueError says what is wrong."""
    if not text.strip().isdigit():
        raise ValueError(f"{SKIP_GROUP_VARIABLE}={text!r}: expected a parameter group's index, "
                         "e.g. 1")
    return int(text)


def install(name):
    """Make aten operator ``name`` (``packet`` or ``packet.overload``) wrong on refdev."""
    _register(name, _wrong_kernel)


def install_slow(name, milliseconds):
    """Make aten operator ``name`` wait ``milliseconds`` per call on refdev."""
    _register(name, lambda op: _slow_kernel(op, milliseconds / 1000.0))


def install_scaled(name, factor):
    """Make aten operator ``name`` multiply its floating-point results by ``factor``."""
    _register(name, lambda op: _scaled_kernel(op, factor))


def _parse(text, variable, example):
    """``NAME:NUMBER`` as (name, number >= 0); a ValueError says what is wrong."""
    name, _, number = text.partition(":")
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if not name.strip() or not value >= 0 or value == float("inf"):
        raise ValueError(f"{variable}={text!r}: expected {example}")
    return name.strip(), value


def parse_slow(text):
    """``NAME:MILLISECONDS`` as (name, milliseconds); a ValueError says what is wrong."""
    return _parse(text, SLOW_VARIABLE, "NAME:MILLISECONDS, e.g. mm:20")


def parse_scale(text):
    """``NAME:FACTOR`` as (name, factor); a ValueError says what is wrong."""
    return _parse(text, SCALE_VARIABLE, "NAME:FACTOR, e.g. mm:1.001")


def install_from_environment(environ=os.environ):
    name = environ.get(WRONG_VARIABLE, "").strip()
    if name:
        install(name)
    slow = environ.get(SLOW_VARIABLE, "").strip()
    if slow:
        install_slow(*parse_slow(slow))
    scale = environ.get(SCALE_VARIABLE, "").strip()
    if scale:
        install_scaled(*parse_scale(scale))
    for name in environ.get(DROP_LAST_VARIABLE, "").split(","):
        if name.strip():
            install_drop_last(name.strip())
    group = environ.get(SKIP_GROUP_VARIABLE, "")
    if group.strip():
        install_skip_group(parse_group(group))
