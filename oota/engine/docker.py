"""The one door to Docker. Nothing else in oota imports ``docker`` or runs the docker CLI.

Two channels, each for what it does best:

* the Docker SDK (docker-py) for inspection, pulls, labels, archives and clean-up;
* the docker CLI for BuildKit builds (the SDK's ``images.build`` is the legacy builder: no
  secret or cache mounts, docker/docker-py#2230) and for ``docker create``, whose argv
  :func:`create_argv` builds from a typed :class:`~oota.engine.base.RunRequest` (device
  access, environment and mounts are data; this module alone knows the CLI's flags).

Every CLI call is an argv list (never a shell string) with a timeout, echoed at debug level.
Every container the toolkit creates carries the ``oota.run`` label so :meth:`DockerEngine.cleanup`
can remove it (also a killed run's, from the next run). A cell's image does not: its labels
hold nothing that changes between two builds of the same inputs, so that a rebuild is the same
image; it is found by its tag, and the run id is in the result.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from oota import reproducible
from oota.engine import restamp
from oota.engine.base import (
    RUN_LABEL,
    SEALED_FROM_LABEL,
    BuildRequest,
    DeviceAccess,
    Endpoint,
    ImageLayer,
    Mount,
    RegistryAuth,
    RunOutcome,
    RunRequest,
    StepEvent,
    TlsFiles,
    engine_identity,
)
from oota.errors import EnvironmentProblem, StepFailed
from oota.net import redact, redact_text
from oota.reproducible import Entry

if TYPE_CHECKING:  # the SDK itself is imported when an engine is made (it is slow to import)
    from docker.models.containers import Container
    from docker.tls import TLSConfig

log = logging.getLogger("oota.engine")

_STEP = re.compile(r"^#(\d+) \[([^\]]+)\] (.*)$")
_DONE = re.compile(r"^#(\d+) (DONE [\d.]+s|CACHED|ERROR.*)$")


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


_BUILDKIT_ERROR = re.compile(r"^#\d+ ERROR: (.+)$")
_BUILD_ERROR = re.compile(r"^#\d+ [\d.]+ (?:ERROR|E): (.+)$|^#\d+ [\d.]+ (\w*Error: .+)$")


def create_argv(cli: str, request: RunRequest, flags: tuple[str, ...] = ()) -> list[str]:
    """The ``docker create`` argv of a run request: the CLI's global ``flags`` (which engine),
    labels, environment, mounts, device access, then the image and its command. Pure, so each
    vendor's argv is unit-tested."""
    argv = [cli, *flags, "create"]
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


