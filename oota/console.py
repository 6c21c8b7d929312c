"""The one user-facing progress channel: stderr, a line per step with its duration.

On a TTY the running step shows a live elapsed-time line that the finished line replaces;
elsewhere (CI, pipes) only plain finished lines are written. On GitHub Actions
(``GITHUB_ACTIONS=true``) each step's lines fold under a ``::group::`` of its own, the step's
finished line just after it. Results go to stdout, never here.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

# Characters a terminal acts on or hides: controls (ESC starts a sequence that can rewrite the
# screen), format characters (a right-to-left override reverses what follows), line breaks.
_UNSEEN = frozenset(("Cc", "Cf", "Zl", "Zp"))

MARKS = {"ok": "ok  ", "cached": "hit ", "fail": "FAIL", "error": "ERR ", "skip": "skip",
         "info": "    ", "warn": "warn"}


def inert(value: object) -> str:
    """``value`` as one line of plain text a terminal shows as it is: every control, format
    or line-break character written as its escape (``\\x1b``, ``\\u202e``, ``\\n``). The
    text output's counterpart of the pages' HTML escaping, for values read from results."""
    text = str(value)
    if all(unicodedata.category(c) not in _UNSEEN for c in text):
        return text
    return "".join(ascii(c)[1:-1] if unicodedata.category(c) in _UNSEEN else c for c in text)


def folds_here(env: dict[str, str] | None = None) -> bool:
    """Whether this is a GitHub Actions job, whose log folds ``::group::`` blocks."""
    return (os.environ if env is None else env).get("GITHUB_ACTIONS") == "true"


class Console:
    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None,
                 fold: bool | None = None):
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.fold = folds_here() if fold is None else fold
        self._group = False
        self._lock = threading.Lock()
        self._status = ""
        self._since = 0.0
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    def line(self, kind: str, text: str, seconds: float | None = None) -> None:
        took = f" ({seconds:.1f}s)" if seconds is not None else ""
        with self._lock:
            if self.live and self._status:
                self.stream.write("\r\033[K")
            self.stream.write(f"{MARKS.get(kind, kind)} {text}{took}\n")
            self.stream.flush()

    def info(self, text: str) -> None:
        self.line("info", text)

    def warn(self, text: str) -> None:
        self.line("warn", text)

    def block(self, text: str, indent: str = "     | ") -> None:
        """A multi-line block (a log tail), indented so it reads as evidence."""
        with self._lock:
            for row in text.splitlines():
                self.stream.write(f"{indent}{row}\n")
            self.stream.flush()

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        """The body's lines folded under ``title`` (GitHub Actions' ``::group::``) when
        :attr:`fold` is on; plain lines otherwise, and while a group is open (groups do not
        nest)."""
        with self._lock:
            opened = self.fold and not self._group
            if opened:
                self._group = True
                self.stream.write(f"::group::{inert(title)}\n")
                self.stream.flush()
        try:
            yield
        finally:
            if opened:
                with self._lock:
                    self.stream.write("::endgroup::\n")
                    self.stream.flush()
                    self._group = False

    @contextmanager
    def unfolded(self) -> Iterator[None]:
        """No groups while the body runs: cells run side by side would write their lines
        into each other's groups."""
        fold, self.fold = self.fold, False
        try:
            yield
        finally:
            self.fold = fold

    @contextmanager
    def status(self, text: str) -> Iterator[None]:
        """While the body runs, show ``text`` with a live timer (TTY only). The timer shows one
        step: while another (a parallel run's other cell) has it, the body runs without."""
        with self._lock:
            taken = bool(self._status)
            if not taken:
                self._status, self._since = text, time.monotonic()
        if taken:
            yield
            return
        if self.live:
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        try:
            yield
        finally:
            self._stop.set()
            if self._ticker:
                self._ticker.join()
                self._ticker = None
            with self._lock:
                if self.live:
                    self.stream.write("\r\033[K")
                    self.stream.flush()
                self._status = ""

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                elapsed = time.monotonic() - self._since
                self.stream.write(f"\r\033[K  .. {self._status} {elapsed:5.0f}s")
                self.stream.flush()
