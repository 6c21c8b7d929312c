"""A deadline for each whole request the Docker SDK makes of an Engine.

The SDK gives requests a socket timeout, which bounds one read: an endpoint that sends a byte
every 0.3 s never trips it, and ``build`` or ``hosts`` would wait on it without end. So every
request of an Engine's SDK client runs under a deadline (:meth:`Deadlines.request`): when it
passes, every socket of that client is shut down, which ends the read in progress, and the
request is :class:`NoAnswer` (exit 3), naming the Engine.

The sockets are those the client made or connected: a process-wide audit hook
(``socket.__new__``, ``socket.connect``) hands each new socket to the :class:`Deadlines` whose
request is running in that thread. Shutting down all of them, not only the one late request's,
costs the other requests to that Engine their connection; an Engine that left one request
unanswered that long is not one to wait on. An ``ssh://`` Engine's "socket" is the SDK's pipe
to an ``ssh`` process (``docker system dial-stdio`` on the host), which no socket timeout or
shutdown reaches: that process is killed instead, which ends the read as well.

A streamed answer (a pull's or a push's progress, an archive, an image saved) is under the
request's deadline until its headers arrive; the Engine's door puts the whole exchange, body
included, under a longer deadline of its own (:meth:`Deadlines.request` around it).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from oota.errors import EnvironmentProblem

_current = threading.local()
_hook_lock = threading.Lock()
_hooked = False


class NoAnswer(EnvironmentProblem):
    """An Engine that gave no complete answer to a request within its deadline."""


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in ("socket.__new__", "socket.connect"):
        owner = getattr(_current, "deadlines", None)
        if owner is not None:
            owner.track(args[0])


def _hook() -> None:
    global _hooked
    with _hook_lock:
        if not _hooked:
            sys.addaudithook(_audit)
            _hooked = True


class Deadlines:
    """The deadlines of one Engine's SDK clients: ``where`` names the Engine in messages,
    ``seconds`` is a request's deadline unless one is given."""

    def __init__(self, where: str, seconds: float) -> None:
        _hook()
        self.where = where
        self.seconds = seconds
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._lock = threading.Lock()

    def track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _shut_all(self) -> None:
        with self._lock:
            found = list(self._sockets)
        for sock in found:
            pipe = getattr(sock, "proc", None)  # the SDK's SSHSocket: an ssh process's pipes
            if isinstance(pipe, subprocess.Popen):
                _end(sock, pipe)
                continue
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    @contextlib.contextmanager
    def request(self, seconds: float, what: str) -> Iterator[None]:
        """Run the body (one or more requests) within ``seconds``; :class:`NoAnswer` when the
        deadline passed before it ended."""
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            self._shut_all()

        timer = threading.Timer(seconds, expire)
        timer.daemon = True
        previous = getattr(_current, "deadlines", None)
        _current.deadlines = self
        timer.start()
        late = NoAnswer(f"the Docker Engine at {self.where} gave no complete answer to "
                        f"{what} within {seconds:g} s; it is hung, overloaded, or not a "
                        "Docker Engine")
        try:
            yield
        except Exception as exc:
            if expired.is_set():
                raise late from exc
            raise
        finally:
            timer.cancel()
            _current.deadlines = previous
        if expired.is_set():  # an answer cut short can still parse: the flag says it was
            raise late

    def watch_session(self, session: Any, seconds: float | None = None) -> None:
        """Every request ``session`` (a Docker SDK ``APIClient``, a requests Session) sends,
        each under a deadline of ``seconds`` (default: :attr:`seconds` when it is sent)."""
        send: Callable[..., Any] = session.send

        def send_within(request: Any, **kwargs: Any) -> Any:
            within = self.seconds if seconds is None else seconds
            with self.request(within, f"{request.method} {_path(request.path_url)}"):
                return send(request, **kwargs)

        session.send = send_within


def _end(sock: socket.socket, pipe: subprocess.Popen[bytes]) -> None:
    """Kill an ssh:// Engine's ssh process (its reader then meets the end of its pipe) and
    close what the SDK would leave open of it: the pipes, and the socket object it is."""
    pipe.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        pipe.wait(timeout=5)
    for stream in (pipe.stdin, pipe.stdout):
        with contextlib.suppress(OSError, ValueError):
            if stream is not None:
                stream.close()
    with contextlib.suppress(OSError):
        socket.socket.close(sock)


def _path(path: str) -> str:
    """The request's path without the API version and query: ``/containers/create``."""
    path = path.split("?", 1)[0]
    parts = path.split("/")
    if len(parts) > 1 and parts[1].startswith("v1."):
        path = "/" + "/".join(parts[2:])
    return path[:80]
