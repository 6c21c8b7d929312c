"""Release check: is there a working vendor stack for the newest PyTorch release?

The package index is the source of truth for torch and for extensions published there
(torch-npu, ...): the newest final, non-yanked torch release N and N-1 (the newest patch of
the previous minor), the CPython versions torch ships Linux x86_64 wheels for, and each
extension's pairing as its wheels declare it (``Requires-Dist: torch...``, ``Requires-Python``,
wheel tags). Vendors whose stack is not on the index (``facts.torch_index: data`` or
``facts.extension.index: data`` in their vendor.yaml) are answered from ``facts.compat``; an
extension compiled from source in every cell (``facts.extension.index: source``) pairs with
every torch, within the vendor's ``facts.python``.

The index is read with the stdlib only (urllib, with the host's CA bundle for proxies):
the simple API (PEP 691 JSON, else PEP 503 HTML) lists files, and falls back to the PyPI JSON
API where a mirror has no simple page. Core metadata comes from PEP 658/714 files where the
index offers them, else the JSON API's ``requires_dist``, else the wheel itself, read with
HTTP range requests (only the zip directory and METADATA) or downloaded when ranges are not
served. Versions, specifiers, wheel tags and metadata are all parsed by ``packaging``.

``update_matrix`` rewrites the torch axis of ``matrix.yaml`` in place: it edits the text at
the node's position, so comments and formatting survive.
"""

from __future__ import annotations

import email.parser
import hashlib
import io
import json
import os
import re
import ssl
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import yaml
from packaging.metadata import Metadata
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from oota.config.matrix import Matrix, load_matrix
from oota.config.vendors import Vendor
from oota.errors import EnvironmentProblem, InputError
from oota.net import find_ca_bundle

DEFAULT_INDEX = "https://pypi.org"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
ACCEPT_SIMPLE = f"{SIMPLE_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
# Every manylinux policy an x86_64 glibc system can satisfy, newest first, then the legacy
# aliases and the plain tag; release-check asks "is there a Linux x86_64 wheel", not "for
# this host's glibc".
LINUX_X86_64 = tuple(f"manylinux_2_{m}_x86_64" for m in range(45, 4, -1)) + (
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64")
PLATFORM_NAME = "Linux x86_64"
MARKER_ENV = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
              "os_name": "posix", "implementation_name": "cpython",
              "platform_python_implementation": "CPython", "extra": ""}
_CP = re.compile(r"^cp(\d)(\d+)$")
WHEEL_DOWNLOAD_LIMIT = 512 * 1024 * 1024   # a last resort; torch's own wheel is ~900 MB


class IndexProblem(EnvironmentProblem):
    """The index did not answer, or answered something that is not an index."""


class NotOnIndex(InputError):
    """The index answers, but has no such project."""


# -- HTTP ------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class Response:
    url: str
    status: int
    content_type: str
    headers: dict[str, str]
    body: bytes


class Http:
    """GET with a timeout and the host's CA bundle (proxies re-sign TLS)."""

    def __init__(self, *, timeout: float = 30.0, ca_bundle: str | None = None):
        self.timeout = timeout
        self.ca_bundle = ca_bundle

    @cached_property
    def _ssl(self) -> ssl.SSLContext:
        ca = find_ca_bundle(self.ca_bundle)
        return ssl.create_default_context(cafile=str(ca) if ca else None)

    def get(self, url: str, *, accept: str | None = None,
            byte_range: tuple[int, int] | None = None, limit: int | None = None) -> Response:
        headers = {"User-Agent": "oota-release-check"}
        if accept:
            headers["Accept"] = accept
        if byte_range:
            headers["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
        request = urllib.request.Request(url, headers=headers)
        context = self._ssl if url.startswith("https:") else None
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=context) as resp:
                body = resp.read(limit + 1 if limit else -1)
                if limit and len(body) > limit:
                    raise IndexProblem(f"{url}: larger than {limit} bytes; not downloaded")
                return Response(url=resp.geturl(), status=resp.status, body=body,
                                content_type=resp.headers.get_content_type(),
                                headers={k.lower(): v for k, v in resp.headers.items()})
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 410):
                raise NotOnIndex(f"{url}: HTTP {exc.code}") from None
            raise IndexProblem(f"{url}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise IndexProblem(f"{url}: {reason}; check --index-url, the network and the CA "
                               "bundle (PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE)") from None


