"""What a cell's image holds and how it got there, as types: torch and the packages installed,
the package sources the build used, and the requirements it pinned (the lock)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from oota.results.jsonfields import (
    JSONObject,
    ResultFormatError,
    as_object,
    drop_empty,
    get_opt_str,
    get_str,
    get_strs,
)

# PyTorch's nightlies are versioned X.Y.Z.devYYYYMMDD[+local] (verify/oota_nightly.py reads the
# same in the image, where oota's package is absent).
_NIGHTLY_VERSION = re.compile(r"^\d+(?:\.\d+)*\.dev(\d{4})(\d{2})(\d{2})(?:\+[A-Za-z0-9.]+)?$")


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchInfo:
    """torch as it reports itself in the image, and where its wheel came from."""

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

    def to_json(self) -> JSONObject:
        # None is kept: 'cuda': null says torch was built without CUDA.
        data: JSONObject = {"version": self.version, "cuda": self.cuda, "hip": self.hip,
                            "git_version": self.git_version, "source": self.source,
                            "sha256": self.sha256}
        return data | ({"error": self.error} if self.error else {})

    @classmethod
    def from_json(cls, value: object, where: str) -> TorchInfo:
        d = as_object(value, where)
        return cls(**{k: get_opt_str(d, k, where) for k in (
            "version", "cuda", "hip", "git_version", "source", "sha256", "error")})


@dataclass(frozen=True, kw_only=True, slots=True)
class Package:
    """One installed distribution (pip's report): version, source, and whether the build
    asked for it (an extension) or it came as a dependency."""

    version: str | None = None
    source: str | None = None
    sha256: str | None = None
    requested: bool = False

    def to_json(self) -> JSONObject:
        return {"version": self.version, "source": self.source, "sha256": self.sha256,
                "requested": self.requested}

    @classmethod
    def from_json(cls, value: object, where: str) -> Package:
        d = as_object(value, where)
        return cls(version=get_opt_str(d, "version", where), source=get_opt_str(d, "source", where),
                   sha256=get_opt_str(d, "sha256", where), requested=bool(d.get("requested")))


@dataclass(frozen=True, kw_only=True, slots=True)
class Installed:
    """What the image really holds (``installed.json`` of the suite)."""

    torch: TorchInfo = field(default_factory=TorchInfo)
    packages: Mapping[str, Package] = field(default_factory=dict)

    def to_json(self) -> JSONObject:
        return {"torch": self.torch.to_json(),
                "packages": {name: p.to_json() for name, p in self.packages.items()}}

    @classmethod
    def from_json(cls, value: object, where: str = "installed") -> Installed:
        d = as_object(value, where)
        packages = as_object(d.get("packages") or {}, f"{where}.packages")
        return cls(torch=TorchInfo.from_json(d.get("torch") or {}, f"{where}.torch"),
                   packages={str(name): Package.from_json(p, f"{where}.packages.{name}")
                             for name, p in packages.items()})


@dataclass(frozen=True, kw_only=True, slots=True)
class Sources:
    """The package sources a build used, credentials already removed."""

    index_url: str = ""
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def to_json(self) -> JSONObject:
        return {"index_url": self.index_url, "extra_index_urls": list(self.extra_index_urls),
                "find_links": list(self.find_links), "notes": list(self.notes)}

    @classmethod
    def from_json(cls, value: object, where: str = "sources") -> Sources:
        d = as_object(value, where)
        return cls(index_url=get_opt_str(d, "index_url", where) or "",
                   extra_index_urls=get_strs(d, "extra_index_urls", where),
                   find_links=get_strs(d, "find_links", where), notes=get_strs(d, "notes", where))


@dataclass(frozen=True, kw_only=True, slots=True)
class LockedPin:
    """One pin of the cell's lock: what ``pip install --require-hashes`` accepts for it."""

    name: str
    version: str
    hashes: tuple[str, ...] = ()

    def to_json(self) -> JSONObject:
        return {"name": self.name, "version": self.version, "hashes": list(self.hashes)}

    @classmethod
    def from_json(cls, value: object, where: str) -> LockedPin:
        d = as_object(value, where)
        return cls(name=get_str(d, "name", where), version=get_str(d, "version", where),
                   hashes=get_strs(d, "hashes", where))


@dataclass(frozen=True, kw_only=True, slots=True)
class Requirements:
    """What the cell asked pip for, told apart: the vendor's stack (vendor.yaml
    ``requirements``: what a user installs) and the suite's own packages
    (``test_requirements``), formatted for the cell; where the vendor's stack comes from
    (``index_url`` replaces PyPI, as a channel's index does; ``extra_index_url`` is searched
    beside it, as a vendor's release index is); and, for a locked cell, the lock's pins of the
    vendor's stack and everything it needs, with their hashes."""

    vendor: tuple[str, ...] = ()
    test: tuple[str, ...] = ()
    index_url: str = ""
    extra_index_url: str = ""
    locked: tuple[LockedPin, ...] = ()

    def to_json(self) -> JSONObject:
        return drop_empty({"vendor": list(self.vendor), "test": list(self.test),
                            "index_url": self.index_url,
                            "extra_index_url": self.extra_index_url,
                            "locked": [p.to_json() for p in self.locked]}) | {
            "vendor": list(self.vendor), "test": list(self.test)}

    @classmethod
    def from_json(cls, value: object, where: str = "requirements") -> Requirements:
        d = as_object(value, where)
        locked = d.get("locked") or []
        if not isinstance(locked, list):
            raise ResultFormatError(f"{where}.locked: expected a list")
        return cls(vendor=get_strs(d, "vendor", where), test=get_strs(d, "test", where),
                   index_url=get_opt_str(d, "index_url", where) or "",
                   extra_index_url=get_opt_str(d, "extra_index_url", where) or "",
                   locked=tuple(LockedPin.from_json(p, f"{where}.locked[{i}]")
                                for i, p in enumerate(locked)))
