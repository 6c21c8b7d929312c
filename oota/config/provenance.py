"""Where each vendor fact comes from, and whether anyone checked it.

A fact in vendor.yaml (a row of ``facts.compat``, a base image, a driver rule, the CUDA of
PyPI's default wheel, the vendor's Python range) carries::

    source: release-matrix          # a key of facts.sources: {url: ..., title: ...}
    verified: "2026-11-26"          # the day someone compared it with that source
    # or
    unverified: "no published tag list names 9.1.0 images"

A fact that says neither is unverified with the reason "no source recorded". ``release-check``
lists the unverified facts; the report and the get-started pages mark the cells that rest on
one (:func:`oota.plan.Cell.unverified_facts`). Pure data, built by the vendor loader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NO_SOURCE = "no source recorded"
KEYS = ("source", "verified", "unverified")


@dataclass(frozen=True, kw_only=True, slots=True)
class Source:
    key: str
    url: str
    title: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Provenance:
    source: str = ""                 # a key of facts.sources ("" when none is named)
    url: str = ""                    # that source's URL
    verified: str = ""               # YYYY-MM-DD
    unverified: str = ""             # why it is not verified

    @property
    def is_verified(self) -> bool:
        return bool(self.verified) and not self.unverified

    @property
    def why_unverified(self) -> str:
        return self.unverified or ("" if self.verified else NO_SOURCE)

    @property
    def label(self) -> str:
        """'verified 2026-11-26 (https://...)' or 'UNVERIFIED: reason (https://...)'."""
        where = f" ({self.url})" if self.url else ""
        if self.is_verified:
            return f"verified {self.verified}{where}"
        return f"UNVERIFIED: {self.why_unverified}{where}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Fact:
    """One fact of a vendor, where it is written and what it says."""

    vendor: str
    where: str                       # its YAML path, e.g. "facts.compat[2]"
    what: str                        # what it says, e.g. "torch 2.12.0: CANN 9.1.0"
    provenance: Provenance
    # The cells it is about, by coordinate: {"torch": "2.14", "toolkit": "13.0"} (a torch
    # series or release, a toolkit release it covers, an OS key); {} for every cell; None
    # for none (a retired extension).
    about: Mapping[str, str] | None = None

    def concerns(self, os_key: str, torch: str, toolkit: str) -> bool:
        """Does a cell with these coordinates rest on this fact?"""
        if self.about is None:
            return False
        have = {"os": os_key, "torch": torch, "toolkit": toolkit}
        return all(_matches(key, want, have[key]) for key, want in self.about.items())

    @property
    def verified(self) -> bool:
        return self.provenance.is_verified

    @property
    def sentence(self) -> str:
        return (f"vendors/{self.vendor}/vendor.yaml {self.where}: {self.what}: "
                f"{self.provenance.label}")


def sources_of(value: Any) -> dict[str, Source]:
    """``facts.sources``: a mapping key -> {url, title}, or (older files) a list of URLs,
    each its own key."""
    if isinstance(value, list):
        return {str(url): Source(key=str(url), url=str(url)) for url in value}
    if not isinstance(value, Mapping):
        return {}
    return {str(key): Source(key=str(key), url=str(entry.get("url", "")),
                             title=str(entry.get("title", "")))
            for key, entry in value.items() if isinstance(entry, Mapping)}


def provenance_of(entry: Any, sources: Mapping[str, Source],
                  inherited: Provenance | None = None) -> Provenance:
    """The provenance an entry states (the vendor loader checked its shape), else the one it
    inherits from its section, else none."""
    if not isinstance(entry, Mapping) or not any(k in entry for k in KEYS):
        return inherited or Provenance()
    key = str(entry.get("source", "") or (inherited.source if inherited else ""))
    source = sources.get(key)
    return Provenance(source=key, url=source.url if source else "",
                      verified=str(entry.get("verified", "") or ""),
                      unverified=str(entry.get("unverified", "") or ""))


def _matches(key: str, want: str, have: str) -> bool:
    if key == "os":
        return want == have
    return (key == "toolkit" and want == "default") or _prefix(want, have)


def _prefix(series: str, version: str) -> bool:
    """'2.14' covers '2.14.1'; '13' covers '13.2'."""
    mine, theirs = series.split("."), version.split(".")
    return bool(version) and theirs[:len(mine)] == mine
