"""How oota reaches a Docker Engine: the SDK's clients pointed where the docker CLI points
(an endpoint's URL and TLS files, a docker context, or the environment's ``DOCKER_HOST``), a
second client that only pings, and the deadlines of every request (:mod:`oota.engine.deadline`).
An Engine that cannot be reached, or takes the connection and never answers, is an
:class:`~oota.errors.EnvironmentProblem` (exit 3) naming it, never a hang.

:class:`oota.engine.docker.DockerEngine` is made from what :func:`connect` returns; what it
asks of the Engine is there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oota.engine.base import Endpoint, TlsFiles
from oota.engine.cli import POINTING_VARIABLES, cli_flags, host_name, is_local, sdk_tls
from oota.engine.deadline import Deadlines, NoAnswer
from oota.errors import EnvironmentProblem
from oota.net import redact
from oota.project import command_name

if TYPE_CHECKING:  # the SDK itself is imported when an engine is made (it is slow to import)
    from docker import APIClient, DockerClient

PING_TIMEOUT_S = 5
# The SDK asks the daemon its API version as it connects, then oota pings it: an Engine that
# takes the connection and never answers (a hung daemon, an ssh:// host that stalls) is given
# this long. Later requests (an image's inspect, a container's logs) have REQUEST_TIMEOUT_S.
CONNECT_TIMEOUT_S = 30
REQUEST_TIMEOUT_S = 600
# An exchange whose answer is as long as an image (a pull, a push, an image saved or loaded to
# seal it, a container's results or a file of it): its whole body has this long. A socket
# timeout alone would let an Engine that drips its progress keep `build` or `pull` waiting.
STREAM_TIMEOUT_S = 3600

def _shown_endpoint(endpoint: Endpoint, base_url: str) -> str:
    """The Engine as a message names it: the endpoint written, else DOCKER_HOST's, else the
    local socket."""
    if base_url or endpoint.context:
        return endpoint.where() + host_name(endpoint)
    env = os.environ.get("DOCKER_HOST", "")
    return f"{redact(env)[:200]} (DOCKER_HOST)" if env else "unix:///var/run/docker.sock"


def _client(docker: Any, base_url: str, tls: TlsFiles | None) -> DockerClient:
    """The SDK's client of the Engine at ``base_url`` ('': the environment's); it asks the
    Engine its API version as it is made."""
    if not base_url:
        return docker.from_env(timeout=CONNECT_TIMEOUT_S)  # type: ignore[no-any-return]
    return docker.DockerClient(  # type: ignore[no-any-return]
        base_url=base_url, timeout=CONNECT_TIMEOUT_S, use_ssh_client=base_url.startswith(
            "ssh://"), tls=sdk_tls(docker, tls))


def _pinger(docker: Any, base_url: str, tls: TlsFiles | None) -> APIClient:
    """A second client with a short timeout, for :meth:`DockerEngine.alive`."""
    import docker.utils

    if not base_url:
        return docker.APIClient(  # type: ignore[no-any-return]
            timeout=PING_TIMEOUT_S, **docker.utils.kwargs_from_env())
    return docker.APIClient(  # type: ignore[no-any-return]
        base_url=base_url, timeout=PING_TIMEOUT_S, tls=sdk_tls(docker, tls),
        use_ssh_client=base_url.startswith("ssh://"))


@dataclass(frozen=True, slots=True)
class Reached:
    """A Docker Engine that answered: the SDK's client (its timeout now REQUEST_TIMEOUT_S),
    the pinging client, their deadlines, the CLI's flags that point it there, the environment
    its CLI runs with, and whether the Engine is this machine's."""

    client: DockerClient
    pinger: APIClient
    deadlines: Deadlines
    flags: tuple[str, ...]
    env: dict[str, str]
    local: bool


def connect(endpoint: Endpoint) -> Reached:
    """Reach the Engine at ``endpoint`` and ping it, each within CONNECT_TIMEOUT_S.

    Raises EnvironmentProblem saying how to start one or write the endpoint, or NoAnswer
    (exit 3) where it took the connection and never answered."""
    import docker
    import docker.errors
    import docker.tls
    import docker.utils
    import requests

    flags, base_url, tls = cli_flags(endpoint)
    env = {k: v for k, v in os.environ.items() if not (flags and k in POINTING_VARIABLES)}
    deadlines = Deadlines(_shown_endpoint(endpoint, base_url), CONNECT_TIMEOUT_S)
    try:
        with deadlines.request(CONNECT_TIMEOUT_S, "GET /version"):
            client = _client(docker, base_url, tls)
        # The ping's own sockets: a deadline of the main client does not cut them.
        pings = Deadlines(deadlines.where, PING_TIMEOUT_S)
        with pings.request(CONNECT_TIMEOUT_S, "GET /version"):
            pinger = _pinger(docker, base_url, tls)
        deadlines.watch_session(client.api)
        pings.watch_session(pinger)
        client.ping()
        client.api.timeout = REQUEST_TIMEOUT_S
        deadlines.seconds = REQUEST_TIMEOUT_S
    except ValueError as exc:  # the SDK parsing an endpoint it cannot read
        shown = base_url or os.environ.get("DOCKER_HOST", "")
        raise EnvironmentProblem(
            f"{'DOCKER_HOST ' if not base_url else ''}{redact(shown)[:200]!r} is not a Docker "
            f"endpoint ({exc}); write it as unix:///PATH, tcp://HOST:PORT or an ssh:// URL"
        ) from None
    except NoAnswer:
        raise
    except (docker.errors.DockerException, requests.RequestException) as exc:
        where = "" if endpoint.name == "local" and not base_url else \
            f" at {endpoint.where()}" + host_name(endpoint)
        raise EnvironmentProblem(
            f"cannot reach a Docker Engine{where} ({exc}). Start one (`dockerd &` as root, "
            "or `systemctl start docker`) or set DOCKER_HOST"
            + ("; `./oota.sh` installs and starts it on Debian." if command_name() == "./oota.sh"
               else ".")) from exc
    return Reached(client=client, pinger=pinger, deadlines=deadlines, flags=flags, env=env,
                   local=is_local(base_url or os.environ.get("DOCKER_HOST", "")))
