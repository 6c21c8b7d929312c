"""Companions read from the index: for each torch release, the companion release (torchvision,
...) its metadata pairs with it, by the companion's ``Requires-Dist`` on torch.

The rule, in order:

1. a release that pins this torch exactly (``torch==2.12.1``);
2. else, among the releases whose requirement accepts this torch, the one uploaded the same day
   as it (PyTorch publishes a torch release and its companions together: torchvision 0.29.2
   requires ``torch>=2.14.0`` and came out with torch 2.15.0, 0.29.1 with 2.14.1);
3. else the newest release that accepts it (what ``pip install torch==X torchvision`` picks).

The result is the companions cache (:mod:`oota.config.companions`): ``release-check --update``
writes it, ``release-check`` compares the file with a fresh reading.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
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
)
from oota.config.matrix import Matrix, torch_releases
from oota.releases.errors import BadAnswer, NotOnIndex
from oota.releases.index import PackageIndex
from oota.releases.wheels import LINUX_X86_64, DistFile

# The interpreter the requirement's markers are evaluated for: companions state one torch
# requirement for every Python (a marker-free Requires-Dist); 3.12 is one every release has.
_ENV = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
        "os_name": "posix", "implementation_name": "cpython",
        "platform_python_implementation": "CPython", "extra": "", "python_version": "3.12",
        "python_full_version": "3.12.0"}


def torch_requirement(requires: Iterable[Requirement]) -> str:
    """The Requires-Dist on torch that applies on Linux x86_64, as a specifier ("" none)."""
    found = [r for r in requires if canonicalize_name(r.name) == "torch"
             and (r.marker is None or r.marker.evaluate(_ENV))]
    return ",".join(str(r.specifier) for r in found if str(r.specifier))


def read_companion(index: PackageIndex, name: str, torch: Iterable[Version]) -> Companion:
    """Each release of ``name`` down to the oldest that can pair with the oldest of ``torch``,
    with its torch requirement, and the pair for every torch release."""
    wanted = sorted(set(torch), reverse=True)
    uploads = _upload_days(index.releases("torch"))
    requires: dict[str, str] = {}
    uploaded: dict[str, str] = {}
    for version, files in index.releases(name).items():
        try:
            meta = index.metadata(name, _representative(files))
        except BadAnswer as exc:  # one unreadable release is a note; the walk goes on
            index.note(f"{name} {version} skipped: {exc}")
            continue
        requires[str(version)] = torch_requirement(meta.requires_dist)
        uploaded[str(version)] = _day(files)
        spec = SpecifierSet(requires[str(version)])
        # Companion versions follow torch's: once one fits only older torch releases than
        # every wanted one, the older companions do too.
        if wanted and str(spec) and all(not spec.contains(t, prereleases=True) and
                                        _below(spec, t) for t in wanted):
            break
    pairs = {str(t): pair for t in wanted
             if (pair := choose(requires, uploaded, t, uploads.get(t, ""))) is not None}
    return Companion(name=name, requires=MappingProxyType(requires),
                     pairs=MappingProxyType(pairs))


def choose(requires: Mapping[str, str], uploaded: Mapping[str, str], torch: Version,
           torch_day: str) -> Pair | None:
    """The companion release paired with ``torch`` by the module's rule; None when no release
    accepts it."""
    accepting = sorted((v for v, spec in requires.items()
                        if SpecifierSet(spec).contains(torch, prereleases=True)),
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
    spec = requires[accepting[0]] or "no torch requirement"
    return Pair(version=accepting[0], why=f"the newest that allows torch {torch} ({spec})")


def read_cache(index: PackageIndex, names: Iterable[str], torch: Iterable[Version],
               today: dt.date | None = None) -> CompanionCache:
    """A fresh cache for ``names`` and the ``torch`` releases, read from ``index``."""
    releases = tuple(torch)
    companions = {}
    for name in sorted(set(names)):
        try:
            companions[name] = read_companion(index, name, releases)
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
    fresh one did not ask about (a release that left the matrix may come back)."""
    companions = dict(cached.companions) if cached else {}
    for name, companion in fresh.companions.items():
        old = companions.get(name)
        companions[name] = Companion(
            name=name, requires=MappingProxyType({**(old.requires if old else {}),
                                                  **companion.requires}),
            pairs=MappingProxyType({**(old.pairs if old else {}), **companion.pairs}))
    return CompanionCache(file=cached.file if cached else fresh.file, index=fresh.index,
                          read=fresh.read, companions=MappingProxyType(companions))


def _representative(files: list[DistFile]) -> DistFile:
    """A Linux x86_64 wheel if the release has one (its metadata is what pip reads there)."""
    return next((f for f in files if f.is_wheel and f.on(LINUX_X86_64)),
                next((f for f in files if f.is_wheel), files[0]))


def _day(files: list[DistFile]) -> str:
    days = sorted(f.uploaded[:10] for f in files if f.uploaded)
    return days[0] if days else ""


def _upload_days(releases: Mapping[Version, list[DistFile]]) -> dict[Version, str]:
    return {version: _day(files) for version, files in releases.items()}


def _below(spec: SpecifierSet, torch: Version) -> bool:
    """Does ``spec`` only accept releases older than ``torch``?"""
    uppers = [s for s in spec if s.operator in ("==", "===", "<", "<=", "~=")]
    return bool(uppers) and all(Version(s.version.rstrip(".*")) < torch for s in uppers)


def check_companions(matrix: Matrix, vendors: Iterable[str], index: PackageIndex,
                     extra: Iterable[Version | None]) -> tuple[CompanionCache | None,
                                                                tuple[str, ...]]:
    """The companions the checked vendors name, read from ``index`` for every torch release of
    their cells and ``extra`` (N and N-1), and where vendors/companions.yaml differs."""
    chosen = [matrix.vendors[name] for name in vendors if matrix.vendors[name].vendor.companions]
    if not chosen:
        return None, ()
    names = {n for vm in chosen for n in vm.vendor.companions}
    torch = {t for vm in chosen for t in torch_releases(vm)} | {t for t in extra if t}
    file = cache_path(matrix.root / "vendors")
    cached = load_cache(file, f"vendors/{file.name}") if file.is_file() else None
    fresh = read_cache(index, names, torch)
    return merged(cached, fresh), differences(cached, fresh)
