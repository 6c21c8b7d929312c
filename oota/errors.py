"""The one exception hierarchy; the task layer maps each class to a documented exit code.

Exit codes (all of them, with every case: docs/reference/exit-codes.md):
  0  every selected cell passed (skips allowed)
  1  at least one cell failed, errored, or `generate --check` found stale files
  2  bad input: matrix/vendor data, unknown cell or vendor, bad flag
  3  environment: Docker Engine unreachable, BuildKit unavailable, a required tool missing
  4  every cell passed, but a host of hosts.yaml stopped answering (or never answered) during
     the run: its cells were retried on, or taken by, the other hosts of their vendor
  5  `invoke pull` refused the image before running it: unsigned, a signature of another image
     (re-tagged or tampered), a bad signature, or missing or mismatched provenance
  130 interrupted
  141 the program reading oota's output closed it early (as a shell tool stopped by SIGPIPE)
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_HOST_LOST = 4
EXIT_REFUSED = 5
EXIT_INTERRUPTED = 130


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
