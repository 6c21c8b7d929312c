"""Vendor templates run in a sandbox: they format data, and can neither reach Python nor write
a value that no quoting filter has seen.

Vendor folders come from many companies into one shared repository, and a release manager who
runs ``invoke generate`` should not run their code. So a template is rendered by Jinja's
immutable sandbox (:class:`jinja2.sandbox.ImmutableSandboxedEnvironment`: no ``__globals__``,
no private attributes, no mutation of the data it is given), and three more rules hold:

* **Where templates come from.** The vendor's folder, then the shared stages in
  ``templates/dockerfile/``; a template, or a template it extends, includes or imports, whose
  file resolves anywhere else (a symbolic link out) is refused.
* **Every value is quoted.** Each ``{{ ... }}`` must be a quoting filter of
  :mod:`oota.quoting` (``{{ vendor.display | label_value }}``) or a call of a macro, whose own
  expressions follow the same rule; ``comment`` only on a ``#`` line. Checked when a template
  is loaded, with its line (:func:`unquoted`), and again at render time: a filter's output is
  :class:`~oota.quoting.Quoted`, a macro's is made so, and anything else reaching the output
  (a value changed after quoting, ``~`` joining it to more text) is refused.
* **No code, and bounded.** Templates are Jinja text only; the sandbox turns an attempt at
  Python (``cycler.__init__.__globals__``) into an error at that line. Values are formatted
  with filters, not methods (``vendor.display.upper()`` is refused; ``| upper`` is not), and
  only the filters that cannot multiply their input are there (no ``center``, ``format``,
  ``indent``, ``replace``, ``wordwrap``, ``batch``, ``slice``, ``lipsum``, ``str.format``,
  ``%``); ``*`` and ``**`` are held to small results, and a template whose output passes
  :data:`MAX_OUTPUT` characters or whose rendering takes over :data:`MAX_SECONDS` (checked as
  it writes) is refused.

A refusal is a :class:`TemplateRefused` (a Jinja syntax error), located ``file:line``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import jinja2
import jinja2.nodes as nodes
import jinja2.runtime
from jinja2.sandbox import ImmutableSandboxedEnvironment

from oota import quoting

# A Dockerfile is a few KiB; these are far above any real one and far below trouble.
MAX_OUTPUT = 1 << 20
MAX_SECONDS = 10.0
MAX_PRODUCT = 100_000          # items or characters a `*` may make; bits a `**` may make
# Jinja's filters that format data and cannot make more of it than they are given.
_KEPT_FILTERS = frozenset({
    "abs", "capitalize", "count", "d", "default", "dictsort", "first", "float", "groupby",
    "int", "items", "join", "last", "length", "list", "lower", "map", "max", "min", "reject",
    "rejectattr", "reverse", "round", "select", "selectattr", "sort", "string", "striptags",
    "sum", "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "wordcount"})
# Values whose methods a template may not call: it formats them with filters.
_PLAIN_VALUES = (str, bytes, int, float, complex, list, tuple, dict, set, frozenset, Mapping)
_PLACES = ("shell_word or shell_words (RUN), exec_form (JSON arrays), env_key and env_value "
           "(ENV), label_value (LABEL), image_ref (FROM, ARG BASE_IMAGE), comment (# lines)")


class TemplateRefused(jinja2.TemplateSyntaxError):
    """A template the sandbox will not render, located at its file and line."""

    def __init__(self, message: str, lineno: int, name: str | None, filename: str | None):
        super().__init__(message, lineno, name, filename)
        self.translated = True  # str() is the message alone, as for Jinja's own syntax errors


class ConfinedLoader(jinja2.FileSystemLoader):
    """Templates from ``search`` (the vendor's folder, the shared stages), refused when their
    file resolves outside every folder of it, and checked by :func:`unquoted` as loaded."""

    def __init__(self, search: Iterable[Path]) -> None:
        super().__init__([str(folder) for folder in search])

    def get_source(self, environment: jinja2.Environment, template: str
                   ) -> tuple[str, str, Callable[[], bool]]:
        if ".." in template.replace("\\", "/").split("/"):
            raise TemplateRefused(f"'{template}': a template's name may not climb out of its "
                                  "folder ('..'); templates come from the vendor's folder and "
                                  "templates/dockerfile/", 1, template, None)
        source, filename, uptodate = super().get_source(environment, template)
        try:
            real = Path(filename).resolve(strict=True)
        except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python 3.11)
            raise TemplateRefused(f"{template} cannot be read ({exc})", 1, template,
                                  filename) from None
        # Resolved now, not once: a relative search path follows the current folder.
        if not any(real.is_relative_to(Path(top).resolve()) for top in self.searchpath):
            raise TemplateRefused(
                f"{template} is a symbolic link to {real}, outside the vendor's folder and "
                "templates/dockerfile/; a vendor's templates must live in its folder",
                1, template, filename)
        problems = unquoted(environment.parse(source, template, filename), source)
        if problems:
            line, message = problems[0]
            raise TemplateRefused(message, line, template, filename)
        return source, filename, uptodate


def unquoted(tree: nodes.Template, source: str) -> list[tuple[int, str]]:
    """(line, why) of each ``{{ }}`` of ``tree`` that is neither a quoting filter nor a call,
    and of each ``comment`` filter on a line of ``source`` that does not start with ``#``."""
    lines = source.splitlines()
    found = []
    for output in tree.find_all(nodes.Output):
        for expr in output.nodes:
            if isinstance(expr, nodes.TemplateData):
                continue
            line = lines[expr.lineno - 1].strip() if 0 < expr.lineno <= len(lines) else ""
            why = _why_unquoted(expr, line)
            if why:
                found.append((expr.lineno, f"`{line[:80]}`: {why}"))
    return found


def _why_unquoted(expr: nodes.Expr, line: str) -> str:
    if isinstance(expr, nodes.CondExpr):
        return _why_unquoted(expr.expr1, line) or (
            _why_unquoted(expr.expr2, line) if expr.expr2 is not None else "")
    if isinstance(expr, nodes.Call):
        return ""  # a macro, super() or caller(): what it returns is checked at render time
    if not isinstance(expr, nodes.Filter) or expr.name not in quoting.FILTERS:
        return ("a value is written without a quoting filter; write it through the filter "
                f"for its place: {_PLACES}")
    if expr.name == "comment" and not line.startswith("#"):
        return ("the comment filter lets any text but a line break through, so it is for # "
                f"lines only; here use the filter for the place: {_PLACES}")
    return ""


def _only_quoted(value: Any) -> Any:
    """Jinja's ``finalize``: what reaches the output must come from a quoting filter or a
    macro (see the module's docstring)."""
    if isinstance(value, quoting.Quoted):
        return value
    shown = str(value)
    raise quoting.QuotingError(
        f"{shown[:40]!r}{'...' if len(shown) > 40 else ''} reaches the Dockerfile without a "
        f"quoting filter (changed or joined after quoting?); write each value through the "
        f"filter for its place: {_PLACES}")


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, where what a macro or a block returns counts as quoted (every
    value in it passed :func:`_only_quoted` as it was written), methods of plain values are out
    of reach, and ``*`` and ``**`` are bounded."""

    intercepted_binops = frozenset({"*", "**", "%"})

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return not isinstance(obj, _PLAIN_VALUES) and super().is_safe_attribute(obj, attr, value)

    def wrap_str_format(self, value: Any) -> None:
        """None: ``str.format`` is a method like any other here, refused above (the sandbox
        would let it through, and ``"{:>999999999}".format(1)`` makes a gigabyte)."""
        return None

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any,
                   right: Any) -> Any:
        if operator == "**" and isinstance(left, int) and isinstance(right, int) \
                and abs(left) > 1 and right * abs(left).bit_length() > MAX_PRODUCT:
            raise jinja2.exceptions.SecurityError(f"{left} ** {right} is too large a number")
        if operator == "%" and isinstance(left, (str, bytes)):  # printf: '%999999999s' % 1
            raise jinja2.exceptions.SecurityError("formatting text with % is not available here; "
                                                  "join values with ~ and filters")
        if operator == "*" and _size(left) * _size(right) > MAX_PRODUCT:
            raise jinja2.exceptions.SecurityError(
                f"a product of {_size(left)} by {_size(right)} is larger than {MAX_PRODUCT}")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: jinja2.runtime.Context, __obj: Any,  # noqa: N805 - Jinja's
             *args: Any, **kwargs: Any) -> Any:
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(__obj, (jinja2.runtime.Macro, jinja2.runtime.BlockReference)):
            return quoting.Quoted(result)
        return result


def _size(value: Any) -> int:
    """What ``*`` multiplies: a sequence's length, a whole number itself (1 otherwise)."""
    if isinstance(value, (str, bytes, list, tuple)):
        return max(len(value), 1)
    if isinstance(value, int) and not isinstance(value, bool):
        return max(abs(value), 1)
    return 1


def render(template: jinja2.Template, context: Mapping[str, Any]) -> str:
    """``template`` rendered with ``context``, refused past :data:`MAX_OUTPUT` bytes or
    :data:`MAX_SECONDS` (checked at each piece it writes)."""
    pieces: list[str] = []
    size, deadline = 0, time.monotonic() + MAX_SECONDS
    for piece in template.generate(**context):
        size += len(piece)
        pieces.append(piece)
        if size > MAX_OUTPUT:
            raise jinja2.exceptions.SecurityError(
                f"the template writes more than {MAX_OUTPUT} characters")
        if time.monotonic() > deadline:
            raise jinja2.exceptions.SecurityError(
                f"the template takes more than {MAX_SECONDS:g} s to render")
    return "".join(pieces)


def environment(search: Iterable[Path]) -> jinja2.Environment:
    """The environment vendor templates are rendered in (see the module's docstring)."""
    env = _Sandbox(
        loader=ConfinedLoader(search),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # Dockerfiles, not HTML: the quoting filters escape by context
        finalize=_only_quoted,
    )
    env.filters = {name: env.filters[name] for name in _KEPT_FILTERS} | quoting.FILTERS
    env.globals.pop("lipsum", None)  # lipsum(n) writes n paragraphs
    return env
