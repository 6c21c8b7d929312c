"""Companions read from the index: for each torch release, the companion release (torchvision,
...) its metadata pairs with it, by the companion's ``Requires-Dist`` on torch.

The rule, in order:

1. a release that pins this torch exactly (``torch==2.12.1``);
2. else, among the releases whose requirement accepts this torch, the one uploaded the same day
   as it (PyTorch publishes a torch release and its companions together: torchvision 0.29.2
   requires ``torch>=2.14.0`` and came out with torch 2.15.0, 0.29.1 with 2.14.1);
3. else the newest release that accepts it (what ``pip install torch==X torchvision`` picks).

A release whose metadata declares no torch requirement pairs with no torch: it is never
read as "any torch". Where the vendor that names the companion has a rule for it (the same
distribution as its ``facts.extension``, with ``requires_torch``), the rule narrows what the
metadata declares and bounds the walk over releases; a companion none of whose releases
declares anything (torch_xla) is paired by the vendor's own data (its typed ``companions``
table, held to that rule), said so, and never written to the cache.

The result is the companions cache (:mod:`oota.config.companions`): ``release-check --update``
writes it, ``release-check`` compares the file with a fresh reading. An update that changes
no pair leaves the file as it is, its date included.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from oota.config.companions import (
    Companion,
    CompanionCache,
    Pair,
    cache_path,
    load_cache,
    series_of,
)
from oota.config.matrix import Matrix, VendorMatrix, torch_releases
from oota.config.pairing import TorchRule
from oota.releases.errors import BadAnswer, NotOnIndex
from oota.releases.index import PackageIndex
from oota.releases.needs import need_of
from oota.releases.wheels import LINUX_X86_64, DistFile

# The interpreter the requirement's markers are evaluated for: companions state one torch
# requirement for every Python (a marker-free Requires-Dist); 3.12 is one every release has.
_ENV = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
        "os_name": "posix", "implementation_name": "cpython",
        "platform_python_implementation": "CPython", "extra": "", "python_version": "3.12",
        "python_full_version": "3.12.0"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Companions:
    """What release-check found of the checked vendors' companions."""

    cache: CompanionCache                    # the cache to write
    changed: bool = True                     # False: no pair differs from the file's
    compared: tuple[str, ...] = ()           # the companions compared with the index
    drift: tuple[str, ...] = ()              # where vendors/companions.yaml differs
    vendor_data: tuple[str, ...] = ()        # pairs from the vendors' own data, said so


def torch_requirement(requires: Iterable[Requirement]) -> str:
    """The Requires-Dist on torch that applies on Linux x86_64, as a specifier ("" none)."""
    found = [r for r in requires if canonicalize_name(r.name) == "torch"
             and (r.marker is None or r.marker.evaluate(_ENV))]
    return ",".join(str(r.specifier) for r in found if str(r.specifier))


def read_companion(index: PackageIndex, name: str, torch: Iterable[Version],
                   rule: TorchRule | None = None) -> Companion:
    """Each release of ``name`` down to the oldest that can pair with the oldest of ``torch``,
    with its torch requirement, and the pair for every torch release (``rule``: the vendor's
    rule for this distribution, which each declared requirement must meet too)."""
    wanted = sorted(set(torch), reverse=True)
    uploads = _upload_days(index.releases("torch"))
    requires: dict[str, str] = {}
    accepted: dict[str, str] = {}    # what pairs: the declared requirement, held to the rule
    uploaded: dict[str, str] = {}
    for version, files in index.releases(name).items():
        try:
            meta = index.metadata(name, _representative(files))
        except BadAnswer as exc:  # one unreadable release is a note; the walk goes on
            index.note(f"{name} {version} skipped: {exc}")
            continue
        need = need_of(torch_requirement(meta.requires_dist), rule, version)
        requires[str(version)] = need.declared
        accepted[str(version)] = str(need.specifier) if need.declared else ""
        uploaded[str(version)] = _day(files)
        # Companion versions follow torch's: once one fits only older torch releases than
        # every wanted one, the older companions do too.
        if wanted and need.only_older(wanted):
            break
    pairs = {str(t): pair for t in wanted
             if (pair := choose(accepted, uploaded, t, uploads.get(t, ""))) is not None}
    return Companion(name=name, requires=MappingProxyType(requires),
                     pairs=MappingProxyType(pairs))


