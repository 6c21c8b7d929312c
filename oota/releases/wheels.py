"""Wheels as release-check sees them: what a file name says (project, version, tags, and so
which CPython on which Linux platform pip would install it for), and the core metadata inside
(``Requires-Dist``, ``Requires-Python``), read from a METADATA text or out of a remote wheel
with HTTP range requests. Everything is parsed by ``packaging``."""

from __future__ import annotations

import email.parser
import io
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from packaging.metadata import Metadata
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from oota.releases.errors import BadAnswer
from oota.releases.http import Http

WHEEL_DOWNLOAD_LIMIT = 512 * 1024 * 1024   # a last resort; torch's own wheel is ~900 MB
_CP = re.compile(r"^cp(\d)(\d+)$")


def _linux_tags(machine: str) -> tuple[str, ...]:
    # Every manylinux policy a glibc system can satisfy, newest first, then the legacy aliases
    # and the plain tag: release-check asks "is there a Linux wheel", not "for this glibc".
    return tuple(f"manylinux_2_{m}_{machine}" for m in range(45, 4, -1)) + tuple(
        f"{alias}_{machine}" for alias in ("manylinux2014", "manylinux2010", "manylinux1",
                                           "linux"))


@dataclass(frozen=True, kw_only=True, slots=True)
class Platform:
    """A Linux CPU architecture wheels are published for."""

    machine: str                     # platform_machine: "x86_64", "aarch64"
    tags: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"Linux {self.machine}"


LINUX_X86_64 = Platform(machine="x86_64", tags=_linux_tags("x86_64"))
LINUX_AARCH64 = Platform(machine="aarch64", tags=_linux_tags("aarch64"))
PLATFORMS = (LINUX_X86_64, LINUX_AARCH64)


@lru_cache(maxsize=256)
def supported_tags(python: Version, platform: Platform) -> frozenset[Tag]:
    pv = (python.major, python.minor)
    interp = f"cp{python.major}{python.minor}"
    return frozenset(cpython_tags(pv, abis=[interp], platforms=platform.tags)) \
        | frozenset(compatible_tags(pv, interp, platform.tags))


def python_allowed(spec: str, python: Version) -> bool:
    """Does a Requires-Python text admit ``python`` (as X.Y.99: any patch of X.Y)?"""
    if not spec:
        return True
    try:
        specifier = SpecifierSet(spec)
    except InvalidSpecifier:
        return True  # an unparsable Requires-Python is ignored by pip as well
    return specifier.contains(Version(f"{python.major}.{python.minor}.99"), True) \
        or specifier.contains(Version(f"{python.major}.{python.minor}"), True)


@dataclass(frozen=True, kw_only=True, slots=True)
class DistFile:
    """One file of a project on the index."""

    filename: str
    url: str
    version: Version
    yanked: bool
    requires_python: str            # "" when the index states none
    metadata_url: str               # PEP 658 ``<url>.metadata``; "" when not offered
    metadata_sha256: str            # its hash when the index gives one
    tags: frozenset[Tag]            # empty for an sdist
    uploaded: str = ""              # ISO 8601 upload time where the index gives it (PEP 700)

    @property
    def is_wheel(self) -> bool:
        return bool(self.tags)

    def supports(self, python: Version, platform: Platform = LINUX_X86_64) -> bool:
        """Would pip on CPython ``python`` for ``platform`` pick this wheel?"""
        if not self.tags or not (self.tags & supported_tags(python, platform)):
            return False
        return python_allowed(self.requires_python, python)

    def on(self, platform: Platform) -> bool:
        """Is this a wheel for ``platform`` (any Python)?"""
        return any(tag.platform in platform.tags for tag in self.tags)

    def cpythons(self) -> set[Version]:
        """The CPython versions named by the interpreter tags (``cp312`` -> 3.12)."""
        found = set()
        for tag in self.tags:
            match = _CP.match(tag.interpreter)
            if match:
                found.add(Version(f"{match.group(1)}.{match.group(2)}"))
        return found


