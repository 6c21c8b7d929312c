"""A docker CLI process run with a deadline: its output streamed to a log file, BuildKit's
steps reported as they start and end, and every process still running stoppable at once."""

from __future__ import annotations

import io
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from oota.engine.base import RunOutcome, StepEvent

_STEP = re.compile(r"^#(\d+) \[([^\]]+)\] (.*)$")
_DONE = re.compile(r"^#(\d+) (DONE [\d.]+s|CACHED|ERROR.*)$")


class Running:
    """The CLI processes an engine has running (builds, attached runs), so that an interrupt
    stops them all."""

    def __init__(self) -> None:
        self._procs: set[subprocess.Popen[str]] = set()
        self._lock = threading.Lock()

    def add(self, proc: subprocess.Popen[str]) -> None:
        with self._lock:
            self._procs.add(proc)

    def discard(self, proc: subprocess.Popen[str]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop_all(self) -> None:
        with self._lock:
            running = list(self._procs)
        for proc in running:
            stop(proc)


def stream(argv: list[str], env: dict[str, str], log_path: Path | None, timeout_s: int,
           on_step: Callable[[StepEvent], None], live: Running) -> RunOutcome:
    """Run ``argv`` to its end or ``timeout_s`` (then killed: exit code 124), its output
    appended to ``log_path`` and BuildKit's steps given to ``on_step``; the process is one of
    ``live`` while it runs."""
    steps: dict[str, tuple[str, str]] = {}
    tail: list[str] = []
    expired = threading.Event()
    with _open_log(log_path) as sink, subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
            errors="replace") as proc:
        assert proc.stdout is not None

        def expire() -> None:
            expired.set()
            proc.kill()

        watchdog = threading.Timer(timeout_s, expire)
        watchdog.start()
        live.add(proc)
        try:
            for line in proc.stdout:
                sink.write(line)
                tail = (tail + [line.rstrip("\n")])[-40:]
                _parse_progress(line.rstrip("\n"), steps, on_step)
            code = proc.wait()
        except BaseException:
            # Interrupted (SIGINT/SIGTERM) or failed: stop the CLI now. Popen's own exit
            # would wait for a whole build; a stopped `docker build` cancels it in BuildKit.
            stop(proc)
            raise
        finally:
            watchdog.cancel()
            live.discard(proc)
    timed_out = expired.is_set()
    return RunOutcome(exit_code=124 if timed_out else code, timed_out=timed_out,
                      output_tail="\n".join(tail))


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL if the process has not ended within ten seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def _open_log(path: Path | None) -> Iterator[io.TextIOBase]:
    if path is None:
        yield io.StringIO()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        yield fh


def _parse_progress(line: str, steps: dict[str, tuple[str, str]],
                    on_step: Callable[[StepEvent], None]) -> None:
    started = _STEP.match(line)
    if started:
        number, name, instruction = started.groups()
        if not name.startswith("internal"):
            steps.setdefault(number, (name, instruction))
        return
    finished = _DONE.match(line)
    if finished and finished.group(1) in steps:
        name, instruction = steps.pop(finished.group(1))
        status = finished.group(2)
        seconds = float(status.split()[1][:-1]) if status.startswith("DONE") else 0.0
        on_step(StepEvent(name=name, instruction=instruction, seconds=seconds,
                          cached=status == "CACHED", failed=status.startswith("ERROR")))
