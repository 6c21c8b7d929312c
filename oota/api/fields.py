"""The typed fields of the requests (:mod:`oota.api.requests`): a flag's help, default and
check in one declaration, and the parse that fills a request from what invoke parsed.

A field is declared with :func:`flag` (one value), :func:`repeated` (given any number of
times) or :func:`required`. Each returns, for mypy, the type of its default and of its check's
result, so ``jobs: int = flag("...", 1, check=f.jobs)`` is checked: a default of the wrong
type (``"1"``) or a check returning another type is a type error, not a surprise at run time.

The default is the field's value when the flag is not given (it is never checked: it is
typed); the check turns the text the user typed (for :func:`repeated`, the list of texts)
into the field's value, or raises :class:`~oota.errors.InputError` (exit 2) naming the flag.
invoke is given no default but a switch's (``False``/``True``) and a required flag's none, so
what it passes is the user's text, or None when the flag was not given.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from oota.errors import InputError

T = TypeVar("T")
R = TypeVar("R")
_FLAG = "oota.flag"


@dataclass(frozen=True, slots=True)
class Flag:
    """One flag as :func:`parse`, ``--help`` and the reference page read it: ``default`` is
    the field's value when the flag is not given (unused when ``required``); ``check`` turns
    the given text (a list of them when ``repeatable``) into the field's value (None: the
    text as it is)."""
    help: str
    default: object = None
    check: Callable[[Any], object] | None = None   # Any: a str, or a list for a repeatable
    repeatable: bool = False
    required: bool = False

    @property
    def invoke_default(self) -> object:
        """The default invoke is given: a switch's own (invoke makes it a switch, with
        ``--no-NAME`` when on), a required flag's none (invoke takes it by position too),
        else None (a flag that takes a text; None when it is not given)."""
        if self.required:
            return inspect.Parameter.empty
        return self.default if isinstance(self.default, bool) else None


def flag(help: str, default: T, *, check: Callable[[str], T] | None = None) -> T:
    """A field whose flag takes one value (or none: a switch when ``default`` is a bool)."""
    return field(metadata={_FLAG: Flag(help, default, check)})  # type: ignore[no-any-return]


def repeated(help: str, default: T, *, check: Callable[[list[str]], T]) -> T:
    """A field whose flag may be given any number of times (``--vendor a --vendor b``)."""
    return field(  # type: ignore[no-any-return]
        metadata={_FLAG: Flag(help, default, check, repeatable=True)})


def required(help: str, check: Callable[[str], T]) -> T:
    """A field whose flag must be given (with or without its name: invoke takes it by
    position too)."""
    return field(  # type: ignore[no-any-return]
        metadata={_FLAG: Flag(help, None, check, required=True)})


def flags_of(request: type) -> list[tuple[str, Flag]]:
    """``request``'s flags in the order ``--help`` lists them: the required first (invoke
    takes them by position too), then the rest as the class declares them."""
    found = [(x.name, x.metadata[_FLAG]) for x in fields(request) if _FLAG in x.metadata]
    return sorted(found, key=lambda item: not item[1].required)


def parse(request: type[R], **given: object) -> R:
    """``request`` from the flags as invoke parsed them: each not given (None, or an empty
    list for a repeatable one) takes its default, each given is checked (InputError naming a
    bad one); the request's ``__post_init__`` then checks the flags against each other."""
    values = {}
    for name, spec in flags_of(request):
        value = given.pop(name, None)
        if value is None or (spec.repeatable and value == []):
            if spec.required:
                raise InputError(f"--{name.replace('_', '-')} is required")
            values[name] = spec.default
        else:
            values[name] = spec.check(value) if spec.check else value
    if given:
        raise TypeError(f"{request.__name__} has no flag {sorted(given)[0]!r}")
    return request(**values)
