"""Runtime layer: PyTorch's runtime contract for an accelerator, through ``torch.accelerator``
where it serves the device and the device module (``torch.<device>``) otherwise.

Every device must pass: its count and index, synchronize, ``torch.save`` / ``torch.load``
round trips, and random draws that the same seed repeats bit for bit in another process.
The rest holds where the vendor claims it (``verify.capabilities`` in its vendor.yaml) and is
skipped as "not claimed" where it does not: streams and events that order work, event timing,
memory statistics that come back to their baseline, empty_cache, pinned host memory, a
generator's saved state, and what a child forked after the device was opened does.
PyTorch's sources: docs/source/accelerator/ and the tests of its reference backend, OpenReg.
"""

from __future__ import annotations

import gc
import io
import math

import pytest
from oota_claims import claimed, require
from oota_runtime import (
    MIB,
    Memory,
    draws,
    draws_elsewhere,
    fork_and_compute,
    fork_problem,
    leak_problem,
    runtime_call,
    serves,
)

LAYER = "runtime"


def _synchronize(device, device_module) -> None:
    runtime_call(device, device_module, "synchronize")()


def _side_stream(device):
    """A new stream on the device, and the stream current now (the claim needs both)."""
    import torch

    if not serves(device):
        pytest.fail(f"the vendor claims streams, but torch.accelerator does not serve "
                    f"{device.type}: torch.Stream and torch.Event cannot reach its streams")
    current = torch.accelerator.current_stream(device.index)
    side = torch.Stream(device=device)
    assert side != current, (
        f"torch.Stream(device={device}) gave the current stream back (id {side.stream_id}): "
        "the vendor claims streams, but a new stream is not one of its own")
    return side, current


def _filled(device, value: float, n: int = 1 << 16):
    import torch

    return torch.full((n,), value, device=device)


def _ordered(got, want: float, how: str) -> None:
    values = sorted(set(got.tolist()))
    if values != [want]:
        pytest.fail(f"the default stream read the side stream's result before it was "
                    f"written: (out + 1) gave {values[:4]}, not {want}, after {how}: the wait "
                    "did not order the side stream's work before the default stream's",
                    pytrace=False)


def test_device_count_and_index(device, device_module, record_data):
    import torch

    count = runtime_call(device, device_module, "device_count")()
    record_data(count=count, through="torch.accelerator" if serves(device) else
                f"torch.{device.type}")
    assert count >= 1, f"device_count() is {count}"
    if not serves(device):
        made = torch.empty(1, device=device)
        assert made.device.type == device.type, f"a tensor made on {device} is on {made.device}"
        return
    assert torch.accelerator.device_count() == device_module.device_count(), (
        f"torch.accelerator.device_count() is {torch.accelerator.device_count()}, "
        f"torch.{device.type}.device_count() {device_module.device_count()}")
    index = torch.accelerator.current_device_index()
    assert 0 <= index < count, f"current_device_index() is {index} of {count} devices"
    assert torch.empty(1, device=device.type).device.index == index
    last = count - 1
    with torch.accelerator.device_index(last):
        made = torch.empty(1, device=device.type)
        assert (torch.accelerator.current_device_index(), made.device.index) == (last, last), (
            f"inside device_index({last}) the current index is "
            f"{torch.accelerator.current_device_index()} and a new tensor is on {made.device}")
    assert torch.accelerator.current_device_index() == index, "device_index() did not restore"


def test_synchronize_completes_the_work(device, device_module):
    import torch

    x = torch.ones(256, 256, device=device)
    y = x @ x
    _synchronize(device, device_module)
    assert float(y[0, 0].cpu()) == 256.0


def test_side_stream_work_is_ordered_by_wait_stream(device, spec, record_data):
    import torch

    require(spec, "streams", "work on a side stream ordered by wait_stream")
    source, out = _filled(device, 2.0), _filled(device, 0.0)
    side, current = _side_stream(device)
    side.wait_stream(current)  # source and out were made on the current stream
    with side:
        assert torch.accelerator.current_stream(device.index) == side, (
            "inside `with stream:` the current stream is not that stream")
        out.copy_(source * 3)
    current.wait_stream(side)
    got = (out + 1).cpu()
    record_data(side_stream=side.stream_id, current_stream=current.stream_id)
    _ordered(got, 7.0, "current.wait_stream(side)")


