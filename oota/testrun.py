"""What ``oota test`` does before its pytest sessions.

:func:`byte_compile` writes the ``.pyc`` files of the checkout's own Python (oota, the tests,
the suite, the benchmarks and scripts). An interpreter started with ``PYTHONDONTWRITEBYTECODE``
set (some CI runners and sandboxes set it) never writes them itself, so in a fresh clone every
process that imports oota compiled its modules from source again: the test sessions start
hundreds of ``oota`` command lines, each paying about 0.3 s for it on a 2-core machine. The
files are written beside the sources, in ``__pycache__`` folders that git and the image contexts
ignore (oota/contexttree.py); a file that is already current is left alone.
"""

from __future__ import annotations

import compileall
import re
from pathlib import Path

# Hidden folders (.venv, .git, .oota-cache, ...) hold no source of the checkout.
_HIDDEN = re.compile(r"[/\\]\.")


def byte_compile(root: Path) -> bool:
    """Compile every ``.py`` file under ``root`` outside its hidden folders (never walked);
    False when some file does not compile (pytest then names it in its collection errors)."""
    compiled = True
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            compiled &= bool(compileall.compile_dir(entry, quiet=2, rx=_HIDDEN))
        elif entry.suffix == ".py":
            compiled &= bool(compileall.compile_file(entry, quiet=2))
    return compiled
