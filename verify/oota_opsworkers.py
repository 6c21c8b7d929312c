"""The ops layer on every core: its operator × dtype pairs judged by several worker processes
that share the device, reported by the pytest run in its own order.

The pytest process (``test_ops.py``) collects the pairs and reports one test per pair, in the
layer's order. It starts ``OOTA_OPS_WORKERS`` worker processes (by default one per core this
container may use; ``python oota_opsworker.py``) while the other layers run. Each worker opens
the device as the suite does, then walks the pairs in order and *claims* the next unclaimed one
(a file created exclusively in a shared folder), judges it with ``test_ops.judge_pair``, and
leaves the result beside the claim. The pytest process waits for each pair's result in turn
and reports it: the tests, their records and the recorded cases come out in the same order as
with one process, and each pair's samples come from its own seed, so the verdicts are the same
whichever worker judged it.

A worker that dies (a kernel that crashes the process: the vendor's SIGSEGV or SIGFPE) fails
the pair it held, naming the signal, with the end of its log (the worker's Python stack, from
faulthandler), and another worker is started in its place; once MAX_RESTARTS were started and
none is left, every pair still unjudged ends with that reason (a must-pass operator's failed,
any other's skipped, not judged): a crash never ends the layer or the run, and never hangs it.
``OOTA_OPS_WORKERS=0`` judges the pairs in the pytest process itself, for a device that only
one process at a time may open (a crash then ends the run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oota_journal import ended

WORKERS_VARIABLE = "OOTA_OPS_WORKERS"
FOLDER_VARIABLE = "OOTA_OPS_FOLDER"
THREADS_VARIABLE = "OOTA_OPS_THREADS"  # torch's threads in one worker
GO_FILE = "go"  # holds the budget's start, seconds since the epoch: the workers may judge
MAX_RESTARTS = 8
POLL_S = 0.01
HERE = Path(__file__).resolve().parent


def workers_wanted(environ: Any = os.environ, variables: tuple[str, ...] = (WORKERS_VARIABLE,),
                   default: int | None = None) -> int:
    """``OOTA_OPS_WORKERS`` (the first of ``variables`` set), else ``default``, else the cores
    this process may run on; 0: none, the pytest process judges (a ValueError names the
    variable when it holds something else than a whole number)."""
    for variable in variables:
        text = str(environ.get(variable, "")).strip()
        if text:
            if not text.isdigit():
                raise ValueError(f"{variable}={text!r} is not a whole number (0: judge in "
                                 "the pytest process)")
            return int(text)
    return _cores() if default is None else default


def _cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return max(1, len(affinity(0)) if affinity else (os.cpu_count() or 1))


@dataclass
class PairResult:
    """One operator × dtype judged: the test's outcome, its record in tests.json and the case
    it records (made in the pytest process or by a worker, reported alike)."""

    status: str  # passed, failed, skipped
    message: str
    data: dict[str, Any] = field(default_factory=dict)
    case: dict[str, Any] | None = None


def claim(folder: Path, index: int) -> bool:
    try:
        handle = os.open(folder / f"{index}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(handle, "w") as claim:
        claim.write(str(os.getpid()))
    return True


def _result_path(folder: Path, index: int) -> Path:
    return folder / f"{index}.result"


def write(folder: Path, index: int, result: PairResult) -> None:
    import torch

    tmp = folder / f"{index}.result.tmp"
    torch.save({"status": result.status, "message": result.message, "data": result.data,
                "case": result.case}, tmp)
    tmp.replace(_result_path(folder, index))


def _read(folder: Path, index: int) -> dict[str, Any]:
    import torch

    loaded = torch.load(_result_path(folder, index), map_location="cpu", weights_only=True)
    return dict(loaded)


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class Pool:
    """The worker processes of one ops layer run, started at the first pair asked for."""

    folder: Path | None = None
    workers: list[_Worker] = field(default_factory=list)
    index: dict[tuple[str, str], int] = field(default_factory=dict)
    restarts: int = 0
    _wanted: int | None = None
    _going: bool = False
    problem: str = ""
    _environment: dict[str, str] = field(default_factory=dict)
    must: frozenset[str] = frozenset()
    # A worker's command line (default: this interpreter running oota_opsworker.py).
    command: tuple[str, ...] = ()
    # Where the number of workers comes from (another layer's variable first, then the ops
    # layer's), and how many without any (None: one per core).
    variables: tuple[str, ...] = (WORKERS_VARIABLE,)
    default: int | None = None

    def wanted(self) -> int:
        """How many workers to run (0: none, the pytest process judges every pair); a bad
        ``OOTA_OPS_WORKERS`` is kept in :attr:`problem` and runs none."""
        if self._wanted is None:
            try:
                self._wanted = workers_wanted(variables=self.variables, default=self.default)
            except ValueError as exc:
                self.problem, self._wanted = str(exc), 0
        return self._wanted

    def result(self, name: str, dtype: str, budget: Any, late: str | None = None
               ) -> PairResult:
        """The pair's result, waiting for the worker judging it. ``late``: the budget's skip
        message when it is spent for this pair (None: it is not): a pair no worker has taken
        yet is then taken here and skipped with it, as a worker would skip it, without the
        round trip (one file each way, and this process's polling) that made every pair after
        the budget cost tens of milliseconds."""
        if self.folder is None:
            return PairResult(status="failed", message="the ops layer's worker processes were "
                              "not started")
        if not self._going:
            self._go(budget)
        index = self.index.get((name, dtype))
        if index is None:
            return PairResult(status="failed", message=f"{name} ({dtype}) is not among the "
                              "pairs the worker processes share")
        if late and claim(self.folder, index):  # no worker takes a pair claimed here
            return PairResult(status="skipped", message=late)
        path = _result_path(self.folder, index)
        while not path.exists():
            self._mind(index)
            time.sleep(POLL_S)
        return PairResult(**_read(self.folder, index))

    def start(self, pairs: list[tuple[str, str]], must: Collection[str] = ()) -> None:
        """Start the workers (while the other layers run, they import op_db and open the
        device); they judge nothing before :meth:`_go`. ``must``: the must-pass operators."""
        import atexit
        import shutil

        if self.folder is not None or os.environ.get(FOLDER_VARIABLE):
            return  # started already, or this is a worker
        self.folder = Path(tempfile.mkdtemp(prefix="oota-ops-"))
        atexit.register(shutil.rmtree, self.folder, True)
        atexit.register(self.close)
        self.index = {pair: i for i, pair in enumerate(pairs)}
        self.must = frozenset(must)
        # Each worker gets its share of the cores for torch's own threads: eight workers of
        # sixteen threads each on a 16-core GPU host starve one another (seen on an H200).
        threads = str(max(1, _cores() // self.wanted()))
        self._environment = {**os.environ, FOLDER_VARIABLE: str(self.folder),
                             WORKERS_VARIABLE: "1", THREADS_VARIABLE: threads,
                             "OMP_NUM_THREADS": threads}
        for _ in range(self.wanted()):
            self._spawn()

    def _go(self, budget: Any) -> None:
        """Let the workers judge, the budget's clock started when the first pair was asked."""
        assert self.folder is not None
        started = time.time() - (time.monotonic() - (budget.started or time.monotonic()))
        tmp = self.folder / "go.tmp"
        tmp.write_text(repr(started))
        tmp.replace(self.folder / GO_FILE)
        self._going = True

    def _spawn(self) -> None:
        assert self.folder is not None
        log = self.folder / f"worker-{len(self.workers)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                list(self.command or (sys.executable, str(HERE / "oota_opsworker.py"))),
                cwd=str(HERE), env=self._environment or None, stdout=out,
                stderr=subprocess.STDOUT)
        self.workers.append(_Worker(process=process, log=log))

    def _mind(self, waiting_for: int) -> None:
        """Fail the pairs a dead worker held, and start another in its place."""
        assert self.folder is not None
        for worker in list(self.workers):
            code = worker.process.poll()
            if code is None:
                continue
            held = [int(c.name.removesuffix(".claim")) for c in self.folder.glob("*.claim")
                    if c.read_text().strip() == str(worker.process.pid)
                    and not _result_path(self.folder, int(c.name.removesuffix(".claim")))
                    .exists()]
            self.workers.remove(worker)
            tail = worker.log.read_text(errors="replace")[-1500:].strip()
            for index in held:
                write(self.folder, index, PairResult(
                    status="failed", message=f"the worker process judging this pair ended "
                    f"({ended(code)}) before it had a result: {tail or 'no output'}"))
            if self._unclaimed() and self.restarts < MAX_RESTARTS:
                self.restarts += 1
                self._spawn()
            elif not self.workers:
                self._give_up(f"no worker process is left to judge this pair ({self.restarts} "
                              f"restarted after crashes; the last {ended(code)}): "
                              f"{tail or 'no output'}")

    def _give_up(self, why: str) -> None:
        """Every pair without a result gets one now (or the pytest process would wait for it
        for ever): a must-pass operator's fails, any other's is skipped, not judged."""
        assert self.folder is not None
        for (name, _dtype), index in self.index.items():
            if not _result_path(self.folder, index).exists():
                write(self.folder, index, PairResult(
                    status="failed" if name in self.must else "skipped", message=why))

    def _unclaimed(self) -> bool:
        assert self.folder is not None
        return any(not (self.folder / f"{i}.claim").exists() for i in self.index.values())

    def close(self) -> None:
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.process.terminate()
        for worker in self.workers:
            try:
                worker.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.process.kill()
        self.workers.clear()
