"""A server on loopback that misbehaves the way a broken index or registry does, for the
hostile-input tests and the probe (benchmarks/probe_hostile.py)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

# What a "flood" answers without end: an index page (HTML) or a registry answer (JSON).
HTML_FLOOD = (b"text/html", b"<a>x</a>" * 8192)
JSON_FLOOD = (b"application/json", b" " * 65536)


@contextlib.contextmanager
def misbehaving(kind: str, *, flood: tuple[bytes, bytes] = JSON_FLOOD,
                silent_s: float = 60) -> Iterator[str]:
    """``host:port`` of a server that, to every connection: never answers ("silent", for
    ``silent_s``), sends a status line and then a byte every 0.3 s ("drip"), answers 200 with
    ``flood``'s body without end ("flood"), redirects to file:///etc/passwd ("redirect"),
    challenges for Basic auth ("challenge"), or answers a Docker client's first requests (its
    ``/version`` and ``/_ping``) as an Engine does and drips to every later one: its status line
    only ("engine"), or whole headers and then a streamed body, a blank chunk every 0.3 s, as a
    pull's progress that never ends ("engine-stream")."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(32)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            asked = conn.recv(65536)
            while kind.startswith("engine") and _engine_answer(asked):
                conn.sendall(_engine_answer(asked))
                asked = conn.recv(65536)
            if kind == "engine-stream":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n")
                while not stop.wait(0.3):
                    conn.sendall(b"1\r\n \r\n")
            elif kind in ("drip", "engine"):
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                while not stop.wait(0.3):
                    conn.sendall(b"X")
            elif kind == "flood":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: " + flood[0] + b"\r\n\r\n")
                while not stop.is_set():
                    conn.sendall(flood[1])
            elif kind == "redirect":
                conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: file:///etc/passwd\r\n"
                             b"Content-Length: 0\r\n\r\n")
            elif kind == "challenge":
                conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic "
                             b'realm="r"\r\nContent-Length: 0\r\n\r\n')
            else:
                stop.wait(silent_s)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                conn, _ = listener.accept()
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


ENGINE_VERSION = b'{"ApiVersion": "1.41", "Version": "20.10.24", "MinAPIVersion": "1.12"}'


def _engine_answer(request: bytes) -> bytes:
    """What an Engine answers to a client's first requests (keep-alive), b'' to the rest."""
    line = request.split(b"\r\n", 1)[0]
    path = line.split(b" ")[1] if line.count(b" ") >= 2 else b""
    body = ENGINE_VERSION if path.endswith(b"/version") else b"OK" if path.endswith(
        b"/_ping") else b""
    if not body:
        return b""
    kind = b"application/json" if body.startswith(b"{") else b"text/plain"
    return (b"HTTP/1.1 200 OK\r\nContent-Type: " + kind + b"\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)
