"""The distributed layer's plan and its ranks: which cases a run holds, the inputs each rank
gives them, what the CPU says each rank must receive, and the processes that run them.

One run per world size: ``world_size`` processes (``python oota_distworker.py``), one per rank,
each opening the device as the suite does (rank r on device r modulo the device count) and
joining one process group on the vendor's backend over TCP on this host. Each rank walks the
same cases in the same order (:func:`plan`): a barrier, each collective in each dtype, then a
two-step DDP training; it writes the case it is in to ``rank<r>.progress`` before it starts it
and its outputs to ``rank<r>-<index>.pt`` after. The pytest process (``test_distributed.py``)
watches them (:class:`Launch`): a case that no rank leaves within the deadline ends the run,
every rank killed, and names each rank and the case it was in; a rank that exits early ends
the run with its exit and the end of its log (its Python stack, from faulthandler). Cases a
run never reached are not judged.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oota_opsworkers import ended

HERE = Path(__file__).resolve().parent
SEED = 20261128
CHUNK = 3                      # elements each rank's share of a tensor holds: keep it small
SENTINEL = -7                  # what an output holds before its collective writes it
DEADLINE_VARIABLE = "OOTA_DISTRIBUTED_TIMEOUT_S"
# A comma list that narrows the dtypes of one run (the Docker tests' smallest set: float32).
DTYPES_VARIABLE = "OOTA_DISTRIBUTED_DTYPES"
FOLDER_VARIABLE = "OOTA_DISTRIBUTED_FOLDER"
# Seconds one case may take (the vendor's timeout_s overrides it): a hang, not a slow host. 60 s
# made the DDP case flaky on a 2-core host verifying three images at once (CI, 2026-11-28: it
# failed there and passed when run again alone); PyTorch's own process-group default is 30 min.
DEFAULT_TIMEOUT_S = 300.0
POLL_S = 0.05
BASE = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
REDUCTIONS = frozenset({"all_reduce", "reduce_scatter"})
SETUP = "init_process_group"   # the progress of a rank that has not reached its first case
# Seconds a rank may take to import torch and the backend, open the device and join the group,
# at least: a loaded host's imports, not a hang.
SETUP_S = 120.0


@dataclass(frozen=True)
class Case:
    """One step every rank takes: a collective in a dtype, the barrier, or the DDP training."""

    index: int
    collective: str        # all_reduce, ..., barrier, ddp
    dtype: str = ""        # "" for the barrier and DDP (DDP trains in the model dtype)

    @property
    def id(self) -> str:
        return f"{self.collective}-{self.dtype}" if self.dtype else self.collective

    @property
    def words(self) -> str:
        return f"{self.collective} ({self.dtype})" if self.dtype else self.collective


def collectives(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The collectives a vendor's ``verify.distributed`` asks for: the four every backend has,
    all_to_all where claimed."""
    return BASE + (("all_to_all",) if spec.get("all_to_all") else ())


