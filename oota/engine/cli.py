"""The docker CLI: finding one that runs BuildKit, pointing it (and the SDK) at an engine, the
argv of ``docker create`` for a typed run request, and the line of a failed build that says why.
Pure but for :func:`find_buildkit_cli` and a docker context's lookup, which ask the CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from oota.engine.base import DeviceAccess, Endpoint, Mount, RunRequest, TlsFiles
from oota.errors import EnvironmentProblem
from oota.files import SMALL_LIMIT, read_text

if TYPE_CHECKING:
    from docker.tls import TLSConfig


_BUILDKIT_ERROR = re.compile(r"^#\d+ ERROR: (.+)$")
_BUILD_ERROR = re.compile(r"^#\d+ [\d.]+ (?:ERROR|E): (.+)$|^#\d+ [\d.]+ (\w*Error: .+)$")


def create_argv(cli: str, request: RunRequest, flags: tuple[str, ...] = ()) -> list[str]:
    """The ``docker create`` argv of a run request: the CLI's global ``flags`` (which engine),
    labels, environment, mounts, device access, then the image and its command. Pure, so each
    vendor's argv is unit-tested.

    ``--init``: the command must not be the container's PID 1, which the kernel spares every
    signal it has no handler for. A process that ends itself by a signal then lives on: QEMU
    reports an emulated program's crash ("qemu: uncaught target signal 11") and sends itself
    SIGSEGV to die, so a crashed arm64 suite hung to its 30-minute deadline."""
    argv = [cli, *flags, "create", "--init"]
    for key, value in sorted(request.labels.items()):
        argv += ["--label", f"{key}={value}"]
    for key, value in sorted(request.env.items()):
        argv += ["--env", f"{key}={value}"]
    for mount in request.mounts:
        argv += ["--mount", _mount_spec(mount)]
    if request.device is not None:
        argv += _device_args(request.device)
    return argv + [request.image, *request.command]


def _device_args(device: DeviceAccess) -> list[str]:
    args: list[str] = []
    singles = (("--runtime", device.runtime), ("--gpus", device.gpus), ("--ipc", device.ipc),
               ("--network", device.network), ("--shm-size", device.shm_size))
    repeated = (("--device", device.devices), ("--group-add", device.group_add),
                ("--cap-add", device.cap_add), ("--security-opt", device.security_opt))
    for flag, value in singles:
        if value is not None:
            args += [flag, value]
    for flag, values in repeated:
        for item in values:
            args += [flag, item]
    return args


def _mount_spec(mount: Mount) -> str:
    """``--mount`` takes comma-separated fields, read as CSV: a field holding a comma or a
    quote is quoted (so any path works, unlike ``-v``, which splits on colons)."""
    fields = ["type=bind", f"source={mount.source}", f"target={mount.target}"]
    if mount.read_only:
        fields.append("readonly")
    return ",".join(f'"{f.replace(chr(34), chr(34) * 2)}"' if "," in f or '"' in f else f
                    for f in fields)


def build_error_cause(log_tail: str) -> str:
    """The line of a failed build's output that says why, e.g. pip's "No matching distribution
    found for torch==2.14.1+cpu" or apt's "E: Unable to locate package ...": the last error line
    a build step printed, not BuildKit's own "executor failed running ..." summary."""
    lines = log_tail.splitlines()
    causes = [next(g for g in m.groups() if g) for m in map(_BUILD_ERROR.match, lines) if m]
    if not causes:  # no step printed an error: BuildKit's own (a missing file, a bad mount)
        causes = [m.group(1) for m in map(_BUILDKIT_ERROR.match, lines)
                  if m and not m.group(1).startswith("executor failed")]
    return causes[-1].strip() if causes else ""


def find_buildkit_cli() -> tuple[list[str], dict[str, str]]:
    """A docker CLI that can drive BuildKit: argv prefix and extra environment.

    ``docker buildx build --load`` where the buildx plugin exists; otherwise a pre-23 CLI with
    ``DOCKER_BUILDKIT=1`` (newer CLIs refuse BuildKit without buildx). ``OOTA_DOCKER_CLI``
    names a CLI to prefer.
    """
    candidates = [os.environ.get("OOTA_DOCKER_CLI", ""), shutil.which("docker") or "",
                  "/usr/bin/docker", "/usr/local/bin/docker"]
    tried = []
    for cli in dict.fromkeys(c for c in candidates if c and os.access(c, os.X_OK)):
        tried.append(cli)
        if _quiet([cli, "buildx", "version"]):
            return [cli, "buildx", "build", "--load"], {}
        version = _output([cli, "version", "--format", "{{.Client.Version}}"])
        major = re.match(r"(\d+)\.", version or "")
        if major and int(major.group(1)) < 23:
            return [cli, "build"], {"DOCKER_BUILDKIT": "1"}
    raise EnvironmentProblem(
        "no docker CLI that can run BuildKit builds (tried: " + (", ".join(tried) or "none") +
        "). Install the buildx plugin, or Debian's docker.io package (its CLI runs BuildKit "
        "with DOCKER_BUILDKIT=1); OOTA_DOCKER_CLI=/path/to/docker picks one.")