# -- index model -----------------------------------------------------------------------------
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

    @property
    def is_wheel(self) -> bool:
        return bool(self.tags)

    def supports(self, python: Version, platforms: tuple[str, ...] = LINUX_X86_64) -> bool:
        """Would pip on CPython ``python`` for ``platforms`` pick this wheel?"""
        if not self.tags or not (self.tags & supported_tags(python, platforms)):
            return False
        return python_allowed(self.requires_python, python)


def python_allowed(spec: str, python: Version) -> bool:
    """Does a Requires-Python text admit ``python`` (as X.Y.99: any patch of X.Y)?"""
    if not spec:
        return True
    try:
        return SpecifierSet(spec).contains(Version(f"{python.major}.{python.minor}.99"), True) \
            or SpecifierSet(spec).contains(Version(f"{python.major}.{python.minor}"), True)
    except InvalidSpecifier:
        return True  # an unparsable Requires-Python is ignored by pip as well


_TAG_CACHE: dict[tuple[Version, tuple[str, ...]], frozenset[Tag]] = {}


def supported_tags(python: Version, platforms: tuple[str, ...]) -> frozenset[Tag]:
    key = (python, platforms)
    if key not in _TAG_CACHE:
        pv = (python.major, python.minor)
        interp = f"cp{python.major}{python.minor}"
        _TAG_CACHE[key] = frozenset(cpython_tags(pv, abis=[interp], platforms=platforms)) \
            | frozenset(compatible_tags(pv, interp, platforms))
    return _TAG_CACHE[key]


def cpython_of(file: DistFile) -> set[Version]:
    """The CPython versions named by a wheel's interpreter tags (``cp312`` -> 3.12)."""
    found = set()
    for tag in file.tags:
        match = _CP.match(tag.interpreter)
        if match:
            found.add(Version(f"{match.group(1)}.{match.group(2)}"))
    return found


@dataclass(frozen=True, kw_only=True, slots=True)
class CoreMetadata:
    requires_dist: tuple[Requirement, ...]
    requires_python: str
    source: str                     # "pep658" | "json-api" | "wheel-range" | "wheel-download"