def choose(requires: Mapping[str, str], uploaded: Mapping[str, str], torch: Version,
           torch_day: str) -> Pair | None:
    """The companion release paired with ``torch`` by the module's rule; None when no release
    accepts it. A release that declares no requirement ("") accepts no torch."""
    accepting = sorted((v for v, spec in requires.items()
                        if spec and SpecifierSet(spec).contains(torch, prereleases=True)),
                       key=Version, reverse=True)
    if not accepting:
        return None
    for version in accepting:
        if any(s.operator in ("==", "===") and Version(s.version) == torch
               for s in SpecifierSet(requires[version]) if "*" not in s.version):
            return Pair(version=version, why=f"pins torch=={torch}")
    same_day = [v for v in accepting if torch_day and uploaded.get(v) == torch_day]
    if same_day:
        return Pair(version=same_day[0], why=f"released with torch {torch} ({torch_day})")
    return Pair(version=accepting[0], why=f"the newest that allows torch {torch} "
                f"({requires[accepting[0]]})")


@dataclass(frozen=True, kw_only=True, slots=True)
class Wanted:
    """One companion to read: the torch releases it is paired for (those of the vendors that
    name it, and N and N-1), and the rule one of those vendors has for it."""

    torch: frozenset[Version]
    rule: TorchRule | None = None


def read_cache(index: PackageIndex, wanted: Mapping[str, Wanted],
               today: dt.date | None = None) -> CompanionCache:
    """A fresh cache of each wanted companion, read from ``index``."""
    companions = {}
    for name in sorted(wanted):
        try:
            companions[name] = read_companion(index, name, wanted[name].torch,
                                              wanted[name].rule)
        except NotOnIndex as exc:  # a mirror without it: nothing to compare, said once
            index.note(f"{name}: not compared with vendors/companions.yaml ({exc})")
    return CompanionCache(file="the index", index=index.display,
                          read=(today or dt.date.today()).isoformat(),
                          companions=MappingProxyType(companions))


def differences(cached: CompanionCache | None, fresh: CompanionCache) -> tuple[str, ...]:
    """Where the cache says another thing than the index now does, one line each."""
    out = []
    for name, companion in fresh.companions.items():
        old = cached.companions.get(name) if cached else None
        for torch, pair in companion.pairs.items():
            was = old.pairs.get(torch) if old else None
            if was is None:
                out.append(f"{name} for torch {torch}: not in the cache; the index pairs "
                           f"{pair.version} ({pair.why})")
            elif was.version != pair.version:
                out.append(f"{name} for torch {torch}: the cache says {was.version} "
                           f"({cached.read if cached else ''}), the index now {pair.version} "
                           f"({pair.why})")
    return tuple(out)


def merged(cached: CompanionCache | None, fresh: CompanionCache) -> CompanionCache:
    """The cache to write: the fresh reading, keeping the cached pairs of torch releases the
    fresh one did not ask about (a release that left the matrix may come back). A companion
    no release of which declares a torch requirement has nothing of the index's to keep; a
    reading that changes nothing leaves the cache as it was, date and all."""
    companions = dict(cached.companions) if cached else {}
    for name, companion in fresh.companions.items():
        if not declares(companion):
            continue
        old = companions.get(name)
        companions[name] = Companion(
            name=name, requires=MappingProxyType({**(old.requires if old else {}),
                                                  **companion.requires}),
            pairs=MappingProxyType({**(old.pairs if old else {}), **companion.pairs}))
    if cached is not None and _same(companions, cached.companions):
        return cached
    return CompanionCache(file=cached.file if cached else fresh.file, index=fresh.index,
                          read=fresh.read, companions=MappingProxyType(companions))


def declares(companion: Companion) -> bool:
    """Does any release read declare a torch requirement?"""
    return any(companion.requires.values())


def _same(mine: Mapping[str, Companion], theirs: Mapping[str, Companion]) -> bool:
    return mine.keys() == theirs.keys() and all(
        dict(mine[n].requires) == dict(theirs[n].requires)
        and dict(mine[n].pairs) == dict(theirs[n].pairs) for n in mine)


