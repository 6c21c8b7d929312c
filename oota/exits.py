"""The task layer's one catch: a task's errors become exit codes (:mod:`oota.errors`), SIGINT
and SIGTERM one interruption (exit 130), and an unexpected error one line for the user, its
traceback saved. ``tasks.py`` wraps every task in :func:`errors_to_exit`; nothing else catches.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec

from invoke.exceptions import Exit

from oota.errors import EXIT_ENVIRONMENT, EXIT_FAILED, EXIT_INTERRUPTED, OotaError
from oota.execute.interrupts import signal_name, signals_as_interrupts
from oota.files import write_atomic
from oota.net import redact_text

P = ParamSpec("P")


def errors_to_exit(fn: Callable[P, None], error_log: Path) -> Callable[P, None]:
    """The one place errors become exit codes, and where SIGINT and SIGTERM become the same
    interruption (exit 130) for the whole task (oota/execute/interrupts.py). An unexpected
    error's traceback is saved to ``error_log`` (else to the temporary folder)."""
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        if os.environ.get("OOTA_DEBUG"):
            logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
        try:
            with signals_as_interrupts():
                return fn(*args, **kwargs)
        except Exit:  # a task's own exit code (a failed cell, a stale file)
            raise
        except OotaError as exc:
            raise Exit(redact_text(f"error: {exc}"), code=exc.exit_code) from None
        except KeyboardInterrupt as exc:
            raise Exit(f"interrupted ({signal_name(exc)})", code=EXIT_INTERRUPTED) from None
        except BrokenPipeError:  # `invoke matrix | head`: the reader left; no traceback
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise Exit(code=0) from None
        except OSError as exc:  # the system refused (a full disk, a permission): not a bug
            raise _unexpected(exc, f"{exc.filename}: {exc.strerror}" if exc.filename
                              else str(exc), EXIT_ENVIRONMENT, error_log) from None
        except Exception as exc:  # a bug: one line for the user, the traceback for the report
            raise _unexpected(exc, f"internal error: {type(exc).__name__}: {exc}",
                              EXIT_FAILED, error_log, report=True) from None
    return wrapper


def _unexpected(exc: BaseException, what: str, code: int, error_log: Path, *,
                report: bool = False) -> Exit:
    """An Exit with one line saying ``what`` and where the traceback was saved."""
    details = _save_traceback(exc, error_log)
    if os.environ.get("OOTA_DEBUG"):
        traceback.print_exception(exc)
    line = (what.splitlines() or [type(exc).__name__])[0]
    return Exit(redact_text(f"error: {line} (details: {details})"
                            + ("; please report it" if report else "")), code=code)


def _save_traceback(exc: BaseException, error_log: Path) -> str:
    text = redact_text(f"oota {' '.join(sys.argv[1:])}\n"
                       + "".join(traceback.format_exception(exc)))
    for path in (error_log, Path(tempfile.gettempdir()) / "oota-last-error.log"):
        try:
            write_atomic(path, text)
        except OSError:
            continue
        return os.path.relpath(path) if path.is_relative_to(Path.cwd()) else str(path)
    return "not saved: no writable place"
