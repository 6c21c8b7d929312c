"""The ``@task`` of oota's tasks: invoke's Task derived from the request a task body takes
(:mod:`oota.api.requests`): its flags, their help and checks, and its errors as exit codes."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from invoke.exceptions import Exit
from invoke.parser.argument import Argument
from invoke.tasks import Task

from oota.api.fields import flags_of, parse
from oota.errors import EXIT_BAD_INPUT
from oota.exits import errors_to_exit

HELP_FLAGS = ("--help", "-h")


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


def request_of(body: TaskBody) -> type | None:
    """The request class a task body takes: the annotation of its second parameter (None: a
    task without flags, ``def boom(c)``)."""
    params = list(inspect.signature(body).parameters)
    request: type | None = typing.get_type_hints(body)[params[1]] if len(params) > 1 else None
    return request


def bind(body: TaskBody) -> TaskBody:
    """The task ``body`` (``def build(c: Context, r: BuildRequest)``) with the signature
    invoke reads: one parameter per flag of its request (:mod:`oota.api.requests`), with the
    flag's default; called by invoke, it builds the request (each flag checked) and calls
    ``body(c, request)``."""
    request = request_of(body)
    if request is None:
        return body
    context = next(iter(inspect.signature(body).parameters.values()))
    signature = inspect.Signature([
        context.replace(annotation=inspect.Parameter.empty),
        *(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                            default=spec.invoke_default)
          for name, spec in flags_of(request))])

    @functools.wraps(body)
    def checked(*args: Any, **kwargs: Any) -> None:
        values = dict(signature.bind(*args, **kwargs).arguments)
        body(values.pop(context.name), parse(request, **values))

    checked.__signature__ = signature  # type: ignore[attr-defined]  # read by invoke
    return checked


def task_of(error_log: Path) -> Callable[[TaskBody], FlagTask]:
    """The ``@task`` decorator of ``tasks.py``, typed (invoke's own returns a bare Callable,
    which mypy cannot check): the flags of a body are the fields of the request it takes,
    checked before it runs, and its errors become our exit codes (the traceback of an
    unexpected one goes to ``error_log``)."""
    def task(body: TaskBody) -> FlagTask:
        request = request_of(body)
        specs = flags_of(request) if request is not None else []
        return FlagTask(errors_to_exit(bind(body), error_log),
                        help={name: spec.help for name, spec in specs},
                        iterable=[name for name, spec in specs if spec.repeatable])
    return task
