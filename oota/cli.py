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
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from invoke.exceptions import Exit, ParseError
from invoke.parser.argument import Argument
from invoke.parser.context import ParserContext
from invoke.program import Program
from invoke.tasks import Task
from invoke.util import yaml  # type: ignore[attr-defined]  # invoke's own copy of PyYAML

from oota import __version__
from oota.api.options import bind
from oota.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT
from oota.exits import errors_to_exit

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


def missing_value(argv: list[str], contexts: Mapping[str, ParserContext]
                  ) -> tuple[str, str] | None:
    """(task, flag) of the first repeatable flag given no value (``--vendor`` last, or followed
    by another flag, or ``--vendor=``), else None. invoke's parser refuses a missing value for
    other flags, but a repeatable one silently stays empty, and an empty ``--vendor`` means
    every vendor: a build of everything for a value left out."""
    task, context, pending = "", None, None   # pending: a flag whose value comes next
    for token in argv:
        if token == "--":  # the rest goes to the task as it is
            break
        if pending is not None:
            if pending and token.startswith("-"):
                return task, pending
            pending = None
            continue
        name, eq, value = token.partition("=")
        arg = context.flags.get(name) if context is not None else None
        if arg is not None and arg.takes_value:
            repeatable = arg.kind is list
            shown = "--" + str(arg.name).replace("_", "-")
            if eq and repeatable and not value:
                return task, shown
            if not eq:  # "": another flag's value, which invoke checks itself
                pending = shown if repeatable else ""
        elif arg is None and token in contexts:
            task, context = token, contexts[token]
    return (task, pending) if pending else None


TaskBody = Callable[..., None]


class FlagTask(Task[TaskBody]):
    """invoke's Task, without two habits of invoke 3: its help for a flag was used up by the
    first parser built (``oota`` builds one to find a repeatable flag left without a value, so
    ``--help`` then showed none), a dashed flag could get ``-`` as its short name
    (``--ca-bundle`` listed as ``--=STRING``), and a flag beginning with h took ``-h``
    (``oota pull -h`` was ``--host``, not help): ``-h`` is help everywhere."""

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts: dict[str, Any] = super().arg_opts(name, default, taken_names)
        opts["names"] = [n for n in opts["names"] if n not in ("-", "h")]
        return opts

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Plain `invoke publish --help` gives '--help' as publish's REGISTRY (`oota` prints the
        # task's help instead, OotaProgram.parse_tasks): never run a task with it.
        if any(kwargs.get(name) in HELP_FLAGS for name in self.positional):
            raise Exit(f"error: a help flag where {self.name} takes a value; `oota {self.name} "
                       "--help` shows its help", code=EXIT_BAD_INPUT)
        return super().__call__(*args, **kwargs)

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        kept = dict(self.help)
        try:
            return super().get_arguments(ignore_unknown_help)
        finally:
            self.help = kept


def task_of(error_log: Path) -> Callable[[TaskBody], FlagTask]:
    """The ``@task`` decorator of ``tasks.py``, typed (invoke's own returns a bare Callable,
    which mypy cannot check): the flags of a body come from oota/api/options.py, checked
    before it runs, and its errors become our exit codes (the traceback of an unexpected one
    goes to ``error_log``)."""
    def task(body: TaskBody) -> FlagTask:
        bound = bind(body)
        return FlagTask(errors_to_exit(bound.body, error_log), help=bound.help,
                        iterable=bound.iterable)
    return task


@contextmanager
def _configuration_read() -> Iterator[None]:
    """invoke's own configuration files (``/etc/invoke.yaml``, ``~/.invoke.yaml``, the
    project's ``invoke.yaml``) and ``tasks.py``, read before any task runs: one that cannot be
    read is exit 3 (the environment), one that is not YAML exit 2, each in one line naming it,
    never invoke's traceback (a HOME that is not readable, a config edited by hand)."""
    try:
        yield
    except BrokenPipeError:
        raise   # the reader of stdout went away (`oota --help | head`): main() ends quietly
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        raise Exit(f"error: {where}{exc.strerror or exc}; oota reads invoke's configuration "
                   "files before any task (fix the file's permissions, or point HOME at a "
                   "readable folder)", code=EXIT_ENVIRONMENT) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{mark.name}:{mark.line + 1}:{mark.column + 1}: " if mark else ""
        raise Exit(f"error: {where}invoke's configuration file is not YAML "
                   f"({' '.join(str(getattr(exc, 'problem', exc)).split())})",
                   code=EXIT_BAD_INPUT) from None


class OotaProgram(Program):
    """invoke's Program, with parse errors as exit code 2 (bad input) instead of 1, and its
    configuration files read as :func:`_configuration_read` says."""

    def create_config(self) -> None:
        with _configuration_read():
            super().create_config()

    def parse_collection(self) -> None:
        with _configuration_read():
            super().parse_collection()

    def update_config(self, merge: bool = True) -> None:
        with _configuration_read():
            super().update_config(merge)

    def parse_core(self, argv: list[str] | None) -> None:
        try:
            super().parse_core(argv)
        except ParseError as exc:
            raise Exit(parse_error_message(exc), code=EXIT_BAD_INPUT) from None

    def parse_tasks(self) -> None:
        missing = missing_value(self.core.unparsed, self._make_parser().contexts)
        if missing is not None:
            task, flag = missing
            raise Exit(f"error: {flag} needs a value (`oota {task} --help` lists its flags)",
                       code=EXIT_BAD_INPUT)
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


# A reader that closed our standard output early (`oota --list | head -1`) ends the command
# as it ends a shell tool: no traceback, the status of a process that SIGPIPE stopped.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


def main() -> None:
    """The ``oota`` console script (and ``python -m oota``)."""
    try:
        OotaProgram(name="oota", binary="oota", binary_names=["oota"], version=__version__).run()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would report the same error again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_BROKEN_PIPE)
