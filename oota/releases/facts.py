"""The one place release-check reads a vendor's ``facts`` (vendors/<name>/vendor.yaml):
its Python range, where its torch and its extension come from, and its pairing table.

``Vendor.facts`` is loaded elsewhere; this module turns it into the typed view the check
needs, so a change to how vendor.yaml is loaded is absorbed here and nowhere else. Values of
the wrong type are input errors naming the file and key, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oota.config.vendors import Vendor
from oota.errors import InputError

INDEX_KINDS = ("pypi", "source", "data")


@dataclass(frozen=True, kw_only=True, slots=True)
class Extension:
    """The vendor's out-of-tree extension and where its builds come from: the package index
    (``pypi``), a build from source in every cell (``source``), or the vendor's table
    (``data``)."""

    distribution: str
    index: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Pairing:
    """One row of ``facts.compat``: which torch (a series such as "2.9" or one release) goes
    with which extension / toolkit build, for which Pythons."""

    position: int                    # its index in facts.compat, for "facts.compat[2]"
    torch: str
    extension: str
    toolkit: str
    build: str
    python: str
    verified: bool                   # False where the vendor's own sources do not confirm it


@dataclass(frozen=True, kw_only=True, slots=True)
class VendorFacts:
    vendor: str
    display: str
    toolkit_name: str                # "" when the vendor has no toolkit axis
    python: str                      # a Requires-Python-like range; "" for any
    torch_index: str                 # "pypi" or "data"
    extension: Extension | None
    compat: tuple[Pairing, ...]

    @property
    def file(self) -> str:
        return f"vendors/{self.vendor}/vendor.yaml"

    @property
    def build_name(self) -> str:
        """What the vendor's pairing table pairs torch with, in words: "CUDA", "Intel XPU
        build" (a vendor without a toolkit axis names its own build, never 'None')."""
        return self.toolkit_name or f"{self.display} build"

    @property
    def tracks_torch(self) -> bool:
        """A vendor whose whole stack is torch from the index, with no pairing table of its
        own (cpu), follows every release; the others follow their table or extension."""
        return self.torch_index == "pypi" and self.extension is None and not self.compat


def vendor_facts(vendor: Vendor) -> VendorFacts:
    """The typed view of ``vendor.facts``."""
    facts = _mapping(vendor.name, "facts", vendor.facts or {})
    ext = facts.get("extension")
    extension = None
    if ext is not None:
        ext = _mapping(vendor.name, "facts.extension", ext)
        extension = Extension(distribution=_text(vendor.name, "facts.extension.distribution",
                                                 ext.get("distribution"), vendor.name),
                              index=_kind(vendor.name, "facts.extension.index", ext.get("index")))
    compat = facts.get("compat") or []
    if not isinstance(compat, list):
        raise _bad(vendor.name, "facts.compat", "expected a list of mappings")
    return VendorFacts(
        vendor=vendor.name, display=vendor.display,
        toolkit_name=vendor.toolkit.name if vendor.toolkit else "",
        python=_text(vendor.name, "facts.python", facts.get("python"), ""),
        torch_index=_kind(vendor.name, "facts.torch_index", facts.get("torch_index")),
        extension=extension,
        compat=tuple(_pairing(vendor.name, i, e) for i, e in enumerate(compat)))


def _pairing(vendor: str, position: int, value: Any) -> Pairing:
    where = f"facts.compat[{position}]"
    entry = _mapping(vendor, where, value)
    verified = entry.get("verified", True)
    if not isinstance(verified, bool):
        raise _bad(vendor, f"{where}.verified", "expected true or false")
    return Pairing(position=position,
                   torch=_text(vendor, f"{where}.torch", entry.get("torch"), None),
                   extension=_text(vendor, f"{where}.extension", entry.get("extension"), ""),
                   toolkit=_text(vendor, f"{where}.toolkit", entry.get("toolkit"), ""),
                   build=_text(vendor, f"{where}.build", entry.get("build"), ""),
                   python=_text(vendor, f"{where}.python", entry.get("python"), ""),
                   verified=verified)


def _mapping(vendor: str, where: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(vendor, where, "expected a mapping")
    return value


def _text(vendor: str, where: str, value: Any, default: str | None) -> str:
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or not value:
        raise _bad(vendor, where, f"expected a non-empty string, got {value!r}")
    return value


def _kind(vendor: str, where: str, value: Any) -> str:
    kind = _text(vendor, where, value, "pypi")
    if kind not in INDEX_KINDS:
        raise _bad(vendor, where, f"unknown value {kind!r}", f"use one of {', '.join(INDEX_KINDS)}")
    return kind


def _bad(vendor: str, where: str, problem: str, hint: str = "") -> InputError:
    return InputError(f"vendors/{vendor}/vendor.yaml: {where}: {problem}"
                      + (f"; {hint}" if hint else ""))
