"""How the writers show values: Markdown escaping, links, sizes and numbers. Used as the
templates' filters (oota/report/templating.py)."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

from oota.console import inert

REASON_CHARS = 400
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~!])")
_WWW = re.compile(r"(?i)(?<![a-z0-9])(www)\.")


def md_text(text: object, limit: int = REASON_CHARS) -> str:
    """Result text made inert in a Markdown table: one line, no HTML, no link or emphasis, no
    control character (:func:`~oota.console.inert`: the digest is also printed)."""
    flat = inert(" ".join(str(text).split()))
    if len(flat) > limit:
        flat = flat[:limit - 1] + "…"
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    # GitHub also links a bare URL or www. name: a backslash before its ':' or '.' stops it.
    escaped = _MD_SPECIAL.sub(r"\\\1", flat).replace("://", "\\://")
    return _WWW.sub(lambda m: m.group(1) + "\\.", escaped)


def md_code(text: object, *, in_table: bool = False) -> str:
    """A code span of ``text`` (one line, no backtick, no control character). In a table
    cell ``|`` is escaped: GitHub splits a row on it even inside a code span, and takes
    ``\\|`` back as ``|`` there (outside a table it would show the backslash)."""
    flat = inert(" ".join(str(text).split())).replace("`", "'")
    if in_table:
        flat = flat.replace("|", "\\|")
    return f"`{flat}`" if flat else ""


def md_cell_code(text: object) -> str:
    """:func:`md_code` for a table cell."""
    return md_code(text, in_table=True)


def days(value: float | None) -> str:
    return "–" if value is None else f"{value:g}"


def href(path: str) -> str:
    """A relative link, percent-encoded (autoescape then escapes it for the attribute)."""
    return quote(path, safe="/._-~")


def human_bytes(value: object) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "–"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def number(value: object, fmt: str, unit: str = "") -> str:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return format(value, fmt) + unit if ok else "–"


def shown(value: object) -> str:
    """A value in a key/value list: JSON for lists and objects, '–' for nothing."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return "–" if value is None or value == "" else str(value)