def _output(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


PING_TIMEOUT_S = 5
# The variables that point the docker CLI at an engine; an explicit endpoint replaces them.
_POINTING_VARIABLES = ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")


def _cli_flags(endpoint: Endpoint) -> tuple[tuple[str, ...], str, TlsFiles | None]:
    """(the CLI's global flags, the SDK's base URL, TLS files) for ``endpoint``; a docker
    context is resolved to its endpoint for the SDK (the CLI is given its name)."""
    if endpoint.context:
        return ("--context", endpoint.context), *_context_endpoint(endpoint.context)
    if not endpoint.url:
        return (), "", None
    flags = ["-H", endpoint.url]
    if endpoint.tls is not None:
        flags += ["--tlsverify", "--tlscacert", str(endpoint.tls.ca),
                  "--tlscert", str(endpoint.tls.cert), "--tlskey", str(endpoint.tls.key)]
    return tuple(flags), endpoint.url, endpoint.tls


def _context_endpoint(name: str) -> tuple[str, TlsFiles | None]:
    """The Docker endpoint and TLS files of the docker context ``name`` (``docker context
    inspect``), so that the SDK and the CLI talk to the same daemon."""
    cli = shutil.which("docker") or "/usr/bin/docker"
    text = _output([cli, "context", "inspect", name])
    try:
        found = json.loads(text or "[]")
        docker_endpoint = found[0]["Endpoints"]["docker"]
        host = str(docker_endpoint["Host"])
    except (ValueError, LookupError, TypeError) as exc:
        raise EnvironmentProblem(f"docker context {name!r} does not exist or names no Docker "
                                 "endpoint (`docker context ls` lists them)") from exc
    tls_files = found[0].get("Storage", {}).get("TLSPath", "")
    folder = Path(tls_files) / "docker" if tls_files else None
    if folder is not None and (folder / "ca.pem").is_file():
        return host, TlsFiles(ca=folder / "ca.pem", cert=folder / "cert.pem",
                              key=folder / "key.pem")
    return host, None


def _sdk_tls(docker_module: ModuleType, tls: TlsFiles | None) -> bool | TLSConfig:
    if tls is None:
        return False
    config: TLSConfig = docker_module.tls.TLSConfig(client_cert=(str(tls.cert), str(tls.key)),
                                       ca_cert=str(tls.ca), verify=True)
    return config


def _host_name(endpoint: Endpoint) -> str:
    """' (host NAME)' for a message, unless the name is the endpoint itself (``--host``)."""
    written = endpoint.url or endpoint.context
    return "" if endpoint.name in (written, "local") else f" (host {endpoint.name})"


def _is_local(url: str) -> bool:
    """Does an engine at ``url`` run on this machine? A unix socket does ('' is the default
    socket); tcp:// and ssh:// are treated as other machines, even on a loopback address (a
    lab may forward a remote engine to one), so the host check probes inside the engine."""
    return url == "" or url.startswith("unix://")


def stored_credentials(registry: str, config: Mapping[str, Any],
                       where: Path) -> RegistryAuth | None:
    """The docker CLI's credentials for ``registry`` in ``config`` (its config.json, read from
    ``where``), in docker's order: the helper ``credHelpers`` names for the registry, else the
    ``credsStore`` helper, else the ``auths`` entry; None when none holds any.

    The SDK picks the helper and reads ``auths``; the helper itself is asked here
    (:func:`ask_helper`: ``docker-credential-NAME get``, the server on stdin, ``{ServerURL,
    Username, Secret}`` back) because the SDK waits for a helper without end. A helper that is
    missing, fails, hangs or answers something else is an EnvironmentProblem naming it; what a
    helper answered is never quoted (it may hold the secret), only the first line a failing
    one printed."""
    import docker.auth  # here, as in DockerEngine: the SDK is slow to import
    import docker.errors

    if not config:  # the SDK would go and look for a file of its own
        return None
    try:
        stored = docker.auth.load_config(config_dict=dict(config))
        # The same configuration without its helpers: only `auths`, asked last.
        auths = docker.auth.load_config(config_dict={
            k: v for k, v in config.items() if k not in ("credsStore", "credHelpers")})
    except (docker.errors.DockerException, ValueError) as exc:
        raise EnvironmentProblem(f"{where}: an `auths` entry is not docker's (base64 of "
                                 f"USER:PASSWORD) ({type(exc).__name__}); `docker login "
                                 f"{registry}` rewrites it") from None
    helper = stored.get_credential_store(registry)
    if helper is not None:
        server = docker.auth.INDEX_URL if registry in ("", docker.auth.INDEX_NAME) else registry
        found = ask_helper(helper, server, registry, where)
        if found is not None:
            return _as_auth(found, helper, registry, where)
    return _as_auth(auths.resolve_authconfig(registry), None, registry, where)


HELPER_TIMEOUT_S = 30
_HELPER_ANSWER_LIMIT = 1 << 20


def ask_helper(helper: str, server: str, registry: str, where: Path) -> dict[str, str] | None:
    """A credential helper's answer for ``server`` as the SDK shapes it (``Username`` and
    ``Password``, or ``IdentityToken``); None when it knows none. It has
    :data:`HELPER_TIMEOUT_S` to answer (a helper waiting for a locked keyring would hang
    every publish and pull)."""
    program = f"docker-credential-{helper}"
    exe = shutil.which(program)
    if exe is None:
        raise _helper_failed(helper, registry, where,
                             f"{program} is not installed or not available in PATH")
    try:
        proc = subprocess.run([exe, "get"], input=server.encode(), capture_output=True,
                              timeout=HELPER_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise _helper_failed(helper, registry, where,
                             f"no answer within {HELPER_TIMEOUT_S} s") from None
    except OSError as exc:
        raise _helper_failed(helper, registry, where, f"cannot run it ({exc.strerror})") from None
    said = (proc.stdout or proc.stderr)[:_HELPER_ANSWER_LIMIT].decode(errors="replace").strip()
    if proc.returncode != 0:
        if "credentials not found" in said.lower():
            return None
        first = (said.splitlines() or [""])[0]
        raise _helper_failed(helper, registry, where, f"it exited with {proc.returncode}"
                             + (f": {first}" if first else ""))
    try:
        answer = json.loads(said)
        user, secret = answer["Username"], answer["Secret"]
        if not isinstance(user, str) or not isinstance(secret, str):
            raise TypeError("not strings")
    except (ValueError, LookupError, TypeError, RecursionError):
        raise _helper_failed(helper, registry, where, "its answer is not the JSON "
                             "{ServerURL, Username, Secret} of docker's credential helpers"
                             ) from None
    if user == "<token>":  # docker's marker of an identity token
        return {"IdentityToken": secret}
    return {"Username": user, "Password": secret}


def _as_auth(found: Mapping[str, Any] | None, helper: str | None, registry: str,
             where: Path) -> RegistryAuth | None:
    """The SDK's answer (a helper's Username/Password, or an auths entry's username/password)
    as RegistryAuth."""
    if not found:
        return None
    if found.get("IdentityToken"):
        source = f"docker-credential-{helper}" if helper else f"{where} (auths)"
        raise EnvironmentProblem(f"{source} holds an identity token for {registry}, not a user "
                                 "and password, and oota's registry client cannot use one; give "
                                 "--registry-auth FILE")
    user = found.get("Username") or found.get("username") or ""
    password = found.get("Password") or found.get("password") or ""
    return RegistryAuth(username=str(user), password=str(password)) if user else None


def _helper_failed(helper: str | None, registry: str, where: Path,
                   reason: str) -> EnvironmentProblem:
    first = redact_text((reason.strip().splitlines() or ["no reason given"])[0][:200])
    return EnvironmentProblem(f"the Docker credential helper docker-credential-{helper} (named "
                              f"in {where}) gave no credentials for {registry}: {first}; fix "
                              "or install it, or give --registry-auth FILE")


# A file read out of an image (its sealed results): an image may hold anything there.
READ_FILE_LIMIT = 64 << 20


def _bounded(stream: Iterable[bytes], limit: int) -> bytes:
    """The chunks of ``stream`` joined, refused (StepFailed) past ``limit`` bytes."""
    chunks, size = [], 0
    for chunk in stream:
        size += len(chunk)
        if size > limit + 4096:  # the tar header and padding around the file
            raise StepFailed(f"the file is larger than {limit >> 20} MiB; not read")
        chunks.append(chunk)
    return b"".join(chunks)


class DockerEngine:
    """The real engine: the Docker daemon at ``endpoint`` (default: the environment's, i.e.
    ``DOCKER_HOST`` or the local socket, as the docker CLI picks it).

    The SDK and the CLI are pointed at the same daemon: an endpoint's URL and TLS files become
    the SDK client's and the CLI's ``-H``/``--tls*`` flags (a docker context: ``--context``),
    and the ``DOCKER_*`` variables that would point the CLI elsewhere are dropped."""

    def __init__(self, endpoint: Endpoint | None = None) -> None:
        import docker
        import docker.errors
        import docker.tls
        import docker.utils

        self._errors = docker.errors
        self.endpoint = endpoint or Endpoint()
        self._flags, base_url, tls = _cli_flags(self.endpoint)
        self._env = {k: v for k, v in os.environ.items()
                     if not (self._flags and k in _POINTING_VARIABLES)}
        self.local = _is_local(base_url or os.environ.get("DOCKER_HOST", ""))
        self._live: set[subprocess.Popen[str]] = set()
        self._live_lock = threading.Lock()
        try:
            if base_url:
                self.client = docker.DockerClient(
                    base_url=base_url, timeout=600, use_ssh_client=base_url.startswith("ssh://"),
                    tls=_sdk_tls(docker, tls))
                self._pinger = docker.APIClient(
                    base_url=base_url, timeout=PING_TIMEOUT_S, tls=_sdk_tls(docker, tls),
                    use_ssh_client=base_url.startswith("ssh://"))
            else:
                self.client = docker.from_env(timeout=600)
                self._pinger = docker.APIClient(timeout=PING_TIMEOUT_S,
                                                **docker.utils.kwargs_from_env())
            self.client.ping()
        except ValueError as exc:  # the SDK parsing an endpoint it cannot read
            shown = base_url or os.environ.get("DOCKER_HOST", "")
            raise EnvironmentProblem(
                f"{'DOCKER_HOST ' if not base_url else ''}{redact(shown)[:200]!r} is not a Docker "
                f"endpoint ({exc}); write it as unix:///PATH, tcp://HOST:PORT or an ssh:// URL"
            ) from None
        except docker.errors.DockerException as exc:
            where = "" if self.endpoint.name == "local" and not base_url else \
                f" at {self.endpoint.where()}" + _host_name(self.endpoint)
            raise EnvironmentProblem(
                f"cannot reach a Docker Engine{where} ({exc}). Start one (`dockerd &` as root, "
                "or `systemctl start docker`) or set DOCKER_HOST; `./oota.sh` installs and "
                "starts it on Debian.") from exc
        self._cli: tuple[list[str], dict[str, str]] | None = None

    def alive(self) -> bool:
        """Does the daemon still answer (within a few seconds)?"""
        try:
            return bool(self._pinger.ping())
        except Exception:  # noqa: BLE001 - any failure to answer is "no"
            return False

    def abort(self) -> None:
        """Stop every docker CLI process this engine has running (builds, attached runs)."""
        with self._live_lock:
            running = list(self._live)
        for proc in running:
            _stop(proc)

    # -- inspection ------------------------------------------------------------------------
    def facts(self) -> dict[str, str]:
        info = self.client.info()
        version = self.client.version()
        return {
            "engine": self.endpoint.name,
            "engine_id": engine_identity(str(info.get("ID", "")),
                                         str(info.get("DockerRootDir", ""))),
            "docker_id": str(info.get("ID", "")),
            "daemon_name": str(info.get("Name", "")),
            "endpoint": self.endpoint.where(),
            "docker_server": version.get("Version", ""),
            "docker_api": version.get("ApiVersion", ""),
            "kernel": info.get("KernelVersion", ""),
            "os": info.get("OperatingSystem", ""),
            "arch": info.get("Architecture", ""),
            "cpus": str(info.get("NCPU", "")),
            "memory_bytes": str(info.get("MemTotal", "")),
            "runtimes": ",".join(sorted(info.get("Runtimes", {}))),
            "storage_driver": info.get("Driver", ""),
        }

    def image_labels(self, ref: str) -> dict[str, str] | None:
        try:
            image = self.client.images.get(ref)
        except self._errors.ImageNotFound:
            return None
        return dict(image.labels or {})

    def image_digest(self, ref: str) -> str:
        """The registry digest, else the image id; for an image oota sealed, the id of the build
        output it was sealed from (sealing adds results, not software)."""
        image = self.client.images.get(ref)
        digests = image.attrs.get("RepoDigests") or []
        if digests:
            return str(digests[0]).split("@", 1)[1]
        return str((image.labels or {}).get(SEALED_FROM_LABEL) or image.id)

    def image_id(self, ref: str) -> str | None:
        return self._image_id(ref)

    def build_output(self, ref: str) -> str | None:
        """The id of the build output ``ref`` is (or was sealed from): what a verification of
        it judged; None when there is no such image."""
        try:
            image = self.client.images.get(ref)
        except self._errors.ImageNotFound:
            return None
        return str((image.labels or {}).get(SEALED_FROM_LABEL) or image.id)

    def image_layers(self, ref: str) -> tuple[ImageLayer, ...]:
        """``ref``'s layers, oldest first, each with the build step that made it."""
        return restamp.layers(self.client, self.client.images.get(ref))

    def layer_entries(self, ref: str, layer: str) -> dict[str, Entry]:
        """The files of ``ref``'s layer ``layer`` (a diff id), to compare with another copy;
        the whole image streams past (``docker save``): for the rare layer that differs."""
        return restamp.entries(self.client.images.get(ref), layer)

    def seal(self, image: str, files: dict[str, bytes], labels: dict[str, str], *,
             run_id: str = "") -> str:
        """Add ``files`` (absolute path -> bytes) to ``image`` as one layer and move its tag there.

        The layer always goes on the build output (label ``oota.sealed-from``), never on an
        earlier sealing, and the sealing it replaces is removed: re-verifying an image does not
        grow it. The tag moves in one step, so an interruption leaves the old sealing or the
        new one. A build output oota restamped (:mod:`oota.reproducible`) is sealed with a
        configuration written the same way: the same results on the same image make the same
        sealed image on any Engine. Returns the new image id."""
        current = self.client.images.get(image)
        base = str((current.labels or {}).get(SEALED_FROM_LABEL) or current.id)
        try:
            built = self.client.images.get(base)
        except self._errors.ImageNotFound:
            built = self._build_output_again(current, base, labels)
            base = str(built.id)
        merged = {**labels, SEALED_FROM_LABEL: base}
        layer = reproducible.files_layer(files, restamp.created(built))
        canonical = restamp.sealed(self.client, built, files, layer, merged, image)
        if canonical is not None:
            if current.id not in (base, canonical):
                self._remove_if_untagged(str(current.id))
            return canonical
        container = self._scratch_container(base, run_id)
        try:
            container.put_archive("/", _tar_of(files))
            repository, tag = _split_tag(image)
            changes = [f"LABEL {key}={_label_quote(value)}" for key, value
                       in sorted({**labels, SEALED_FROM_LABEL: base}.items())]
            sealed = container.commit(repository=repository, tag=tag, changes=changes,
                                      message="oota: the image's verification results")
        finally:
            container.remove(force=True)
        if current.id not in (base, sealed.id):
            self._remove_if_untagged(str(current.id))  # the sealing this one replaces
        return str(sealed.id)

    def _build_output_again(self, sealed: Any, base: str, labels: dict[str, str]) -> Any:
        """The build output ``sealed`` was sealed from, loaded again from the seal itself when
        it was pruned; else the sealed image (the new seal then goes on top of it)."""
        if restamp.unsealed(self.client, sealed, [*labels, SEALED_FROM_LABEL], base):
            return self.client.images.get(base)
        return sealed

    def _scratch_container(self, image: str, run_id: str) -> Container:
        """A container that is never started (only its filesystem is used), labelled with the
        run so that a run killed before removing it gets it removed by the next one."""
        return self.client.containers.create(image, labels={RUN_LABEL: run_id} if run_id else {})

    def pull(self, ref: str) -> str | None:
        """Pull ``ref``; None (with the reason logged) when the registry does not answer."""
        repo, tag = _split_tag(ref)
        try:
            self.client.images.pull(repo, tag=tag)
            return None
        except self._errors.DockerException as exc:
            log.debug("pull %s failed: %s", ref, exc)
            return str(exc).splitlines()[0][:300]

    def push(self, image: str, ref: str, auth: RegistryAuth | None) -> str:
        """Tag ``image`` as ``ref`` and push it; the registry's manifest digest. Credentials are
        ``auth``'s, else the engine's credential store's (``docker login``)."""
        repository, tag = _split_tag(ref)
        self.client.images.get(image).tag(repository, tag=tag)
        try:
            return self._push(ref, repository, tag, auth)
        except BaseException:
            # A push that did not happen leaves no tag behind (a dead registry's name on an
            # image here would look like a published one).
            with contextlib.suppress(self._errors.DockerException):
                self.client.images.remove(ref, noprune=True)
            raise

    def _push(self, ref: str, repository: str, tag: str, auth: RegistryAuth | None) -> str:
        config = {"username": auth.username, "password": auth.password} if auth else None
        digest = ""
        try:
            for line in self.client.api.push(repository, tag=tag, stream=True, decode=True,
                                             auth_config=config):
                if "error" in line:
                    raise StepFailed(f"push of {ref} failed: {line['error']}")
                digest = str((line.get("aux") or {}).get("Digest") or digest)
        except self._errors.DockerException as exc:
            raise StepFailed(f"push of {ref} failed: {str(exc).splitlines()[0]}") from exc
        if not digest.startswith("sha256:"):
            raise StepFailed(f"push of {ref}: the registry named no digest")
        return digest

    def pull_digest(self, repository: str, digest: str, auth: RegistryAuth | None) -> str:
        """Pull exactly ``repository@digest`` (credentials as for :meth:`push`); its image id.
        StepFailed with the engine's reason when it cannot."""
        config = {"username": auth.username, "password": auth.password} if auth else None
        try:
            image = self.client.images.pull(repository, tag=digest, auth_config=config)
        except self._errors.DockerException as exc:
            raise StepFailed(f"pull of {repository}@{digest} failed: "
                             f"{str(exc).splitlines()[0][:300]}") from exc
        return str(image.id)

    def read_file(self, image: str, path: str, *, run_id: str = "") -> bytes:
        """One file of ``image``, byte for byte, from a container that is never started;
        FileNotFoundError when the image has no such file."""
        container = self._scratch_container(image, run_id)
        try:
            try:
                stream, _ = container.get_archive(path)
            except self._errors.NotFound as exc:
                raise FileNotFoundError(f"{path} in {image}") from exc
            with tarfile.open(fileobj=io.BytesIO(_bounded(stream, READ_FILE_LIMIT))) as tar:
                member = tar.next()
                handle = tar.extractfile(member) if member else None
                if handle is None:
                    raise StepFailed(f"{path} in {image} is not a file")
                return handle.read(READ_FILE_LIMIT)
        finally:
            container.remove(force=True)

    def tag(self, source: str, target: str) -> None:
        repository, tag = _split_tag(target)
        self.client.images.get(source).tag(repository, tag=tag)

    # -- creation --------------------------------------------------------------------------
    def import_rootfs(self, rootfs: Path, tag: str, labels: dict[str, str]) -> None:
        """``tar -C rootfs -c . | docker import`` with labels, streamed (no temp tarball)."""
        cli = self._plain_cli()
        changes = [arg for key, value in sorted(labels.items())
                   for arg in ("--change", f"LABEL {key}={_label_quote(value)}")]
        argv = [cli, *self._flags, "import", *changes, "-", tag]
        log.debug("run: tar -C %s -c . | %s", rootfs, " ".join(argv))
        tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."],
                               stdout=subprocess.PIPE)
        try:
            proc = subprocess.run(argv, stdin=tar.stdout, capture_output=True, text=True,
                                  timeout=900, env=self._env)
        finally:
            if tar.stdout:
                tar.stdout.close()
            tar.wait(timeout=60)
        if proc.returncode != 0 or tar.returncode != 0:
            raise StepFailed(f"importing {rootfs} as {tag} failed", command=argv,
                             exit_code=proc.returncode, log_tail=_tail(proc.stderr))

    def build(self, request: BuildRequest, on_step: Callable[[StepEvent], None]) -> str:
        """Build with BuildKit; stream progress to ``on_step`` and the log file; return the id
        of the image ``request.tag`` names afterwards.

        BuildKit writes the new image's id to a file and leaves tags alone; the tag moves here,
        once the build succeeded, in one step. A build that is interrupted or killed therefore
        never moves it. When the build reproduces the output a sealed image was made from, the
        tag stays on the sealed image: its verification results still hold."""
        if self._cli is None:
            self._cli = find_buildkit_cli()
        cli, extra_env = self._cli
        prefix = [cli[0], *self._flags, *cli[1:]]
        # Beside the context, in the folder its owner removes (also after a SIGKILL, when the
        # orphaned CLI may still write it).
        iidfile = request.context.with_name(f"{request.context.name}.image-id")
        iidfile.unlink(missing_ok=True)
        argv = [*prefix, "--progress=plain", "--target", request.target,
                "--iidfile", str(iidfile)]
        for key, value in sorted(request.build_args.items()):
            argv += ["--build-arg", f"{key}={value}"]
        for key, value in sorted(request.labels.items()):
            argv += ["--label", f"{key}={value}"]
        for key, path in sorted(request.secrets.items()):
            argv += ["--secret", f"id={key},src={path}"]
        argv.append(str(request.context))
        log.debug("run: %s", " ".join(argv))
        output = self._stream(argv, {**self._env, **extra_env}, request.log_path,
                              request.timeout_s, on_step)
        built = iidfile.read_text(encoding="utf-8").strip() if iidfile.exists() else ""
        iidfile.unlink(missing_ok=True)
        if output.exit_code != 0 or not built:
            why = "timed out" if output.timed_out else f"exited with {output.exit_code}"
            cause = build_error_cause(output.output_tail) or ("" if output.exit_code else
                                                              "BuildKit named no image")
            raise StepFailed(f"docker build of {request.tag} {why}"
                             + (f": {cause}" if cause else ""), command=argv,
                             exit_code=output.exit_code, log_tail=output.output_tail)
        if request.epoch is not None:
            built = self._restamped(built, request.epoch)
        return self._take_tag(request.tag, built)

    def _restamped(self, raw: str, when: int) -> str:
        """BuildKit's output with every time of its configuration ``when`` (the layers are
        the same): the image id the same inputs give on any Engine. BuildKit's own image goes
        (its layers stay: they are the restamped image's)."""
        image = self.client.images.get(raw)
        stamped = restamp.restamped(self.client, image, when, None)
        if stamped != raw:
            self._remove_if_untagged(raw)
        return stamped

    def _take_tag(self, tag: str, built: str) -> str:
        """Point ``tag`` at the image ``built`` (or keep it on the sealing of that very image);
        the image it named before goes unless something else still names or uses it."""
        previous = self._image_id(tag)
        if previous is not None and previous != built and self._sealed_from(previous) == built:
            return previous
        self.tag(built, tag)
        if previous is not None and previous != built:
            self._remove_if_untagged(previous)
        return built

    def _sealed_from(self, image_id: str) -> str | None:
        try:
            labels = self.client.images.get(image_id).labels or {}
        except self._errors.ImageNotFound:
            return None
        return labels.get(SEALED_FROM_LABEL)

    def _image_id(self, ref: str) -> str | None:
        try:
            return str(self.client.images.get(ref).id)
        except self._errors.ImageNotFound:
            return None

    def _remove_if_untagged(self, image_id: str) -> None:
        """The image a rebuild replaced, unless something else still names or uses it (a
        1.4 GB image per matrix edit would otherwise pile up)."""
        try:
            if not self.client.images.get(image_id).tags:
                self.client.images.remove(image_id, noprune=False)
        except (self._errors.ImageNotFound, self._errors.APIError) as exc:
            log.debug("kept replaced image %s: %s", image_id[:19], exc)

    def _stream(self, argv: list[str], env: dict[str, str], log_path: Path | None,
                timeout_s: int, on_step: Callable[[StepEvent], None]) -> RunOutcome:
        steps: dict[str, tuple[str, str]] = {}
        tail: list[str] = []
        expired = threading.Event()
        with _open_log(log_path) as sink, subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                errors="replace") as proc:
            assert proc.stdout is not None

            def expire() -> None:
                expired.set()
                proc.kill()

            watchdog = threading.Timer(timeout_s, expire)
            watchdog.start()
            with self._live_lock:
                self._live.add(proc)
            try:
                for line in proc.stdout:
                    sink.write(line)
                    tail = (tail + [line.rstrip("\n")])[-40:]
                    _parse_progress(line.rstrip("\n"), steps, on_step)
                code = proc.wait()
            except BaseException:
                # Interrupted (SIGINT/SIGTERM) or failed: stop the CLI now. Popen's own exit
                # would wait for a whole build; a stopped `docker build` cancels it in BuildKit.
                _stop(proc)
                raise
            finally:
                watchdog.cancel()
                with self._live_lock:
                    self._live.discard(proc)
        timed_out = expired.is_set()
        return RunOutcome(exit_code=124 if timed_out else code, timed_out=timed_out,
                          output_tail="\n".join(tail))

    def run(self, request: RunRequest) -> RunOutcome:
        """``docker create`` the request (:func:`create_argv`), start attached with a deadline,
        copy ``request.collect`` out, and always remove the container."""
        cli = self._plain_cli()
        create = create_argv(cli, request, self._flags)
        log.debug("run: %s", " ".join(create))
        proc = subprocess.run(create, capture_output=True, text=True, timeout=120, env=self._env)
        if proc.returncode != 0:
            raise StepFailed(f"docker create {request.image} failed", command=create,
                             exit_code=proc.returncode, log_tail=_tail(proc.stderr))
        container_id = proc.stdout.strip().splitlines()[-1]
        try:
            outcome = self._stream([cli, *self._flags, "start", "--attach", container_id],
                                   self._env,
                                   request.log_path, request.timeout_s, lambda _e: None)
            if outcome.timed_out:
                subprocess.run([cli, *self._flags, "kill", container_id], capture_output=True,
                               timeout=60,
                               env=self._env)
            if request.collect and request.collect_to:
                self._copy_out(container_id, request.collect, request.collect_to)
            return outcome
        finally:
            try:
                self.client.containers.get(container_id).remove(force=True)
            except self._errors.DockerException as exc:
                log.warning("could not remove container %s: %s", container_id[:12], exc)

    def _copy_out(self, container_id: str, path: str, dest: Path) -> None:
        try:
            stream, _ = self.client.containers.get(container_id).get_archive(path)
        except self._errors.NotFound:
            return  # the run wrote nothing there; the caller reports missing results
        data = io.BytesIO(b"".join(stream))
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=data) as tar:
            members = []
            for member in tar.getmembers():  # strip the archive's top folder
                _, _, rest = member.name.partition("/")
                if rest and (member.isfile() or member.isdir()):
                    member.name = rest
                    members.append(member)
            extract_safely(tar, members, dest)

    def cleanup(self, run_id: str, *, images: bool) -> int:
        """Remove containers (and images, if asked) labelled with ``oota.run=run_id``; return
        how many. An image a removed container was the last user of, and that no tag names
        (the one a rebuild or a resealing replaced while a killed run's container pinned it),
        goes too. Something another process removed meanwhile is not an error."""
        removed = 0
        selector: dict[str, str | list[str] | bool] = {"label": f"{RUN_LABEL}={run_id}"}
        released: set[str] = set()
        for container in self.client.containers.list(all=True, filters=selector):
            try:
                released.add(str(container.attrs.get("Image", "")))
                container.remove(force=True)
                removed += 1
            except self._errors.NotFound:
                continue
        for image_id in sorted(released - {""}):
            self._remove_if_untagged(image_id)
        if images:
            for image in self.client.images.list(filters=selector):
                for tag in image.tags or [str(image.id)]:
                    try:
                        self.client.images.remove(tag, force=True)
                    except self._errors.ImageNotFound:
                        pass
                removed += 1
        return removed

    def _plain_cli(self) -> str:
        """The docker CLI and this engine's endpoint flags, to be followed by a command; the
        flags are global options, so they sit between the program and the command."""
        cli = shutil.which("docker") or "/usr/bin/docker"
        if not os.access(cli, os.X_OK):
            raise EnvironmentProblem("no docker CLI on PATH")
        return cli


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL if the process has not ended within ten seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def extract_safely(tar: tarfile.TarFile, members: list[tarfile.TarInfo], dest: Path) -> None:
    """Extract ``members`` (regular files and folders) of ``tar`` into ``dest``; nothing may land
    outside it. Python's ``data`` filter does it where this Python has one (3.12, 3.11.4 and
    later); stock Debian 12's 3.11.2 has none (``extractall(filter=...)`` is a TypeError there),
    so the same rules are applied by hand: an absolute name is taken as relative to ``dest``,
    there is no way out of it (also not through a link already in it), only files and folders,
    no set-id bits, nothing writable by others. A member that breaks them is a StepFailed
    naming it."""
    if hasattr(tarfile, "data_filter"):
        try:
            tar.extractall(dest, members=members, filter="data")
        except tarfile.TarError as exc:
            raise StepFailed(f"refused to extract a container's results into {dest}: "
                             f"{exc}") from exc
        return
    root = dest.resolve()
    for member in members:
        target = (root / member.name.lstrip("/")).resolve()
        if not target.is_relative_to(root) or not (member.isfile() or member.isdir()):
            raise StepFailed(f"refused to extract a container's results into {dest}: "
                             f"{member.name!r} is not a file or folder inside it")
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        source = tar.extractfile(member)
        assert source is not None  # a regular file always has content
        with source, target.open("wb") as sink:
            shutil.copyfileobj(source, sink)
        target.chmod((member.mode & 0o755) | 0o600)


