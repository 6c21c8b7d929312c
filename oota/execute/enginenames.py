"""What each Docker Engine is called, kept by its identity.

An Engine is known by its identity (``engine_id`` in its facts: Docker's own ID and its data
root, :func:`oota.engine.base.engine_identity`), and shown by a name. A host of ``hosts.yaml``
is called what the file calls it, and the project remembers that name for the Engine
(``.oota-cache/engine-names.json``). A run without a hosts file uses the remembered name of
the Engine it talks to, else the name of the machine its daemon runs on (``docker info``'s
``Name``). So the lab's main Engine, named ``main`` in hosts.yaml, is ``main`` in every
result, history row and HUD line, with ``--hosts`` or without; and two results of one Engine
are never "a host change", whatever their names (the history compares identities).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oota.files import write_json

log = logging.getLogger("oota.engines")

NAMES_FILE = "engine-names.json"


def remembered(cache: Path) -> dict[str, str]:
    """identity -> name, as hosts files named the Engines ({} when none did)."""
    try:
        data = json.loads((cache / NAMES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.debug("no remembered engine names: %s", exc)
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str) and v}


def remember(cache: Path, engine_id: str, name: str) -> None:
    """Keep ``name`` for the Engine ``engine_id`` (a failure to write only loses the name)."""
    if not engine_id:
        return
    names = remembered(cache)
    if names.get(engine_id) == name:
        return
    try:
        write_json(cache / NAMES_FILE, {**names, engine_id: name})
    except OSError as exc:
        log.debug("engine names not written: %s", exc)


def name_of(facts: Mapping[str, Any], cache: Path) -> str:
    """The name of an Engine a run reaches without a hosts file (see the module's docstring)."""
    engine_id = str(facts.get("engine_id") or "")
    found = remembered(cache).get(engine_id) if engine_id else None
    return found or str(facts.get("daemon_name") or facts.get("hostname") or "local")
