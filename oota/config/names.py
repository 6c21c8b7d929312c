"""The one pattern for names that become paths, image names and tags.

A vendor name is a folder (``vendors/<name>/``, ``images/<name>/``) and the repository of its
images (``oota/<name>``); OS keys and axis values are joined into cell ids, which are folders
(``images/<vendor>/<cell-id>/``, ``results/<cell-id>/``) and image tags. So every such name
follows Docker's grammar for one repository path component, the strictest of the places it
lands::

    [a-z0-9]+ ( ( '.' | '_' | '__' | '-'+ ) [a-z0-9]+ )*      at most 63 characters

lower-case ASCII letters and digits, separated by '.', '_' or '-', starting and ending with a
letter or digit: no '/', no '..', no '+', no space, nothing a shell or a path would read. A cell
id is such names joined by '-' and follows the same grammar, at most 128 characters (Docker's
limit for a tag); ``schema/result-v1.json`` accepts every such id. Base image names follow
Docker's reference grammar (:data:`IMAGE_PATTERN`): they cannot be quoted in ``FROM``.
"""

from __future__ import annotations

import re
import unicodedata

NAME_MAX = 63
CELL_ID_MAX = 128
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
NAME_PATTERN = re.compile(rf"^{_COMPONENT}$")
CELL_ID_PATTERN = NAME_PATTERN   # the same grammar; only the length limit differs
# An image reference: Docker's grammar (distribution/reference) without the parts oota never
# writes. Nothing in such a reference is special to a Dockerfile or a shell.
_DOMAIN_PART = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOMAIN = rf"{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_PATTERN = re.compile(
    rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?")
IMAGE_MAX = 255
NAME_RULE = ("use lower-case letters, digits, '.', '_' and '-', starting and ending with a "
             "letter or digit")


def name_problem(text: str, *, limit: int = NAME_MAX) -> str | None:
    """Why ``text`` is not a valid name (one short clause), or None when it is one."""
    if not text:
        return "it is empty"
    if len(text) > limit:
        return f"it is {len(text)} characters long, at most {limit} are allowed"
    if NAME_PATTERN.fullmatch(text):
        return None
    bad = next((c for c in text if not re.fullmatch(r"[a-z0-9._-]", c)), None)
    if bad is not None:
        hint = " (a local version such as '+cpu' belongs in vendor.yaml)" if bad == "+" else ""
        return f"{_describe(bad)} is not allowed{hint}"
    if not (text[0].isalnum() and text[-1].isalnum()):
        return "it must start and end with a letter or digit"
    return "separators ('.', '_', '-') must stand between letters or digits ('..' and '._' " \
           "are not allowed)"


def cell_id_problem(text: str) -> str | None:
    return name_problem(text, limit=CELL_ID_MAX)


def image_problem(text: str) -> str | None:
    """Why ``text`` is not an image reference (the whole message), or None."""
    if len(text) <= IMAGE_MAX and IMAGE_PATTERN.fullmatch(text):
        return None
    return (f"{text!r} is not an image reference; write it like "
            "'registry.example.com:5000/team/image:tag'")


def is_name(text: str) -> bool:
    return name_problem(text) is None


def _describe(char: str) -> str:
    if char == " ":
        return "a space"
    if char.isascii() and char.isupper():
        return f"the upper-case letter '{char}'"
    if char.isascii() and char.isprintable():
        return f"'{char}'"
    name = unicodedata.name(char, "")
    return f"the character U+{ord(char):04X}" + (f" ({name.lower()})" if name else "")
