"""The engine door's vocabulary: the requests the pipeline makes of a container engine, the
answers it gets, and the :class:`Engine` Protocol. Pure data; nothing here talks to Docker.

:mod:`oota.engine.docker` is the real engine; with its helpers in this package (``cli``,
``streaming``, ``credentials``, ``archives``, ``restamp``) it is the only importer of the Docker
SDK and the only runner of the docker CLI. Unit tests fake :class:`Engine`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from oota.reproducible import Entry

# On a container: the run that owns it; that run's clean-up (or the next run's, after a kill)
# removes it.
RUN_LABEL = "oota.run"
# On an image: the run that made it (a lock builder; a test's image), so that what a dead run
# made goes too. Never RUN_LABEL: a container carries its image's labels, so every container
# started from an image labelled with RUN_LABEL looked owned by the image's run, and that run's
# clean-up removed it, whoever had started it (seen: the Docker tests' judge containers of the
# shared CPU image, killed by the end of another run of the same id, exit 137).
IMAGE_RUN_LABEL = "oota.image-run"
# On a sealed image (the build output plus its verification results): the build output's id, so
# resealing starts from it again instead of stacking layers, and the digest stays the same.
SEALED_FROM_LABEL = "oota.sealed-from"


def engine_identity(docker_id: str, root_dir: str) -> str:
    """A Docker Engine's stable identity: its own ID (``docker info``'s ``ID``) together with
    its data root, as 16 hex digits ('' when the Engine gives no ID).

    The data root is part of it because Docker 20.10 derives the ID from the machine's
    ``/etc/docker/key.json``, which every daemon of one machine shares; Docker 23 and later
    keep the ID in the data root itself. Either way the pair names one daemon, and stays the
    same across its restarts, its renames in hosts.yaml and runs with or without a hosts file."""
    if not docker_id:
        return ""
    return hashlib.sha256(f"{docker_id}\n{root_dir}".encode()).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True, slots=True)
class TlsFiles:
    """The client side of a ``tcp://`` endpoint protected by TLS (``dockerd --tlsverify``)."""

    ca: Path
    cert: Path
    key: Path


@dataclass(frozen=True, kw_only=True, slots=True)
class Endpoint:
    """Where a Docker Engine answers: a host of ``hosts.yaml``, or the default one.

    ``url`` is ``unix:///path``, ``tcp://host:port`` (with ``tls``) or ``ssh://user@host``;
    ``context`` names a docker context instead. Neither: the environment's engine
    (``DOCKER_HOST``, else the local socket), as the docker CLI would pick it."""

    name: str = "local"
    url: str = ""
    context: str = ""
    tls: TlsFiles | None = None

    def where(self) -> str:
        """The endpoint as a user wrote it, for messages and results (no credentials: a URL
        with a password is refused when hosts.yaml is loaded)."""
        if self.context:
            return f"context {self.context}"
        return self.url or "the default engine"


@dataclass(frozen=True, kw_only=True, slots=True)
class RegistryAuth:
    """Credentials for one push (``--registry-auth``); the password never reaches a repr, a
    log or a result. Without it the engine's own credential store is used."""

    username: str
    password: str = field(repr=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageLayer:
    """One layer of an image: its digest (the diff id) and the build step that made it."""

    id: str
    step: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class StepEvent:
    """One finished build step, from BuildKit's plain progress output."""

    name: str          # e.g. "builder 4/6"
    instruction: str   # e.g. "RUN python3.11 -m venv /opt/venv"
    seconds: float
    cached: bool
    failed: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildRequest:
    context: Path
    tag: str
    build_args: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, Path] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    target: str = "runtime"
    log_path: Path | None = None
    timeout_s: int = 3600
    # Every time in the image's configuration (oota.reproducible); None: as BuildKit left it.
    epoch: int | None = None
    platform: str | None = None   # docker build --platform (linux/arm64); None: the Engine's own


@dataclass(frozen=True, kw_only=True, slots=True)
class Mount:
    """A host path bind-mounted into a container."""

    source: Path
    target: str
    read_only: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class DeviceAccess:
    """How a container reaches an accelerator, as data (from a vendor's ``host`` and ``run``
    sections); only the engine turns it into its own options."""

    gpus: str | None = None                 # "all" or a count (NVIDIA container toolkit)
    devices: tuple[str, ...] = ()           # device nodes, passed through as they are
    group_add: tuple[str, ...] = ()
    ipc: str | None = None
    runtime: str | None = None              # a container runtime registered with the engine
    cap_add: tuple[str, ...] = ()
    security_opt: tuple[str, ...] = ()
    network: str | None = None
    shm_size: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRequest:
    image: str
    command: list[str]
    env: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    device: DeviceAccess | None = None
    labels: dict[str, str] = field(default_factory=dict)
    collect: str = ""          # a path inside the container copied out after the run
    collect_to: Path | None = None
    log_path: Path | None = None
    timeout_s: int = 1800


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOutcome:
    exit_code: int
    timed_out: bool
    output_tail: str


class Engine(Protocol):
    """What the pipeline needs from a container engine; unit tests fake this.

    ``endpoint`` says which engine it is; ``local`` whether it runs on this machine (then the
    host check probes this machine; otherwise it probes inside a container on that host).
    ``alive`` asks, with a short deadline, whether the engine still answers; ``abort`` stops
    every docker CLI process the engine has running (an interrupted or lost run)."""

    endpoint: Endpoint
    local: bool

    def alive(self) -> bool: ...
    def abort(self) -> None: ...
    def facts(self) -> dict[str, str]: ...
    def image_labels(self, ref: str) -> dict[str, str] | None: ...
    def image_id(self, ref: str) -> str | None: ...
    def image_digest(self, ref: str) -> str: ...
    def pull(self, ref: str, platform: str | None = None) -> str | None: ...
    def push(self, image: str, ref: str, auth: RegistryAuth | None) -> str: ...
    def pull_digest(self, repository: str, digest: str, auth: RegistryAuth | None) -> str: ...
    def tag(self, source: str, target: str) -> None: ...
    def import_rootfs(self, rootfs: Path, tag: str, labels: dict[str, str],
                      platform: str | None = None) -> None: ...
    def build(self, request: BuildRequest, on_step: Callable[[StepEvent], None]) -> str: ...
    def run(self, request: RunRequest) -> RunOutcome: ...
    def cleanup(self, run_id: str, *, images: bool) -> int: ...
    def seal(self, image: str, files: dict[str, bytes], labels: dict[str, str], *,
             run_id: str = "") -> str: ...
    def read_file(self, image: str, path: str, *, run_id: str = "") -> bytes: ...
    def build_output(self, ref: str) -> str | None: ...
    def image_layers(self, ref: str) -> tuple[ImageLayer, ...]: ...
    def layer_entries(self, ref: str, layer: str) -> dict[str, Entry]: ...
