"""A crash of the suite's process fails the test it was in, and the suite goes on.

The ops layer judges its pairs in worker processes, but the other layers (modules, optimizers,
autograd, runtime, models...) run their tests in pytest's own process: a vendor kernel that
segfaults there (torch_xla 2.9.0 in nn.CrossEntropyLoss, 2026-11-28) used to end the whole
verification with no result at all. The recorder (oota_recorder) writes a journal as it goes,
``$OOTA_VERIFY_OUT/tests.journal.jsonl``: a line when a test starts, its entry when it ends.
oota-verify runs pytest in a child process; where that process is killed by a signal, the test
it had started and not ended is recorded as failed ("the suite's process was killed by SIGSEGV
in this test", with the first lines of the fatal error's stack), and pytest runs again with
``OOTA_VERIFY_RESUME`` set: the recorder takes the journal's entries as they are and the suite
leaves out every test the journal holds. A crashed test is then retried in a fresh process
like any failed test (oota_rerun: its message says "killed by SIG..."), and a device health
probe decides whether the failures after it are the device's state.

Standard library only: oota-verify reads it before pytest is imported.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

JOURNAL = "tests.journal.jsonl"
CRASH_FILE = "crash.txt"  # the fatal error's stack (faulthandler), written by the recorder
RESUME_VARIABLE = "OOTA_VERIFY_RESUME"
MAX_RESUMES = 50  # crashes one verification survives; past them the run ends as before
STACK_LINES = 12


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def ended(code: int) -> str:
    """A process's exit status in words: 'exit code 3', 'killed by SIGSEGV' (the words
    oota_rerun's CRASH pattern finds), for every process the suite starts."""
    return f"exit code {code}" if code >= 0 else f"killed by {signal_name(-code)}"


class Journal:
    """The journal of one verification's tests, in ``out``."""

    def __init__(self, out: Path):
        self.path = out / JOURNAL

    def begin(self) -> float:
        """A new verification: an empty journal; its start time."""
        started = time.time()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"started_at": started}) + "\n")
        return started

    def _write(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as handle:  # one line, flushed at close: a crash keeps it
            handle.write(json.dumps(record) + "\n")

    def started(self, nodeid: str, layer: str) -> None:
        self._write({"start": nodeid, "layer": layer, "at": time.time()})

    def ended(self, entry: dict[str, Any]) -> None:
        self._write({"entry": entry})

    def read(self) -> tuple[float | None, list[dict[str, Any]], dict[str, Any] | None]:
        """(start time, the ended tests' entries in order, the test started and not ended)."""
        started_at, entries, running = None, {}, None
        if not self.path.exists():
            return started_at, [], None
        for line in self.path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:  # a line cut by the crash
                continue
            if "started_at" in record:
                started_at = record["started_at"]
            elif "start" in record:
                running = record
            elif "entry" in record:
                entries[record["entry"]["id"]] = record["entry"]
                if running and running["start"] == record["entry"]["id"]:
                    running = None
        return started_at, list(entries.values()), running

    def crashed(self, number: int, crash_text: str) -> str | None:
        """Record the running test as failed by the crash (signal ``number``); its id, or None
        where no test was running (a crash outside any test: nothing to resume from)."""
        _, _, running = self.read()
        if running is None:
            return None
        stack = _current_stack(crash_text)
        message = (f"the suite's process was {ended(-number)} in this test; "
                   "the suite went on with the tests after it in a new process"
                   + (f"; the stack: {stack}" if stack else ""))
        self.ended({"id": running["start"], "layer": running.get("layer", "vendor"),
                    "status": "failed", "message": message[:2000],
                    "duration_s": round(max(0.0, time.time() - running.get("at", 0)), 4)})
        return str(running["start"])


def _current_stack(text: str) -> str:
    """The crashing thread's frames from faulthandler's report, innermost first, one line."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.startswith(("Current thread", "Thread", "Stack"))), None)
    if start is None:
        return ""
    frames = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        frames.append(line.strip())
    return " | ".join([lines[0].strip(), *frames[:STACK_LINES]])
