"""The device flags a verify run of an image needs, carried by the image itself (label
``oota.run-flags``, set at build time from the vendor's ``host`` and ``run`` data), so that
``invoke pull`` can run ``oota-verify`` in a pulled image without the vendor folder.

The label is compact JSON of the fields of a run that are set: ``{}`` for a CPU image.
"""

from __future__ import annotations

import json
from pathlib import Path

from oota.engine.base import DeviceAccess, Mount, RunRequest

LABEL = "oota.run-flags"
_LISTS = ("devices", "group_add", "cap_add", "security_opt")
_TEXTS = ("gpus", "ipc", "runtime", "network", "shm_size")


class RunFlagsError(ValueError):
    pass


def to_label(request: RunRequest) -> str:
    """The label's value for a vendor's run request (its device access, env and mounts)."""
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
    return json.dumps(flags, sort_keys=True, separators=(",", ":"))


def from_label(image: str, value: str, command: list[str]) -> RunRequest:
    """A run of ``image`` with the flags its label carries; RunFlagsError when unreadable."""
    try:
        flags = json.loads(value)
        if not isinstance(flags, dict):
            raise TypeError("not an object")
        given: dict[str, str | tuple[str, ...]] = {n: str(flags[n]) for n in _TEXTS
                                                   if n in flags}
        given |= {n: tuple(str(x) for x in flags[n]) for n in _LISTS if n in flags}
        device = DeviceAccess(**given)  # type: ignore[arg-type]  # names from the fields
        mounts = tuple(Mount(source=Path(m["source"]), target=str(m["target"]),
                             read_only=bool(m.get("read_only", True)))
                       for m in flags.get("mounts", []))
        env = {str(k): str(v) for k, v in dict(flags.get("env", {})).items()}
    except (ValueError, TypeError, KeyError) as exc:
        raise RunFlagsError(f"label {LABEL} of {image} is unreadable ({exc})") from None
    return RunRequest(image=image, command=command, env=env, mounts=mounts,
                      device=device if device != DeviceAccess() else None)
