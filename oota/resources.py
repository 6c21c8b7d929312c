"""The files oota ships beside its code: the in-image verify suite (``verify/``), the shared
Dockerfile templates (``templates/``) and the JSON Schemas (``schema/``).

In a checkout they are the repository's own folders; an installed oota (a wheel) carries them
as ``oota/_shipped/<name>`` (pyproject.toml maps the folders there), so ``oota`` works in any
folder that holds a ``matrix.yaml`` and ``vendors/``. A project may keep its own ``verify/``
or ``templates/`` beside its matrix; :mod:`oota.config.matrix` prefers those.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
SHIPPED = ("verify", "templates", "schema")


def shipped(name: str) -> Path:
    """The shipped folder ``name`` (one of :data:`SHIPPED`): the installed copy, else the
    checkout's."""
    if name not in SHIPPED:
        raise ValueError(f"oota ships no {name!r}")
    installed = PACKAGE / "_shipped" / name
    return installed if installed.is_dir() else PACKAGE.parent / name
