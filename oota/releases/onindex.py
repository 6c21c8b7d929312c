"""An extension published on the package index (torch-npu, torch-xla): the release that pairs
with one torch release, for one Python and platform.

Each release's wheel metadata says what it requires of torch (``Requires-Dist``); where it
says nothing, the vendor's rule does (``facts.extension.requires_torch``), and where it says
something, the rule must hold too (:mod:`oota.releases.needs`). A release with neither is an
unknown pairing: never a pass. Releases are read newest first, one metadata read each, and
the walk stops once a release only fits older torch releases.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from oota.releases.claims import Claim, Verdict, gap, index_claim, vendor_claim
from oota.releases.errors import BadAnswer, NotOnIndex
from oota.releases.facts import Extension
from oota.releases.index import PackageIndex
from oota.releases.needs import TorchNeed, need_of
from oota.releases.wheels import CoreMetadata, DistFile, Platform, python_allowed

RULE = "facts.extension.requires_torch"


@dataclass(frozen=True, kw_only=True, slots=True)
class Asked:
    """What is asked of the index: this torch, for this Python on this platform."""

    torch: Version
    python: Version
    platform: Platform
    known_torch: tuple[Version, ...]     # every torch release on the index


def pair_on_index(index: PackageIndex, ext: Extension, file: str, asked: Asked) -> Verdict:
    """The newest release of ``ext`` that pairs with ``asked.torch``, or why none does
    (``file``: the vendor.yaml its rule is read from, as claims show it)."""
    dist, torch = ext.distribution, asked.torch
    try:
        releases = index.releases(dist)
    except NotOnIndex:
        return gap(index_claim(f"no {dist} on the index", index.display))
    python: tuple[Claim, ...] = ()
    unknown: tuple[Claim, ...] = ()
    other: tuple[Claim, ...] = ()
    for version, files in releases.items():
        try:
            meta = index.metadata(dist, _representative(files, asked))
        except BadAnswer as exc:  # one unreadable release is a note; the walk goes on
            index.note(f"{dist} {version} skipped: {exc}")
            continue
        need = need_of(_declared(meta, asked), ext.requires_torch, version)
        said = _Said(index=index, ext=ext, file=file, version=version, need=need)
        if need.accepts(torch):
            why = _python_gap(dist, version, files, meta, asked)
            if not why:
                return Verdict(ok=True, claims=said.claims(
                    f"{dist} {version} ({need.metadata_words})"))
            python = python or (index_claim(why, index.display),)
        elif not need.known:
            unknown = unknown or said.unknown(torch)
        else:
            other = other or said.claims(
                f"no {dist} for torch {torch} (newest {version} {need.metadata_words})")
            # Extension versions follow torch versions: once a release only fits older torch
            # releases, every older one does too, so the walk stops.
            if not any(need.accepts(t) for t in (*asked.known_torch, torch) if t >= torch):
                break
    # A release that pairs with this torch but not this Python says the most; an unknown
    # pairing comes before a newer release's other torch (it might have been this one).
    return gap(*(python or unknown or other or (
        index_claim(f"no readable final release of {dist}", index.display),)))


@dataclass(frozen=True, kw_only=True, slots=True)
class _Said:
    """The claims about one release's torch need: the index's words, and the vendor's rule
    where it applies."""

    index: PackageIndex
    ext: Extension
    file: str
    version: Version
    need: TorchNeed

    def claims(self, text: str) -> tuple[Claim, ...]:
        said = index_claim(text, self.index.display)
        rule = self.ext.requires_torch
        if not self.need.rule or rule is None:
            return (said,)
        return said, vendor_claim(self.file, f"{self.ext.distribution} {self.version} requires "
                                  f"torch{self.need.rule}", RULE, rule.provenance.is_verified)

    def unknown(self, torch: Version) -> tuple[Claim, ...]:
        dist = self.ext.distribution
        return (index_claim(f"{dist} {self.version} declares no torch requirement",
                            self.index.display),
                vendor_claim(self.file, f"no rule for it: its pairing with torch {torch} is "
                             f"unknown (add {RULE})", "facts.extension"))


def _declared(meta: CoreMetadata, asked: Asked) -> str:
    """The metadata's specifier on torch for this Python and platform ("" when none)."""
    python = asked.python
    env = {"sys_platform": "linux", "platform_system": "Linux",
           "platform_machine": asked.platform.machine, "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython",
           "extra": "", "python_version": f"{python.major}.{python.minor}",
           "python_full_version": f"{python.major}.{python.minor}.0"}
    found: list[Requirement] = [r for r in meta.requires_dist
                                if canonicalize_name(r.name) == "torch"
                                and (r.marker is None or r.marker.evaluate(env))]
    return ",".join(str(r.specifier) for r in found if str(r.specifier))


def _representative(files: list[DistFile], asked: Asked) -> DistFile:
    """The file whose metadata speaks for the release: the wheel pip would pick if any."""
    return next((f for f in files if f.supports(asked.python, asked.platform)),
                next((f for f in files if f.is_wheel), files[0]))


def _python_gap(dist: str, version: Version, files: list[DistFile], meta: CoreMetadata,
                asked: Asked) -> str:
    python, platform = asked.python, asked.platform
    tag = f"cp{python.major}{python.minor}"
    if not python_allowed(meta.requires_python, python):
        return f"{dist} {version} requires Python {meta.requires_python}"
    if not any(f.supports(python, platform) for f in files):
        have = sorted({p for f in files for p in f.cpythons() if f.supports(p, platform)})
        listed = ", ".join(f"cp{p.major}{p.minor}" for p in have) or "none"
        return f"{dist} {version} has no {tag} wheel (has: {listed})"
    return ""
