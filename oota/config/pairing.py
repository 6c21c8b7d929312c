"""``facts.extension`` of vendor.yaml: the vendor's out-of-tree extension, where its builds
come from, and which torch each of its releases pairs with where the release's own metadata
declares none (``requires_torch``).

PyPI's torch-xla declares no ``Requires-Dist`` on torch, yet each of its releases works with
one torch release series only. That rule is the vendor's data, with its source::

    extension:
      distribution: torch-xla
      import: torch_xla
      index: pypi
      requires_torch: {requires: "=={major}.{minor}.*", source: xla-install, verified: "..."}

``{major}``, ``{minor}`` and ``{micro}`` stand for the extension release's own numbers
(torch-xla 2.8.1 requires torch==2.8.*: the same release series). release-check reads the
rule where the metadata declares nothing, and holds a declared requirement to it too; a
release with neither has an unknown pairing, never "any torch" (:mod:`oota.releases.onindex`,
:mod:`oota.releases.companions`). The loader checks that the rule fills to a version
specifier and that the vendor's own pairs agree with it: each ``facts.compat`` row that names
an extension release, and each hand-typed pair of a companion that is the same distribution
(``companions: {torch_xla: {"2.9": "2.9.0"}}``).
"""

from __future__ import annotations

import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from oota.config.provenance import Provenance, Source, provenance_of
from oota.config.yamlsrc import Doc, Path_, did_you_mean

RULE = ("facts", "extension", "requires_torch")
NAMES = ("major", "minor", "micro")
_SAMPLE = {"major": "2", "minor": "9", "micro": "0"}


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchRule:
    """The torch an extension release requires, written with that release's numbers."""

    requires: str                    # e.g. "=={major}.{minor}.*"
    provenance: Provenance = field(default_factory=Provenance)

    def for_release(self, release: Version) -> SpecifierSet:
        """The rule for one release: torch-xla 2.8.1 -> ``==2.8.*``."""
        major, minor, micro = (*release.release, 0, 0)[:3]
        return SpecifierSet(self.requires.format(major=major, minor=minor, micro=micro))

    @property
    def where(self) -> str:
        return ".".join(RULE)


@dataclass(frozen=True, kw_only=True, slots=True)
class ExtensionFacts:
    """The vendor's out-of-tree extension (``facts.extension``) and where its builds come from:
    the package index (``pypi``), this file's compat table (``data``), or a build from source
    in every cell (``source``); with the vendor's rule for its torch where one is written."""

    distribution: str
    import_name: str
    index: str
    requires_torch: TorchRule | None = None

    def names(self, project: str) -> bool:
        """Is ``project`` this extension (torch_xla and torch-xla are one distribution)?"""
        return canonicalize_name(project) == canonicalize_name(self.distribution)


def extension_facts(data: Any, sources: Mapping[str, Source]) -> ExtensionFacts | None:
    """``facts.extension`` of a file the loader checked, as data."""
    if not isinstance(data, Mapping):
        return None
    rule = data.get("requires_torch")
    return ExtensionFacts(
        distribution=data["distribution"], import_name=data["import"], index=data["index"],
        requires_torch=None if rule is None else TorchRule(
            requires=str(rule["requires"]), provenance=provenance_of(rule, sources)))


# -- the checks the schema cannot make -------------------------------------------------------
def check_extension(doc: Doc, data: Any, reported: set[Path_]) -> None:
    """Record where ``facts.extension.requires_torch`` does not fill to a specifier, and every
    pair of the vendor's own that it contradicts."""
    facts = _dict(_dict(data).get("facts"))
    extension = _dict(facts.get("extension"))
    text = _dict(extension.get("requires_torch")).get("requires")
    if not isinstance(text, str) or _skipped(RULE + ("requires",), reported):
        return
    if not _fills(doc, text):
        return
    rule = TorchRule(requires=text)
    dist = str(extension.get("distribution", ""))
    for path, release, torch in _own_pairs(_dict(data), dist):
        if not _skipped(path, reported):
            _check_pair(doc, rule, dist, path, release, torch)


def _fills(doc: Doc, text: str) -> bool:
    where = RULE + ("requires",)
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        doc.error(where, f"'{text}': {exc}", "write it like '=={major}.{minor}.*'")
        return False
    for name in fields:
        if name not in NAMES:
            hint = did_you_mean(name, NAMES) or ""
            doc.error(where, f"'{text}': unknown placeholder {{{name}}} (the extension "
                      f"release's numbers are {{major}}, {{minor}} and {{micro}})", hint)
            return False
    try:
        SpecifierSet(text.format(**_SAMPLE))
    except InvalidSpecifier:
        doc.error(where, f"'{text}' is not a version specifier once filled in (release "
                  f"2.9.0 would read '{text.format(**_SAMPLE)}')",
                  "write it like '=={major}.{minor}.*'")
        return False
    return True


def _own_pairs(data: dict[str, Any], dist: str) -> Iterator[tuple[Path_, str, str]]:
    """(path, extension release, torch) of each pair the vendor writes down itself."""
    rows = _dict(data.get("facts")).get("compat")
    for i, row in enumerate(rows if isinstance(rows, list) else []):
        if isinstance(row, dict) and isinstance(row.get("extension"), str) \
                and isinstance(row.get("torch"), str):
            yield ("facts", "compat", i, "extension"), row["extension"], row["torch"]
    for name, typed in _dict(data.get("companions")).items():
        if canonicalize_name(str(name)) == canonicalize_name(dist):
            for series, release in _dict(typed).items():
                yield ("companions", name, series), str(release), str(series)


def _check_pair(doc: Doc, rule: TorchRule, dist: str, path: Path_, release: str,
                torch: str) -> None:
    try:
        spec, wanted = rule.for_release(Version(release)), Version(torch)
    except ValueError:  # a bad version: the loader's version checks report it
        return
    if not spec.contains(wanted, prereleases=True):
        doc.error(path, f"pairs torch {torch} with {dist} {release}, but {'.'.join(RULE)} says "
                  f"{dist} {release} requires torch{spec}",
                  "correct the pair or the rule (both are this vendor's data)")


def _skipped(path: Path_, reported: set[Path_]) -> bool:
    return any(path[:len(done)] == done for done in reported)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
