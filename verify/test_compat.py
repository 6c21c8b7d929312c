"""Compat layer: the installed pieces belong together.

torch is the cell's release; each extension the vendor declares (cell.json ``verify.extensions``:
``{import, distribution, torch}``) pairs with this torch and its native modules load with every
symbol resolved; the toolkit version torch reports at run time is the cell's, when the vendor
says where to read it (``verify.toolkit_version``, a dotted path such as ``torch.version.cuda``).
A channel's cell (cell.json ``channel``: torch from PyTorch's nightly index) has no release to
compare: its torch must be a dated nightly no older than ``channel.max_age_days``
(verify/oota_nightly.py).
"""

from __future__ import annotations

import ctypes
import datetime as dt
import fnmatch
import importlib
import importlib.metadata as md
import os
import re
from pathlib import Path

import pytest
from oota_nightly import age_problem, nightly_date
from oota_probe import resolve
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

LAYER = "compat"


def _torch_version() -> Version:
    import torch

    return Version(torch.__version__)


def test_torch_is_the_cells_release(cell, record_data):
    installed = _torch_version()
    record_data(torch=str(installed), distribution=md.version("torch"), cell=cell["torch"])
    if not cell.get("channel"):  # a channel's torch is dated by test_nightly_is_recent
        assert installed.release == Version(cell["torch"]).release, installed
    # The module and the distribution metadata must agree: a second torch on sys.path shows here.
    # (PyPI's CUDA wheel records 2.15.0 while torch says 2.15.0+cu132: compare public parts.)
    assert Version(md.version("torch")).public == installed.public


def test_nightly_is_recent(cell, record_data):
    """The torch of a nightly cell is a dated nightly, recent enough (PyTorch's smoke test
    rule); records its version, date and git commit for the report."""
    channel = cell.get("channel")
    if not channel or channel.get("name") != "nightly":
        pytest.skip("not a nightly cell: torch comes from a release or a candidate")
    import torch

    version = torch.__version__
    built = nightly_date(version)
    today = dt.datetime.now(dt.timezone.utc).date()
    record_data(channel=channel["name"], version=version,
                date=built.isoformat() if built else None,
                commit=getattr(torch.version, "git_version", None),
                age_days=(today - built).days if built else None,
                max_age_days=channel["max_age_days"], index_url=channel["index_url"])
    problem = age_problem(version, today, int(channel["max_age_days"]))
    assert problem is None, problem


def test_candidate_is_the_release_it_stands_for(cell, record_data):
    """The torch of a release candidate's cell (the test channel) is a candidate, not a
    nightly, and, where the cell names it, the very release it stands for: PyTorch's smoke
    test fails 'Torch version mismatch, expected X for channel test' the same way."""
    channel = cell.get("channel")
    if not channel or channel.get("name") != "test":
        pytest.skip("not a release candidate's cell")
    installed = _torch_version()
    expected = channel.get("version")
    record_data(channel="test", version=str(installed), expected=expected,
                index_url=channel.get("index_url"))
    assert not installed.is_devrelease, (
        f"torch {installed} is a nightly: the test channel's index served no candidate")
    if expected:
        assert installed.release == Version(expected).release, (
            f"torch {installed} is installed, the candidate of {expected} was expected")


def _requires_on_torch(distribution: str) -> list[Requirement]:
    return [r for r in (Requirement(t) for t in md.requires(distribution) or [])
            if r.name == "torch" and (r.marker is None or r.marker.evaluate({"extra": ""}))]


def test_extension_pairs_with_torch(extension, record_data):
    torch_version = _torch_version()
    dist = extension["distribution"]
    try:
        version = md.version(dist)
    except md.PackageNotFoundError:
        pytest.fail(f"the vendor's extension distribution {dist} is not installed")
    wanted = SpecifierSet(extension.get("torch") or "")
    own = _requires_on_torch(dist)
    record_data(distribution=dist, version=version, torch=str(torch_version),
                vendor_spec=str(wanted), requires=[str(r) for r in own])
    assert wanted.contains(torch_version, prereleases=True), (
        f"{dist} {version} pairs with torch{wanted}, but torch {torch_version} is installed")
    for req in own:
        assert req.specifier.contains(torch_version, prereleases=True), (
            f"{dist} {version} requires {req}, but torch {torch_version} is installed")


