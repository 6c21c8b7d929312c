"""A small client of a registry's HTTP API (the OCI distribution spec): resolve a tag, fetch a
manifest or blob, upload a blob (POST then PUT), put a manifest. The Docker SDK pushes and pulls
images only, not the artifact manifests of :mod:`oota.supply.cosign`, hence this module.

Authentication follows the registry's challenge: Basic, or a Bearer token from the realm it
names (Docker's token protocol). Credentials are ``--registry-auth``'s, else the docker CLI's
as docker looks them up: the credential helper ``config.json`` names for the registry
(``credHelpers``), else its credential store (``credsStore``), else its ``auths`` entry. They
go only into Authorization headers that urllib does not carry across redirects (a blob may be
served from other storage), and never into a message: errors name the URL without them.

TLS: https with the system's trust store, or ``ca`` (``--registry-ca``). A registry on loopback
that does not speak TLS is reached over plain http, as the Docker Engine does for
``127.0.0.0/8``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from http.client import HTTPException
from pathlib import Path

from oota import httpio
from oota.engine.base import RegistryAuth
from oota.engine.credentials import stored_credentials
from oota.errors import EnvironmentProblem, InputError, OotaError
from oota.files import SMALL_LIMIT, read_text
from oota.supply.cosign import Artifact, digest_of

MANIFEST_TYPES = ", ".join((
    "application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json"))
_LOOPBACK = re.compile(r"^(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d+)?$")
_REFERENCE = re.compile(r"^(?P<registry>[A-Za-z0-9.-]+(:\d{1,5})?|\[::1\](:\d{1,5})?)/"
                        r"(?P<repository>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
                        r"(:(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
                        r"(@(?P<digest>sha256:[0-9a-f]{64}))?$")
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
# One request, connect to last byte: the registry's answers here are small (manifests,
# signatures, an SBOM), so a registry that has not answered whole by then is stalled.
REQUEST_DEADLINE_S = 30.0
ANSWER_LIMIT = 16 << 20
ERROR_LIMIT = 64 << 10


class _Refused(Exception):
    """An HTTP error answer, read whole (its body at most ERROR_LIMIT bytes)."""

    def __init__(self, code: int, reason: str, headers: Message, body: bytes):
        super().__init__(f"{code} {reason}")
        self.code, self.reason, self.headers, self.body = code, reason, headers, body


class RegistryError(OotaError):
    """The registry refused or failed a request; the message names the URL and the status."""


class NotFound(RegistryError):
    pass


@dataclass(frozen=True, kw_only=True, slots=True)
class Reference:
    """``registry/repository[:tag][@digest]``; the registry part is required (a pull of
    something unqualified from Docker Hub would not be one of ours)."""

    registry: str
    repository: str
    tag: str = ""
    digest: str = ""

    @classmethod
    def parse(cls, text: str) -> Reference:
        found = _REFERENCE.match(text)
        if not found:
            raise InputError(f"{text!r}: give REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST], e.g. "
                             "registry.lab:5000/oota/cpu:cpu-torch2.13.0-py3.11-debian12")
        return cls(registry=found["registry"], repository=found["repository"],
                   tag=found["tag"] or ("" if found["digest"] else "latest"),
                   digest=found["digest"] or "")

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    def __str__(self) -> str:
        return self.name + (f":{self.tag}" if self.tag else "") + (
            f"@{self.digest}" if self.digest else "")


def docker_config_auth(registry: str, environ: Mapping[str, str] | None = None
                       ) -> RegistryAuth | None:
    """The docker CLI's stored credentials for ``registry``, looked up as docker does: the
    credential helper its config.json's ``credHelpers`` names for the registry, else its
    ``credsStore``, else its ``auths`` entry (:func:`oota.engine.credentials.stored_credentials`).
    None without a config.json; EnvironmentProblem for one that is not JSON or a helper that
    fails."""
    env = os.environ if environ is None else environ
    file = Path(env.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json"
    try:
        config = json.loads(read_text(file, SMALL_LIMIT))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        raise EnvironmentProblem(f"{file}: not a readable JSON file ({type(exc).__name__}); "
                                 "fix it, or give --registry-auth FILE") from None
    if not isinstance(config, dict):
        raise EnvironmentProblem(f"{file}: not docker's config.json (a JSON object)")
    return stored_credentials(registry, config, file)


class RegistryClient:
    def __init__(self, registry: str, *, auth: RegistryAuth | None, ca: Path | None = None,
                 timeout_s: float = REQUEST_DEADLINE_S):
        self.registry = registry
        # The docker CLI's stored credentials are looked up on the registry's first challenge
        # only: a registry that wants none never runs a credential helper.
        self._auth = auth
        self._stored_looked_up = auth is not None
        self._tls = ssl.create_default_context(cafile=str(ca) if ca else None)
        self._timeout = timeout_s
        self._base = ""
        self._authorization = ""

    # -- reading ---------------------------------------------------------------------------
    def resolve(self, repository: str, reference: str) -> str:
        """The manifest digest a tag (or digest) names now; NotFound when it names none."""
        _, headers, body = self._call("GET", f"/v2/{repository}/manifests/{reference}",
                                      headers={"Accept": MANIFEST_TYPES})
        return headers.get("Docker-Content-Digest") or digest_of(body)

    def manifest(self, repository: str, reference: str) -> bytes:
        _, _, body = self._call("GET", f"/v2/{repository}/manifests/{reference}",
                                headers={"Accept": MANIFEST_TYPES})
        if reference.startswith("sha256:") and digest_of(body) != reference:
            raise RegistryError(f"{self.registry}/{repository}@{reference}: the registry sent "
                                "a manifest with another digest")
        return body

    def blob(self, repository: str, digest: str) -> bytes:
        _, _, body = self._call("GET", f"/v2/{repository}/blobs/{digest}")
        if digest_of(body) != digest:
            raise RegistryError(f"{self.registry}/{repository} blob {digest}: the registry "
                                "sent other bytes")
        return body

    # -- writing ---------------------------------------------------------------------------
    def push_blob(self, repository: str, data: bytes) -> str:
        digest = digest_of(data)
        try:
            self._call("HEAD", f"/v2/{repository}/blobs/{digest}")
            return digest  # already there
        except NotFound:
            pass
        _, headers, _ = self._call("POST", f"/v2/{repository}/blobs/uploads/")
        location = headers.get("Location", "")
        if not location:
            raise RegistryError(f"{self.registry}: blob upload started without a Location")
        joiner = "&" if "?" in location else "?"
        self._call("PUT", f"{location}{joiner}digest={urllib.parse.quote(digest)}", body=data,
                   headers={"Content-Type": "application/octet-stream"})
        return digest

    def push_manifest(self, repository: str, tag: str, data: bytes, media_type: str) -> str:
        self._call("PUT", f"/v2/{repository}/manifests/{tag}", body=data,
                   headers={"Content-Type": media_type})
        return digest_of(data)

    def push_artifact(self, repository: str, tag: str, artifact: Artifact) -> str:
        """Push an artifact's blobs and manifest under ``tag``; the manifest's digest."""
        self.push_blob(repository, artifact.config)
        self.push_blob(repository, artifact.layer.data)
        manifest = artifact.manifest()
        return self.push_manifest(repository, tag, manifest,
                                  json.loads(manifest)["mediaType"])

    # -- transport -------------------------------------------------------------------------
    def _call(self, method: str, path: str, *, body: bytes | None = None,
              headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        url = urllib.parse.urljoin(self._root() + "/", path)
        for attempt in range(2):
            request = urllib.request.Request(url, data=body, method=method,
                                             headers=headers or {})
            if self._authorization:
                # Unredirected: urllib would otherwise send it on to wherever a redirect points.
                request.add_unredirected_header("Authorization", self._authorization)
            try:
                return self._exchange(request)
            except _Refused as exc:
                if exc.code == 401 and attempt == 0:
                    self._authorization = self._answer(exc.headers.get("WWW-Authenticate", ""),
                                                       url)
                    continue
                raise self._error(method, url, exc) from None
            except (urllib.error.URLError, OSError, HTTPException) as exc:
                if isinstance(getattr(exc, "reason", exc), ssl.SSLCertVerificationError):
                    raise self._untrusted(exc) from None
                raise EnvironmentProblem(f"registry {self.registry} does not answer at "
                                         f"{_bare(url)}: {_reason(exc)}") from None
        raise RegistryError(f"{method} {_bare(url)}: refused after authenticating (401)")

    def _exchange(self, request: urllib.request.Request,
                  limit: int = ANSWER_LIMIT) -> tuple[int, dict[str, str], bytes]:
        """One request under :mod:`oota.httpio`'s deadline (the whole answer within
        ``timeout_s``) and size limit; a redirect is followed to http(s) only."""
        url = _bare(request.full_url)
        with httpio.Watchdog(self._timeout) as watchdog:
            try:
                with httpio.opener(watchdog, tls=self._tls).open(
                        request, timeout=self._timeout) as response:
                    answer = (response.status, dict(response.headers.items()),
                              httpio.read_body(response, limit))
            except urllib.error.HTTPError as exc:  # its body too, under the same deadline
                with exc:
                    refused = _Refused(exc.code, str(exc.reason), exc.headers,
                                       exc.read(ERROR_LIMIT) if exc.fp is not None else b"")
                if watchdog.expired:
                    raise self._stalled(url) from None
                raise refused from None
            except (urllib.error.URLError, OSError, HTTPException):
                if watchdog.expired:
                    raise self._stalled(url) from None
                raise
            except httpio.TooLargeAnswer as exc:
                raise EnvironmentProblem(f"registry {self.registry}: the answer of {url} is "
                                         f"{exc}") from None
        if watchdog.expired:  # a body cut short by the deadline ends without an error
            raise self._stalled(url)
        return answer

    def _stalled(self, url: str) -> EnvironmentProblem:
        return EnvironmentProblem(f"registry {self.registry}: no complete answer from {url} "
                                  f"within {self._timeout:g} s; it is stalled or too slow")

    def _root(self) -> str:
        """https://REGISTRY, or http:// for a loopback registry without TLS (as dockerd)."""
        if self._base:
            return self._base
        self._base = f"https://{self.registry}"
        if _LOOPBACK.match(self.registry):
            try:
                self._exchange(urllib.request.Request(f"{self._base}/v2/"), limit=1 << 16)
            except _Refused:
                pass  # it answered over TLS (401 and the like are fine)
            except (urllib.error.URLError, OSError, HTTPException) as exc:
                if isinstance(getattr(exc, "reason", exc), ssl.SSLCertVerificationError):
                    raise self._untrusted(exc) from None  # it speaks TLS: no plain http then
                self._base = f"http://{self.registry}"
        return self._base

    def _untrusted(self, exc: BaseException) -> EnvironmentProblem:
        return EnvironmentProblem(f"registry {self.registry}: its TLS certificate is not trusted "
                                  f"({_reason(exc)}); give --registry-ca with the CA that "
                                  "signed it")

    def _answer(self, challenge: str, url: str) -> str:
        """The Authorization header for a 401's challenge (Basic, or a Bearer token)."""
        scheme, _, params = challenge.partition(" ")
        if not self._stored_looked_up:
            self._auth, self._stored_looked_up = docker_config_auth(self.registry), True
        if self._auth is None:
            raise RegistryError(f"{_bare(url)}: the registry wants credentials; give "
                                "--registry-auth FILE or `docker login` to it")
        basic = "Basic " + base64.b64encode(
            f"{self._auth.username}:{self._auth.password}".encode()).decode()
        if scheme.lower() == "basic":
            return basic
        if scheme.lower() != "bearer":
            raise RegistryError(f"{_bare(url)}: unknown authentication scheme {scheme!r}")
        found = dict(_CHALLENGE.findall(params))
        query = urllib.parse.urlencode({k: v for k, v in found.items() if k != "realm"})
        realm = found.get("realm", "")
        if urllib.parse.urlsplit(realm).scheme not in httpio.SCHEMES:
            raise RegistryError(f"{_bare(url)}: the registry names a token service that is not "
                                f"an http(s) URL ({realm[:100]!r})")
        request = urllib.request.Request(f"{realm}?{query}")
        request.add_unredirected_header("Authorization", basic)
        try:
            answer = json.loads(self._exchange(request, limit=1 << 20)[2])
            if not isinstance(answer, dict):
                raise ValueError("not a JSON object")
        except (urllib.error.URLError, OSError, HTTPException, ValueError,
                RecursionError) as exc:
            raise RegistryError(f"token for {_bare(url)}: {_reason(exc)}") from None
        return f"Bearer {answer.get('token') or answer.get('access_token', '')}"

    def _error(self, method: str, url: str, exc: _Refused) -> RegistryError:
        try:
            errors = json.loads(exc.body).get("errors") or []
            detail = "; ".join(str(e.get("message", e.get("code", ""))) for e in errors)
        except (ValueError, AttributeError, TypeError, RecursionError):
            detail = ""
        kind = NotFound if exc.code == 404 else RegistryError
        return kind(f"{method} {_bare(url)}: {exc.code} {exc.reason}"
                    + (f" ({detail})" if detail else ""))


def _bare(url: str) -> str:
    """A URL for a message: without its query (an upload's state) or any credentials."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}" \
           f"{parts.path}"


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    return str(reason).splitlines()[0][:200] if str(reason) else type(exc).__name__