class _LinkParser(HTMLParser):
    """PEP 503 anchors with their data-* attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[dict[str, str | None]] = []
        self._open: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._open = dict(attrs)
            self._open["#text"] = ""

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open["#text"] = (self._open["#text"] or "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.links.append(self._open)
            self._open = None


class PackageIndex:
    """A PyPI-shaped index: ``URL`` is its root (``https://pypi.org``) or its simple API
    (``https://mirror.example/simple``); the JSON API is looked for beside the simple API."""

    def __init__(self, url: str = DEFAULT_INDEX, *, http: Http | None = None):
        url = url.rstrip("/")
        self.url = url
        if url.endswith("/simple"):
            self.simple_base, self.json_base = url, url[: -len("/simple")]
        else:
            self.simple_base, self.json_base = url + "/simple", url
        self.http = http or Http()
        self._files: dict[str, list[DistFile]] = {}
        self._meta: dict[str, CoreMetadata] = {}
        self.notes: list[str] = []

    # listing -------------------------------------------------------------------------------
    def files(self, project: str) -> list[DistFile]:
        """Every file of ``project`` (yanked ones included, marked); simple API first."""
        name = canonicalize_name(project)
        if name not in self._files:
            try:
                self._files[name] = self._simple_files(name)
            except NotOnIndex:
                self._files[name] = self._json_files(name)
        return self._files[name]

    def _simple_files(self, name: str) -> list[DistFile]:
        resp = self.http.get(f"{self.simple_base}/{name}/", accept=ACCEPT_SIMPLE)
        if resp.content_type == SIMPLE_JSON:
            data = json.loads(resp.body)
            entries = [_entry_from_json(item, resp.url) for item in data.get("files", [])]
        elif resp.content_type in ("text/html", "application/vnd.pypi.simple.v1+html"):
            parser = _LinkParser()
            parser.feed(resp.body.decode("utf-8", "replace"))
            entries = [_entry_from_html(link, resp.url) for link in parser.links]
        else:
            raise IndexProblem(f"{resp.url}: answered {resp.content_type}, not a simple index page")
        return [f for f in (_dist_file(name, **e) for e in entries if e) if f]

    def _json_files(self, name: str) -> list[DistFile]:
        resp = self.http.get(f"{self.json_base}/pypi/{name}/json", accept="application/json")
        data = json.loads(resp.body)
        out = []
        for items in data.get("releases", {}).values():
            for item in items:
                dist = _dist_file(name, filename=item["filename"], url=urljoin(resp.url, item["url"]),
                                  yanked=bool(item.get("yanked")),
                                  requires_python=item.get("requires_python") or "",
                                  metadata_url="", metadata_sha256="")
                if dist:
                    out.append(dist)
        return out

    def releases(self, project: str) -> dict[Version, list[DistFile]]:
        """Final releases (no pre/dev), each with its non-yanked files; newest first.
        Local labels (``2.15.0+cpu`` on download.pytorch.org) are folded into the public one."""
        grouped: dict[Version, list[DistFile]] = {}
        for file in self.files(project):
            if file.yanked or file.version.is_prerelease or file.version.is_devrelease:
                continue
            grouped.setdefault(Version(file.version.public), []).append(file)
        return dict(sorted(grouped.items(), reverse=True))

    # metadata ------------------------------------------------------------------------------
    def metadata(self, project: str, file: DistFile) -> CoreMetadata:
        """Core metadata of one file: PEP 658, else the JSON API, else the wheel itself."""
        if file.url not in self._meta:
            self._meta[file.url] = self._read_metadata(project, file)
        return self._meta[file.url]

    def _read_metadata(self, project: str, file: DistFile) -> CoreMetadata:
        if file.metadata_url:
            body = self.http.get(file.metadata_url).body
            if file.metadata_sha256 and hashlib.sha256(body).hexdigest() != file.metadata_sha256:
                raise IndexProblem(f"{file.metadata_url}: sha256 differs from the index's")
            return parse_metadata(body, "pep658")
        try:
            resp = self.http.get(f"{self.json_base}/pypi/{canonicalize_name(project)}/"
                                 f"{file.version}/json", accept="application/json")
            info = json.loads(resp.body).get("info") or {}
            return CoreMetadata(requires_dist=_requirements(info.get("requires_dist") or []),
                                requires_python=info.get("requires_python") or "",
                                source="json-api")
        except (NotOnIndex, IndexProblem, ValueError) as exc:
            self.notes.append(f"no JSON API for {file.filename} ({exc}); reading the wheel")
        if not file.is_wheel:
            raise IndexProblem(f"{file.url}: no metadata offered and not a wheel")
        return wheel_metadata(self.http, file)


def _entry_from_json(item: dict[str, Any], base: str) -> dict[str, Any]:
    meta = item.get("core-metadata", item.get("dist-info-metadata", False))
    url = urljoin(base, item["url"])
    return {"filename": item["filename"], "url": url, "yanked": bool(item.get("yanked")),
            "requires_python": item.get("requires-python") or "",
            "metadata_url": url.split("#", 1)[0] + ".metadata" if meta else "",
            "metadata_sha256": meta.get("sha256", "") if isinstance(meta, dict) else ""}


def _entry_from_html(link: dict[str, str | None], base: str) -> dict[str, Any] | None:
    href = link.get("href")
    if not href:
        return None
    url = urljoin(base, href)
    meta = link.get("data-core-metadata", link.get("data-dist-info-metadata"))
    sha = meta.split("=", 1)[1] if meta and meta.startswith("sha256=") else ""
    filename = url.split("#", 1)[0].rsplit("/", 1)[-1]
    return {"filename": filename, "url": url, "yanked": "data-yanked" in link,
            "requires_python": link.get("data-requires-python") or "",
            "metadata_url": url.split("#", 1)[0] + ".metadata"
            if meta is not None and meta != "false" else "",
            "metadata_sha256": sha}


def _dist_file(project: str, *, filename: str, url: str, yanked: bool, requires_python: str,
               metadata_url: str, metadata_sha256: str) -> DistFile | None:
    """A DistFile, or None for files that are not wheels/sdists of ``project``."""
    try:
        if filename.endswith(".whl"):
            name, version, _, tags = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
            tags = frozenset()
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    if name != canonicalize_name(project):
        return None
    return DistFile(filename=filename, url=url, version=version, yanked=yanked,
                    requires_python=requires_python, metadata_url=metadata_url,
                    metadata_sha256=metadata_sha256, tags=frozenset(tags))


def _requirements(lines: Iterable[str]) -> tuple[Requirement, ...]:
    out = []
    for line in lines:
        try:
            out.append(Requirement(line))
        except InvalidRequirement:
            continue
    return tuple(out)


def parse_metadata(body: bytes | str, source: str) -> CoreMetadata:
    """Requires-Dist and Requires-Python from a METADATA file, parsed by packaging."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        meta = Metadata.from_email(text, validate=False)
        requires = tuple(meta.requires_dist or ())
        python = str(meta.requires_python) if meta.requires_python else ""
    except Exception:  # noqa: BLE001 - packaging raises an ExceptionGroup of field errors
        # A field packaging rejects must not hide the ones we need: read those two raw.
        msg = email.parser.Parser().parsestr(text)
        requires = _requirements(msg.get_all("Requires-Dist") or [])
        python = (msg.get("Requires-Python") or "").strip()
    return CoreMetadata(requires_dist=requires, requires_python=python, source=source)


# -- reading METADATA out of a remote wheel --------------------------------------------------
class _RangeReader(io.RawIOBase):
    """A seekable file over HTTP range requests, so zipfile reads only what it needs."""

    def __init__(self, http: Http, url: str, size: int):
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

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        resp = self.http.get(self.url, byte_range=(self.pos, end - 1))
        if resp.status != 206:
            raise _NoRanges()
        self.pos += len(resp.body)
        return resp.body

    def readinto(self, buffer) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _NoRanges(Exception):
    pass


def wheel_metadata(http: Http, file: DistFile) -> CoreMetadata:
    """METADATA of a remote wheel: range reads when served, else a bounded download."""
    url = file.url.split("#", 1)[0]
    try:
        probe = http.get(url, byte_range=(0, 0))
        size = int(probe.headers.get("content-range", "/").rsplit("/", 1)[1])
        if probe.status != 206:
            raise _NoRanges()
        with zipfile.ZipFile(io.BufferedReader(_RangeReader(http, url, size),
                                               buffer_size=64 * 1024)) as wheel:
            return parse_metadata(_read_metadata_member(wheel, file), "wheel-range")
    except (_NoRanges, ValueError, IndexError):
        body = http.get(url, limit=WHEEL_DOWNLOAD_LIMIT).body
        with zipfile.ZipFile(io.BytesIO(body)) as wheel:
            return parse_metadata(_read_metadata_member(wheel, file), "wheel-download")


def _read_metadata_member(wheel: zipfile.ZipFile, file: DistFile) -> bytes:
    names = [n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    if len(names) != 1:
        raise IndexProblem(f"{file.url}: expected one .dist-info/METADATA, found {len(names)}")
    return wheel.read(names[0])


# -- the check -------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class TorchRelease:
    version: Version
    pythons: tuple[Version, ...]     # CPython versions with a Linux x86_64 wheel
    requires_python: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    vendor: str
    torch: Version
    python: Version
    ok: bool
    detail: str                      # what pairs (ok) or why nothing does (gap)

    @property
    def sentence(self) -> str:
        return f"{self.vendor} py{self.python}: {self.detail}"

    def as_dict(self) -> dict[str, Any]:
        return {"vendor": self.vendor, "torch": str(self.torch), "python": str(self.python),
                "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True, kw_only=True, slots=True)
class ReleaseCheck:
    index: str
    current: Version
    previous: Version | None
    detected: bool                   # False when --torch named the release
    torch: tuple[TorchRelease, ...]
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def gaps(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if not r.ok)

    def supported(self, vendor: str, torch: Version) -> bool:
        return any(r.ok for r in self.rows if r.vendor == vendor and r.torch == torch)

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "current": str(self.current),
                "previous": str(self.previous) if self.previous else None,
                "detected": self.detected,
                "torch": [{"version": str(t.version), "requires_python": t.requires_python,
                           "platform": PLATFORM_NAME, "pythons": [str(p) for p in t.pythons]}
                          for t in self.torch],
                "rows": [r.as_dict() for r in self.rows],
                "gaps": [r.sentence for r in self.gaps], "notes": list(self.notes)}


def newest_and_previous(versions: Iterable[Version]) -> tuple[Version, Version | None]:
    """N = the newest version; N-1 = the newest patch of the minor before N's."""
    ordered = sorted(versions, reverse=True)
    if not ordered:
        raise NotOnIndex("no final, non-yanked release on the index")
    newest = ordered[0]
    older = [v for v in ordered if v.release[:2] < newest.release[:2]]
    return newest, (older[0] if older else None)


def previous_of(target: Version, versions: Iterable[Version]) -> Version | None:
    older = sorted((v for v in versions if v.release[:2] < target.release[:2]), reverse=True)
    return older[0] if older else None


def torch_release(index: PackageIndex, version: Version) -> TorchRelease:
    files = index.releases("torch").get(version)
    if not files:
        raise NotOnIndex(f"torch {version} is not a final, non-yanked release on {index.url}")
    pythons = sorted({p for f in files if f.is_wheel for p in cpython_of(f) if f.supports(p)})
    requires = next((f.requires_python for f in files if f.requires_python), "")
    return TorchRelease(version=version, pythons=tuple(pythons), requires_python=requires)


def _facts(vendor: Vendor) -> dict[str, Any]:
    return vendor.facts or {}


def vendor_pythons(vendor: Vendor, torch: TorchRelease) -> list[Version]:
    """torch's Pythons for the release, narrowed to the vendor's ``facts.python``."""
    spec = str(_facts(vendor).get("python") or "")
    return [p for p in torch.pythons if python_allowed(spec, p)]


def tracks_torch(vendor: Vendor) -> bool:
    """A vendor whose whole stack is torch from the index, with no pairing table of its own
    (cpu), follows every release; the others follow their table or extension metadata."""
    facts = _facts(vendor)
    return facts.get("torch_index", "pypi") == "pypi" and not facts.get("extension") \
        and not facts.get("compat")


def check_vendor(index: PackageIndex, vendor: Vendor, torch: TorchRelease,
                 known_torch: tuple[Version, ...]) -> list[Row]:
    facts = _facts(vendor)
    extension = facts.get("extension") or {}
    rows = []
    for python in vendor_pythons(vendor, torch):
        if extension and extension.get("index", "pypi") == "pypi":
            ok, detail = _pair_on_index(index, extension, torch.version, python, known_torch)
        elif extension.get("index") == "source":
            ok, detail = _pair_from_source(vendor, torch.version, python)
        elif extension or facts.get("torch_index", "pypi") == "data":
            ok, detail = _pair_from_data(vendor, torch.version, python)
        else:
            ok, detail = True, f"torch {torch.version} has a cp{python.major}{python.minor} " \
                               f"wheel for {PLATFORM_NAME}"
            if facts.get("compat"):  # torch from the index, but the vendor's table decides
                ok, paired = _pair_from_data(vendor, torch.version, python)
                detail = f"{detail}; {paired}" if ok else paired
        rows.append(Row(vendor=vendor.name, torch=torch.version, python=python, ok=ok,
                        detail=detail))
    return rows


def _torch_requirements(meta: CoreMetadata, python: Version) -> list[Requirement]:
    env = {**MARKER_ENV, "python_version": f"{python.major}.{python.minor}",
           "python_full_version": f"{python.major}.{python.minor}.0"}
    return [r for r in meta.requires_dist
            if canonicalize_name(r.name) == "torch" and (r.marker is None or r.marker.evaluate(env))]


def _pair_on_index(index: PackageIndex, extension: dict[str, Any], torch: Version,
                   python: Version, known_torch: tuple[Version, ...]) -> tuple[bool, str]:
    dist = str(extension.get("distribution", ""))
    try:
        releases = index.releases(dist)
    except NotOnIndex:
        return False, f"no {dist} on {index.url}"
    torch_reason = python_reason = ""
    for version, files in releases.items():
        meta = index.metadata(dist, _representative(files, python))
        reqs = _torch_requirements(meta, python)
        spec = reqs[0].specifier if reqs else SpecifierSet()
        if all(r.specifier.contains(torch, prereleases=True) for r in reqs):
            why = _python_gap(dist, version, files, meta, python)
            if not why:
                pins = f" (requires torch{spec})" if reqs else " (declares no torch requirement)"
                return True, f"{dist} {version}{pins}"
            python_reason = python_reason or why
            continue
        torch_reason = torch_reason or f"no {dist} for torch {torch} (newest {version} " \
                                        f"requires torch{spec})"
        # Extension versions follow torch versions: once a release only fits older torch
        # releases, every older one does too, so the walk (one metadata read each) stops.
        if not any(r.specifier.contains(t, prereleases=True) for r in reqs
                   for t in (*known_torch, torch) if t >= torch):
            break
    # A release that pairs with this torch but not this Python says more than a newer
    # release that pairs with another torch.
    return False, python_reason or torch_reason or f"no final release of {dist} on {index.url}"


def _representative(files: list[DistFile], python: Version) -> DistFile:
    """The file whose metadata speaks for the release: the wheel pip would pick if any."""
    return next((f for f in files if f.supports(python)),
                next((f for f in files if f.is_wheel), files[0]))


def _python_gap(dist: str, version: Version, files: list[DistFile], meta: CoreMetadata,
                python: Version) -> str:
    tag = f"cp{python.major}{python.minor}"
    if not python_allowed(meta.requires_python, python):
        return f"{dist} {version} requires Python {meta.requires_python}"
    if not any(f.supports(python) for f in files):
        have = sorted({p for f in files for p in cpython_of(f) if f.supports(p)})
        listed = ", ".join(f"cp{p.major}{p.minor}" for p in have) or "none"
        return f"{dist} {version} has no {tag} wheel for {PLATFORM_NAME} (has: {listed})"
    return ""


def _compat_matches(entry: dict[str, Any], torch: Version) -> bool:
    try:
        pinned = Version(str(entry.get("torch", "")))
    except InvalidVersion:
        return False
    # "2.9" in a vendor table means any 2.9.x; "2.9.1" means exactly that release.
    return torch.release[: len(pinned.release)] == pinned.release and not torch.local


def _pair_from_source(vendor: Vendor, torch: Version, python: Version) -> tuple[bool, str]:
    """An extension compiled from source in every cell pairs with whatever torch it is built
    against; only its declared Python range limits it."""
    facts = _facts(vendor)
    dist = str(facts["extension"].get("distribution") or vendor.name)
    spec = str(facts.get("python") or "")
    if not python_allowed(spec, python):
        return False, f"{dist} supports Python {spec} (vendors/{vendor.name}/vendor.yaml " \
                      "facts.python)"
    return True, f"{dist} is built from source against torch {torch} in each cell"


def _pair_from_data(vendor: Vendor, torch: Version, python: Version) -> tuple[bool, str]:
    facts = _facts(vendor)
    dist = str((facts.get("extension") or {}).get("distribution") or "")
    toolkit = vendor.toolkit.name if vendor.toolkit else "toolkit"
    where = f"vendors/{vendor.name}/vendor.yaml facts.compat"
    compat = [e for e in facts.get("compat") or [] if isinstance(e, dict)]
    if not compat:
        return False, f"no pairing data for torch {torch} ({where} is empty)"
    entries = [e for e in compat if _compat_matches(e, torch)]
    entry = entries[0] if entries else None
    if entry is None:
        newest = compat[0]
        if dist:
            return False, f"no {dist} for torch {torch} in {where} (newest " \
                          f"{newest.get('extension')} pairs torch {newest.get('torch')})"
        return False, f"no {toolkit} pairing for torch {torch} in {where} (newest: torch " \
                      f"{newest.get('torch')} with {toolkit} {newest.get('toolkit')})"
    if dist:
        label = f"{dist} {entry.get('extension')}"
    elif vendor.toolkit:  # every toolkit version the vendor pairs with this torch series
        label = f"{toolkit} " + ", ".join(str(e.get("toolkit")) for e in entries)
    else:
        label = f"{vendor.display} build"
    spec = str(entry.get("python") or facts.get("python") or "")
    if not python_allowed(spec, python):
        return False, f"{label} for torch {entry.get('torch')} supports Python {spec} ({where})"
    extra = f", {toolkit} {entry['toolkit']}" if dist and entry.get("toolkit") else ""
    return True, f"{label} for torch {entry.get('torch')}{extra} ({where})"


def release_check(matrix: Matrix, *, index_url: str = DEFAULT_INDEX, torch: str | None = None,
                  vendors: list[str] | None = None, http: Http | None = None) -> ReleaseCheck:
    """Detect (or take) torch N, derive N-1, and check every vendor of the matrix for both."""
    index = PackageIndex(index_url, http=http)
    known = tuple(index.releases("torch"))
    if torch:
        try:
            current = Version(torch)
        except InvalidVersion:
            raise InputError(f"--torch {torch}: not a version; write it like 2.15.0") from None
        previous = previous_of(current, known)
    else:
        current, previous = newest_and_previous(known)
    releases = tuple(torch_release(index, v) for v in (current, previous) if v is not None)
    names = vendors or list(matrix.vendors)
    rows = [row for rel in releases for name in names
            for row in check_vendor(index, matrix.vendors[name].vendor, rel, known)]
    return ReleaseCheck(index=index.url, current=current, previous=previous,
                        detected=torch is None, torch=releases, rows=tuple(rows),
                        notes=tuple(index.notes))


# -- output ----------------------------------------------------------------------------------
def _header(check: ReleaseCheck) -> list[str]:
    how = "detected" if check.detected else "given"
    prev = f", N-1 {check.previous}" if check.previous else ", no N-1 on the index"
    lines = [f"torch N {check.current} ({how}){prev} on {check.index}"]
    for t in check.torch:
        pys = ", ".join(f"cp{p.major}{p.minor}" for p in t.pythons) or "none"
        req = f" (Requires-Python {t.requires_python})" if t.requires_python else ""
        lines.append(f"torch {t.version}: {PLATFORM_NAME} wheels for {pys}{req}")
    return lines


def format_check(check: ReleaseCheck, fmt: str) -> str:
    """The check as ``table`` (terminal), ``markdown`` (reports, issues) or ``json``."""
    if fmt == "json":
        return json.dumps(check.as_dict(), indent=2)
    if fmt == "markdown":
        return _markdown(check)
    if fmt != "table":
        raise InputError(f"--format {fmt}: expected table, json or markdown")
    headers = ("vendor", "torch", "python", "stack", "detail")
    table = [(r.vendor, str(r.torch), str(r.python), "yes" if r.ok else "GAP", r.detail)
             for r in check.rows]
    widths = [max([len(h)] + [len(row[i]) for row in table]) for i, h in enumerate(headers)]
    out = _header(check) + ["", "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    out += ["", f"{len(check.gaps)} gap(s)"] + [f"  {r.sentence}" for r in check.gaps]
    return "\n".join(out)


def _markdown(check: ReleaseCheck) -> str:
    out = ["## PyTorch release check", ""] + [f"- {line}" for line in _header(check)] + [""]
    out += ["| vendor | torch | python | stack | detail |", "|---|---|---|---|---|"]
    out += [f"| {r.vendor} | {r.torch} | {r.python} | {'✓' if r.ok else '✗'} | "
            f"{r.detail.replace('|', '&#124;')} |" for r in check.rows]
    out += ["", f"### Gaps ({len(check.gaps)})", ""]
    out += [f"- {r.sentence}" for r in check.gaps] or ["none"]
    return "\n".join(out) + "\n"


def run(matrix_path: str | Path, *, torch: str | None = None, index_url: str = DEFAULT_INDEX,
        fmt: str = "table", update: bool = False, vendors: list[str] | None = None) -> str:
    """``invoke release-check``: the check, formatted; with ``update`` also rewrite the matrix."""
    if fmt not in ("table", "json", "markdown"):
        raise InputError(f"--format {fmt}: expected table, json or markdown")
    matrix = load_matrix(matrix_path)
    check = release_check(matrix, index_url=index_url, torch=torch, vendors=vendors)
    if not update:
        return format_check(check, fmt)
    result = update_matrix(matrix, check)
    if fmt == "json":
        return json.dumps({**check.as_dict(), "update": result.as_dict()}, indent=2)
    return format_check(check, fmt) + "\n\n" + "\n".join(result.lines())


# -- matrix.yaml update ----------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class MatrixUpdate:
    file: Path
    changed: dict[str, tuple[str, ...]]     # vendor -> new torch axis
    notes: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"file": str(self.file), "changed": {k: list(v) for k, v in self.changed.items()},
                "notes": list(self.notes)}

    def lines(self) -> list[str]:
        head = (f"updated {self.file}: " + "; ".join(f"{name} torch [{', '.join(v)}]"
                                                      for name, v in self.changed.items())
                if self.changed else f"{self.file}: torch axes already up to date")
        return [head] + [f"note: {n}" for n in self.notes]


def planned_torch(check: ReleaseCheck, matrix: Matrix) -> dict[str, tuple[str, ...]]:
    """Per vendor the torch axis --update writes, newest first (matrix.yaml's order): N and
    N-1 for vendors that track torch, otherwise those of the two that the vendor's data
    (``facts.compat`` or its extension's metadata) pairs with for at least one Python."""
    targets = [v for v in (check.current, check.previous) if v is not None]
    out = {}
    for name, vm in matrix.vendors.items():
        if tracks_torch(vm.vendor):
            out[name] = tuple(str(v) for v in targets)
        else:
            out[name] = tuple(str(v) for v in targets if check.supported(name, v))
    return out


def update_matrix(matrix: Matrix, check: ReleaseCheck) -> MatrixUpdate:
    """Rewrite each vendor's torch axis in matrix.yaml, keeping every comment and format."""
    text = matrix.file.read_text(encoding="utf-8")
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    edits: list[tuple[int, int, str]] = []
    changed, notes = {}, []
    for name, versions in planned_torch(check, matrix).items():
        node = _find(root, ("vendors", name, "torch"))
        if not versions:
            notes.append(f"{name}: no pairing for torch {check.current} or {check.previous}; "
                         "torch axis left as it is")
            continue
        if not isinstance(node, yaml.SequenceNode):
            notes.append(f"{name}: has no torch list (only include entries); left as it is")
            continue
        if [str(n.value) for n in node.value] == list(versions):
            continue
        # A block sequence's end mark lies at the next key, past trailing comments: end the
        # edit at its last item instead, so those comments stay.
        end = node.end_mark.index if node.flow_style or not node.value \
            else node.value[-1].end_mark.index
        edits.append((node.start_mark.index, end, _sequence_text(node, versions, text)))
        changed[name] = versions
        notes += _stale_rule_notes(root, name, versions)
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    if changed:
        _write_atomic(matrix.file, text)
    return MatrixUpdate(file=matrix.file, changed=changed, notes=tuple(notes))


def _find(node: yaml.Node | None, path: tuple[str, ...]) -> yaml.Node | None:
    for key in path:
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next((v for k, v in node.value if k.value == key), None)
    return node


def _quote(value: str, style: str | None) -> str:
    if style in ("'", '"'):
        return f"{style}{value}{style}"
    # A plain "2.15" would load as the float 2.15: quote whatever is not a plain string.
    plain = yaml.safe_load(value)
    return value if isinstance(plain, str) else f'"{value}"'


def _sequence_text(node: yaml.SequenceNode, versions: tuple[str, ...], text: str) -> str:
    style = node.value[0].style if node.value else '"'
    items = [_quote(v, style) for v in versions]
    if node.flow_style:
        return "[" + ", ".join(items) + "]"
    line_start = text.rfind("\n", 0, node.start_mark.index) + 1
    indent = text[line_start:node.start_mark.index]
    indent = indent if not indent.strip() else " " * node.start_mark.column
    # The node ends after its last item; the text after it (newline, comments) is kept.
    return ("\n" + indent).join(f"- {item}" for item in items)


def _stale_rule_notes(root: yaml.Node, name: str, versions: tuple[str, ...]) -> list[str]:
    notes = []
    for rule in ("include", "exclude", "default"):
        entries = _find(root, ("vendors", name, rule))
        if not isinstance(entries, yaml.SequenceNode):
            continue
        for i, entry in enumerate(entries.value):
            torch = _find(entry, ("torch",))
            if isinstance(torch, yaml.ScalarNode) and torch.value not in versions:
                notes.append(f"matrix.yaml:{torch.start_mark.line + 1}: vendors.{name}.{rule}"
                             f"[{i}].torch '{torch.value}' is no longer on the torch axis "
                             f"({', '.join(versions)}); edit it by hand")
    return notes


def _write_atomic(path: Path, text: str) -> None:
    yaml.safe_load(text)  # never write a file that no longer parses
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
