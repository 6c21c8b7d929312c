"""refdev's c10d backend, ``refccl``: torch.distributed's collectives on refdev tensors.

What it is, honestly: a Python ``ProcessGroup`` (the kind PyTorch's own
``test_c10d_pypg.py`` builds) over the CPU's gloo.  Each collective copies its
refdev tensors to host tensors, runs gloo's collective on them, and copies the
results back into the refdev tensors once the work is waited for.  No
refdev-to-refdev transport exists; what it exercises is the path a vendor's
backend takes through PyTorch: a backend name other than gloo in
``torch.distributed.Backend.backend_list``, registered for the ``refdev``
device (``Backend.register_backend(..., devices=["refdev"])``), a default
process group on it, and collectives, ``Work`` futures and DDP's reducer on
refdev tensors.

``import torch_refdev`` registers it; ``init_process_group("refccl")`` (or
``init_process_group()`` with refdev tensors: refdev's default backend is
refccl) uses it.

Faults, for testing verification suites against it (read when a group is made;
each names a collective as torch.distributed names it: ``all_reduce``,
``all_gather``, ``reduce_scatter``, ``broadcast``, ``all_to_all``, ``barrier``):

``REFDEV_COLLECTIVE_WRONG``: that collective's results are right on the host,
then 1 is added to every element on every rank: a wrong reduction.

``REFDEV_COLLECTIVE_STALE``: on rank 0, that collective's results are never
copied back: its output tensors keep the data they held before the call, a rank
that receives stale data (rank 0, not the last rank, which a broadcast from the
last rank would leave right).

``REFDEV_COLLECTIVE_HANG``: the last rank never joins that collective (it
sleeps for ever before it), so the others wait in it until their timeout: a
collective that never completes.
"""

import os
import time

import torch
import torch.distributed as dist

NAME = "refccl"
WRONG_VARIABLE = "REFDEV_COLLECTIVE_WRONG"
STALE_VARIABLE = "REFDEV_COLLECTIVE_STALE"
HANG_VARIABLE = "REFDEV_COLLECTIVE_HANG"


def _host(tensor):
    return tensor.cpu() if tensor.device.type != "cpu" else tensor.clone()


class _Work(dist._Work):
    """gloo's work on the host copies; waiting for it copies the results back."""

    def __init__(self, inner, pairs, result, wrong):
        super().__init__()
        self._inner, self._pairs, self._result, self._wrong = inner, pairs, result, wrong
        self._future = torch.futures.Future()

    def wait(self, timeout=None):
        if self._future.done():
            return True
        self._inner.wait()
        for device_tensor, host_tensor in self._pairs:
            device_tensor.copy_(host_tensor + 1 if self._wrong else host_tensor)
        # DDP's reducer reads the future's value as the list of reduced tensors.
        self._future.set_result(self._result)
        return True

    def is_completed(self):
        return self._future.done()

    def get_future(self):
        self.wait()
        return self._future


class RefcclProcessGroup(dist.ProcessGroup):
    """refdev's collectives over a gloo group on host copies (see the module docstring)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("refccl", store), rank, size,
                                           timeout)
        self._last, self._first = rank == size - 1, rank == 0
        self._faults = {kind: os.environ.get(variable, "").strip()
                        for kind, variable in (("wrong", WRONG_VARIABLE),
                                               ("stale", STALE_VARIABLE),
                                               ("hang", HANG_VARIABLE))}

    def getBackendName(self):  # noqa: N802 - PyTorch's name
        return NAME

    def _run(self, collective, outputs, call, result=None):
        """gloo's ``call`` on host copies; ``outputs``: the refdev tensors it writes."""
        if self._faults["hang"] == collective and self._last:
            while True:
                time.sleep(3600)
        hosts = [_host(t) for t in outputs]
        inner = call(hosts)
        stale = self._faults["stale"] == collective and self._first
        pairs = [] if stale else list(zip(outputs, hosts, strict=True))
        return _Work(inner, pairs, outputs if result is None else result,
                     self._faults["wrong"] == collective)

    def allreduce(self, tensors, opts):
        return self._run("all_reduce", tensors, lambda h: self._gloo.allreduce(h, opts))

    def broadcast(self, tensors, opts):
        return self._run("broadcast", tensors, lambda h: self._gloo.broadcast(h, opts))

    def allgather(self, output_lists, inputs, opts):
        flat = [t for group in output_lists for t in group]
        sizes = [len(group) for group in output_lists]

        def call(hosts):
            nested, at = [], 0
            for n in sizes:
                nested.append(hosts[at:at + n])
                at += n
            return self._gloo.allgather(nested, [_host(t) for t in inputs], opts)
        return self._run("all_gather", flat, call, output_lists)

    def all_gather_single(self, output, input, opts):
        return self._run("all_gather", [output], lambda h: self._gloo._allgather_base(
            h[0], _host(input), opts))

    _allgather_base = all_gather_single

    def reduce_scatter(self, outputs, input_lists, opts):
        hosts_in = [[_host(t) for t in group] for group in input_lists]
        return self._run("reduce_scatter", outputs, lambda h: self._gloo.reduce_scatter(
            h, hosts_in, opts))

    def reduce_scatter_single(self, output, input, opts):
        return self._run("reduce_scatter", [output], lambda h: self._gloo._reduce_scatter_base(
            h[0], _host(input), opts))

    _reduce_scatter_base = reduce_scatter_single

    def all_to_all_single(self, output, input, output_splits, input_splits, opts):
        return self._run("all_to_all", [output], lambda h: self._gloo.alltoall_base(
            h[0], _host(input), output_splits, input_splits, opts))

    alltoall_base = all_to_all_single

    def barrier(self, opts):
        return self._run("barrier", [], lambda _: self._gloo.barrier(opts), [])


def _create(store, rank, size, timeout):
    return RefcclProcessGroup(store, rank, size, timeout)


def register():
    """Register refccl with torch.distributed, as refdev's default backend (idempotent)."""
    if not dist.is_available() or NAME in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(NAME, _create, devices=["refdev"])