def _representative(files: list[DistFile]) -> DistFile:
    """A Linux x86_64 wheel if the release has one (its metadata is what pip reads there)."""
    return next((f for f in files if f.is_wheel and f.on(LINUX_X86_64)),
                next((f for f in files if f.is_wheel), files[0]))


def _day(files: list[DistFile]) -> str:
    days = sorted(f.uploaded[:10] for f in files if f.uploaded)
    return days[0] if days else ""


def _upload_days(releases: Mapping[Version, list[DistFile]]) -> dict[Version, str]:
    return {version: _day(files) for version, files in releases.items()}


def check_companions(matrix: Matrix, vendors: Iterable[str], index: PackageIndex,
                     extra: Iterable[Version | None]) -> Companions | None:
    """The companions the checked vendors name, each read from ``index`` for the torch
    releases of the cells of the vendors that name it and ``extra`` (N and N-1); where
    vendors/companions.yaml differs; and what the vendors' own data pairs where no release
    declares a torch requirement."""
    chosen = [matrix.vendors[name] for name in vendors if matrix.vendors[name].vendor.companions]
    if not chosen:
        return None
    wanted = _wanted(chosen, [t for t in extra if t])
    file = cache_path(matrix.root / "vendors")
    cached = load_cache(file, f"vendors/{file.name}") if file.is_file() else None
    fresh = read_cache(index, wanted)
    cache = merged(cached, fresh)
    return Companions(cache=cache, changed=cache is not cached,
                      drift=differences(cached, fresh),
                      compared=tuple(n for n, c in fresh.companions.items() if declares(c)),
                      vendor_data=tuple(line for name, c in fresh.companions.items()
                                        if not declares(c)
                                        for line in vendor_pairs(name, c, chosen, wanted[name])))


def _wanted(chosen: list[VendorMatrix], extra: list[Version]) -> dict[str, Wanted]:
    out: dict[str, Wanted] = {}
    for vm in chosen:
        ext = vm.vendor.facts.extension
        for name in vm.vendor.companions:
            had = out.get(name, Wanted(torch=frozenset(extra)))
            rule = ext.requires_torch if ext is not None and ext.names(name) else None
            out[name] = Wanted(torch=had.torch | set(torch_releases(vm)), rule=had.rule or rule)
    return out


def vendor_pairs(name: str, companion: Companion, chosen: list[VendorMatrix],
                 wanted: Wanted) -> list[str]:
    """Where no release of ``name`` declares a torch requirement, what each vendor naming it
    pairs, from its own data: its typed table (``companions.<name>``), else its rule for the
    distribution; and the torch releases nothing pairs. One line per vendor."""
    read = ", ".join(companion.requires) or "none"
    lines = []
    for vm in (vm for vm in chosen if name in vm.vendor.companions):
        ext = vm.vendor.facts.extension
        rule = ext.requires_torch if ext is not None and ext.names(name) else None
        found, none = [], []
        for torch in sorted(wanted.torch, reverse=True):
            pair = _vendor_pair(name, vm.vendor.companions[name], rule, companion, torch)
            if pair:
                found.append(f"torch {torch} -> {pair}")
            else:
                none.append(str(torch))
        lines.append(f"{name}: no release read from the index declares a torch requirement "
                     f"({read}); vendors/{vm.vendor.name}/vendor.yaml pairs "
                     + ("; ".join(found) or "none")
                     + (f"; nothing for torch {', '.join(none)}" if none else "")
                     + " (vendor data, not written to vendors/companions.yaml)")
    return lines


def _vendor_pair(name: str, typed: Mapping[str, str], rule: TorchRule | None,
                 companion: Companion, torch: Version) -> str:
    series = series_of(typed, torch)
    if series is not None:
        return f"{typed[series]} (companions.{name}[\"{series}\"])"
    fits = [v for v in companion.requires
            if rule is not None and rule.for_release(Version(v)).contains(torch, prereleases=True)]
    newest = max(fits, key=Version, default=None)
    return f"{newest} (facts.extension.requires_torch)" if newest else ""
