"""HTTP(S) reads that end: a deadline for the whole answer and a limit on its size.

A socket timeout bounds one read, not a request: a server that sends one byte every five
seconds never trips it, and one that answers a page without end fills memory. Every request
oota makes (release-check's index, a registry, the probe of a vendor's index) therefore runs
under a :class:`Watchdog` that shuts its sockets down when the request's deadline (connect,
headers and every read) passes, and reads at most a given number of bytes of the answer.

The openers built here speak http and https only (no ``file:``, ``ftp:`` or ``data:``
handler), so a redirect can never turn a request into a read of a local file.
"""

from __future__ import annotations

import socket
import ssl
import threading
import urllib.error
import urllib.request
from http.client import HTTPConnection, HTTPResponse, HTTPSConnection
from types import TracebackType
from typing import IO, Any
from urllib.parse import urlsplit

MIB = 1 << 20
# The most oota reads of one answer unless a caller says otherwise: PyPI's largest simple
# pages (torch's JSON) are a few MiB.
MAX_ANSWER = 64 * MIB
SCHEMES = ("http", "https")


class TooLargeAnswer(Exception):
    """An answer longer than the caller reads."""


class Watchdog:
    """Shuts down every socket of one request when its deadline passes; ``expired`` says it
    did (a body read until the server closes then ends early without an error: the flag, not
    the data, says whether it is whole)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shutdown(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    # The plain socket's shutdown, not SSLSocket's: it wakes a reader blocked in another
    # thread without touching the TLS state that reader is using.
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


class _WatchedHttp(HTTPConnection):
    watchdog: Watchdog | None = None

    def connect(self) -> None:
        super().connect()
        if self.watchdog is not None:
            self.watchdog.watch(self.sock)


class _WatchedHttps(HTTPSConnection):
    watchdog: Watchdog | None = None

    def connect(self) -> None:
        super().connect()
        if self.watchdog is not None:
            self.watchdog.watch(self.sock)


class _HttpHandler(urllib.request.HTTPHandler):
    def __init__(self, watchdog: Watchdog):
        super().__init__()
        self.watchdog = watchdog

    def http_open(self, req: urllib.request.Request) -> HTTPResponse:
        return self.do_open(self._connect, req)

    def _connect(self, host: str, **kwargs: Any) -> HTTPConnection:
        conn = _WatchedHttp(host, **kwargs)
        conn.watchdog = self.watchdog
        return conn


class _HttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: Watchdog, context: ssl.SSLContext | None):
        super().__init__(context=context)
        self.watchdog = watchdog
        self.context = context

    def https_open(self, req: urllib.request.Request) -> HTTPResponse:
        return self.do_open(self._connect, req, context=self.context)

    def _connect(self, host: str, **kwargs: Any) -> HTTPSConnection:
        conn = _WatchedHttps(host, **kwargs)
        conn.watchdog = self.watchdog
        return conn


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Let a redirect surface as an HTTPError, for a caller that follows it itself."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> None:
        return None


class HttpOnlyRedirect(urllib.request.HTTPRedirectHandler):
    """Follow a redirect to http(s) only (urllib's own also follows one to ftp:)."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        if urlsplit(newurl).scheme.lower() not in SCHEMES:
            raise urllib.error.HTTPError(req.full_url, code, f"a redirect to "
                                         f"{urlsplit(newurl).scheme}: is not followed",
                                         headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def opener(watchdog: Watchdog, *, tls: ssl.SSLContext | None = None,
           follow: bool = True) -> urllib.request.OpenerDirector:
    """An opener of http and https only, its sockets watched by ``watchdog``; redirects
    followed (to http and https only) or, ``follow`` False, raised as HTTPError."""
    director = urllib.request.OpenerDirector()
    for handler in (urllib.request.ProxyHandler(), urllib.request.UnknownHandler(),
                    _HttpHandler(watchdog), _HttpsHandler(watchdog, tls),
                    urllib.request.HTTPDefaultErrorHandler(),
                    HttpOnlyRedirect() if follow else NoRedirect(),
                    urllib.request.HTTPErrorProcessor()):
        director.add_handler(handler)
    return director


def read_body(resp: IO[bytes], limit: int = MAX_ANSWER) -> bytes:
    """At most ``limit`` bytes of an answer; TooLargeAnswer when it has more."""
    body = resp.read(limit + 1)
    if len(body) > limit:
        raise TooLargeAnswer(f"larger than {limit // MIB if limit >= MIB else limit}"
                             f"{' MiB' if limit >= MIB else ' bytes'}; not read further")
    return body
