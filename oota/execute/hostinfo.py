"""Facts about the host a result was made on (recorded in every result)."""

from __future__ import annotations

import platform
from typing import Any

from oota.engine.base import Engine


def host_facts(engine: Engine | None) -> dict[str, Any]:
    facts: dict[str, Any] = {"hostname": platform.node(), "machine": platform.machine(),
                             "host_kernel": platform.release(),
                             "host_python": platform.python_version()}
    if engine is not None:
        facts.update(engine.facts())
    facts.setdefault("devices", [])
    return facts
