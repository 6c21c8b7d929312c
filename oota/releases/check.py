"""Release check: is there a working vendor stack for the newest PyTorch release?

The package index is the source of truth for torch and for extensions published there
(torch-npu, ...): the newest final, non-yanked torch release N and N-1 (the newest patch of
the previous minor), the CPython versions torch ships Linux wheels for, and each extension's
pairing as its wheels declare it (``Requires-Dist: torch...``, ``Requires-Python``, wheel
tags), held to the vendor's rule where it has one and taken from that rule where the wheels
declare nothing (torch-xla; :mod:`oota.releases.onindex`), on every Linux platform the
extension publishes wheels for (torch-npu: x86_64 and aarch64). Vendors whose stack is not
on the index (``facts.torch_index: data`` or ``facts.extension.index: data``) are answered
from their ``facts.compat`` table; an extension compiled from source in every cell
(``facts.extension.index: source``) pairs with every torch within the vendor's
``facts.python``.

Every row carries its claims, and each claim says where it comes from: the index, or the
vendor's data (with the table row, and UNVERIFIED where the vendor marks it
``verified: false``), so a pairing read from a table never passes for an index fact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from packaging.version import Version

from oota.config.matrix import Matrix
from oota.config.provenance import Fact
from oota.config.yamlsrc import did_you_mean
from oota.errors import InputError
from oota.releases.claims import Claim, Verdict, gap, index_claim, vendor_claim
from oota.releases.companions import Companions, check_companions
from oota.releases.errors import IndexProblem, NotOnIndex
from oota.releases.facts import Pairing, VendorFacts, vendor_facts
from oota.releases.http import Http
from oota.releases.index import DEFAULT_INDEX, PackageIndex
from oota.releases.onindex import Asked, pair_on_index
from oota.releases.wheels import LINUX_X86_64, PLATFORMS, Platform, python_allowed


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchRelease:
    version: Version
    requires_python: str
    wheels: tuple[tuple[Platform, tuple[Version, ...]], ...]   # CPythons with a wheel, per platform

    def pythons_on(self, platform: Platform) -> tuple[Version, ...]:
        return next((p for plat, p in self.wheels if plat == platform), ())

    @property
    def pythons(self) -> tuple[Version, ...]:
        return self.pythons_on(LINUX_X86_64)


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    vendor: str
    torch: Version
    python: Version
    platforms: tuple[Platform, ...]  # where this verdict holds (one row per differing verdict)
    ok: bool
    claims: tuple[Claim, ...]        # what pairs (ok) or why nothing does (gap)

    @property
    def platform(self) -> str:
        return "+".join(p.machine for p in self.platforms)

    @property
    def detail(self) -> str:
        return "; ".join(c.sentence for c in self.claims)

    @property
    def origins(self) -> str:
        return " + ".join(dict.fromkeys(c.label for c in self.claims))

    @property
    def sentence(self) -> str:
        return f"{self.vendor} py{self.python} {self.platform}: {self.detail}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ReleaseCheck:
    index: str                       # redacted: never a password
    current: Version
    previous: Version | None
    detected: bool                   # False when --torch named the release
    torch: tuple[TorchRelease, ...]
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = field(default=())
    companions: Companions | None = None         # None: no checked vendor names one
    unverified: tuple[Fact, ...] = ()            # the checked vendors' unverified facts

    @property
    def gaps(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if not r.ok)

    def supported(self, vendor: str, torch: Version) -> bool:
        return any(r.ok for r in self.rows if r.vendor == vendor and r.torch == torch)


# -- N and N-1 -------------------------------------------------------------------------------
def newest_and_previous(versions: Iterable[Version]) -> tuple[Version, Version | None]:
    """N = the newest version; N-1 = the newest patch of the minor before N's."""
    ordered = sorted(versions, reverse=True)
    if not ordered:
        raise NotOnIndex("no final, non-yanked torch release on the index")
    return ordered[0], previous_of(ordered[0], ordered)


def previous_of(target: Version, versions: Iterable[Version]) -> Version | None:
    older = sorted((v for v in versions if v.release[:2] < target.release[:2]), reverse=True)
    return older[0] if older else None