def test_events_order_and_complete_work(device, spec, record_data):
    import torch

    require(spec, "events", "events that order work across streams")
    source, out = _filled(device, 2.0), _filled(device, 0.0)
    event = torch.Event(device=device)
    if claimed(spec, "streams"):
        side, current = _side_stream(device)
        side.wait_stream(current)
        with side:
            out.copy_(source * 5)
            event.record()
        current.wait_event(event)
        _ordered((out + 1).cpu(), 11.0, "current.wait_event(event recorded on the side stream)")
    else:
        out.copy_(source * 5)
        event.record()
    event.synchronize()
    assert event.query() is True, "event.query() is not True after event.synchronize()"
    record_data(with_side_stream=bool(claimed(spec, "streams")))


def test_event_elapsed_time(device, spec, record_data):
    import torch

    require(spec, "event_timing", "elapsed_time between two timing events")
    start, end = (torch.Event(device=device, enable_timing=True) for _ in range(2))
    x = torch.ones(128, 128, device=device)
    start.record()
    x = x @ x
    end.record()
    end.synchronize()
    elapsed = start.elapsed_time(end)
    record_data(elapsed_ms=elapsed)
    assert math.isfinite(elapsed) and elapsed >= 0.0, f"elapsed_time gave {elapsed} ms"


def test_memory_comes_back_after_del(device, device_module, spec, record_data):
    import torch

    require(spec, "memory_stats", "memory_allocated back to its baseline after del")
    memory, nbytes = Memory(device, device_module), 4 * MIB
    _synchronize(device, device_module)
    gc.collect()
    base = memory.allocated()
    x = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    _synchronize(device, device_module)
    grown, peak = memory.allocated() - base, memory.peak()
    del x
    _synchronize(device, device_module)
    gc.collect()
    after = memory.allocated()
    record_data(baseline=base, grown=grown, peak=peak, after=after)
    assert grown >= nbytes, (f"memory_allocated grew by {grown} bytes for a {nbytes}-byte "
                             "tensor: the statistics do not count the device's allocations")
    assert peak >= base + nbytes, f"max_memory_allocated {peak} is below {base} + {nbytes}"
    problem = leak_problem("memory_allocated", base, after, nbytes)
    if problem:
        pytest.fail(problem, pytrace=False)


def test_peak_memory_resets(device, device_module, spec, record_data):
    import torch

    require(spec, "memory_stats", "reset_peak_memory_stats")
    memory, nbytes = Memory(device, device_module), 2 * MIB
    memory.reset_peak()
    current, peak = memory.allocated(), memory.peak()
    assert peak == current, (f"after reset_peak_memory_stats, max_memory_allocated is {peak} "
                             f"and memory_allocated {current}: the peak was not reset")
    y = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    del y
    record_data(peak_after_reset=peak, peak_after_tensor=memory.peak())
    assert memory.peak() >= current + nbytes, (
        f"max_memory_allocated is {memory.peak()} after a {nbytes}-byte tensor on top of "
        f"{current}: the peak does not follow allocations after a reset")


def test_empty_cache_returns_memory(device, device_module, spec, record_data):
    import torch

    require(spec, "empty_cache", "memory returned by empty_cache")
    require(spec, "memory_stats", "the statistics empty_cache is checked against")
    memory, nbytes = Memory(device, device_module), 8 * MIB
    _synchronize(device, device_module)
    gc.collect()
    base, reserved = memory.allocated(), memory.reserved()
    x = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    del x
    _synchronize(device, device_module)
    memory.empty_cache()
    after, reserved_after = memory.allocated(), memory.reserved()
    record_data(reserved_before=reserved, reserved_after=reserved_after)
    problem = leak_problem("memory_allocated (after empty_cache)", base, after, nbytes)
    if problem:
        pytest.fail(problem, pytrace=False)
    assert reserved_after <= reserved, (
        f"memory_reserved is {reserved_after} bytes after del and empty_cache, more than the "
        f"{reserved} before the {nbytes}-byte tensor: empty_cache did not return it")


def test_same_seed_same_draws_in_two_processes(device, record_data):
    here, again = draws(device), draws(device)
    assert here == again, "torch.manual_seed with the same seed gave other draws the second time"
    elsewhere = draws_elsewhere()
    record_data(digest=here[:16])
    assert elsewhere == here, (
        "another process seeded the same (torch.manual_seed) drew other numbers on the device "
        f"(sha256 {elsewhere[:16]} against {here[:16]}): random draws are not reproducible")


