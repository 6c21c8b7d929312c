"""Host tests of refdev's runtime: streams, events, memory statistics through
torch.accelerator, fork, and the runtime fault switches."""

import gc
import os

import pytest
import torch
import torch_refdev  # noqa: F401 - registers the device
from test_refdev import run_python

DEV = torch.device("refdev")


@pytest.fixture(autouse=True)
def _side_streams_done_after():
    yield
    for index in range(torch.refdev.device_count()):
        torch.refdev.synchronize(index)


# --------------------------------------------------------------------------
# Streams and events
# --------------------------------------------------------------------------


def test_new_streams_come_from_a_pool_apart_from_the_default_stream():
    default = torch.accelerator.current_stream()
    assert default.stream_id == 0 and default.device == torch.device("refdev:0")
    side = torch.Stream(device="refdev:1")
    assert side.device_index == 1 and 1 <= side.stream_id <= 8
    with side:
        assert torch.accelerator.current_stream(1) == side
    assert torch.accelerator.current_stream(1).stream_id == 0


def test_a_side_stream_s_writes_are_seen_only_after_a_wait():
    out = torch.zeros(64, device=DEV)
    source = torch.full((64,), 2.0, device=DEV)
    side = torch.Stream(device=DEV)
    side.wait_stream(torch.accelerator.current_stream())
    with side:
        out.copy_(source * 3)
    # The default stream did not wait: the side stream's result is not there yet.
    assert (out + 1).cpu().tolist() == [1.0] * 64
    torch.accelerator.current_stream().wait_stream(side)
    assert (out + 1).cpu().tolist() == [7.0] * 64


def test_a_side_stream_keeps_its_own_order():
    x = torch.ones(8, device=DEV)
    side = torch.Stream(device=DEV)
    with side:
        x.add_(1)
        x.mul_(5)            # reads the add's result: the stream's earlier work
        value = x.sum().item()  # a read on the stream waits for it, as .item() does
    assert value == 80.0


@pytest.mark.parametrize("complete", [
    lambda side, event: torch.accelerator.current_stream().wait_event(event),
    lambda side, event: event.synchronize(),
    lambda side, event: side.synchronize(),
    lambda side, event: torch.refdev.synchronize(),
    lambda side, event: torch.accelerator.synchronize(),
    lambda side, event: event.query(),
], ids=["wait_event", "event.synchronize", "stream.synchronize", "refdev.synchronize",
        "accelerator.synchronize", "event.query"])
def test_each_way_of_waiting_completes_the_side_stream(complete):
    out = torch.zeros(4, device=DEV)
    side = torch.Stream(device=DEV)
    with side:
        out.fill_(7)
        event = torch.Event(device=DEV)
        event.record()
    assert out.cpu().tolist() == [0.0] * 4
    complete(side, event)
    assert out.cpu().tolist() == [7.0] * 4


def test_elapsed_time_needs_timing_events_and_is_not_negative():
    start, end = (torch.Event(device=DEV, enable_timing=True) for _ in range(2))
    start.record()
    torch.ones(32, 32, device=DEV).sum()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    plain = torch.Event(device=DEV)
    plain.record()
    with pytest.raises(ValueError, match="enable_timing=True"):  # torch.Event says so first
        start.elapsed_time(plain)


def test_a_resize_waits_for_the_writes_queued_into_the_old_memory():
    x = torch.zeros(4, device=DEV)
    side = torch.Stream(device=DEV)
    with side:
        x.fill_(3)
    x.resize_(1000)
    assert x[:4].cpu().tolist() == [3.0] * 4


# --------------------------------------------------------------------------
# Memory through torch.accelerator
# --------------------------------------------------------------------------


def test_accelerator_memory_statistics_follow_the_allocator():
    gc.collect()
    base = torch.accelerator.memory_allocated(0)
    x = torch.empty(1 << 20, device=DEV)  # 4 MiB
    assert torch.accelerator.memory_allocated(0) == base + (4 << 20)
    assert torch.accelerator.max_memory_allocated(0) >= base + (4 << 20)
    assert torch.accelerator.memory_reserved(0) == torch.accelerator.memory_allocated(0)
    stats = torch.accelerator.memory_stats(0)
    assert stats["allocated_bytes.large_pool.current"] >= 4 << 20
    del x
    torch.accelerator.empty_cache()
    assert torch.accelerator.memory_allocated(0) == base
    torch.accelerator.reset_peak_memory_stats(0)
    assert torch.accelerator.max_memory_allocated(0) == base
    torch.accelerator.reset_accumulated_memory_stats(0)
    assert torch.accelerator.memory_stats(0)["allocated_bytes.all.freed"] == 0
    assert torch.refdev.memory_stats(0)["total_freed_bytes"] == 0


# --------------------------------------------------------------------------
# Fork, and the fault switches
# --------------------------------------------------------------------------


def test_a_child_forked_after_the_device_was_used_computes_on_it():
    torch.ones(2, device=DEV).sum()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, never return to pytest
        try:
            os.write(write, str(float((torch.ones(3, device=DEV) * 2).sum().cpu())).encode())
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    assert answer == "6.0"


STREAM_CHECK = """
import torch, torch_refdev
out = torch.zeros(4, device='refdev')
side = torch.Stream(device='refdev')
with side:
    out.fill_(7)
torch.accelerator.current_stream().wait_stream(side)
print(out.cpu().tolist())
"""

LEAK_CHECK = """
import torch, torch_refdev
base = torch.accelerator.memory_allocated(0)
x = torch.empty(1024, device='refdev')
del x
print(torch.accelerator.memory_allocated(0) - base)
"""


def test_stream_nowait_makes_a_wait_order_nothing():
    assert run_python(STREAM_CHECK).strip() == "[7.0, 7.0, 7.0, 7.0]"
    assert run_python(STREAM_CHECK, REFDEV_STREAM_NOWAIT="1").strip() == "[0.0, 0.0, 0.0, 0.0]"


def test_leak_alloc_keeps_freed_memory_allocated():
    assert run_python(LEAK_CHECK).strip() == "0"
    assert run_python(LEAK_CHECK, REFDEV_LEAK_ALLOC="1").strip() == "4096"
