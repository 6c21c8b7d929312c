"""The one door to Docker. Nothing outside :mod:`oota.engine` imports ``docker`` or runs the
docker CLI; this module drives both, its neighbours hold the parts: reaching an Engine and the
deadlines of its requests (``connect``), the CLI's discovery and argv (``cli``), a CLI process
streamed with a deadline (``streaming``), stored registry credentials (``credentials``) and tar
archives in and out of containers (``archives``).

Two channels, each for what it does best:

* the Docker SDK (docker-py) for inspection, pulls, labels, archives and clean-up;
* the docker CLI for BuildKit builds (the SDK's ``images.build`` is the legacy builder: no
  secret or cache mounts, docker/docker-py#2230) and for ``docker create``, whose argv
  :func:`~oota.engine.cli.create_argv` builds from a typed
  :class:`~oota.engine.base.RunRequest` (device access, environment and mounts are data).

Every CLI call is an argv list (never a shell string) with a timeout, echoed at debug level.
Every container a run creates carries the ``oota.run`` label so :meth:`DockerEngine.cleanup`
can remove it (also a killed run's, from the next run); a lock builder image carries
``oota.image-run`` (:data:`~oota.engine.base.IMAGE_RUN_LABEL`). A cell's image carries neither:
no label changes between two builds of the same inputs, so a rebuild is the same image.
"""

from __future__ import annotations

import contextlib
import io
import logging
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oota import reproducible
from oota.engine import restamp
from oota.engine.archives import READ_FILE_LIMIT, bounded, extract_results, tar_of
from oota.engine.base import (
    IMAGE_RUN_LABEL,
    RUN_LABEL,
    SEALED_FROM_LABEL,
    BuildRequest,
    Endpoint,
    ImageLayer,
    RegistryAuth,
    RunOutcome,
    RunRequest,
    StepEvent,
    engine_identity,
)
from oota.engine.cli import (
    build_error_cause,
    create_argv,
    find_buildkit_cli,
    label_quote,
    plain_cli,
    split_tag,
)
from oota.engine.connect import STREAM_TIMEOUT_S, connect
from oota.engine.streaming import Running, stream
from oota.errors import StepFailed
from oota.reproducible import Entry

if TYPE_CHECKING:  # the SDK itself is imported when an engine is made (it is slow to import)
    from docker.models.containers import Container

log = logging.getLogger("oota.engine")


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


