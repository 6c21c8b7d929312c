"""The one place release-check reads a vendor's ``facts`` (vendors/<name>/vendor.yaml):
its Python range, where its torch and its extension come from, and its pairing table.

``Vendor.facts`` is typed and checked in full when vendor.yaml is loaded (a wrong value is a
located input error there, exit 2); this module adds what the check needs of it: each row's
position (for "facts.compat[2]") and the words for the vendor's build.
"""

from __future__ import annotations

from dataclasses import dataclass

from oota.config.pairing import TorchRule
from oota.config.vendors import Vendor


@dataclass(frozen=True, kw_only=True, slots=True)
class Extension:
    """The vendor's out-of-tree extension and where its builds come from: the package index
    (``pypi``), a build from source in every cell (``source``), or the vendor's table
    (``data``)."""

    distribution: str
    index: str
    # The torch each release requires where its metadata declares none (the vendor's rule,
    # facts.extension.requires_torch); None: such a release's pairing is unknown.
    requires_torch: TorchRule | None = None


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
    """The check's view of ``vendor.facts`` (checked in full by the vendor's loader)."""
    facts = vendor.facts
    extension = None if facts.extension is None else Extension(
        distribution=facts.extension.distribution, index=facts.extension.index,
        requires_torch=facts.extension.requires_torch)
    return VendorFacts(
        vendor=vendor.name, display=vendor.display,
        toolkit_name=vendor.toolkit.name if vendor.toolkit else "",
        python=facts.python, torch_index=facts.torch_index, extension=extension,
        compat=tuple(Pairing(position=i, torch=row.torch, extension=row.extension,
                             toolkit=row.toolkit, build=row.build, python=row.python,
                             verified=row.verified)
                     for i, row in enumerate(facts.compat)))
