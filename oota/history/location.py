"""Where the history is kept: ``--history URL``, else ``OOTA_HISTORY``, else ``history.db``
beside matrix.yaml. Any SQLAlchemy URL is accepted; ``postgresql://`` means the psycopg driver
(the one oota depends on), not SQLAlchemy's default psycopg2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from oota.errors import InputError
from oota.files import link_problem
from oota.net import redact

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

# SQLAlchemy is imported where a URL is parsed, not with this module: a task that reads no
# history (--no-history, or none of its steps touch one) does not pay its import (about a
# quarter of a second of a command's start).

DEFAULT_FILE = "history.db"
ENV_VARIABLE = "OOTA_HISTORY"
# Drivers oota installs; another driver of these backends would fail only when first used.
_DRIVERS = {"sqlite": ("pysqlite",), "postgresql": ("psycopg",)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Location:
    """A store's URL, and where it came from (for messages: a flag, a variable, the default)."""

    url: str
    source: str

    @property
    def shown(self) -> str:
        """The URL as oota prints it: a password never appears."""
        return redact(self.url)

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    @property
    def file(self) -> Path | None:
        """The SQLite file the store is (None for a server)."""
        from sqlalchemy.engine import make_url

        database = make_url(self.url).database if self.is_sqlite else None
        return Path(database) if database else None


def locate(flag: str | None, env: Mapping[str, str], project_root: Path) -> Location:
    """The store named by ``--history`` (``flag``), ``OOTA_HISTORY`` or the default file.

    Raises InputError (exit 2) naming where a URL that cannot be a store came from."""
    if flag:
        return Location(url=normalise(flag, "--history"), source="--history")
    if env.get(ENV_VARIABLE):
        return Location(url=normalise(env[ENV_VARIABLE], ENV_VARIABLE), source=ENV_VARIABLE)
    default = project_root / DEFAULT_FILE
    problem = link_problem(default, project_root)
    if problem:
        raise InputError(f"the default history: {problem}; remove the link, or name the store "
                         "with --history or OOTA_HISTORY")
    return Location(url=f"sqlite:///{default.resolve()}", source="default")


def normalise(text: str, where: str) -> str:
    """``text`` as a SQLAlchemy URL with a driver oota ships (``postgresql://`` -> psycopg)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(text.strip())
    except ArgumentError:
        raise InputError(f"{where} {redact(text)!r} is not a database URL; give e.g. "
                         "sqlite:///path/history.db or postgresql://host:5432/db") from None
    backend, _, driver = url.drivername.partition("+")
    if backend not in _DRIVERS:
        raise InputError(f"{where} {redact(text)!r}: {backend!r} is not a history backend "
                         f"oota supports ({', '.join(_DRIVERS)}); e.g. postgresql://host:5432/db")
    if backend == "postgresql" and driver in ("", "psycopg2"):
        url = url.set(drivername="postgresql+psycopg")
    elif driver and driver not in _DRIVERS[backend]:
        raise InputError(f"{where} {redact(text)!r}: driver {driver!r} is not installed with "
                         f"oota; use {backend}+{_DRIVERS[backend][0]}:// or {backend}://")
    _check_parts(url, text, where)
    return url.render_as_string(hide_password=False)


def _check_parts(url: URL, text: str, where: str) -> None:
    if url.drivername.startswith("postgresql") and not (url.host or url.query.get("host")):
        raise InputError(f"{where} {redact(text)!r} names no server; e.g. "
                         "postgresql://host:5432/db")
    if url.drivername.startswith("sqlite") and not url.database:
        raise InputError(f"{where} {redact(text)!r} names no file (an in-memory history is "
                         "lost at exit); e.g. sqlite:///history.db")
