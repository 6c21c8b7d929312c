"""refdev's torch.compile path, registered the way PyTorch's reference backend (OpenReg) and
docs/source/accelerator/compiler.md ask of an accelerator:

* a Dynamo backend named ``refdev`` (``torch.compile(model, backend="refdev")``): AOTAutograd
  traces the forward and the backward graph into ATen operators, and refdev runs each graph as
  one compiled unit (an ``fx.GraphModule`` whose operators dispatch to refdev's kernels), so
  graph breaks, guards, recompiles and autograd behave as with any backend;
* a DeviceInterface for the device (``torch._dynamo.device_interface``), which Dynamo and
  Inductor ask for the device's count, current index, streams and synchronisation.

Inductor is not registered (``register_backend_for_device``): its CPU code generator would need
a C++ compiler where the suite runs, and refdev's runtime image carries none on purpose.

``REFDEV_COMPILE_WRONG``: an aten operator name (``mul.Tensor``, ``add``). Every call of that
operator in a graph refdev's backend compiles gets +1 on its floating-point outputs: a
miscompiled fusion, while the same operator in eager mode stays right (oota's compile layer is
tested this way). Read once, when torch_refdev is imported.
"""

import os

import torch
from torch._dynamo import register_backend
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device
from torch._functorch.aot_autograd import make_boxed_func

BACKEND = "refdev"
WRONG_VARIABLE = "REFDEV_COMPILE_WRONG"


class RefdevInterface(DeviceInterface):
    """What Dynamo asks of the device, answered by torch.refdev."""

    class Worker:
        @staticmethod
        def set_device(device):
            torch.refdev.set_device(device)

        @staticmethod
        def current_device():
            return torch.refdev.current_device()

        @staticmethod
        def get_device_properties(device=None):
            return {"name": torch.refdev.get_device_name(device)}

    device = torch.refdev.device
    Event = torch.Event
    Stream = torch.Stream

    @staticmethod
    def current_device():
        return torch.refdev.current_device()

    @staticmethod
    def set_device(device):
        torch.refdev.set_device(device)

    @staticmethod
    def device_count():
        return torch.refdev.device_count()

    @staticmethod
    def is_available():
        return torch.refdev.is_available()

    @staticmethod
    def synchronize(device=None):
        torch.refdev.synchronize(device)

    @staticmethod
    def current_stream():
        return torch.accelerator.current_stream()

    @staticmethod
    def is_bf16_supported(including_emulation=False):
        return True

    @staticmethod
    def memory_allocated(device=None):
        return torch.refdev.memory_allocated(device)

    @staticmethod
    def is_triton_capable(device=None):
        return False


def _target_matches(target, name):
    """Whether an FX node's target is aten operator ``name`` (``mul`` or ``mul.Tensor``)."""
    packet = getattr(target, "_schema", None)
    if packet is None:
        return False
    packet_name = target.name().removeprefix("aten::")  # 'mul.Tensor'
    return packet_name == name or packet_name.partition(".")[0] == name


def _miscompile(graph_module, name):
    """Follow every call of ``name`` in the graph with +1 on a floating-point result."""
    graph = graph_module.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or not _target_matches(node.target, name):
            continue
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            continue
        with graph.inserting_after(node):
            wrong = graph.call_function(torch.ops.aten.add.Scalar, (node, 1.0))
        node.replace_all_uses_with(wrong, delete_user_cb=lambda user, w=wrong: user is not w)
    graph.lint()
    graph_module.recompile()
    return graph_module


def _compiler(wrong_op):
    def compile_graph(graph_module, example_inputs):
        if wrong_op:
            _miscompile(graph_module, wrong_op)
        # An ATen graph: each operator runs refdev's kernel. Boxed: AOTAutograd frees the
        # inputs it hands over as soon as the graph no longer needs them.
        return make_boxed_func(graph_module.forward)

    return compile_graph


def register(environ=os.environ):
    """Register the Dynamo backend and the DeviceInterface (once per process)."""
    register_interface_for_device(BACKEND, RefdevInterface)
    compiler = _compiler(environ.get(WRONG_VARIABLE, "").strip())
    backend = aot_autograd(fw_compiler=compiler, bw_compiler=compiler)
    register_backend(name=BACKEND)(backend)