def resolve_release(text: str, known: Iterable[Version], where: str) -> Version:
    """The release ``--torch`` means: ``2.15`` is the newest 2.15.x on the index, ``2.15.0``
    that release; always the index's own spelling, so ``2.15`` is never written anywhere."""
    try:
        wanted = Version(text)
    except ValueError:  # InvalidVersion, or more digits than int() reads
        raise InputError(f"--torch {text}: not a version; write it like 2.15 or 2.15.0") from None
    known = sorted(known, reverse=True)
    if len(wanted.release) < 3 and str(wanted) == wanted.base_version:
        matches = [v for v in known if v.release[: len(wanted.release)] == wanted.release]
    else:
        matches = [v for v in known if v == wanted]
    if not matches:
        newest = f"; newest there: {known[0]}" if known else ""
        raise NotOnIndex(f"--torch {text}: no final, non-yanked torch {text} on {where}{newest}")
    return matches[0]


def torch_release(index: PackageIndex, version: Version) -> TorchRelease:
    files = index.releases("torch").get(version)
    if not files:
        raise NotOnIndex(f"torch {version} is not a final, non-yanked release on "
                         f"{index.display}")
    wheels = tuple((plat, tuple(sorted({p for f in files if f.is_wheel for p in f.cpythons()
                                        if f.supports(p, plat)})))
                   for plat in PLATFORMS)
    requires = next((f.requires_python for f in files if f.requires_python), "")
    return TorchRelease(version=version, requires_python=requires, wheels=wheels)


# -- the check -------------------------------------------------------------------------------
def release_check(matrix: Matrix, *, index_url: str = DEFAULT_INDEX, torch: str | None = None,
                  vendors: list[str] | None = None, http: Http | None = None) -> ReleaseCheck:
    """Detect (or take) torch N, derive N-1, and check every vendor of the matrix for both."""
    names = checked_vendors(matrix, vendors)
    facts = [vendor_facts(matrix.vendors[name].vendor) for name in names]
    index = PackageIndex(index_url, http=http)
    known = tuple(index.releases("torch"))
    if not known:
        raise IndexProblem(f"{index.page('torch')}: lists no final, non-yanked torch release")
    if torch:
        current = resolve_release(torch, known, index.display)
        previous = previous_of(current, known)
    else:
        current, previous = newest_and_previous(known)
    releases = tuple(torch_release(index, v) for v in (current, previous) if v is not None)
    rows = [row for rel in releases for f in facts for row in check_vendor(index, f, rel, known)]
    companions = check_companions(matrix, names, index, (current, previous))
    return ReleaseCheck(index=index.display, current=current, previous=previous,
                        detected=torch is None, torch=releases, rows=tuple(rows),
                        notes=tuple(dict.fromkeys([*index.notes, *index.http.notes])),
                        companions=companions,
                        unverified=tuple(f for name in names
                                         for f in matrix.vendors[name].vendor.facts.unverified))


def checked_vendors(matrix: Matrix, vendors: list[str] | None) -> list[str]:
    """The vendors to check (all of the matrix when none are named); unknown names are an
    input error before any network access."""
    unknown = [n for n in vendors or () if n not in matrix.vendors]
    if unknown:
        raise InputError("\n".join(f"--vendor {n}: not in {matrix.file}; "
                                   f"{did_you_mean(n, tuple(matrix.vendors))}" for n in unknown))
    return list(vendors or matrix.vendors)


def check_vendor(index: PackageIndex, facts: VendorFacts, torch: TorchRelease,
                 known_torch: tuple[Version, ...]) -> list[Row]:
    platforms = _platforms(index, facts)
    pythons = sorted({p for plat in platforms for p in torch.pythons_on(plat)
                      if python_allowed(facts.python, p)})
    rows = []
    for python in pythons:
        verdicts = [(plat, _verdict(index, facts, torch, python, plat, known_torch))
                    for plat in platforms]
        for verdict in dict.fromkeys(v for _, v in verdicts):
            where = tuple(plat for plat, v in verdicts if v == verdict)
            rows.append(Row(vendor=facts.vendor, torch=torch.version, python=python,
                            platforms=where, ok=verdict.ok, claims=verdict.claims))
    return rows


def _platforms(index: PackageIndex, facts: VendorFacts) -> tuple[Platform, ...]:
    """Linux x86_64, plus every other platform the vendor's extension publishes wheels for."""
    if facts.extension is None or facts.extension.index != "pypi":
        return (LINUX_X86_64,)
    try:
        files = index.files(facts.extension.distribution)
    except NotOnIndex:
        return (LINUX_X86_64,)
    return tuple(p for p in PLATFORMS if p == LINUX_X86_64 or any(f.on(p) for f in files))


