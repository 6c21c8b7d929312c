"""What one release of an extension or a companion requires of torch, and on whose word: its
own metadata (``Requires-Dist: torch==2.14.0.*``), the vendor's rule where the metadata says
nothing (``facts.extension.requires_torch``, :mod:`oota.config.pairing`), or both, each
holding. A release with neither has an unknown pairing: it pairs with no torch, and the
check says why, never "any torch".

An unversioned ``Requires-Dist: torch`` names no torch release either: it counts as no
declaration.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from oota.config.pairing import TorchRule


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchNeed:
    declared: str                    # the metadata's specifier on torch ("" when none)
    rule: str                        # the vendor's rule for this release ("" when none)

    @property
    def known(self) -> bool:
        return bool(self.declared or self.rule)

    def accepts(self, torch: Version) -> bool:
        """Does this release pair with ``torch``? Never when its pairing is unknown."""
        return self.known and all(SpecifierSet(s).contains(torch, prereleases=True)
                                  for s in (self.declared, self.rule) if s)

    def only_older(self, torch: Iterable[Version]) -> bool:
        """Does it accept none of ``torch`` and only releases older than each of them? (An
        unknown pairing is never older: the walk over releases goes on past it.)"""
        return self.known and all(not self.accepts(t) and _below(self.specifier, t)
                                  for t in torch)

    @property
    def specifier(self) -> SpecifierSet:
        return SpecifierSet(",".join(s for s in (self.declared, self.rule) if s))

    @property
    def metadata_words(self) -> str:
        """What the index says: 'requires torch==2.14.0.*' or 'declares no torch requirement'."""
        return f"requires torch{self.declared}" if self.declared \
            else "declares no torch requirement"


def need_of(declared: str, rule: TorchRule | None, release: Version) -> TorchNeed:
    """The need of ``release``: its declared specifier and the vendor's rule filled in."""
    return TorchNeed(declared=declared,
                     rule=str(rule.for_release(release)) if rule is not None else "")


def _below(spec: SpecifierSet, torch: Version) -> bool:
    """Does ``spec`` only accept releases older than ``torch``?"""
    uppers = [s for s in spec if s.operator in ("==", "===", "<", "<=", "~=")]
    return bool(uppers) and all(Version(s.version.rstrip(".*")) < torch for s in uppers)
