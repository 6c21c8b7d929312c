"""What the smoke layer (test_smoke.py) decides, apart from running it: where the build put
what the layer needs, why numpy 1.x is absent for a Python, which of PyTorch's three smoke
environments a run is in, whether the first device call's error is a clear one, and whether
the libraries torch carries agree with it. Standard library and ``packaging`` only, so the
toolkit's unit tests run it without torch.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

HERE = Path(__file__).resolve().parent
# The numpy 1.x the builder installs (templates/dockerfile/base.Dockerfile.j2), its pin and
# hashes; and the C++ extension the builder compiles (smoke/build_ext.py) with its record.
NUMPY1_FILE = HERE / "smoke" / "numpy1.txt"
NUMPY1_DIR = Path(os.environ.get("OOTA_SMOKE_NUMPY1", "/opt/oota/numpy1"))
EXTENSION_DIR = Path(os.environ.get("OOTA_SMOKE_EXTENSION", "/opt/oota/smoke-ext"))
# Words a clear error of a first device call uses, besides the device type's own name
# (CUDA without a GPU: "Found no NVIDIA driver on your system"; a CPU build asked for CUDA:
# "Torch not compiled with CUDA enabled").
CLEAR_WORDS = ("driver", "device", "hardware", "gpu", "not compiled", "not available")


def numpy1_requirement(text: str) -> Requirement:
    """The one requirement of numpy1.txt (comments, hashes and line continuations aside)."""
    lines = [line.split("#", 1)[0].strip() for line in text.replace("\\\n", " ").splitlines()]
    for line in lines:
        if line:
            return Requirement(line.split(" --hash", 1)[0].strip())
    raise InvalidRequirement("numpy1.txt holds no requirement")


def numpy1_absent(text: str, python: str) -> str:
    """Why numpy1.txt installs nothing for ``python`` ('3.13'), or '' where it installs it."""
    requirement = numpy1_requirement(text)
    if requirement.marker is None or requirement.marker.evaluate({"python_version": python}):
        return ""
    return (f"numpy 1.x has no wheel for Python {python}: the last 1.x, {requirement.specifier}"
            f", is built for CPython 3.9 to 3.12 (verify/smoke/numpy1.txt: {requirement.marker})")


def library_names(listing: str) -> list[str]:
    """The library file names of ``ldconfig -p``'s listing ('libcuda.so.1 (libc6,x86-64) =>
    /usr/lib/...' lines)."""
    return [line.split()[0] for line in listing.splitlines()[1:] if line.strip()]


def matching(names: Iterable[str], patterns: Iterable[str]) -> list[str]:
    patterns = list(patterns)
    return sorted({n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)})


def driver_libraries(patterns: Iterable[str]) -> list[str]:
    """The libraries matching the vendor's driver patterns (cell.json ``driver_libraries``)
    that the dynamic loader can find here: in its cache, or in LD_LIBRARY_PATH's folders."""
    patterns = list(patterns)
    if not patterns:
        return []
    names: list[str] = []
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=60)
        names += library_names(listing.stdout)
    except (OSError, subprocess.SubprocessError):
        pass  # no ldconfig on the path: the folders below still count
    for folder in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(":")):
        if os.path.isdir(folder):
            names += os.listdir(folder)
    return matching(names, patterns)


def environment(*, device_here: bool, unsupported: bool, patterns: list[str],
                found: list[str]) -> str:
    """Which of PyTorch's three smoke environments (oota_vocab.SMOKE_ENVIRONMENTS) this run is
    in, or '' where it cannot say: the device is used here ('hardware'); the host check found
    no hardware and the stack is whole ('no-hardware': the driver's libraries are here, or the
    vendor needs none); or not even the driver's libraries are ('minimal-os'). A host that has
    the hardware while this container cannot use it is none of them: the device layer fails
    the cell for it."""
    if device_here:
        return "hardware"
    if not unsupported:
        return ""
    return "no-hardware" if found or not patterns else "minimal-os"


def unclear(device: str, raised: str | None, message: str) -> str:
    """Why the first device call's outcome is not a clear error, or '' where it is one: it
    raised, with a message that names the device or says what is missing."""
    if raised is None:
        return f"it did not raise: {message}"
    text = message.strip()
    if not text:
        return f"it raised {raised} with no message"
    lowered = text.lower()
    if device.lower() in lowered or any(word in lowered for word in CLEAR_WORDS):
        return ""
    return (f"{raised}: {text!r} names neither the device ({device}) nor what is missing "
            f"(a {', '.join(repr(w) for w in CLEAR_WORDS)})")


def cudnn_text(number: int) -> str:
    """cuDNN's version number as text: 92600 is 9.26.0 (cuDNN 9), 8907 is 8.9.7 (cuDNN 8)."""
    if number >= 90000:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number // 100 % 10}.{number % 100}"


def cudnn_problem(runtime: tuple[int, ...], compiled: tuple[int, ...], is_cuda: bool) -> str:
    """'' where the cuDNN torch loads is one torch accepts for the one it was built against,
    by PyTorch's own rule (torch/backends/cudnn/__init__.py, _init): the same major release,
    and from cuDNN 7 on a minor release at least the built one (cuDNN's minor releases are
    backward compatible; PyPI's torch 2.9.0 is built against 9.8.0 and pins 9.10.2); the
    same minor release before cuDNN 7 and for MIOpen. Else what disagrees."""
    built, loaded = ".".join(map(str, compiled)), ".".join(map(str, runtime))
    if runtime[0] != compiled[0]:
        return f"cuDNN: torch was built against {built} and loads {loaded} (another major release)"
    if (runtime[0] < 7 or not is_cuda) and runtime[1] != compiled[1]:
        return f"cuDNN: torch was built against {built} and loads {loaded} (another minor release)"
    if runtime[1] < compiled[1]:
        return (f"cuDNN: torch was built against {built} and loads {loaded}, an older minor "
                "release than it needs")
    return ""


def distribution_of(prefix: str, installed: Mapping[str, str]) -> tuple[str, str] | None:
    """(name, version) of the installed distribution whose name starts with ``prefix``
    ('nvidia-cudnn' finds nvidia-cudnn-cu13), as PyTorch's smoke test looks them up."""
    found = sorted((name, version) for name, version in installed.items()
                   if name.lower().startswith(prefix))
    return found[0] if found else None


def pip_agrees(what: str, seen: str, distribution: tuple[str, str] | None) -> str:
    """'' where the pip distribution's version begins with the version torch reports (as
    PyTorch's smoke test compares them), else what disagrees."""
    if distribution is None:
        return ""
    name, version = distribution
    if _release(version)[:len(_release(seen))] == _release(seen):
        return ""
    return f"{what}: torch loads {seen}, but {name} {version} is installed"


def _release(text: str) -> tuple[int, ...]:
    match = re.match(r"\d+(?:\.\d+)*", text.strip())
    return tuple(int(x) for x in match.group(0).split(".")) if match else ()


def companion_problem(name: str, paired: str, installed: str | None) -> str:
    """'' where the companion installed is the release the cell pairs with its torch."""
    if installed is None:
        return f"{name} is not installed; the cell pairs {paired} with its torch"
    try:
        same = Version(installed).public == Version(paired).public  # '+cu126' aside
    except InvalidVersion:
        same = installed == paired
    return "" if same else (f"{name} {installed} is installed; the cell pairs {paired} with "
                            "its torch (vendors/companions.yaml or the vendor's companions)")