def _verdict(index: PackageIndex, facts: VendorFacts, torch: TorchRelease, python: Version,
             platform: Platform, known_torch: tuple[Version, ...]) -> Verdict:
    tag = f"cp{python.major}{python.minor}"
    if python not in torch.pythons_on(platform):
        return gap(_index(f"torch {torch.version} has no {tag} wheel", index))
    ext = facts.extension
    if ext is not None and ext.index == "pypi":
        return pair_on_index(index, ext, facts.file, Asked(
            torch=torch.version, python=python, platform=platform, known_torch=known_torch))
    if ext is not None and ext.index == "source":
        return _pair_from_source(facts, torch.version, python)
    if ext is not None or facts.torch_index == "data":
        return _pair_from_data(facts, torch.version, python)
    wheel = _index(f"torch {torch.version} has a {tag} wheel", index)
    if not facts.compat:
        return Verdict(ok=True, claims=(wheel,))
    paired = _pair_from_data(facts, torch.version, python)  # torch from the index, table decides
    return Verdict(ok=True, claims=(wheel, *paired.claims)) if paired.ok else paired


def _index(text: str, index: PackageIndex) -> Claim:
    return index_claim(text, index.display)



# -- the vendor's own data -------------------------------------------------------------------
def _vendor(facts: VendorFacts, text: str, where: str, verified: bool = True) -> Claim:
    return vendor_claim(facts.file, text, where, verified)


def _pair_from_source(facts: VendorFacts, torch: Version, python: Version) -> Verdict:
    """An extension compiled from source in every cell pairs with whatever torch it is built
    against; only its declared Python range limits it."""
    dist = facts.extension.distribution if facts.extension else facts.vendor
    if not python_allowed(facts.python, python):
        return gap(_vendor(facts, f"{dist} supports Python {facts.python}", "facts.python"))
    return Verdict(ok=True, claims=(_vendor(
        facts, f"{dist} is built from source against torch {torch} in each cell",
        "facts.extension"),))


def _compat_matches(entry: Pairing, torch: Version) -> bool:
    try:
        pinned = Version(entry.torch)
    except ValueError:  # InvalidVersion, or more digits than int() reads
        return False
    # "2.9" in a vendor table means any 2.9.x; "2.9.1" means exactly that release.
    return torch.release[: len(pinned.release)] == pinned.release and not torch.local


def _pair_from_data(facts: VendorFacts, torch: Version, python: Version) -> Verdict:
    if not facts.compat:
        return gap(_vendor(facts, f"no pairing data for torch {torch}", "facts.compat (empty)"))
    entries = [e for e in facts.compat if _compat_matches(e, torch)]
    if not entries:
        return gap(_vendor(facts, _no_pairing(facts, torch), "facts.compat"))
    entry = entries[0]
    label = _label(facts, entries)
    where = f"facts.compat[{entry.position}]"
    spec = entry.python or facts.python
    if not python_allowed(spec, python):
        return gap(_vendor(facts, f"{label} for torch {entry.torch} supports Python {spec}",
                            where, entry.verified))
    return Verdict(ok=True, claims=(_vendor(facts, f"{label} for torch {entry.torch}", where,
                                            all(e.verified for e in entries)),))


def _no_pairing(facts: VendorFacts, torch: Version) -> str:
    newest = facts.compat[0]
    if facts.extension is not None:
        dist = facts.extension.distribution
        return f"no {dist} for torch {torch} (newest {dist} {newest.extension} pairs torch " \
               f"{newest.torch})"
    if facts.toolkit_name:
        paired = f" with {facts.toolkit_name} {newest.toolkit}" if newest.toolkit else ""
        return f"no {facts.toolkit_name} pairing for torch {torch} (newest: torch " \
               f"{newest.torch}{paired})"
    return f"no {facts.build_name} for torch {torch} (newest: torch {newest.torch})"


def _label(facts: VendorFacts, entries: list[Pairing]) -> str:
    """What the table pairs this torch with, in words: "torch-npu 2.14.0, CANN 9.2.0",
    "CUDA 13.2, 13.0", "Intel XPU build (toolkit 2025.3)"; never 'None'."""
    entry = entries[0]
    build = f" (build {entry.build})" if entry.build else ""
    if facts.extension is not None:
        toolkit = f", {facts.build_name} {entry.toolkit}" if entry.toolkit else ""
        return f"{facts.extension.distribution} {entry.extension}{toolkit}{build}".strip()
    if facts.toolkit_name:
        versions = [e.toolkit for e in entries if e.toolkit]
        return f"{facts.toolkit_name} {', '.join(versions)}{build}" if versions \
            else f"{facts.display} build{build}"
    return f"{facts.build_name} (toolkit {entry.toolkit}){build}" if entry.toolkit \
        else f"{facts.build_name}{build}"