def _quiet(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _output(argv: list[str], env: Mapping[str, str] | None = None) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


# The variables that point the docker CLI at an engine; an explicit endpoint replaces them.
POINTING_VARIABLES = ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")


def cli_flags(endpoint: Endpoint) -> tuple[tuple[str, ...], str, TlsFiles | None]:
    """(the CLI's global flags, the SDK's base URL, TLS files) for ``endpoint``; a docker
    context is resolved to its endpoint for the SDK (the CLI is given its name). The
    environment's engine is the one the docker CLI would pick, context included
    (:func:`environment_context`): the SDK alone would ignore a context."""
    if endpoint.context:
        return ("--context", endpoint.context), *_context_endpoint(endpoint.context)
    if not endpoint.url:
        context, named_by = environment_context(os.environ)
        if context:
            return ("--context", context), *_context_endpoint(context, named_by)
        return (), "", None
    flags = ["-H", endpoint.url]
    if endpoint.tls is not None:
        flags += ["--tlsverify", "--tlscacert", str(endpoint.tls.ca),
                  "--tlscert", str(endpoint.tls.cert), "--tlskey", str(endpoint.tls.key)]
    return tuple(flags), endpoint.url, endpoint.tls


def environment_context(env: Mapping[str, str]) -> tuple[str, str]:
    """The docker context the docker CLI uses when no flag names one, and what named it:
    none when DOCKER_HOST is set (it wins), else DOCKER_CONTEXT, else the ``currentContext``
    of its config.json (``docker context use``). ('', '') for the default context."""
    if env.get("DOCKER_HOST"):
        return "", ""
    if env.get("DOCKER_CONTEXT"):
        name, named_by = env["DOCKER_CONTEXT"], "DOCKER_CONTEXT"
    else:
        config = Path(env.get("DOCKER_CONFIG") or Path(env.get("HOME") or "~").expanduser()
                      / ".docker") / "config.json"
        name, named_by = _current_context(config), f"currentContext of {config}"
    return ("", "") if name in ("", "default") else (name, named_by)


def _current_context(config: Path) -> str:
    try:
        found = json.loads(read_text(config, SMALL_LIMIT))
    except (OSError, ValueError):  # none, or one the CLI would not read either
        return ""
    value = found.get("currentContext") if isinstance(found, dict) else None
    return value if isinstance(value, str) else ""


def _context_endpoint(name: str, named_by: str = "") -> tuple[str, TlsFiles | None]:
    """The Docker endpoint and TLS files of the docker context ``name`` (``docker context
    inspect``), so that the SDK and the CLI talk to the same daemon. ``named_by``: where the
    environment named it, for the message when it does not exist."""
    cli = shutil.which("docker") or "/usr/bin/docker"
    quiet = {k: v for k, v in os.environ.items() if k not in POINTING_VARIABLES}
    text = _output([cli, "context", "inspect", name], env=quiet)
    try:
        found = json.loads(text or "[]")
        docker_endpoint = found[0]["Endpoints"]["docker"]
        host = str(docker_endpoint["Host"])
    except (ValueError, LookupError, TypeError) as exc:
        source = f"{named_by} names the docker context" if named_by else "docker context"
        fix = f"; unset {named_by} or create the context" if named_by == "DOCKER_CONTEXT" \
            else ("; `docker context use default` goes back to the default one" if named_by
                  else "")
        raise EnvironmentProblem(f"{source} {name!r}, which does not exist or names no Docker "
                                 f"endpoint (`docker context ls` lists them){fix}") from exc
    tls_files = found[0].get("Storage", {}).get("TLSPath", "")
    folder = Path(tls_files) / "docker" if tls_files else None
    if folder is not None and (folder / "ca.pem").is_file():
        return host, TlsFiles(ca=folder / "ca.pem", cert=folder / "cert.pem",
                              key=folder / "key.pem")
    return host, None


def sdk_tls(docker_module: ModuleType, tls: TlsFiles | None) -> bool | TLSConfig:
    if tls is None:
        return False
    config: TLSConfig = docker_module.tls.TLSConfig(client_cert=(str(tls.cert), str(tls.key)),
                                       ca_cert=str(tls.ca), verify=True)
    return config


def host_name(endpoint: Endpoint) -> str:
    """' (host NAME)' for a message, unless the name is the endpoint itself (``--host``)."""
    written = endpoint.url or endpoint.context
    return "" if endpoint.name in (written, "local") else f" (host {endpoint.name})"


def is_local(url: str) -> bool:
    """Does an engine at ``url`` run on this machine? A unix socket does ('' is the default
    socket); tcp:// and ssh:// are treated as other machines, even on a loopback address (a
    lab may forward a remote engine to one), so the host check probes inside the engine."""
    return url == "" or url.startswith("unix://")


def plain_cli() -> str:
        """The docker CLI and this engine's endpoint flags, to be followed by a command; the
        flags are global options, so they sit between the program and the command."""
        cli = shutil.which("docker") or "/usr/bin/docker"
        if not os.access(cli, os.X_OK):
            raise EnvironmentProblem("no docker CLI on PATH")
        return cli


def split_tag(ref: str) -> tuple[str, str]:
    """('registry:5000/repo', 'tag') of a reference; a reference without a tag means latest."""
    repository, _, tag = ref.rpartition(":")
    if not repository or "/" in tag:  # no tag; the colon was a registry port
        return ref, "latest"
    return repository, tag


def label_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
