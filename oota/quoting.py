"""Quoting by context: one helper for each place a data value can take in a Dockerfile.

A Dockerfile reads the same text differently in different places: a RUN line is handed to a
shell, an exec-form array is JSON, ENV and LABEL values go through the Dockerfile's own word
rules (``$VAR`` is expanded, ``\\`` escapes), a comment ends at the line's end and a base image
name cannot be quoted at all. Each helper below makes a value mean exactly its text in one of
those places, so that a requirement holding ``"`` or ``$(...)`` reaches pip as written and
never becomes a command. They are the render environment's filters (oota/render.py).

No helper lets a control character through: a newline would end the instruction and start
another one, whatever the quoting. Such a value is a :class:`QuotingError`.
"""

from __future__ import annotations

import json
import re
import shlex
import unicodedata
from collections.abc import Iterable

from oota.config.names import image_problem

ENV_KEY_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_CONTROL_NAMES = {"\n": "line feed", "\r": "carriage return", "\t": "tab", "\0": "NUL"}


class QuotingError(ValueError):
    """A value that cannot be written safely where the template puts it."""


class Quoted(str):
    """Text a quoting helper made safe for its place: the template sandbox (oota/sandbox.py)
    lets only this reach a Dockerfile."""


def check_text(value: object) -> str:
    """``value`` as text, or QuotingError when it holds a control character."""
    text = str(value)
    for char in text:
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            name = _CONTROL_NAMES.get(char) or unicodedata.name(char, "control").lower()
            raise QuotingError(f"{text!r} holds U+{ord(char):04X} ({name}), which would end "
                               "the Dockerfile instruction; remove it")
    return text


def shell_word(value: object) -> str:
    """One word of a RUN line (shell form): quoted so the shell reads it as one literal word."""
    return Quoted(shlex.quote(check_text(value)))


def shell_words(values: Iterable[object]) -> str:
    """Several shell words, space-separated (packages for apt-get or pip)."""
    return Quoted(" ".join(shell_word(v) for v in values))


def exec_form(values: Iterable[object]) -> str:
    """An exec-form array (``CMD``, ``ENTRYPOINT``, ``RUN [...]``): JSON, no shell involved."""
    return Quoted(json.dumps([check_text(v) for v in values]))


def _double_quoted(value: object) -> str:
    """A double-quoted Dockerfile word: inside it the Dockerfile itself treats ``\\``, ``"``
    and ``$`` as special (variables are expanded), so each is escaped to mean itself."""
    text = check_text(value)
    return '"' + re.sub(r'([\\"$])', r"\\\1", text) + '"'


def env_value(value: object) -> str:
    """The value of ``ENV KEY=<value>``: taken literally, no ``$VAR`` expansion."""
    return Quoted(_double_quoted(value))


def label_value(value: object) -> str:
    """The value of ``LABEL key=<value>``: taken literally, no ``$VAR`` expansion."""
    return Quoted(_double_quoted(value))


def env_key(value: object) -> str:
    """The name in ``ENV <KEY>=...``: validated (letters, digits, '_'), never quoted."""
    text = check_text(value)
    if not ENV_KEY_PATTERN.fullmatch(text):
        raise QuotingError(f"{text!r} is not an environment variable name; use letters, "
                           "digits and '_', not starting with a digit")
    return Quoted(text)


def image_ref(value: object) -> str:
    """An image reference (``FROM``, ``ARG BASE_IMAGE=``): it cannot be quoted, so it must
    follow Docker's reference grammar, which leaves nothing a Dockerfile would interpret."""
    text = check_text(value)
    problem = image_problem(text)
    if problem:
        raise QuotingError(problem)
    return Quoted(text)


def comment(value: object) -> str:
    """Text inside a ``#`` comment: anything but a line break, which would end the comment."""
    return Quoted(check_text(value))


# Filter name -> helper, as the templates use them: {{ requirements | shell_words }}.
FILTERS = {
    "shell_word": shell_word,
    "shell_words": shell_words,
    "exec_form": exec_form,
    "env_key": env_key,
    "env_value": env_value,
    "label_value": label_value,
    "image_ref": image_ref,
    "comment": comment,
}
