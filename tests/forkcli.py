"""``python -m oota ARGS`` (or ``python -m invoke ARGS``) for the tests, in a process forked
from a server that has imported oota and its libraries once.

The unit and history tests start some three hundred command lines, each one a user's: a bad
flag, a report, a history query. A fresh interpreter spends about 0.6 s of CPU importing invoke,
oota and their libraries before the command does anything, which was over a third of the unit
session's CPU on a 2-core host. Here each command line still runs in a process of its own, with
its own argv, environment, working folder, stdin, stdout, stderr and exit code, through the
same entry point (``runpy`` runs the module's ``__main__`` as ``-m`` does); only the interpreter's
start and the imports are done once, by a server per pytest process (forked from it, each
command starts from the same freshly imported state, never from another command's).

:func:`run` takes ``subprocess.run``'s arguments. It forks only what a fresh interpreter would
run the same way: ``[sys.executable, "-m", "oota" | "invoke", ...]`` with the checkout first on
the path, output captured, and an environment whose interpreter settings (``PYTHON*``, the
locale, ``TZ``) are the server's. Anything else (another interpreter, ``-X`` flags, a wrapper
such as ``setpriv``, ``PYTHONPATH`` elsewhere, a call from a second thread while one runs) goes
to ``subprocess.run`` unchanged, as do the tests that are about the start itself (tests that
read which modules a command imports start their own interpreter).
"""

from __future__ import annotations

import io
import json
import locale
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODULES = ("oota", "invoke")
# What a forked command takes from subprocess.run's arguments; any other one means a fresh
# interpreter (so nothing is silently ignored).
_HANDLED = frozenset({"cwd", "env", "capture_output", "text", "universal_newlines", "encoding",
                      "errors", "input", "timeout", "check"})
# Variables the interpreter reads when it starts (and the C library at its first use), which a
# forked process cannot take from its request: a command whose values differ is not forked.
_START_PREFIXES = ("PYTHON", "LC_")
_START_NAMES = frozenset({"LANG", "LANGUAGE", "TZ"})
_MESSAGE = 1 << 20