def _split_tag(ref: str) -> tuple[str, str]:
    """('registry:5000/repo', 'tag') of a reference; a reference without a tag means latest."""
    repository, _, tag = ref.rpartition(":")
    if not repository or "/" in tag:  # no tag; the colon was a registry port
        return ref, "latest"
    return repository, tag


def _tar_of(files: dict[str, bytes]) -> bytes:
    """A tar archive of absolute paths, owned by root and readable by everyone."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _label_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@contextmanager
def _open_log(path: Path | None) -> Iterator[io.TextIOBase]:
    if path is None:
        yield io.StringIO()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        yield fh


def _parse_progress(line: str, steps: dict[str, tuple[str, str]],
                    on_step: Callable[[StepEvent], None]) -> None:
    started = _STEP.match(line)
    if started:
        number, name, instruction = started.groups()
        if not name.startswith("internal"):
            steps.setdefault(number, (name, instruction))
        return
    finished = _DONE.match(line)
    if finished and finished.group(1) in steps:
        name, instruction = steps.pop(finished.group(1))
        status = finished.group(2)
        seconds = float(status.split()[1][:-1]) if status.startswith("DONE") else 0.0
        on_step(StepEvent(name=name, instruction=instruction, seconds=seconds,
                          cached=status == "CACHED", failed=status.startswith("ERROR")))
