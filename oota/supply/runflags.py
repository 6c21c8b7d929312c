"""The device flags a verify run of an image needs, carried by the image itself (label
``oota.run-flags``, set at build time from the vendor's ``host`` and ``run`` data), so that
``invoke pull`` can run ``oota-verify`` in a pulled image without the vendor folder.

The label is compact JSON of the fields of a run that are set: ``{}`` for a CPU image.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path

from oota.engine.base import DeviceAccess, Mount, RunRequest

LABEL = "oota.run-flags"
_LISTS = ("devices", "group_add", "cap_add", "security_opt")
_TEXTS = ("gpus", "ipc", "runtime", "network", "shm_size")


class RunFlagsError(ValueError):
    pass


def to_label(request: RunRequest) -> str:
    """The label's value for a vendor's run request (its device access, env and mounts)."""
    return json.dumps(to_flags(request), sort_keys=True, separators=(",", ":"))


def to_flags(request: RunRequest) -> dict[str, object]:
    """The label's content as data (what a result's ``image.run_flags`` records)."""
    flags: dict[str, object] = {}
    device = request.device or DeviceAccess()
    for name in _TEXTS:
        if getattr(device, name):
            flags[name] = getattr(device, name)
    for name in _LISTS:
        if getattr(device, name):
            flags[name] = list(getattr(device, name))
    if request.env:
        flags["env"] = dict(sorted(request.env.items()))
    if request.mounts:
        flags["mounts"] = [{"source": str(m.source), "target": m.target,
                            "read_only": m.read_only} for m in request.mounts]
    return flags


def from_label(image: str, value: str, command: list[str]) -> RunRequest:
    """A run of ``image`` with the flags its label carries; RunFlagsError when unreadable."""
    try:
        flags = json.loads(value)
        if not isinstance(flags, dict):
            raise TypeError("not an object")
        device = DeviceAccess(
            gpus=_text(flags, "gpus"), ipc=_text(flags, "ipc"), runtime=_text(flags, "runtime"),
            network=_text(flags, "network"), shm_size=_text(flags, "shm_size"),
            devices=_texts(flags, "devices"), group_add=_texts(flags, "group_add"),
            cap_add=_texts(flags, "cap_add"), security_opt=_texts(flags, "security_opt"))
        mounts = tuple(Mount(source=Path(m["source"]), target=str(m["target"]),
                             read_only=bool(m.get("read_only", True)))
                       for m in flags.get("mounts", []))
        env = {str(k): str(v) for k, v in dict(flags.get("env", {})).items()}
    except (ValueError, TypeError, KeyError) as exc:
        raise RunFlagsError(f"label {LABEL} of {image} is unreadable ({exc})") from None
    return RunRequest(image=image, command=command, env=env, mounts=mounts,
                      device=device if device != DeviceAccess() else None)


def docker_run_args(flags: Mapping[str, object]) -> tuple[str, ...]:
    """The ``docker run`` options for recorded flags, each shell-quoted ('--device /dev/kfd',
    "-e 'K=a b'"), for a command line shown to users to copy. RunFlagsError when unreadable."""
    request = from_label("image", json.dumps(dict(flags)), [])
    device = request.device or DeviceAccess()
    pairs: list[tuple[str, str]] = []
    for option, name in (("--gpus", "gpus"), ("--runtime", "runtime"), ("--ipc", "ipc"),
                         ("--network", "network"), ("--shm-size", "shm_size")):
        value = getattr(device, name)
        pairs += [(option, value)] if value else []
    for option, name in (("--device", "devices"), ("--group-add", "group_add"),
                         ("--cap-add", "cap_add"), ("--security-opt", "security_opt")):
        pairs += [(option, value) for value in getattr(device, name)]
    pairs += [("-e", f"{key}={value}") for key, value in sorted(request.env.items())]
    pairs += [("-v", f"{m.source}:{m.target or m.source}" + (":ro" if m.read_only else ""))
              for m in request.mounts]
    return tuple(f"{option} {shlex.quote(value)}" for option, value in pairs)


def _text(flags: dict[str, object], name: str) -> str | None:
    value = flags.get(name)
    return None if value is None else str(value)


def _texts(flags: dict[str, object], name: str) -> tuple[str, ...]:
    value = flags.get(name, [])
    if not isinstance(value, list):
        raise TypeError(f"{name} is not a list")
    return tuple(str(x) for x in value)
