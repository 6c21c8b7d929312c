"""The runtime layer's means (verify/test_runtime.py): which API reaches the device's runtime
(``torch.accelerator`` where it serves the device, else ``torch.<device>``), the random draws
two processes must agree on, a forked child's answer, and the words of each failure.

Run as a script (``python oota_runtime.py draws``), it opens the device as the suite does and
prints the digest of :func:`draws`: the second process of the RNG check.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SEED = 1234
MIB = 1 << 20
# How long a forked child may take to answer before it counts as hung.
FORK_DEADLINE_S = 120.0


def serves(device: Any) -> bool:
    """Whether ``torch.accelerator`` is this device's runtime API (torch 2.6+, and the device
    is the process's current accelerator: CUDA, XPU, MPS, PrivateUse1 backends...)."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    current = accelerator.current_accelerator() if accelerator is not None else None
    return current is not None and current.type == device.type


def runtime_call(device: Any, device_module: Any, name: str) -> Callable[..., Any]:
    """``torch.accelerator.NAME`` where it serves the device, else ``torch.<device>.NAME``;
    AttributeError naming both where neither has it."""
    import torch

    if serves(device) and hasattr(torch.accelerator, name):
        return getattr(torch.accelerator, name)
    if hasattr(device_module, name):
        return getattr(device_module, name)
    place = "torch.accelerator does not serve it" if not serves(device) else (
        f"torch.accelerator has no {name}")
    raise AttributeError(f"torch.{device.type}.{name} does not exist and {place}")


@dataclass(frozen=True)
class Memory:
    """The device's memory statistics, read through :func:`runtime_call`."""

    device: Any
    device_module: Any

    def _call(self, name: str, *args: Any) -> Any:
        return runtime_call(self.device, self.device_module, name)(*args)

    def _index(self) -> Any:
        return self.device.index if self.device.index is not None else None

    def allocated(self) -> int:
        return int(self._call("memory_allocated", self._index()))

    def peak(self) -> int:
        return int(self._call("max_memory_allocated", self._index()))

    def reserved(self) -> int:
        return int(self._call("memory_reserved", self._index()))

    def reset_peak(self) -> None:
        self._call("reset_peak_memory_stats", self._index())

    def empty_cache(self) -> None:
        self._call("empty_cache")


def draws(device: Any) -> str:
    """The digest of random draws on ``device`` right after ``torch.manual_seed(SEED)``: normal,
    uniform, integers and a dropout mask, each copied to the CPU as raw bytes."""
    import torch

    torch.manual_seed(SEED)
    samples = [torch.randn(256, device=device), torch.rand(256, device=device),
               torch.randint(0, 1 << 20, (256,), device=device),
               torch.nn.functional.dropout(torch.ones(256, device=device), p=0.5)]
    digest = hashlib.sha256()
    for sample in samples:
        digest.update(sample.cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def draws_elsewhere(timeout_s: float = 300.0) -> str:
    """:func:`draws` in a new process that opens the device as the suite does; its digest,
    or RuntimeError with the child's last words."""
    import subprocess

    done = subprocess.run([sys.executable, os.path.abspath(__file__), "draws"],
                          capture_output=True, text=True, timeout=timeout_s)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"the second process exited {done.returncode}: {tail}")
    return lines[-1]


@dataclass(frozen=True)
class ForkOutcome:
    """What a child forked after the device was opened did with it: ``value`` (its result)
    or ``error`` (the exception it raised), or neither where it died or hung (``how``)."""

    value: float | None = None
    error: str = ""
    how: str = ""


def fork_and_compute(compute: Callable[[], float]) -> ForkOutcome:
    """Fork; the child runs ``compute`` and reports through a pipe, never returning here."""
    read, write = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns that fork() in a multi-threaded process may deadlock: that is the
        # risk under test (a child that hangs is reported as such, FORK_DEADLINE_S).
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: answer, then leave without running anything of pytest's
        try:
            try:
                answer: dict[str, Any] = {"value": float(compute())}
            except BaseException as exc:  # noqa: BLE001 - the answer to report
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                answer = {"error": f"{type(exc).__name__}: {first}"}
            os.write(write, json.dumps(answer).encode())
        finally:
            os._exit(0)
    os.close(write)
    return _child_answer(pid, read)


def _child_answer(pid: int, read: int) -> ForkOutcome:
    deadline = time.monotonic() + FORK_DEADLINE_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(read)
            return ForkOutcome(how=f"hung: no answer within {FORK_DEADLINE_S:.0f} s")
        time.sleep(0.05)
    with os.fdopen(read, "rb") as pipe:
        raw = pipe.read()
    if os.WIFSIGNALED(status):
        return ForkOutcome(how=f"died of signal {os.WTERMSIG(status)}")
    if not raw:
        return ForkOutcome(how=f"exited {os.WEXITSTATUS(status)} without an answer")
    answer = json.loads(raw)
    return ForkOutcome(value=answer.get("value"), error=answer.get("error", ""))


def fork_problem(claim: str, outcome: ForkOutcome, want: float, device: str) -> str:
    """Why ``outcome`` breaks the vendor's ``fork`` claim ('works' or 'fails'), or ''."""
    if outcome.how:
        return (f"a child forked after {device} was opened {outcome.how}: it neither computed "
                f"nor raised a clear error (the vendor declares fork: {claim})")
    if claim == "works":
        if outcome.error:
            return (f"a child forked after {device} was opened raised {outcome.error}, but the "
                    "vendor declares fork: works")
        if outcome.value != want:
            return (f"a child forked after {device} was opened computed {outcome.value}, not "
                    f"{want} (the vendor declares fork: works)")
        return ""
    if not outcome.error:
        return (f"a child forked after {device} was opened computed {outcome.value} with no "
                "error, but the vendor declares fork: fails (set verify.capabilities.fork: "
                "works if it is meant to)")
    return ""


def leak_problem(what: str, base: int, after: int, nbytes: int) -> str:
    """Why memory at ``after`` (from ``base``, once a tensor of ``nbytes`` was deleted) shows a
    leak, or ''."""
    if after == base:
        return ""
    return (f"{what} is {after - base} bytes above its baseline ({base}) after the "
            f"{nbytes}-byte tensor was deleted: the allocator did not give it back (a leak)"
            if after > base else
            f"{what} fell {base - after} bytes below its baseline of {base} after the "
            f"{nbytes}-byte tensor was deleted: the statistics do not add up")


def _open_and_draw() -> int:
    from oota_suite import opened_device, read_cell

    with opened_device(read_cell()) as device:
        if isinstance(device, str):
            print(f"oota runtime: {device}", file=sys.stderr)
            return 3
        print(draws(device))
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["draws"]:
        print("usage: oota_runtime.py draws", file=sys.stderr)
        sys.exit(2)
    sys.exit(_open_and_draw())
