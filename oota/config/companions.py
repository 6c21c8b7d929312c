"""The companions cache: which release of each companion (torchvision, ...) pairs with which
torch release, as the package index's metadata says (each companion's ``Requires-Dist`` on
torch), kept in ``vendors/companions.yaml`` with the index and the date it was read.

``release-check --update`` writes the file (:mod:`oota.releases.companions` derives it);
``release-check`` compares it with the index. A vendor names its companions in vendor.yaml
(``companions: [torchvision]``) and takes the cached pairs; a hand-typed table
(``companions: {torchvision: {"2.12": "0.27.1"}}``) is still read, and a pair that the
metadata contradicts (0.27.0 requires torch==2.12.0, the matrix has torch 2.12.1) is a located
error that names both. Pure: no network, no Docker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from oota.config.fields import Fields
from oota.config.yamlsrc import Doc, load_yaml
from oota.project import command_name

CACHE_FILE = "companions.yaml"
CACHE_VERSION = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Pair:
    """The companion release paired with one torch release, and the metadata's reason."""

    version: str
    why: str                         # "pins torch==2.12.1", "released with torch 2.15.0 ..."


@dataclass(frozen=True, kw_only=True, slots=True)
class Companion:
    name: str
    requires: Mapping[str, str]      # companion release -> its Requires-Dist on torch ("" none)
    pairs: Mapping[str, Pair]        # torch release -> the paired companion release

    def allows(self, version: str, torch: Version) -> bool | None:
        """Does ``version``'s metadata accept ``torch``? None when the cache lacks it."""
        if version not in self.requires:
            return None
        return SpecifierSet(self.requires[version]).contains(torch, prereleases=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class CompanionCache:
    file: str                        # as messages show it: vendors/companions.yaml
    index: str                       # where the metadata was read (redacted URL)
    read: str                        # the date it was read, YYYY-MM-DD
    companions: Mapping[str, Companion] = field(
        default_factory=lambda: MappingProxyType({}))

    @property
    def origin(self) -> str:
        return f"{self.file}: {self.index} metadata, read {self.read}"


def cache_path(vendors_dir: Path) -> Path:
    return vendors_dir / CACHE_FILE


def load_cache(file: Path, shown: str) -> CompanionCache:
    """The cache, every problem of the file reported at once (MatrixError)."""
    doc = load_yaml(file, shown)
    top = Fields(doc, (), doc.data, allowed=("version", "index", "read", "companions"),
                 required=("version", "index", "read", "companions"))
    if top.ok and top.raw("version") != CACHE_VERSION:
        doc.error(("version",), f"unsupported version {top.raw('version')!r}",
                  f"regenerate it: {regenerate(file)}")
    companions = {name: _companion(doc, ("companions", name), name, value, regenerate(file))
                  for name, value in top.mapping("companions").items()}
    doc.raise_if_problems()
    return CompanionCache(file=shown, index=top.str("index"), read=str(top.raw("read", "")),
                          companions=MappingProxyType(companions))


def _companion(doc: Doc, path: tuple[str, ...], name: str, value: Any,
               command: str) -> Companion:
    f = Fields(doc, path, value, allowed=("requires", "pairs"), required=("requires", "pairs"))
    requires = f.str_map("requires")
    for version, spec in requires.items():
        try:
            Version(version)
            SpecifierSet(spec)
        except (ValueError, InvalidSpecifier):
            doc.error(path + ("requires", version), f"'{version}: {spec}' is not a version "
                      "and a specifier", f"regenerate the file: {command}")
    pairs = {}
    for torch, entry in f.mapping("pairs").items():
        p = Fields(doc, path + ("pairs", torch), entry, allowed=("version", "why"),
                   required=("version",))
        pairs[str(torch)] = Pair(version=p.str("version"), why=p.str("why"))
        if pairs[str(torch)].version not in requires:
            doc.error(path + ("pairs", torch), f"{name} {pairs[str(torch)].version} has no "
                      "entry under requires", f"regenerate the file: {command}")
    return Companion(name=name, requires=MappingProxyType(requires),
                     pairs=MappingProxyType(pairs))


def regenerate(file: Path) -> str:
    """The command that writes the companions file ``file`` (vendors/companions.yaml) again,
    as the user of its project types it."""
    return f"{command_name(file.parent.parent)} release-check --update"


def dump_cache(cache: CompanionCache, file: Path) -> str:
    """The text of the companions file ``file`` (the banner says how it is made, with the
    command of its project); stable order, newest first."""
    lines = [f"# Generated by `{regenerate(file)}`: do not edit by hand.",
             "# Which companion release pairs with each torch release, read from the index's",
             "# metadata (each companion's Requires-Dist on torch, Linux x86_64 wheel).",
             f"# `{command_name(file.parent.parent)} release-check` compares it with the index "
             "(oota/config/companions.py).",
             f"version: {CACHE_VERSION}", f"index: {cache.index}", f'read: "{cache.read}"',
             "companions:"]
    for name in sorted(cache.companions):
        companion = cache.companions[name]
        lines += [f"  {name}:", "    requires:"]
        for version in _newest_first(companion.requires):
            lines.append(f'      "{version}": "{companion.requires[version]}"')
        lines.append("    pairs:")
        for torch in _newest_first(companion.pairs):
            pair = companion.pairs[torch]
            lines.append(f'      "{torch}": {{version: "{pair.version}", why: "{pair.why}"}}')
    return "\n".join(lines) + "\n"


def _newest_first(keys: Iterable[str]) -> list[str]:
    return sorted(keys, key=Version, reverse=True)


# -- a vendor's companions -------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class Resolved:
    pairs: Mapping[str, Mapping[str, str]]   # name -> torch release or series -> version
    problems: tuple[str, ...]                # each names both the typed pair and the metadata


def resolve(vendor: str, declared: Mapping[str, Mapping[str, str]], torch: Iterable[Version],
            cache: CompanionCache | None) -> Resolved:
    """The pairs a vendor's cells use: the hand-typed ones it declares (each checked against
    the metadata for every torch release of its matrix that the series covers), the cache's
    for every other torch release (one the cache lacks is left out)."""
    releases = sorted(set(torch), reverse=True)
    pairs: dict[str, Mapping[str, str]] = {}
    problems: list[str] = []
    for name, typed in declared.items():
        companion = cache.companions.get(name) if cache else None
        merged = dict(typed)
        for release in releases:
            series = series_of(typed, release)
            if series is not None:
                problems += _typed_problem(vendor, name, series, typed[series], release,
                                           companion, cache)
            elif companion is not None and str(release) in companion.pairs:
                merged[str(release)] = companion.pairs[str(release)].version
            # else: a cell that needs it says so (oota.plan.Cell.format), and release-check,
            # which loads this matrix to fill the cache, can run.
        pairs[name] = MappingProxyType(merged)
    return Resolved(pairs=MappingProxyType(pairs), problems=tuple(problems))


def series_of(typed: Mapping[str, str], torch: Version) -> str | None:
    """The most specific typed series covering ``torch`` ('2.14' covers 2.14.x)."""
    best: str | None = None
    for series in typed:
        try:
            release = Version(series).release
        except ValueError:  # reported by the vendor's own checks
            continue
        if torch.release[:len(release)] == release \
                and (best is None or len(release) > len(Version(best).release)):
            best = series
    return best


def _typed_problem(vendor: str, name: str, series: str, version: str, torch: Version,
                   companion: Companion | None, cache: CompanionCache | None) -> list[str]:
    if companion is None or cache is None:
        return []
    allowed = companion.allows(version, torch)
    if allowed is None or allowed:
        return []
    pair = companion.pairs.get(str(torch))
    paired = f"; the index pairs torch {torch} with {name} {pair.version} ({pair.why})" \
        if pair else ""
    return [f"vendors/{vendor}/vendor.yaml companions.{name}[\"{series}\"] pairs torch {torch} "
            f"with {name} {version}, but {name} {version} requires "
            f"torch{companion.requires[version]} ({cache.origin}){paired}: write "
            f"companions: [{name}] to take the index's pairs, or correct the typed version"]