def dist_file(project: str, *, filename: str, url: str, yanked: bool, requires_python: str,
              metadata_url: str, metadata_sha256: str, uploaded: str = "") -> DistFile | None:
    """A DistFile, or None for files that are not wheels/sdists of ``project``."""
    try:
        if filename.endswith(".whl"):
            name, version, _, tags = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
            tags = frozenset()
    except ValueError:  # a name packaging cannot parse, or more digits than int() reads
        return None
    if name != canonicalize_name(project):
        return None
    return DistFile(filename=filename, url=url, version=version, yanked=yanked,
                    requires_python=requires_python, metadata_url=metadata_url,
                    metadata_sha256=metadata_sha256, tags=frozenset(tags), uploaded=uploaded)


# -- core metadata ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class CoreMetadata:
    requires_dist: tuple[Requirement, ...]
    requires_python: str
    source: str                     # "pep658" | "json-api" | "wheel-range" | "wheel-download"


class BadMetadata(ValueError):
    """A METADATA file that is not core metadata; the caller names where it came from."""


def requirements(lines: Iterable[str]) -> tuple[Requirement, ...]:
    out = []
    for line in lines:
        try:
            out.append(Requirement(line))
        except InvalidRequirement:
            continue
    return tuple(out)


def parse_metadata(body: bytes, source: str) -> CoreMetadata:
    """Requires-Dist and Requires-Python from a METADATA file, parsed by packaging."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadMetadata("METADATA is not UTF-8 text") from None
    raw = email.parser.Parser().parsestr(text)
    if not raw.get("Metadata-Version") or not raw.get("Name"):
        raise BadMetadata("not a core metadata file (no Metadata-Version and Name fields)")
    try:
        meta = Metadata.from_email(text, validate=False)
        requires = tuple(meta.requires_dist or ())
        python = str(meta.requires_python) if meta.requires_python else ""
    except Exception:  # noqa: BLE001 - packaging raises an ExceptionGroup of field errors
        # A field packaging rejects must not hide the ones we need: read those two raw.
        requires = requirements(str(v) for v in raw.get_all("Requires-Dist") or [])
        python = str(raw.get("Requires-Python") or "").strip()
    return CoreMetadata(requires_dist=requires, requires_python=python, source=source)


# -- reading METADATA out of a remote wheel --------------------------------------------------
class _NoRanges(Exception):
    pass


class _RangeReader(io.RawIOBase):
    """A seekable file over HTTP range requests, so zipfile reads only what it needs."""

    def __init__(self, http: Http, url: str, size: int):
        super().__init__()
        self.http, self.url, self.size, self.pos = http, url, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        end = min(self.size, self.pos + len(buffer))
        if end <= self.pos:
            return 0
        resp = self.http.get(self.url, byte_range=(self.pos, end - 1))
        if resp.status != 206:
            raise _NoRanges()
        data = resp.body[: end - self.pos]
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


def wheel_metadata(http: Http, url: str) -> CoreMetadata:
    """METADATA of a remote wheel: range reads when served, else a bounded download."""
    url = url.split("#", 1)[0]
    try:
        probe = http.get(url, byte_range=(0, 0))
        if probe.status != 206:
            raise _NoRanges()
        size = int(probe.headers.get("content-range", "/").rsplit("/", 1)[1])
        reader = io.BufferedReader(_RangeReader(http, url, size), buffer_size=64 * 1024)
        return _metadata_in(reader, http.shown(url), "wheel-range")
    except (_NoRanges, ValueError, IndexError):
        body = http.get(url, limit=WHEEL_DOWNLOAD_LIMIT).body
        return _metadata_in(io.BytesIO(body), http.shown(url), "wheel-download")


def _metadata_in(stream: io.BufferedIOBase, url: str, source: str) -> CoreMetadata:
    try:
        with zipfile.ZipFile(stream) as wheel:
            names = [n for n in wheel.namelist()
                     if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(names) != 1:
                raise BadAnswer(f"{url}: expected one .dist-info/METADATA, found {len(names)}")
            return parse_metadata(wheel.read(names[0]), source)
    except zipfile.BadZipFile as exc:
        raise BadAnswer(f"{url}: not a wheel (zip): {exc}") from None
    except BadMetadata as exc:
        raise BadAnswer(f"{url}: {exc}") from None
