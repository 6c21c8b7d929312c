"""Interruptions: SIGINT (Ctrl-C) and SIGTERM end a run the same way.

Python turns SIGINT into ``KeyboardInterrupt``, but SIGTERM (what ``kill``, CI runners, systemd
and ``timeout`` send) ends the process on the spot: no result is written, no container or
context folder is removed. While :func:`signals_as_interrupts` is active, both signals raise
:class:`Interrupted` in the main thread. It is a ``KeyboardInterrupt``, so every handler written
for Ctrl-C handles SIGTERM too, and it says which signal it was, so a result can tell.

:func:`deferred` holds a signal back while a step that must not be cut in half runs (writing the
interrupted cell's result, removing the run's containers); the signal is raised when the step
ends. SIGKILL cannot be caught; :mod:`oota.execute.leftovers` cleans up after it on the next run.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

HANDLED: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal (``signal_name``: ``SIGINT`` or ``SIGTERM``)."""

    def __init__(self, signal_name: str = "SIGINT") -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def signal_name(exc: BaseException) -> str:
    """The signal behind an interruption; a plain ``KeyboardInterrupt`` came from SIGINT."""
    return exc.signal_name if isinstance(exc, Interrupted) else "SIGINT"


class _Deferral(threading.local):
    """Per thread: signal handlers run in the main thread and only its deferred() blocks hold
    a signal back; a worker thread's blocks (a parallel run's cells) must not."""

    depth: int = 0      # how many deferred() blocks are open
    pending: str = ""   # the first signal that arrived inside them


_deferral = _Deferral()
_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    if _deferral.depth:
        _deferral.pending = _deferral.pending or name
        return
    raise Interrupted(name)


@contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`Interrupted` inside the block; the handlers that were
    installed before come back when it ends. Outside the main thread (where Python cannot
    install handlers) the block runs with the process's handlers unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[signal.Signals, _Handler] = {sig: signal.getsignal(sig) for sig in HANDLED}
    for sig in HANDLED:
        signal.signal(sig, _raise_interrupted)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            # None: a handler not installed from Python; the default is the closest we can give
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


@contextmanager
def deferred() -> Iterator[None]:
    """Run the block to its end even if SIGINT or SIGTERM arrives; then raise the interruption.

    When the block itself ends with an exception (typically the interruption being handled),
    a signal that arrived meanwhile is dropped: the run is already stopping. Only signals
    routed through :func:`signals_as_interrupts` can be held back."""
    _deferral.depth += 1
    try:
        yield
    finally:
        _deferral.depth -= 1
        pending = _deferral.pending if not _deferral.depth else ""
        if not _deferral.depth:
            _deferral.pending = ""
    if pending:
        raise Interrupted(pending)