def _native_files(distribution: str) -> list[Path]:
    files = md.files(distribution) or []
    return sorted(Path(str(f.locate())) for f in files
                  if f.name.endswith(".so") or ".so." in f.name)


def _load_all(paths: list[Path]) -> dict[str, str]:
    failures = {}
    for path in paths:
        try:
            # RTLD_NOW resolves every symbol at once: a lazily bound undefined symbol (an ABI
            # mismatch with torch) would otherwise only crash on first use.
            ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as exc:
            failures[path.name] = str(exc)
    return failures


def test_extension_native_modules_load(extension, record_data):
    importlib.import_module("torch")
    importlib.import_module(extension["import"])  # loads torch's libraries the .so files need
    paths = _native_files(extension["distribution"])
    failures = _load_all(paths)
    record_data(distribution=extension["distribution"], native_modules=[p.name for p in paths])
    assert paths, f"{extension['distribution']} lists no native module (.so) in its RECORD"
    assert not failures, failures


# torch's own libraries; the third-party ones it bundles (torch.libs, nvidia wheels) are loaded
# lazily by torch itself and some need libraries only a GPU host provides.
_TORCH_OWN = re.compile(r"^(libtorch|libc10|libshm|_C\b|_C\.|libcaffe2)")
# A library file name in a loader's message ("libcuda.so.1: cannot open shared object file").
_LIBRARY = re.compile(r"lib[\w.+-]*?\.so(?:\.\d+)*")


def _needs_driver(why: str, patterns: list[str]) -> bool:
    """Does the loader's message name a library of the host's driver (the vendor's
    ``host.driver_libraries``, in cell.json), which no image carries?"""
    return any(fnmatch.fnmatchcase(name, pattern) for name in _LIBRARY.findall(why)
               for pattern in patterns)


def test_torch_native_modules_load(cell, record_data):
    importlib.import_module("torch")
    paths = [p for p in _native_files("torch") if _TORCH_OWN.match(p.name)]
    failures = _load_all(paths)
    patterns = list(cell.get("driver_libraries") or ())
    need_driver = {name: why for name, why in failures.items() if _needs_driver(why, patterns)}
    record_data(native_modules=len(paths), need_host_driver=sorted(need_driver))
    unsupported = os.environ.get("OOTA_UNSUPPORTED_HERE")
    if need_driver and len(need_driver) == len(failures) and unsupported:
        pytest.skip(f"unsupported-here: {', '.join(sorted(need_driver))} need the host's driver "
                    f"libraries ({unsupported})")
    assert paths and not failures, failures


def test_toolkit_version_matches_cell(cell, spec, record_data):
    where = spec.get("toolkit_version")
    if not where:
        pytest.skip("the vendor declares no verify.toolkit_version to read at run time")
    if not cell.get("toolkit_version"):
        pytest.skip("this cell has no toolkit version")
    seen = resolve(where)
    record_data(source=where, seen=None if seen is None else str(seen),
                cell=cell["toolkit_version"])
    assert seen is not None, f"{where} is None: this build carries no {cell.get('toolkit')} runtime"
    expected = _release(cell["toolkit_version"])
    assert _release(str(seen))[:len(expected)] == expected, (
        f"{where} is {seen}, the cell promises {cell['toolkit_version']}")


def _release(text: str) -> tuple[int, ...]:
    """(6, 2, 41133) of '6.2.41133-dd7f95766' (HIP), (13, 0) of '13.0' (CUDA)."""
    match = re.match(r"\d+(?:\.\d+)*", text.strip())
    return tuple(int(x) for x in match.group(0).split(".")) if match else ()
