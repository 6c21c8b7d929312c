"""Which layers of a local image hold given bytes (a password, a key, a CA certificate).

Every file of every layer is read, and the image's config (its labels, environment and
history). Where the Engine keeps its layers in overlay2 folders this process can read (a
root test on the Engine's own host: the Docker tests), the layers' files are read there, each
layer's ``diff`` folder being that layer's contents; else the image streams past through
``docker save``. Both read the same bytes: the folders cost a read of the files, the stream
costs the Engine a tar of the whole image (about 21 s of dockerd's CPU for the 1.76 GB CPU
cell on a 2-core host, where reading the folders takes about 3 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

CHUNK = 1 << 20


def _found(handle: IO[bytes], needles: tuple[bytes, ...]) -> bool:
    """Whether any of ``needles`` is in what ``handle`` reads (across chunk edges too)."""
    keep = max(len(n) for n in needles) - 1
    tail = b""
    while chunk := handle.read(CHUNK):
        window = tail + chunk
        if any(n in window for n in needles):
            return True
        tail = window[-keep:] if keep else b""
    return False


def _inspect(tag: str) -> tuple[dict[str, Any], str]:
    """The image's ``docker image inspect`` object, and the output as the Engine gave it."""
    out = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return json.loads(out)[0], out


def layer_folders(tag: str) -> list[Path] | None:
    """The image's overlay2 layer folders (each a layer's ``diff``), base first; None where
    the Engine stores layers otherwise or this process cannot read them."""
    return _folders(_inspect(tag)[0])


def _folders(image: dict[str, Any]) -> list[Path] | None:
    driver = image.get("GraphDriver") or {}
    data = driver.get("Data") or {}
    if driver.get("Name") != "overlay2" or not data.get("UpperDir"):
        return None
    folders = [Path(p) for p in reversed((data.get("LowerDir") or "").split(":")) if p]
    folders.append(Path(data["UpperDir"]))
    if not all(folder.is_dir() and os.access(folder, os.R_OK | os.X_OK) for folder in folders):
        return None
    return folders


def _files(folder: Path) -> Iterator[Path]:
    """Every regular file under ``folder`` (links are not followed: the layer holds the link,
    whose target is another file of the image, read where it is)."""
    for top, _dirs, names in os.walk(folder):
        for name in names:
            path = Path(top, name)
            if path.is_file() and not path.is_symlink():
                yield path


def _history_text(tag: str) -> str:
    """The image's history as the Engine gives it (each step's command, untruncated)."""
    return subprocess.run(["docker", "history", "--no-trunc", "--format", "{{json .}}", tag],
                          capture_output=True, text=True, timeout=60, check=True).stdout


def saved_members_holding(tag: str, needles: tuple[bytes, ...]) -> list[str]:
    """Every member of ``docker save TAG`` (each layer, the config, the manifest) whose bytes
    hold one of ``needles``."""
    found = []
    with subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        with tarfile.open(fileobj=proc.stdout, mode="r|") as archive:
            for member in archive:
                handle = archive.extractfile(member) if member.isfile() else None
                if handle is not None and _found(handle, needles):
                    found.append(member.name)
    assert proc.returncode == 0
    return found


def holding(tag: str, needles: Iterable[bytes]) -> list[str]:
    """Where in image ``tag`` any of ``needles`` is: ``layer N:/path`` for a file of a layer
    (base layer 0), ``config`` for the config or history; [] when nowhere."""
    wanted = tuple(n for n in needles if n)
    assert wanted, "nothing to look for"
    image, inspected = _inspect(tag)
    folders = _folders(image)
    if folders is None:
        return saved_members_holding(tag, wanted)
    found = []
    for index, folder in enumerate(folders):
        for path in _files(folder):
            with path.open("rb") as handle:
                if _found(handle, wanted):
                    found.append(f"layer {index}:/{path.relative_to(folder)}")
    text = (inspected + _history_text(tag)).encode()
    if any(n in text for n in wanted):
        found.append("config")
    return found
