"""The docker CLI's stored registry credentials: its config.json's ``credHelpers``,
``credsStore`` and ``auths``, and the credential helpers they name (asked here, with a deadline).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oota.engine.base import RegistryAuth
from oota.errors import EnvironmentProblem
from oota.net import redact_text


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
        code, said = _run_helper(exe, server)
    except OSError as exc:
        raise _helper_failed(helper, registry, where, f"cannot run it ({exc.strerror})") from None
    if code is None:
        raise _helper_failed(helper, registry, where, f"no answer within {HELPER_TIMEOUT_S} s")
    if len(said) > _HELPER_ANSWER_LIMIT:
        raise _helper_failed(helper, registry, where, "it answered more than 1 MiB")
    if code != 0:
        if b"credentials not found" in said.lower():
            return None
        # What it printed is not quoted: a helper may print the secret it failed to hand over.
        raise _helper_failed(helper, registry, where, f"it exited with {code} (run "
                             f"`echo {server} | {program} get` to see what it says)")
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


def _run_helper(exe: str, server: str) -> tuple[int | None, bytes]:
    """``exe get`` asked for ``server``: its exit code (None: killed at the deadline) and at
    most :data:`_HELPER_ANSWER_LIMIT` + 1 bytes of its answer (a helper printing without end
    is not read into memory). Its stderr is not kept (docker's helpers answer on stdout). It
    runs in a process group of its own, killed whole: a child of it that holds its output
    open would otherwise keep the read waiting."""
    expired = threading.Event()
    with subprocess.Popen([exe, "get"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, start_new_session=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None

        def kill() -> None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)

        def expire() -> None:
            expired.set()
            kill()

        timer = threading.Timer(HELPER_TIMEOUT_S, expire)
        timer.daemon = True
        timer.start()
        try:
            with contextlib.suppress(OSError):  # it may exit before reading
                proc.stdin.write(server.encode())
                proc.stdin.close()
            said = proc.stdout.read(_HELPER_ANSWER_LIMIT + 1)
            if len(said) > _HELPER_ANSWER_LIMIT:
                kill()
            code = proc.wait()
        finally:
            timer.cancel()
    return (None if expired.is_set() else code), said


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
