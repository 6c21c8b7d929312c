"""The ``oota`` command: invoke's own program running the tasks of ``oota/tasks.py`` wherever
it runs (whatever ``tasks.py`` the folder holds), with a command line it cannot parse reported
as bad input (exit 2).

``oota build --vendor=cpu`` is ``invoke build --vendor=cpu`` with one difference: invoke exits 1
when it cannot parse the command line (an unknown task or flag, a flag without its value),
where our exit codes (docs/reference/exit-codes.md) say 2, bad input. invoke documents
subclassing its ``Program`` to ship a program of one's own; the two parse steps are wrapped
here and nothing else changes, so ``invoke TASK`` keeps working the same way (except for that
exit code).
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from invoke.collection import Collection
from invoke.exceptions import Exit, ParseError
from invoke.parser.argument import Argument
from invoke.parser.context import ParserContext
from invoke.program import Program
from invoke.util import yaml  # type: ignore[attr-defined]  # invoke's own copy of PyYAML

from oota import __version__
from oota.errors import EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_ENVIRONMENT
from oota.tasking import HELP_FLAGS


def _split(token: str, context: ParserContext | None) -> list[str]:
    """``token`` as invoke's parser splits it: ``--flag=value`` and ``-fvalue`` (a short flag
    taking a value) in two, ``-qv`` (short switches) in one token each."""
    if not token.startswith("-") or token == "-":
        return [token]
    if "=" in token:
        name, _, value = token.partition("=")
        return [name, value]
    if token.startswith("--") or len(token) <= 2:
        return [token]
    head = token[:2]
    arg = context.flags.get(head) if context is not None else None
    if arg is not None and arg.takes_value:
        return [head, token[2:]]
    return [f"-{c}" for c in token[1:]]


@dataclass
class _Walk:
    """Where a walk over the command line is: the task whose flags apply, its positional
    flags still to come, and a flag waiting for its value (with whether it is repeatable)."""
    task: str = ""
    context: ParserContext | None = None
    positional: list[str] = field(default_factory=list)
    pending: Argument | None = None

    def flag_name(self, arg: Argument) -> str:
        return "--" + str(arg.name).replace("_", "-")

    def where(self) -> str:
        return f"`oota {self.task} --help` lists its flags" if self.task \
            else "`oota --help` lists the flags"


def command_line_problem(argv: list[str], contexts: Mapping[str, ParserContext],
                         initial: ParserContext | None = None) -> str | None:
    """What is wrong with the tasks' part of a command line, as one line, or None: an unknown
    task or flag (with a did-you-mean), a flag without its value, a word that is neither a
    task nor a value. Read from the tasks' flags themselves, the way invoke's parser reads
    them; it also refuses a repeatable flag left without a value (``--vendor`` last, before
    another flag, or ``--vendor=``), which invoke keeps as an empty list: an empty
    ``--vendor`` means every vendor, a build of everything for a value left out."""
    walk = _Walk()
    for raw in argv:
        if raw == "--":  # the rest goes to the task as it is
            break
        for i, token in enumerate(_split(raw, walk.context if walk.pending is None else None)):
            problem = _step(walk, token, contexts, initial, split=i > 0)
            if problem:
                return f"error: {problem}"
    if walk.pending is not None:
        return f"error: {walk.flag_name(walk.pending)} needs a value ({walk.where()})"
    return None


def _step(walk: _Walk, token: str, contexts: Mapping[str, ParserContext],
          initial: ParserContext | None, *, split: bool) -> str | None:
    context = walk.context
    known = context is not None and (token in context.flags or token in context.inverse_flags)
    core = initial is not None and token in initial.flags
    if walk.pending is not None:
        arg, walk.pending = walk.pending, None
        refused = (known or core) if arg.kind is not list else token.startswith("-") or \
            (split and not token)
        if refused:
            return f"{walk.flag_name(arg)} needs a value ({walk.where()})"
        return None
    if known and context is not None:
        # The flags are a Lexicon: indexing resolves a short flag (-l) to its long one,
        # .get() does not (it crashed on every short flag).
        arg = context.flags[token] if token in context.flags else \
            context.flags[context.inverse_flags[token]]
        walk.positional = [n for n in walk.positional if n != arg.name]
        if arg.takes_value and token in context.flags:
            walk.pending = arg
        return None
    if token.startswith("-") and not split and not core:
        flags = list(context.flags) if context is not None else []
        close = difflib.get_close_matches(token, flags, n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return f"unknown flag '{token}' ({hint}{walk.where()})"
    if core and initial is not None:
        arg = initial.flags[token]
        walk.pending = arg if arg.takes_value and arg.name != "help" else None
        return None
    if walk.positional:
        walk.positional.pop(0)
        return None
    if token in contexts:
        walk.task, walk.context = token, contexts[token]
        walk.positional = [str(a.name) for a in walk.context.positional_args]
        return None
    if walk.task:
        return (f"'{token}' is neither a task nor a value of a flag of {walk.task} "
                f"({walk.where()})")
    return f"unknown task '{token}' (`oota --list` lists the tasks)"


def parse_error_message(exc: ParseError) -> str:
    """One line for a command line invoke could not parse that :func:`command_line_problem`
    let through (a required value missing, a core flag's), pointing to the help."""
    task = getattr(exc.context, "name", None)
    where = f"`oota {task} --help` lists its flags" if task else "`oota --help` lists the flags"
    return f"error: {exc} ({where})"


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

    def load_collection(self) -> None:
        """oota's own tasks (:mod:`oota.tasks`), wherever it runs: never a ``tasks.py`` that
        invoke would find in the folder or above it (a vendor's repository may hold its own,
        with other tasks). This checkout's tasks.py is the same collection, for ``invoke``."""
        from oota import tasks

        self.collection = Collection.from_module(
            tasks, auto_dash_names=self.config.tasks.auto_dash_names)

    def update_config(self, merge: bool = True) -> None:
        with _configuration_read():
            super().update_config(merge)

    def parse_core(self, argv: list[str] | None) -> None:
        try:
            super().parse_core(argv)
        except ParseError as exc:
            raise Exit(parse_error_message(exc), code=EXIT_BAD_INPUT) from None

    def parse_tasks(self) -> None:
        parser = self._make_parser()
        problem = command_line_problem(self.core.unparsed, parser.contexts, parser.initial)
        if problem is not None:
            raise Exit(problem, code=EXIT_BAD_INPUT)
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
    try:
        OotaProgram(name="oota", binary="oota", binary_names=["oota"], version=__version__).run()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would report the same error again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_BROKEN_PIPE)
