"""Image configurations the engine writes itself, so that images are reproducible across
Engines (:mod:`oota.reproducible` says why and how), and the files of a layer, to say where two
copies of a layer differ. Part of the engine door: it works on the Docker SDK client that
:class:`oota.engine.docker.DockerEngine` made, and imports no SDK itself.

A configuration is loaded beside the layers the engine already holds: ``docker load`` of an
archive with the configuration and a manifest whose layer files are missing stores the image
without reading them, as long as the engine has every layer (only a new layer, a seal's,
travels in the archive).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

from oota.engine.base import ImageLayer
from oota.reproducible import (
    LAYERS_LABEL,
    Entry,
    Step,
    canonical_config,
    config_id,
    steps_from_label,
    steps_from_sizes,
)


def steps(client: Any, image: Any) -> list[Step]:
    """The image's history with which entries made layers: from its :data:`LAYERS_LABEL` (an
    image oota restamped), else from the history's sizes, else from its configuration as
    ``docker save`` gives it (the whole image streams past: the slow way, rarely needed)."""
    history = [(str(h.get("CreatedBy") or ""), str(h.get("Comment") or ""), int(h.get("Size")
                or 0)) for h in reversed(client.api.history(image.id))]
    label = ((image.attrs.get("Config") or {}).get("Labels") or {}).get(LAYERS_LABEL)
    layers = len(image.attrs["RootFS"]["Layers"])
    found = (steps_from_label([(c, m) for c, m, _ in history], label) if label else None) \
        or steps_from_sizes(history, layers)
    return found if found is not None else _saved_steps(image)


def _saved_steps(image: Any) -> list[Step]:
    config = saved_config(image)
    return [Step(created_by=str(h.get("created_by") or ""), comment=str(h.get("comment") or ""),
                 layer=not h.get("empty_layer")) for h in config.get("history") or []]


def saved_config(image: Any) -> dict[str, Any]:
    """The image's configuration as ``docker save`` writes it."""
    with tarfile.open(fileobj=_chunks(image.save(named=False)), mode="r|") as outer:
        for member in outer:
            name = member.name
            if member.isfile() and name.endswith(".json") and "/" not in name \
                    and name not in ("manifest.json", "repositories"):
                handle = outer.extractfile(member)
                if handle is not None:
                    config: dict[str, Any] = json.loads(handle.read())
                    return config
    raise ValueError(f"docker save of {image.id} held no image configuration")


def created(image: Any) -> int:
    """The image's creation time in whole seconds (0 when it has none)."""
    text = str(image.attrs.get("Created") or "")
    try:
        return int(dt.datetime.fromisoformat(text[:19]).replace(
            tzinfo=dt.timezone.utc).timestamp())
    except ValueError:
        return 0


def restamped(client: Any, image: Any, when: int, tag: str | None) -> str:
    """The id of ``image`` with its canonical configuration (every time ``when``), loaded and
    tagged ``tag`` unless the engine has it already."""
    config = canonical_config(_inspected(image.attrs), steps(client, image), when)
    new_id = config_id(config)
    if new_id != image.id:
        load(client, config, (), tag)
    elif tag:
        _tag(image, tag)
    return new_id


def sealed(client: Any, base: Any, files: Mapping[str, bytes], layer: bytes,
           labels: Mapping[str, str], tag: str) -> str | None:
    """``base`` (a restamped image) plus ``layer`` (the tar of ``files``) and ``labels``, as
    one configuration written the canonical way; its id. None when ``base``'s configuration
    cannot be written again exactly (not restamped by oota): the caller seals another way."""
    history = steps(client, base)
    when = created(base)
    if config_id(canonical_config(_inspected(base.attrs), history, when)) != base.id:
        return None
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    inspected = _inspected(base.attrs)
    inspected["RootFS"] = {"Layers": [*inspected["RootFS"]["Layers"], diff_id]}
    step = Step(created_by="oota seal: " + " ".join(sorted(files)),
                comment="oota: the image's verification results", layer=True)
    config = canonical_config(inspected, [*history, step], when, labels=labels)
    load(client, config, (layer,), tag)
    return config_id(config)


def unsealed(client: Any, image: Any, seal_labels: Sequence[str], base_id: str) -> bool:
    """Load again the build output ``image`` (a canonical seal) was made from, when it is gone
    (a seal's configuration has no parent link, so ``docker image prune`` takes the build
    output for dangling): the seal's configuration without its last layer and step and
    without ``seal_labels``. True when that gave back exactly ``base_id``."""
    history = steps(client, image)
    if not history or not history[-1].layer:
        return False
    inspected = _inspected(image.attrs)
    layers = inspected["RootFS"]["Layers"]
    inspected["RootFS"] = {"Layers": layers[:-1]}
    labels = dict(inspected["Config"].get("Labels") or {})
    for key in (*seal_labels, LAYERS_LABEL):
        labels.pop(key, None)
    inspected["Config"] = {**inspected["Config"], "Labels": labels}
    config = canonical_config(inspected, history[:-1], created(image))
    if config_id(config) != base_id:
        return False
    load(client, config, (), None)
    return True


