"""Read a version the running stack reports, by dotted path (``torch.version.cuda``).

Used by the compat layer inside images, and run as a script by ``invoke verify --here`` to ask
an interpreter what it has before choosing its cell::

    python oota_probe.py [DOTTED.PATH]   ->  Python X.Y, torch's version, the value ('' if None)

Standard library only, and it imports nothing the path does not name.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from typing import Any


def resolve(dotted: str) -> Any:
    """Import the longest importable prefix of ``a.b.c.attr``, then walk the attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            value = getattr(value, attr)
        return value
    raise ImportError(f"nothing of {dotted!r} is importable")


def main(argv: list[str]) -> int:
    print("{}.{}".format(*sys.version_info[:2]))
    print(importlib.metadata.version("torch"))
    value = None
    if len(argv) > 1 and argv[1]:
        try:
            value = resolve(argv[1])
        except (ImportError, AttributeError):
            value = None
    print("" if value is None else value)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