def test_generator_state_saves_and_restores(device, device_module, spec, record_data):
    import torch

    require(spec, "generator_state", "get_rng_state / set_rng_state and Generator.get_state")
    module = torch if device.type == "cpu" else device_module
    state = module.get_rng_state()
    first = torch.randn(64, device=device).cpu()
    module.set_rng_state(state)
    assert torch.equal(torch.randn(64, device=device).cpu(), first), (
        f"torch.{device.type}.set_rng_state did not bring back the draws of the saved state")
    generator = torch.Generator(device=device).manual_seed(7)
    saved = generator.get_state()
    drawn = torch.randn(64, device=device, generator=generator).cpu()
    generator.set_state(saved)
    again = torch.randn(64, device=device, generator=generator).cpu()
    # refdev's generator is the CPU's (its random kernels run on the host): recorded, not hidden.
    record_data(generator_device=str(generator.device))
    assert torch.equal(again, drawn), "Generator.set_state did not bring back its draws"


@pytest.mark.parametrize("trip", ["device-to-cpu", "device-to-device", "cpu-to-device",
                                  "module-state"])
def test_save_load_round_trip(device, device_module, trip, record_data):
    import torch

    host = torch.arange(24, dtype=torch.float32).reshape(4, 6)

    def round_trip(obj, **load):
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        buffer.seek(0)
        return torch.load(buffer, **load)

    if trip == "module-state":
        # The state a device module saves comes back whole: every tensor bit for bit on the
        # CPU, and a CPU module loads it. (Never the device's output against the CPU's, bit for
        # bit: a correct device kernel may round a matmul otherwise, as PyTorch/XLA's does; the
        # ops layer judges that, with its tolerances, not this test.)
        torch.manual_seed(0)
        module = torch.nn.Linear(6, 3).to(device)
        own = {name: value.cpu() for name, value in module.state_dict().items()}
        state = round_trip(module.state_dict(), map_location="cpu")
        assert sorted(state) == sorted(own), f"the saved state holds {sorted(state)}"
        differ = [name for name in own if not (state[name].device.type == "cpu"
                                               and torch.equal(state[name], own[name]))]
        assert not differ, ("the module's state after torch.save/torch.load(map_location="
                            f"'cpu') differs from the device module's own: {differ}")
        plain = torch.nn.Linear(6, 3)
        plain.load_state_dict(state)
        assert all(torch.equal(value, own[name]) for name, value in plain.state_dict().items()), \
            "a CPU module loaded from the saved state does not hold the device module's weights"
        return
    source = host.to(device) if trip.startswith("device") else host
    target = torch.device("cpu") if trip == "device-to-cpu" else _last(device, device_module)
    loaded = round_trip(source) if trip == "device-to-device" else \
        round_trip(source, map_location=target)
    want = source.device if trip == "device-to-device" else target
    storage = _storage_device(loaded)
    record_data(loaded_on=str(loaded.device), storage_on=str(storage or "no storage"))
    assert (loaded.device, storage or want) == (want, want), (
        f"torch.load gave a tensor on {loaded.device} with its storage on {storage}, "
        f"not on {want}")
    assert torch.equal(loaded.cpu(), host), "the loaded tensor's values differ from the saved"


def _storage_device(tensor):
    """The device of the tensor's storage, or None for a tensor that has none (PyTorch/XLA's
    tensors live in the XLA runtime, not in a storage)."""
    try:
        return tensor.untyped_storage().device
    except (RuntimeError, NotImplementedError):
        return None


def _last(device, device_module):
    """The device's last index (a map_location other than the current one where there are
    several), or the device itself where it has no index (the CPU)."""
    import torch

    if device.type == "cpu":
        return device
    count = runtime_call(device, device_module, "device_count")()
    return torch.device(device.type, count - 1)


def test_pinned_host_memory(device, device_module, spec, record_data):
    import torch

    require(spec, "pinned_memory", "pin_memory() and is_pinned()")
    host = torch.arange(4096, dtype=torch.float32)
    assert not host.is_pinned(), "a plain CPU tensor says it is pinned"
    pinned = host.pin_memory()
    assert pinned.is_pinned(), "tensor.pin_memory() gave a tensor that is not pinned"
    on_device = pinned.to(device, non_blocking=True)
    _synchronize(device, device_module)
    record_data(nbytes=pinned.numel() * pinned.element_size())
    assert torch.equal(on_device.cpu(), host), "a non_blocking copy from pinned memory differs"


def test_fork_after_the_device_was_opened(device, spec, record_data):
    import torch

    claim = require(spec, "fork", "a child forked after the device was opened")
    torch.ones(2, device=device).sum().cpu()  # the device is in use before the fork
    outcome = fork_and_compute(lambda: float((torch.ones(3, device=device) * 2).sum().cpu()))
    record_data(claim=claim, value=outcome.value, error=outcome.error, how=outcome.how)
    problem = fork_problem(claim, outcome, 6.0, str(device))
    if problem:
        pytest.fail(problem, pytrace=False)
