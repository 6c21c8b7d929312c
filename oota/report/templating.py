"""The Jinja environments of the report's writers, loading ``oota/report/templates/`` (package
data, so an installed oota finds them). HTML autoescapes everything; Markdown has its own
escaping filters (``md``, ``code``), applied in the template to every text from a result.
"""

from __future__ import annotations

from functools import lru_cache

import jinja2

from oota.report.text import days, href, human_bytes, md_code, md_text, number, shown

_LOADER = jinja2.PackageLoader("oota.report", "templates")


@lru_cache(maxsize=1)
def html_environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=_LOADER, autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(href=href, human_bytes=human_bytes, number=number, days=days,
                       shown=shown)
    return env


@lru_cache(maxsize=1)
def markdown_environment() -> jinja2.Environment:
    # No HTML autoescape for Markdown: the md and code filters escape for Markdown instead.
    env = jinja2.Environment(loader=_LOADER, autoescape=False, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(md=md_text, code=md_code, days=days)
    return env
