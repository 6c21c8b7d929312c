"""One sample of one ``ModuleInfo`` run forward and backward, as PyTorch's
``test_cpu_gpu_parity`` (test/test_modules.py) runs it: the module built once on the CPU, the
same weights and buffers copied to the device (and widened to float64 for the judge's
reference), the sample's inputs copied with their ``requires_grad``, the forward pass, then one
backward pass from the same fixed gradients of every differentiable output. What a run gives is
a list of named results: each output, the gradient of each input and parameter, and each
buffer after the pass (BatchNorm's running statistics), as CPU tensors or plain values.

A run in a memory format (``channels_last``: the module and its 4-d inputs, or
``channels_last_3d`` and 5-d inputs, as PyTorch's ``test_memory_format`` converts them) gives
the same names, and says which of its outputs are laid out in that format.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

# The memory format a module's sample is also run in, by the dimension of its inputs.
FORMATS = {4: "channels_last", 5: "channels_last_3d"}
LAYOUT_DIMS = {"torch.channels_last": 4, "torch.channels_last_3d": 5}


@dataclass
class Run:
    """What one run of one sample produced: (name, value) of every result, in order, the
    outputs laid out in the run's memory format, and the gradients its backward pass started
    from (on the CPU: the other runs of the sample start from the same)."""

    named: list[tuple[str, Any]]
    in_format: set[str] = field(default_factory=set)
    grads: list[Any] = field(default_factory=list)


def _copy_tensor(tensor: Any, device: Any, dtype: Any, layout: Any) -> Any:
    """A fresh leaf copy of ``tensor`` on ``device`` (in ``dtype`` if floating, in ``layout``
    if it has that format's dimension), with its ``requires_grad``."""
    floating = tensor.is_floating_point() or tensor.is_complex()
    moved = tensor.detach().to(device=device, dtype=dtype if dtype is not None and
                               tensor.is_floating_point() else None, copy=True)
    if layout is not None and moved.dim() == LAYOUT_DIMS.get(str(layout), 0):
        moved = moved.contiguous(memory_format=layout)
    return moved.requires_grad_(tensor.requires_grad and floating)


def copied(value: Any, device: Any, dtype: Any = None, memory_format: Any = None) -> Any:
    """``value`` (a sample's inputs) with every tensor a fresh leaf on ``device`` (floating ones
    in ``dtype`` when given, those of the format's dimension in ``memory_format``), keeping
    ``requires_grad``; containers keep their type (a PackedSequence is moved whole)."""
    import torch
    from torch.nn.utils.rnn import PackedSequence

    if isinstance(value, torch.Tensor):
        return _copy_tensor(value, device, dtype, memory_format)
    if isinstance(value, PackedSequence):
        data = _copy_tensor(value.data, device, dtype, None)
        return PackedSequence(data, value.batch_sizes, value.sorted_indices,
                              value.unsorted_indices)
    if isinstance(value, tuple):
        items = [copied(v, device, dtype, memory_format) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [copied(v, device, dtype, memory_format) for v in value]
    if isinstance(value, dict):
        return {k: copied(v, device, dtype, memory_format) for k, v in value.items()}
    return copy.deepcopy(value)


def tensor_dims(value: Any) -> set[int]:
    """The dimensions of every tensor in ``value`` (a sample's forward inputs)."""
    import torch

    if isinstance(value, torch.Tensor):
        return {value.dim()}
    if isinstance(value, (tuple, list)):
        return {d for v in value for d in tensor_dims(v)}
    if isinstance(value, dict):
        return {d for v in value.values() for d in tensor_dims(v)}
    return set()


def named_leaves(name: str, value: Any) -> Iterator[tuple[str, Any]]:
    """(name, leaf) of a nested result: 'output', 'output[0]', "kwargs['target']"..."""
    from torch.nn.utils.rnn import PackedSequence

    if isinstance(value, PackedSequence):
        yield from named_leaves(f"{name}.data", value.data)
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from named_leaves(f"{name}[{index}]", item)
    elif isinstance(value, dict):
        for key in value:
            yield from named_leaves(f"{name}[{key!r}]", value[key])
    else:
        yield name, value


def _on_cpu(value: Any) -> Any:
    import torch

    return value.detach().cpu() if isinstance(value, torch.Tensor) else value


def _differentiable(named: list[tuple[str, Any]]) -> list[Any]:
    import torch

    return [v for _, v in named if isinstance(v, torch.Tensor) and v.requires_grad]


def grad_outputs(outputs: list[Any], seed: int, dtype: Any) -> list[Any]:
    """The fixed gradients the first run's backward pass starts from, on the CPU: normal values
    made in float64 from ``seed`` and rounded to the pair's ``dtype``, so that every run of one
    sample starts from the same values (the float64 run from them exactly)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    made = []
    for output in outputs:
        values = torch.randn(tuple(output.shape), generator=generator, dtype=torch.float64)
        made.append(values.to(dtype) if output.is_floating_point() else values)
    return made


@dataclass(frozen=True, kw_only=True, slots=True)
class Sample:
    """One ModuleInput made on the CPU, ready to be run anywhere."""

    index: int
    description: str
    module: Any  # the module built on the CPU in the pair's dtype, before any run
    args: Any
    kwargs: Any
    training: bool
    dtype: Any  # the pair's dtype
    seed: int

    def formats(self) -> list[str]:
        """The memory formats PyTorch's test_memory_format would convert this sample to."""
        return [FORMATS[d] for d in sorted(tensor_dims((self.args, self.kwargs)) & set(FORMATS))]


def run(sample: Sample, device: Any, dtype: Any = None, memory_format: str = "",
        watch: Callable[[Callable[[], Any]], Any] | None = None,
        grads: list[Any] | None = None) -> Run:
    """The sample forward and backward on ``device`` (in ``dtype`` when given: the float64
    reference), every result copied back to the CPU. The backward pass starts from ``grads``
    (another run's :attr:`Run.grads`; made from the sample's seed when None). ``watch`` wraps
    the device work (the vendor's fallback counters and the dispatcher's recorder)."""
    import torch

    layout = getattr(torch, memory_format) if memory_format else None
    module = copy.deepcopy(sample.module).to(device)
    if dtype is not None:
        module = module.to(dtype)
    if layout is not None:
        module = module.to(memory_format=layout)
    module.train(sample.training)
    args, kwargs = copied((sample.args, sample.kwargs), device, dtype, layout)

    started: list[Any] = []

    def work() -> list[tuple[str, Any]]:
        outputs = list(named_leaves("output", module(*args, **kwargs)))
        differentiable = _differentiable(outputs)
        if differentiable:
            started.extend(grads if grads is not None else
                           grad_outputs(differentiable, sample.seed, sample.dtype))
            torch.autograd.backward(differentiable, [
                g.to(device=o.device, dtype=o.dtype) for g, o in
                zip(started, differentiable, strict=True)])
        _synchronize(device)
        return outputs

    outputs = watch(work) if watch is not None else work()
    named = [(n, _on_cpu(v)) for n, v in outputs]
    in_format = {n for n, v in outputs if layout is not None and isinstance(v, torch.Tensor)
                 and v.dim() == LAYOUT_DIMS[str(layout)] and
                 v.is_contiguous(memory_format=layout)}
    inputs = [*named_leaves("args", args), *named_leaves("kwargs", kwargs)]
    named += [(f"gradient of {n}", _on_cpu(v.grad)) for n, v in inputs
              if isinstance(v, torch.Tensor) and v.requires_grad]
    named += [(f"gradient of parameter {n}", _on_cpu(p.grad))
              for n, p in module.named_parameters()]
    named += [(f"buffer {n} after the pass", _on_cpu(b)) for n, b in module.named_buffers()]
    return Run(named=named, in_format=in_format, grads=started)


def _synchronize(device: Any) -> None:
    import torch

    wait = getattr(getattr(torch, device.type, None), "synchronize", None)
    if callable(wait) and device.type != "cpu":
        wait()
