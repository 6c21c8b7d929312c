"""What a cell's image holds and how it got there, as types: torch and the packages installed,
the package sources the build used, and the requirements it pinned (the lock)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from oota.results.codec import ALL, Record, Shape

# PyTorch's nightlies are versioned X.Y.Z.devYYYYMMDD[+local] (verify/oota_nightly.py reads the
# same in the image, where oota's package is absent).
_NIGHTLY_VERSION = re.compile(r"^\d+(?:\.\d+)*\.dev(\d{4})(\d{2})(\d{2})(?:\+[A-Za-z0-9.]+)?$")


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchInfo(Record):
    """torch as it reports itself in the image, and where its wheel came from."""

    json_shape = Shape(omit=("error",))

    version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    git_version: str | None = None
    source: str | None = None
    sha256: str | None = None
    error: str | None = None  # why torch could not be imported

    @property
    def nightly_date(self) -> str | None:
        """'2026-11-23' for a nightly's version (2.16.0.dev20261123+cpu), else None."""
        match = _NIGHTLY_VERSION.match(self.version or "")
        return "-".join(match.groups()) if match else None

    @property
    def nightly(self) -> str | None:
        """How a report names a nightly: its date and, when torch records it, its commit."""
        if self.nightly_date is None:
            return None
        commit = f", commit {self.git_version[:12]}" if self.git_version else ""
        return f"nightly of {self.nightly_date}{commit}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Package(Record):
    """One installed distribution (pip's report): version, source, and whether the build
    asked for it (an extension) or it came as a dependency."""

    version: str | None = None
    source: str | None = None
    sha256: str | None = None
    requested: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Installed(Record):
    """What the image really holds (``installed.json`` of the suite)."""

    torch: TorchInfo = field(default_factory=TorchInfo)
    packages: Mapping[str, Package] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class Sources(Record):
    """The package sources a build used, credentials already removed."""

    index_url: str = ""
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class LockedPin(Record):
    """One pin of the cell's lock: what ``pip install --require-hashes`` accepts for it."""

    name: str
    version: str
    hashes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Requirements(Record):
    """What the cell asked pip for, told apart: the vendor's stack (vendor.yaml
    ``requirements``: what a user installs) and the suite's own packages
    (``test_requirements``), formatted for the cell; where the vendor's stack comes from
    (``index_url`` replaces PyPI, as a channel's index does; ``extra_index_url`` is searched
    beside it, as a vendor's release index is); and, for a locked cell, the lock's pins of the
    vendor's stack and everything it needs, with their hashes."""

    json_shape = Shape(omit=ALL, keep=("vendor", "test", "locked"))

    vendor: tuple[str, ...] = ()
    test: tuple[str, ...] = ()
    index_url: str = ""
    extra_index_url: str = ""
    locked: tuple[LockedPin, ...] = ()