def _inspected(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """What the canonical configuration takes from inspect. The run configuration's ``Image``
    and ``Hostname`` are the builder's, not the image's: left empty."""
    run = {**(attrs.get("Config") or {}), "Image": "", "Hostname": ""}
    return {"Config": run, "Architecture": attrs.get("Architecture", ""),
            "Os": attrs.get("Os", ""), "Variant": attrs.get("Variant", ""),
            "RootFS": {"Layers": list(attrs["RootFS"]["Layers"])}}


def load(client: Any, config: bytes, new_layers: Sequence[bytes], tag: str | None) -> None:
    """``docker load`` of ``config``: the engine holds its first layers already; the last
    ``new_layers`` travel with it."""
    doc = json.loads(config)
    diff_ids = doc["rootfs"]["diff_ids"]
    names = [f"{i:03d}/layer.tar" for i in range(len(diff_ids))]
    config_name = f"{config_id(config).removeprefix('sha256:')}.json"
    manifest = [{"Config": config_name, "RepoTags": [tag] if tag else None, "Layers": names}]
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        _add(tar, config_name, config)
        _add(tar, "manifest.json", json.dumps(manifest).encode())
        for name, data in zip(names[len(names) - len(new_layers):], new_layers, strict=True):
            _add(tar, name, data)
    client.images.load(archive.getvalue())


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _tag(image: Any, tag: str) -> None:
    repository, _, name = tag.rpartition(":")
    image.tag(repository, tag=name)


def layers(client: Any, image: Any) -> tuple[ImageLayer, ...]:
    """Each layer of ``image`` with the step that made it ('' where the history cannot say)."""
    diff_ids = list(image.attrs["RootFS"]["Layers"])
    history = [(str(h.get("CreatedBy") or ""), str(h.get("Comment") or ""), int(h.get("Size")
                or 0)) for h in reversed(client.api.history(image.id))]
    label = ((image.attrs.get("Config") or {}).get("Labels") or {}).get(LAYERS_LABEL)
    found = (steps_from_label([(c, m) for c, m, _ in history], label) if label else None) \
        or steps_from_sizes(history, len(diff_ids))
    made = [s for s in found or [] if s.layer]
    names = [_step_name(s) for s in made] if len(made) == len(diff_ids) else [""] * len(diff_ids)
    return tuple(ImageLayer(id=d, step=n) for d, n in zip(diff_ids, names, strict=True))


def _step_name(step: Step) -> str:
    """The instruction as the Dockerfile wrote it: BuildKit's ``RUN |1 ARG=... SHELL... CMD``
    without the build arguments and oota's SHELL wrapper (whose last word is ``oota-run``)."""
    text = " ".join(step.created_by.removesuffix("# buildkit").split())
    if text.startswith("RUN ") and " oota-run " in text:
        text = "RUN " + text.split(" oota-run ", 1)[1]
    return (text or step.comment)[:200]


def entries(image: Any, diff_id: str) -> dict[str, Entry]:
    """The files of ``image``'s layer ``diff_id``: every layer streams past (``docker save``),
    each listed while its sha256 is taken; the one whose digest is ``diff_id`` is kept."""
    with tarfile.open(fileobj=_chunks(image.save(named=False)), mode="r|") as outer:
        for member in outer:
            if not member.isfile() or not member.name.endswith("layer.tar"):
                continue
            handle = outer.extractfile(member)
            if handle is None:
                continue
            hashed = _Hashing(handle)
            listed = _listing(hashed)
            hashed.drain()
            if "sha256:" + hashed.digest.hexdigest() == diff_id:
                return listed
    raise ValueError(f"{image.id} has no layer {diff_id}")


def _listing(stream: IO[bytes] | io.RawIOBase) -> dict[str, Entry]:
    found: dict[str, Entry] = {}
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            content = ""
            if member.isfile():
                data = tar.extractfile(member)
                content = _sha256(data) if data is not None else ""
            elif member.issym() or member.islnk():
                content = member.linkname
            found[member.name.removeprefix("./").rstrip("/")] = Entry(
                kind=_kind(member), mode=member.mode, owner=f"{member.uid}:{member.gid}",
                size=member.size, mtime=int(member.mtime), content=content)
    return found


def _kind(member: tarfile.TarInfo) -> str:
    return ("file" if member.isfile() else "dir" if member.isdir() else
            "symlink" if member.issym() else "link" if member.islnk() else "other")


def _sha256(handle: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: handle.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def _chunks(chunks: Iterator[bytes]) -> io.BufferedReader:
    """A buffered, readable stream over the SDK's iterator of byte chunks."""
    return io.BufferedReader(_Chunks(chunks), buffer_size=1 << 20)


class _Chunks(io.RawIOBase):
    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._rest = iter(chunks), memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not len(self._rest):
            try:
                self._rest = memoryview(next(self._chunks))
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._rest))
        buffer[:size] = self._rest[:size]
        self._rest = self._rest[size:]
        return size


class _Hashing(io.RawIOBase):
    """Reads through ``inner`` while taking the sha256 of every byte read."""

    def __init__(self, inner: IO[bytes]) -> None:
        self.inner, self.digest = inner, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        self.digest.update(data)
        buffer[:len(data)] = data
        return len(data)

    def drain(self) -> None:
        """Read what the tar reader left (its end-of-archive padding), for the digest."""
        for block in iter(lambda: self.inner.read(1 << 20), b""):
            self.digest.update(block)
