"""The ``oota`` command: invoke's own program running the tasks of ``tasks.py``, with a command
line it cannot parse reported as bad input (exit 2).

``oota build --vendor=cpu`` is ``invoke build --vendor=cpu`` with one difference: invoke exits 1
when it cannot parse the command line (an unknown task or flag, a flag without its value),
where our exit codes (README.md) say 2, bad input. invoke documents subclassing its ``Program``
to ship a program of one's own; the two parse steps are wrapped here and nothing else changes,
so ``invoke TASK`` keeps working the same way (except for that exit code).
"""

from __future__ import annotations

import difflib
import re

from invoke.exceptions import Exit, ParseError
from invoke.program import Program

from oota import __version__
from oota.errors import EXIT_BAD_INPUT

HELP_FLAGS = ("--help", "-h")
_UNKNOWN = re.compile(r"^No idea what '(?P<token>.*)' is!$")
# invoke names a flag by its Argument's repr: <Argument: ca_bundle (c)>.
_FLAG = re.compile(r"^Flag <Argument: (?P<name>[\w-]+)[^>]*> (?P<what>needed value|doesn't take)")


def parse_error_message(exc: ParseError) -> str:
    """One line for a command line invoke could not parse, with a did-you-mean for a
    misspelled flag and where to find the valid ones."""
    task = getattr(exc.context, "name", None)
    text, hint = str(exc), ""
    where = f"`oota {task} --help` lists its flags" if task else "`oota --help` lists the flags"
    flag = _FLAG.match(text)
    if flag:
        name = "--" + flag.group("name").replace("_", "-")
        text = f"{name} needs a value" if flag.group("what") == "needed value" \
            else f"{name} takes no value"
    unknown = _UNKNOWN.match(text)
    if unknown and unknown.group("token").startswith("-"):
        token = unknown.group("token").split("=")[0]
        text = f"unknown flag '{token}'"
        flags = list(exc.context.flags) if exc.context is not None else []
        close = difflib.get_close_matches(token, flags, n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'? " if close else ""
    elif unknown:
        token = unknown.group("token")
        text = f"'{token}' is neither a task nor a value of a flag of {task}" if task \
            else f"unknown task '{token}'"
        where = where if task else "`oota --list` lists the tasks"
    return f"error: {text} ({hint}{where})"


class OotaProgram(Program):
    """invoke's Program, with parse errors as exit code 2 (bad input) instead of 1."""

    def parse_core(self, argv: list[str] | None) -> None:
        try:
            super().parse_core(argv)
        except ParseError as exc:
            raise Exit(parse_error_message(exc), code=EXIT_BAD_INPUT) from None

    def parse_tasks(self) -> None:
        try:
            super().parse_tasks()
        except ParseError as exc:
            raise Exit(parse_error_message(exc), code=EXIT_BAD_INPUT) from None
        # invoke reads `oota pull --help` as pull's REF being '--help' and would run the task
        # with it: a help request, wherever it stands, only prints the task's help.
        for context in self.tasks:
            if any(arg.value in HELP_FLAGS for arg in context.positional_args):
                self.print_task_help(str(context.name))
                raise Exit(code=0)


def main() -> None:
    """The ``oota`` console script (and ``python -m oota``)."""
    OotaProgram(name="oota", binary="oota", binary_names=["oota"], version=__version__).run()