def run(args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(args, **kwargs)``, forked from the server when it would run the same."""
    env = dict(os.environ if kwargs.get("env") is None else kwargs["env"])
    server = _server_for(args, kwargs, env)
    if server is None:
        return subprocess.run(args, **kwargs)
    return server.run(list(args), env, kwargs)


def _forkable(args: Sequence[str], kwargs: Mapping[str, Any]) -> bool:
    return (len(args) >= 3 and list(args[:2]) == [sys.executable, "-m"]
            and args[2] in MODULES and set(kwargs) <= _HANDLED
            and bool(kwargs.get("capture_output")))


def _start_settings(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items()
                        if k.startswith(_START_PREFIXES) or k in _START_NAMES))


def _on_checkout_path(env: Mapping[str, str]) -> bool:
    """Whether a fresh interpreter would import this checkout's oota (PYTHONPATH names it first,
    or nothing: the editable install points here)."""
    first = env.get("PYTHONPATH", "").split(os.pathsep)[0]
    return not first or Path(first).resolve() == REPO


_servers: dict[tuple[tuple[str, str], ...], _Server] = {}
_servers_lock = threading.Lock()


def _server_for(args: Sequence[str], kwargs: Mapping[str, Any],
                env: Mapping[str, str]) -> _Server | None:
    if os.environ.get("OOTA_TEST_FORK") == "0" or not _forkable(args, kwargs) \
            or not _on_checkout_path(env):
        return None
    key = _start_settings(env)
    with _servers_lock:
        server = _servers.get(key)
        if server is None or not server.alive():
            server = _servers[key] = _Server(dict(key))
    return server


class _Server:
    """One server process and the socket it takes requests on (one command at a time)."""

    def __init__(self, start: Mapping[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The server's environment: the test process's, with its interpreter settings those of
        # the commands it will run.
        base = {k: v for k, v in os.environ.items()
                if not (k.startswith(_START_PREFIXES) or k in _START_NAMES)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"from tests.forkcli import serve; serve({theirs.fileno()})"],
            cwd=REPO, env={**base, **start, "PYTHONPATH": str(REPO)}, pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        theirs.close()
        self.sock = ours
        self.busy = threading.Lock()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, args: list[str], env: dict[str, str],
            kwargs: Mapping[str, Any]) -> subprocess.CompletedProcess[Any]:
        if not self.busy.acquire(blocking=False):  # another thread's command: run it fresh
            return subprocess.run(args, **kwargs)
        try:
            return self._run(args, env, kwargs)
        finally:
            self.busy.release()

    def _run(self, args: list[str], env: dict[str, str],
             kwargs: Mapping[str, Any]) -> subprocess.CompletedProcess[Any]:
        cwd = os.fspath(kwargs.get("cwd") or os.getcwd())
        data = kwargs.get("input")
        text = bool(kwargs.get("text") or kwargs.get("universal_newlines")
                    or kwargs.get("encoding") or kwargs.get("errors"))
        with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stdout, \
                tempfile.TemporaryFile() as stderr:
            if data is not None:
                stdin.write(data.encode(_encoding(kwargs)) if isinstance(data, str) else data)
                stdin.seek(0)
            request = {"module": args[2], "args": args[3:], "cwd": cwd, "env": env,
                       "stdin": data is not None}
            socket.send_fds(self.sock, [json.dumps(request).encode()],
                            [stdin.fileno(), stdout.fileno(), stderr.fileno()])
            pid = int(self._reply(None))
            try:
                code = int(self._reply(kwargs.get("timeout")))
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self._reply(None)
                raise subprocess.TimeoutExpired(args, kwargs["timeout"], _read(stdout),
                                                _read(stderr)) from None
            out, err = _read(stdout), _read(stderr)
        if text:
            out, err = _decode(out, kwargs), _decode(err, kwargs)
        done = subprocess.CompletedProcess(args, code, out, err)
        if kwargs.get("check"):
            done.check_returncode()
        return done

    def _reply(self, timeout: float | None) -> str:
        self.sock.settimeout(timeout)
        message = self.sock.recv(64)
        if not message:
            raise RuntimeError("the command-line server of tests/forkcli.py ended")
        return message.decode()


def _read(handle: Any) -> bytes:
    handle.seek(0)
    return bytes(handle.read())


def _encoding(kwargs: Mapping[str, Any]) -> str:
    return str(kwargs.get("encoding") or locale.getpreferredencoding(False))


def _decode(data: bytes, kwargs: Mapping[str, Any]) -> str:
    """As subprocess's text mode: the encoding asked (or the locale's), universal newlines."""
    wrapper = io.TextIOWrapper(io.BytesIO(data), encoding=_encoding(kwargs),
                               errors=kwargs.get("errors") or "strict")
    return wrapper.read()


# -- the server ---------------------------------------------------------------------------------

def _preload() -> None:
    """Import what the command lines import: invoke, every oota module, their libraries."""
    import importlib
    import pkgutil

    import invoke.program  # noqa: F401

    import oota

    for found in pkgutil.walk_packages(oota.__path__, "oota."):
        if not found.name.endswith(".__main__"):
            importlib.import_module(found.name)
    for optional in ("docker", "psycopg"):
        try:
            importlib.import_module(optional)
        except ImportError:
            pass


def serve(fd: int) -> None:
    """Answer requests on the socket ``fd`` until the test process closes it: for each, fork
    a process that runs the command, send its pid, then its exit code."""
    sock = socket.socket(fileno=fd)
    _preload()
    while True:
        try:
            payload, fds, _, _ = socket.recv_fds(sock, _MESSAGE, 3)
        except OSError:
            return
        if not payload:
            return
        request = json.loads(payload)
        pid = os.fork()
        if pid == 0:
            sock.close()
            os._exit(_child(request, fds))
        for handle in fds:
            os.close(handle)
        sock.send(str(pid).encode())
        _, status = os.waitpid(pid, 0)
        sock.send(str(os.waitstatus_to_exitcode(status)).encode())


def _child(request: dict[str, Any], fds: list[int]) -> int:
    """Run the request's module as ``python -m`` would, in this (forked) process."""
    import atexit
    import importlib
    import runpy

    stdin = fds[0] if request["stdin"] else os.open(os.devnull, os.O_RDONLY)
    for target, handle in ((0, stdin), (1, fds[1]), (2, fds[2])):
        os.dup2(handle, target)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [request["module"], *request["args"]]
    sys.path[0] = os.getcwd()  # `-m` puts the working folder first
    importlib.invalidate_caches()
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - as the interpreter: the traceback, then exit 1
        sys.excepthook(*sys.exc_info())
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def _exit_code(value: object) -> int:
    """The exit code ``sys.exit(value)`` gives a fresh interpreter."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1
