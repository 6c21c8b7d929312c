"""The one exception hierarchy; the task layer maps each class to an exit code.

The exit codes are the ``EXIT_*`` constants below, each said once to users in
docs/reference/exit-codes.md (a unit test checks the page lists exactly these).
"""

from __future__ import annotations

import signal

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_HOST_LOST = 4
EXIT_REFUSED = 5
EXIT_INTERRUPTED = 130
# A reader that closed our standard output early (`oota --list | head -1`) ends the command
# as it ends a shell tool: no traceback, the status of a process that SIGPIPE stopped.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


class OotaError(Exception):
    """Base of every error the toolkit raises on purpose."""

    exit_code = EXIT_FAILED


class InputError(OotaError):
    """The user's input (matrix, vendor data, flags) is wrong; the message says how to fix it."""

    exit_code = EXIT_BAD_INPUT


class MatrixError(InputError):
    """One or more problems in a YAML data file, each located as file:line:column: path.

    One problem is one line; several are counted, then listed one per line."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        if len(problems) == 1:
            super().__init__(problems[0])
        else:
            super().__init__(f"{len(problems)} problems:\n"
                             + "\n".join(f"  {p}" for p in problems))


class EnvironmentProblem(OotaError):
    """Something outside the project is missing: Docker, BuildKit, a host tool."""

    exit_code = EXIT_ENVIRONMENT


class EnvironmentFault(OotaError):
    """The environment broke a cell's step: a registry or base image that cannot be reached, a
    full disk, a lost Engine. The cell's status is 'error', not 'failed': nothing of its stack
    was tested. ``short`` is the one line results and summaries show; the message has the
    evidence, said once where it happened."""

    def __init__(self, message: str, *, short: str):
        self.short = short
        super().__init__(message)


class StepFailed(OotaError):
    """A build or verify step failed; carries the evidence a user needs."""

    def __init__(self, message: str, *, command: list[str] | None = None,
                 returncode: int | None = None, log_tail: str = ""):
        # The command's exit status; ``exit_code`` is oota's own (OotaError), for the task.
        self.command = command or []
        self.returncode = returncode
        self.log_tail = log_tail
        super().__init__(message)