def dtypes_of(verify: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> list[str]:
    """The dtypes of the collectives: ``OOTA_DISTRIBUTED_DTYPES`` (those of the vendor's it
    names), else ``verify.distributed.dtypes``, else ``verify.dtypes``."""
    claim = verify.get("distributed") or {}
    dtypes = list(claim.get("dtypes") or verify.get("dtypes") or ["float32"])
    wanted = [d.strip() for d in str(environ.get(DTYPES_VARIABLE, "")).split(",") if d.strip()]
    return [d for d in dtypes if d in wanted] if wanted else dtypes


def plan(spec: Mapping[str, Any], dtypes: Sequence[str]) -> list[Case]:
    """Every case of one run, in the order each rank takes them."""
    steps = [("barrier", "")] + [(c, d) for d in dtypes for c in collectives(spec)]
    steps.append(("ddp", ""))
    return [Case(index=i, collective=c, dtype=d) for i, (c, d) in enumerate(steps)]


def deadline_s(spec: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> float:
    """Seconds one case may take on every rank: ``OOTA_DISTRIBUTED_TIMEOUT_S``, else the
    vendor's ``timeout_s``, else 300 (a ValueError names the variable when it is no number)."""
    text = str(environ.get(DEADLINE_VARIABLE, "")).strip()
    if text:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{DEADLINE_VARIABLE}={text!r} is not a number of seconds") \
                from None
    return float(spec.get("timeout_s") or DEFAULT_TIMEOUT_S)


# -- inputs and the CPU's answers ----------------------------------------------------------
def rank_input(case: Case, rank: int, world: int) -> Any:
    """The tensor ``rank`` gives ``case`` (on the CPU): world × CHUNK elements from a seed of
    its own, so every rank's share differs."""
    import torch

    gen = torch.Generator().manual_seed(SEED + 1000 * case.index + rank)
    dtype = getattr(torch, case.dtype)
    if dtype.is_floating_point:
        return torch.randn(world * CHUNK, generator=gen).to(dtype)
    return torch.randint(-50, 50, (world * CHUNK,), generator=gen).to(dtype)


def _total(values: Sequence[Any]) -> Any:
    out = values[0].clone()
    for value in values[1:]:
        out += value
    return out


def expected(case: Case, rank: int, world: int) -> list[Any]:
    """What ``rank`` must receive from ``case``'s collective, computed on the CPU from every
    rank's input (the broadcast's source is the last rank)."""
    inputs = [rank_input(case, r, world) for r in range(world)]
    shares = [x.chunk(world) for x in inputs]
    if case.collective == "all_reduce":
        return [_total(inputs)]
    if case.collective == "all_gather":
        return inputs
    if case.collective == "reduce_scatter":
        return [_total([s[rank] for s in shares])]
    if case.collective == "broadcast":
        return [inputs[world - 1]]
    if case.collective == "all_to_all":
        import torch

        return [torch.cat([s[rank] for s in shares])]
    raise ValueError(f"no CPU answer for {case.collective}")


def mismatch(case: Case, rank: int, got: Sequence[Any], want: Sequence[Any],
             tolerance: Mapping[str, float] | None) -> str:
    """Why ``rank``'s outputs of ``case`` differ from the CPU's, or ''. Element for element:
    exact, except a reduction over more than two ranks (the order of a sum is the backend's),
    which ``tolerance`` (rtol, atol) judges."""
    import torch

    for part, (a, b) in enumerate(zip(got, want, strict=True)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return (f"rank {rank} received {tuple(a.shape)} {a.dtype} in output {part}, the "
                    f"CPU {tuple(b.shape)} {b.dtype}")
        if tolerance is not None:
            same = torch.isclose(a.double(), b.double(), rtol=tolerance["rtol"],
                                 atol=tolerance["atol"])
        else:
            same = (a == b) | (torch.isnan(a) & torch.isnan(b)) if a.is_floating_point() \
                else a == b
        if not bool(same.all()) and bool((a == SENTINEL).all()):
            return (f"rank {rank}'s output {part} still holds what it held before the "
                    f"collective ({SENTINEL} in every element): it received no data, stale")
        if not bool(same.all()):
            first = int((~same).nonzero()[0][0])
            return (f"rank {rank} received wrong data in output {part}: "
                    f"{int((~same).sum())} of {a.numel()} elements differ from the same "
                    f"collective computed on the CPU; first at [{first}]: got "
                    f"{a[first].item()!r}, the CPU {b[first].item()!r}")
    return ""


# -- the ranks -------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Ending:
    """How a run ended where it did not finish: the case it ended in, and why."""

    index: int
    message: str


@dataclass
class Launch:
    """One run of every case on ``world`` ranks; :meth:`wait` returns how it ended."""

    world: int
    cases: list[Case]
    deadline: float
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="oota-dist-")))
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    command: tuple[str, ...] = ()

    def start(self, environ: Mapping[str, str]) -> None:
        atexit.register(shutil.rmtree, self.folder, True)
        atexit.register(self.close)
        port = str(free_port())
        for rank in range(self.world):
            env = {**environ, FOLDER_VARIABLE: str(self.folder), "RANK": str(rank),
                   "WORLD_SIZE": str(self.world), "MASTER_ADDR": "127.0.0.1",
                   "MASTER_PORT": port, DEADLINE_VARIABLE: repr(self.deadline)}
            with (self.folder / f"rank{rank}.log").open("wb") as log:
                self.processes.append(subprocess.Popen(
                    list(self.command or (sys.executable, str(HERE / "oota_distworker.py"))),
                    cwd=str(HERE), env=env, stdout=log, stderr=subprocess.STDOUT))

    def progress(self, rank: int) -> int:
        """The index of the case ``rank`` is in (-1: still joining the group)."""
        try:
            return int((self.folder / f"rank{rank}.progress").read_text() or -1)
        except (FileNotFoundError, ValueError):
            return -1

    def output(self, rank: int, index: int) -> Any:
        """What ``rank`` saved of case ``index`` (None where it saved nothing)."""
        import torch

        path = self.folder / f"rank{rank}-{index}.pt"
        return torch.load(path, weights_only=True) if path.exists() else None

    def wait(self) -> Ending | None:
        """Wait for every rank; None when all finished every case."""
        seen, since = None, time.monotonic()
        while True:
            codes = [p.poll() for p in self.processes]
            if all(code == 0 for code in codes):
                return None
            dead = next((r for r, code in enumerate(codes) if code not in (None, 0)), None)
            if dead is not None:
                return self._end(self._died(dead, int(codes[dead] or 0)))
            now = tuple(self.progress(r) for r in range(self.world))
            if now != seen:
                seen, since = now, time.monotonic()
            elif time.monotonic() - since > self._allowed(now):
                return self._end(self._hung(now))
            time.sleep(POLL_S)

    def _allowed(self, now: tuple[int, ...]) -> float:
        """Seconds the ranks may stay where they are: the deadline, SETUP_S at least while a
        rank is still joining the group."""
        return max(self.deadline, SETUP_S) if min(now) < 0 else self.deadline

    def _where(self, index: int) -> str:
        return SETUP if index < 0 else self.cases[index].words

    def _died(self, rank: int, code: int) -> Ending:
        index = self.progress(rank)
        tail = (self.folder / f"rank{rank}.log").read_text(errors="replace")[-1500:].strip()
        return Ending(index=max(index, 0), message=(
            f"rank {rank} of {self.world} ended ({ended(code)}) in {self._where(index)}: "
            f"{tail or 'no output'}"))

    def _hung(self, now: tuple[int, ...]) -> Ending:
        stuck = min(now)
        where = ", ".join(f"rank {r} in {self._where(i)}" for r, i in enumerate(now))
        return Ending(index=max(stuck, 0), message=(
            f"{self._where(stuck)} never completed: no rank moved on within the deadline of "
            f"{self._allowed(now):g} s ({where}); every rank was killed"))

    def _end(self, ending: Ending) -> Ending:
        self.close()
        return ending

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
        for process in self.processes:
            process.wait()
