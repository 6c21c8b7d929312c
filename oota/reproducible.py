"""Reproducible images: the same cell built on two Engines from the same inputs is the same image,
byte for byte, so a verification made on one holds on the other. Pure: what the Dockerfiles
and the engine need to make layers and image configurations that do not depend on when or
where they were built.

Docker's BuildKit writes each file's modification time into a layer, and each build step's
time into the image's configuration. The reproducible-builds project's answer, which
docker-library follows, is ``SOURCE_DATE_EPOCH``: every time a build writes is clamped to it.
BuildKit honours it itself only from v0.11 (Docker 23); the Engines oota meets include Debian's
docker.io 20.10 (BuildKit 0.8). So oota does it for any BuildKit:

* every ``RUN`` goes through :data:`SHELL`: the command runs with ``SOURCE_DATE_EPOCH`` set
  (pip's byte-compiling then writes hash-based ``.pyc`` files, wheel zips and useradd's
  password dates take that time), then every file the step created or changed gets that time;
* files reach the runtime stage through ``RUN`` steps (bind mounts of the context and of the
  builder stage onto folders every base has, ``/mnt`` and ``/srv``, so no mount point is
  created), not ``COPY``, which stamps the folders it writes into with the clock;
* :func:`etc_layer`: ``/etc/hosts`` and ``/etc/resolv.conf`` exist before the first ``RUN``
  (BuildKit mounts its own over them; where they are missing it creates and deletes them
  around every step, which stamps ``/etc``);
* files are sorted in layers (BuildKit's own walk does that), and the apt steps drop their
  logs and caches that hold dates or inode numbers;
* after the build, the image's configuration gets the same time for every history entry and
  the image (:func:`canonical_config`), the layers untouched: the engine loads the new
  configuration beside the layers it already has.

``SOURCE_DATE_EPOCH`` set in oota's environment replaces :data:`LAYER_EPOCH` (it also dates
the image's ``org.opencontainers.image.created`` label). Where a layer still differs between
two Engines, :func:`differences` says which files differ, and how.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# 2020-01-01T00:00:00Z: a fixed time for every file a build writes and every history entry.
# Not the commit's time: a time that moved with every commit would rebuild every layer (a
# build argument is part of each RUN's cache key). After 1980: zip files cannot hold older.
LAYER_EPOCH = 1577836800
LAYERS_LABEL = "oota.layers"   # which history entries of the image made a layer: "1011..."

_RUN = ('s=$(date +%s); export SOURCE_DATE_EPOCH; /bin/bash -o pipefail -c "$1" || exit; '
        'find / -xdev \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o '
        '-newermt "@$((s - 1))" -print0 '
        '| xargs -0r touch --no-dereference --date="@${SOURCE_DATE_EPOCH}" 2>/dev/null; true')
# The SHELL of every stage (exec form): $1 is the RUN's command; files the step wrote get
# SOURCE_DATE_EPOCH as their time (touch fails only on BuildKit's read-only mounts).
SHELL = ("/bin/bash", "-o", "pipefail", "-c", _RUN, "oota-run")

ETC_LAYER = "oota-etc.tar"
_ETC_FILES = {
    "etc/hosts": b"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    "etc/resolv.conf": b"# oota: the Docker Engine mounts its own at run time\n",
}


def epoch(environ: Mapping[str, str]) -> int:
    """The time every layer's files get: ``SOURCE_DATE_EPOCH`` when set (whole seconds),
    else :data:`LAYER_EPOCH`."""
    text = environ.get("SOURCE_DATE_EPOCH", "").strip()
    return int(text) if text.isdigit() else LAYER_EPOCH


def etc_layer() -> bytes:
    """The tar the Dockerfiles ``ADD`` to ``/`` first: /etc/hosts and /etc/resolv.conf, every
    entry at :data:`LAYER_EPOCH` (``etc`` as Debian and Ubuntu have it: root's, 0755)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        folder = tarfile.TarInfo("etc")
        folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o755, LAYER_EPOCH
        tar.addfile(folder)
        for name, data in _ETC_FILES.items():
            tar.addfile(_file_info(name, data, LAYER_EPOCH), io.BytesIO(data))
    return out.getvalue()


def files_layer(files: Mapping[str, bytes], when: int) -> bytes:
    """A layer adding ``files`` (absolute path -> bytes), sorted, each root's and 0644, dated
    ``when``: the same files make the same layer on any Engine."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(files):
            tar.addfile(_file_info(path.lstrip("/"), files[path], when), io.BytesIO(files[path]))
    return out.getvalue()


def _file_info(name: str, data: bytes, when: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, when
    return info


# -- the image's configuration ------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One entry of an image's history, as the engine's history gives it (oldest first)."""

    created_by: str
    comment: str
    layer: bool   # the step made one of the image's layers (else an empty_layer entry)


def iso(when: int) -> str:
    return dt.datetime.fromtimestamp(when, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def canonical_config(inspected: Mapping[str, Any], steps: Sequence[Step], when: int,
                     *, labels: Mapping[str, str] | None = None) -> bytes:
    """The image configuration oota gives a built image: what the engine's inspect says of it
    (its run configuration, platform and layers) and its history, every time set to ``when``,
    written one way (sorted keys, no spaces). Its sha256 is the image's id, so two Engines
    holding the same layers and the same settings hold the same image id. ``labels`` replace
    the image's; :data:`LAYERS_LABEL` records which steps made layers (the engine's history
    does not say), so the configuration can be written again from inspect alone."""
    run = dict(inspected.get("Config") or {})
    merged = {**(run.get("Labels") or {}), **(labels or {})}
    merged[LAYERS_LABEL] = "".join("1" if s.layer else "0" for s in steps)
    run["Labels"] = merged
    config: dict[str, Any] = {
        "architecture": inspected.get("Architecture", ""), "os": inspected.get("Os", ""),
        "config": run, "created": iso(when),
        "history": [_history_entry(step, when) for step in steps],
        "rootfs": {"type": "layers", "diff_ids": list(inspected["RootFS"]["Layers"])}}
    if inspected.get("Variant"):
        config["variant"] = inspected["Variant"]
    return json.dumps(config, sort_keys=True, separators=(",", ":")).encode()


def _history_entry(step: Step, when: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"created": iso(when), "created_by": step.created_by}
    if step.comment:
        entry["comment"] = step.comment
    if not step.layer:
        entry["empty_layer"] = True
    return entry


def config_id(config: bytes) -> str:
    return "sha256:" + hashlib.sha256(config).hexdigest()


def steps_from_label(history: Sequence[tuple[str, str]], label: str) -> list[Step] | None:
    """The history (created_by, comment; oldest first) with :data:`LAYERS_LABEL`'s flags;
    None when they do not fit (another history than the one the label was written for)."""
    if len(label) != len(history) or set(label) - {"0", "1"}:
        return None
    return [Step(created_by=c, comment=m, layer=f == "1") for (c, m), f in zip(history, label,
                                                                             strict=True)]


# Instructions that never make a layer; everything else may.
_EMPTY = ("ENV ", "LABEL ", "ARG ", "USER ", "CMD ", "ENTRYPOINT ", "SHELL ", "EXPOSE ",
          "VOLUME ", "HEALTHCHECK ", "STOPSIGNAL ", "ONBUILD ", "MAINTAINER ")


def steps_from_sizes(history: Sequence[tuple[str, str, int]], layers: int) -> list[Step] | None:
    """Which history entries (created_by, comment, size; oldest first) made the image's
    ``layers`` layers, when the engine's history alone tells: an entry with a size made one,
    an instruction that never makes one did not, and the zero-sized rest are all layers or
    none. None when that leaves a choice (then the configuration itself must be read)."""
    definite = [size > 0 for _, _, size in history]
    maybe = [size == 0 and _may_make_a_layer(created_by) for created_by, _, size in history]
    if sum(definite) == layers:
        flags = definite
    elif sum(definite) + sum(maybe) == layers:
        flags = [d or m for d, m in zip(definite, maybe, strict=True)]
    else:
        return None
    return [Step(created_by=c, comment=m, layer=f)
            for (c, m, _), f in zip(history, flags, strict=True)]


def _may_make_a_layer(created_by: str) -> bool:
    text = created_by.strip()
    if "#(nop)" in text:  # the classic builder: only its ADD and COPY make layers
        return any(word in text for word in (" ADD ", " COPY "))
    return not text.startswith(_EMPTY)


# -- where two layers differ -------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    """One file of a layer, as its tar holds it."""

    kind: str        # file, dir, link, symlink, other
    mode: int
    owner: str       # uid:gid
    size: int
    mtime: int
    content: str     # sha256 of a file's bytes, a link's target, '' otherwise


def differences(here: Mapping[str, Entry], there: Mapping[str, Entry], *,
                most: int = 20) -> list[str]:
    """'path: content' / 'path: time 1577836800 here, 1795557276 there' / 'path: only here'
    for each file of two copies of a layer that differs (the first ``most``, then a count)."""
    found = []
    for path in sorted(here.keys() | there.keys()):
        a, b = here.get(path), there.get(path)
        if a is None or b is None:
            found.append(f"/{path}: only {'there' if a is None else 'here'}")
        elif a != b:
            found.append(f"/{path}: " + ", ".join(_how(a, b)))
    if len(found) > most:
        found = [*found[:most], f"and {len(found) - most} more"]
    return found


def _how(a: Entry, b: Entry) -> list[str]:
    how = []
    if (a.kind, a.content, a.size) != (b.kind, b.content, b.size):
        how.append("content" if a.kind == b.kind else f"{a.kind} here, {b.kind} there")
    if a.mtime != b.mtime:
        how.append(f"time {a.mtime} here, {b.mtime} there")
    if (a.mode, a.owner) != (b.mode, b.owner):
        how.append(f"mode {a.mode:o} {a.owner} here, {b.mode:o} {b.owner} there")
    return how
