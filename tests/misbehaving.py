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
    ``flood``'s body without end ("flood"), redirects to file:///etc/passwd ("redirect"), or
    challenges for Basic auth ("challenge")."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(32)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            conn.recv(65536)
            if kind == "drip":
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