class DockerEngine:
    """The real engine: the Docker daemon at ``endpoint`` (default: the environment's, i.e.
    ``DOCKER_HOST`` or the local socket, as the docker CLI picks it).

    The SDK and the CLI are pointed at the same daemon: an endpoint's URL and TLS files become
    the SDK client's and the CLI's ``-H``/``--tls*`` flags (a docker context: ``--context``),
    and the ``DOCKER_*`` variables that would point the CLI elsewhere are dropped."""

    def __init__(self, endpoint: Endpoint | None = None) -> None:
        import docker.errors

        self._errors = docker.errors
        self.endpoint = endpoint or Endpoint()
        reached = connect(self.endpoint)
        self._flags, self._env, self.local = reached.flags, reached.env, reached.local
        self.client, self._pinger, self.deadlines = reached.client, reached.pinger, \
            reached.deadlines
        self._running = Running()
        self._cli: tuple[list[str], dict[str, str]] | None = None

    def alive(self) -> bool:
        """Does the daemon still answer (within a few seconds)?"""
        try:
            return bool(self._pinger.ping())
        except Exception:  # noqa: BLE001 - any failure to answer is "no"
            return False

    def abort(self) -> None:
        """Stop every docker CLI process this engine has running (builds, attached runs)."""
        self._running.stop_all()

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
        with self._streaming(f"docker save of {ref}"):
            return restamp.entries(self.client.images.get(ref), layer)

    def _streaming(self, what: str) -> contextlib.AbstractContextManager[None]:
        """A deadline of :data:`STREAM_TIMEOUT_S` for the whole of ``what`` (NoAnswer, exit 3,
        naming the Engine when it passes)."""
        return self.deadlines.request(STREAM_TIMEOUT_S, what)

    def seal(self, image: str, files: dict[str, bytes], labels: dict[str, str], *,
             run_id: str = "") -> str:
        """Add ``files`` (absolute path -> bytes) to ``image`` as one layer and move its tag there.

        The layer always goes on the build output (label ``oota.sealed-from``), never on an
        earlier sealing, and the sealing it replaces is removed: re-verifying an image does not
        grow it. The tag moves in one step, so an interruption leaves the old sealing or the
        new one. A build output oota restamped (:mod:`oota.reproducible`) is sealed with a
        configuration written the same way: the same results on the same image make the same
        sealed image on any Engine. Returns the new image id."""
        with self._streaming(f"the seal of {image}"):
            return self._seal(image, files, labels, run_id)

    def _seal(self, image: str, files: dict[str, bytes], labels: dict[str, str],
              run_id: str) -> str:
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
            container.put_archive("/", tar_of(files))
            repository, tag = split_tag(image)
            changes = [f"LABEL {key}={label_quote(value)}" for key, value
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

    def pull(self, ref: str, platform: str | None = None) -> str | None:
        """Pull ``ref`` (for ``platform``, else the Engine's own); None (with the reason
        logged) when the registry does not answer."""
        repo, tag = split_tag(ref)
        try:
            with self._streaming(f"the pull of {ref}"):
                self.client.images.pull(repo, tag=tag, platform=platform)
            return None
        except self._errors.DockerException as exc:
            log.debug("pull %s failed: %s", ref, exc)
            return str(exc).splitlines()[0][:300]

    def push(self, image: str, ref: str, auth: RegistryAuth | None) -> str:
        """Tag ``image`` as ``ref`` and push it; the registry's manifest digest. Credentials are
        ``auth``'s, else the engine's credential store's (``docker login``)."""
        repository, tag = split_tag(ref)
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
            with self._streaming(f"the push of {ref}"):
                for line in self.client.api.push(repository, tag=tag, stream=True,
                                                 decode=True, auth_config=config):
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
            with self._streaming(f"the pull of {repository}@{digest}"):
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
                with self._streaming(f"the copy of {path} out of {image}"):
                    stream, _ = container.get_archive(path)
                    archive = bounded(stream, READ_FILE_LIMIT)
            except self._errors.NotFound as exc:
                raise FileNotFoundError(f"{path} in {image}") from exc
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                member = tar.next()
                handle = tar.extractfile(member) if member else None
                if handle is None:
                    raise StepFailed(f"{path} in {image} is not a file")
                return handle.read(READ_FILE_LIMIT)
        finally:
            container.remove(force=True)

    def tag(self, source: str, target: str) -> None:
        repository, tag = split_tag(target)
        self.client.images.get(source).tag(repository, tag=tag)

    # -- creation --------------------------------------------------------------------------
    def import_rootfs(self, rootfs: Path, tag: str, labels: dict[str, str],
                      platform: str | None = None) -> None:
        """``tar -C rootfs -c . | docker import`` with labels, streamed (no temp tarball). For
        another ``platform`` (linux/arm64) ``docker import`` would record the Engine's own
        architecture, so BuildKit makes the image instead: FROM scratch, ADD the tarball."""
        if platform is not None:
            self._import_for(rootfs, tag, labels, platform)
            return
        cli = plain_cli()
        changes = [arg for key, value in sorted(labels.items())
                   for arg in ("--change", f"LABEL {key}={label_quote(value)}")]
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
                             returncode=proc.returncode, log_tail=_tail(proc.stderr))

    def _import_for(self, rootfs: Path, tag: str, labels: dict[str, str], platform: str) -> None:
        if self._cli is None:
            self._cli = find_buildkit_cli()
        cli, extra_env = self._cli
        with tempfile.TemporaryDirectory(prefix="rootfs-import-", dir=rootfs.parent) as tmp:
            context = Path(tmp)
            tar = ["tar", "--numeric-owner", "-C", str(rootfs), "-cf",
                   str(context / "rootfs.tar"), "."]
            subprocess.run(tar, check=True, capture_output=True, timeout=900)
            (context / "Dockerfile").write_text("FROM scratch\nADD rootfs.tar /\n",
                                                encoding="utf-8")
            argv = [cli[0], *self._flags, *cli[1:], "--platform", platform, "-t", tag,
                    *[arg for key, value in sorted(labels.items())
                      for arg in ("--label", f"{key}={value}")], str(context)]
            log.debug("run: %s", " ".join(argv))
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800,
                                  env={**self._env, **extra_env})
        if proc.returncode != 0:
            raise StepFailed(f"importing {rootfs} as {tag} ({platform}) failed", command=argv,
                             returncode=proc.returncode, log_tail=_tail(proc.stderr))

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
        if request.platform:
            argv += ["--platform", request.platform]
        for key, value in sorted(request.build_args.items()):
            argv += ["--build-arg", f"{key}={value}"]
        for key, value in sorted(request.labels.items()):
            argv += ["--label", f"{key}={value}"]
        for key, path in sorted(request.secrets.items()):
            argv += ["--secret", f"id={key},src={path}"]
        argv.append(str(request.context))
        log.debug("run: %s", " ".join(argv))
        output = stream(argv, {**self._env, **extra_env}, request.log_path, request.timeout_s,
                        on_step, self._running)
        built = iidfile.read_text(encoding="utf-8").strip() if iidfile.exists() else ""
        iidfile.unlink(missing_ok=True)
        if output.exit_code != 0 or not built:
            why = "timed out" if output.timed_out else f"exited with {output.exit_code}"
            cause = build_error_cause(output.output_tail) or ("" if output.exit_code else
                                                              "BuildKit named no image")
            raise StepFailed(f"docker build of {request.tag} {why}"
                             + (f": {cause}" if cause else ""), command=argv,
                             returncode=output.exit_code, log_tail=output.output_tail)
        if request.epoch is not None:
            built = self._restamped(built, request.epoch)
        return self._take_tag(request.tag, built)

    def _restamped(self, raw: str, when: int) -> str:
        """BuildKit's output with every time of its configuration ``when`` (the layers are
        the same): the image id the same inputs give on any Engine. BuildKit's own image goes
        (its layers stay: they are the restamped image's)."""
        with self._streaming(f"the restamping of {raw[:19]}"):
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

    def run(self, request: RunRequest) -> RunOutcome:
        """``docker create`` the request (:func:`create_argv`), start attached with a deadline,
        copy ``request.collect`` out, and always remove the container."""
        cli = plain_cli()
        create = create_argv(cli, request, self._flags)
        log.debug("run: %s", " ".join(create))
        proc = subprocess.run(create, capture_output=True, text=True, timeout=120, env=self._env)
        if proc.returncode != 0:
            raise StepFailed(f"docker create {request.image} failed", command=create,
                             returncode=proc.returncode, log_tail=_tail(proc.stderr))
        container_id = proc.stdout.strip().splitlines()[-1]
        try:
            outcome = stream([cli, *self._flags, "start", "--attach", container_id],
                             self._env, request.log_path, request.timeout_s, lambda _e: None,
                             self._running)
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
        with self._streaming(f"the copy of {path} out of container {container_id[:12]}"):
            try:
                stream, _ = self.client.containers.get(container_id).get_archive(path)
            except self._errors.NotFound:
                return  # the run wrote nothing there; the caller reports missing results
            extract_results(stream, dest)

    def cleanup(self, run_id: str, *, images: bool) -> int:
        """Remove the containers labelled ``oota.run=run_id`` (and, if asked, the images
        labelled ``oota.image-run`` or, by an older oota, ``oota.run``); return how many. An
        untagged image a removed container was the last user of (replaced by a rebuild while a
        killed run's container pinned it) goes too. Another process's removal is no error."""
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
            made = {str(image.id): image for key in (IMAGE_RUN_LABEL, RUN_LABEL)
                    for image in self.client.images.list(filters={"label": f"{key}={run_id}"})}
            for image in made.values():
                for tag in image.tags or [str(image.id)]:
                    try:
                        self.client.images.remove(tag, force=True)
                    except self._errors.ImageNotFound:
                        pass
                removed += 1
        return removed
