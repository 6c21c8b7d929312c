"""A client for a PyPI-shaped package index: the simple API (PEP 691 JSON, else PEP 503 HTML)
lists a project's files, the PyPI JSON API stands in where a mirror has no simple page, and
core metadata comes from PEP 658/714 files where offered, else the JSON API's
``requires_dist``, else the wheel itself.

Every answer is checked before it is used. A page that is not what the API promises (JSON
that is not an object, HTML that is not UTF-8) is a :class:`BadAnswer` naming the URL; one
malformed file entry on an otherwise good page is skipped with a note.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

from packaging.utils import canonicalize_name
from packaging.version import Version

from oota.net import redact, redact_text, split_credentials
from oota.releases.errors import BadAnswer, NotOnIndex
from oota.releases.http import Http, Response
from oota.releases.wheels import (
    BadMetadata,
    CoreMetadata,
    DistFile,
    dist_file,
    parse_metadata,
    requirements,
    wheel_metadata,
)

DEFAULT_INDEX = "https://pypi.org"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
SIMPLE_HTML = ("text/html", "application/vnd.pypi.simple.v1+html")
ACCEPT_SIMPLE = f"{SIMPLE_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


@dataclass(frozen=True, kw_only=True, slots=True)
class _Entry:
    """One file as a simple page or the JSON API lists it, before its name is parsed."""

    filename: str
    url: str
    yanked: bool
    requires_python: str
    metadata_url: str = ""
    metadata_sha256: str = ""
    uploaded: str = ""               # PEP 700 upload-time / the JSON API's upload_time_iso_8601


class _LinkParser(HTMLParser):
    """PEP 503 anchors with their attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))


class PackageIndex:
    """``url`` is the index root (``https://pypi.org``) or its simple API
    (``https://mirror.example/simple``); the JSON API is looked for beside the simple API.
    Credentials in the URL (``https://user:password@host/simple``) are sent as HTTP basic
    auth to that host only, and shown as ``user:***@host``."""

    def __init__(self, url: str = DEFAULT_INDEX, *, http: Http | None = None):
        self.display = redact(url.rstrip("/"))
        clean, authorization = split_credentials(url.rstrip("/"))
        if clean.endswith("/simple"):
            self.simple_base, self.json_base = clean, clean[: -len("/simple")]
        else:
            self.simple_base, self.json_base = clean + "/simple", clean
        self.http = http or Http()
        if authorization:
            self.http.authorize(url)
        self._files: dict[str, list[DistFile]] = {}
        self._meta: dict[str, CoreMetadata] = {}
        self.notes: list[str] = []

    def page(self, project: str) -> str:
        """The project's simple page, as messages show it."""
        return self.http.shown(f"{self.simple_base}/{canonicalize_name(project)}/")

    def note(self, text: str) -> None:
        self.notes.append(redact_text(text))

    # listing -------------------------------------------------------------------------------
    def files(self, project: str) -> list[DistFile]:
        """Every file of ``project`` (yanked ones included, marked); simple API first."""
        name = canonicalize_name(project)
        if name not in self._files:
            try:
                entries = self._simple_entries(name)
            except NotOnIndex:
                entries = self._json_entries(name)
            self._files[name] = [f for f in (dist_file(name, **_fields(e)) for e in entries)
                                 if f is not None]
        return self._files[name]

    def releases(self, project: str) -> dict[Version, list[DistFile]]:
        """Final releases (no pre/dev), each with its non-yanked files; newest first.
        Local labels (``2.15.0+cpu`` on download.pytorch.org) are folded into the public one."""
        grouped: dict[Version, list[DistFile]] = {}
        for file in self.files(project):
            if file.yanked or file.version.is_prerelease or file.version.is_devrelease:
                continue
            grouped.setdefault(Version(file.version.public), []).append(file)
        return dict(sorted(grouped.items(), reverse=True))

    def _simple_entries(self, name: str) -> list[_Entry]:
        resp = self.http.get(f"{self.simple_base}/{name}/", accept=ACCEPT_SIMPLE)
        if resp.content_type == SIMPLE_JSON:
            return self._simple_json(resp)
        if resp.content_type in SIMPLE_HTML:
            return self._simple_html(resp)
        raise BadAnswer(f"{resp.shown}: answered {resp.content_type}, not a simple index page "
                        "(PEP 691 JSON or PEP 503 HTML)")

    def _simple_json(self, resp: Response) -> list[_Entry]:
        page = _json_object(resp)
        files = page.get("files")
        if not isinstance(files, list):
            raise BadAnswer(f"{resp.shown}: a PEP 691 project page needs a 'files' list, got "
                            f"{_kind(files)}")
        return list(self._valid(resp.shown, (_entry_from_json(f, resp.url) for f in files)))

    def _simple_html(self, resp: Response) -> list[_Entry]:
        parser = _LinkParser()
        parser.feed(_utf8(resp))
        parser.close()
        return [e for e in (_entry_from_html(link, resp.url) for link in parser.links) if e]

    def _json_entries(self, name: str) -> list[_Entry]:
        resp = self.http.get(f"{self.json_base}/pypi/{name}/json", accept="application/json")
        releases = _json_object(resp).get("releases")
        if not isinstance(releases, Mapping):
            raise BadAnswer(f"{resp.shown}: the JSON API needs a 'releases' object, got "
                            f"{_kind(releases)}")
        items = [i for files in releases.values() if isinstance(files, list) for i in files]
        return list(self._valid(resp.shown, (_entry_from_api(i, resp.url) for i in items)))

    def _valid(self, url: str, entries: Iterator[_Entry | str]) -> Iterator[_Entry]:
        """The good entries; each bad one becomes a note (one bad file is not a bad index)."""
        for i, entry in enumerate(entries):
            if isinstance(entry, str):
                self.note(f"{url}: file entry {i} skipped: {entry}")
            else:
                yield entry

    # metadata ------------------------------------------------------------------------------
    def metadata(self, project: str, file: DistFile) -> CoreMetadata:
        """Core metadata of one file: PEP 658, else the JSON API, else the wheel itself.
        A file whose metadata cannot be read is a :class:`BadAnswer` naming it."""
        if file.url not in self._meta:
            self._meta[file.url] = self._read_metadata(project, file)
        return self._meta[file.url]

    def _read_metadata(self, project: str, file: DistFile) -> CoreMetadata:
        if file.metadata_url:
            body = self.http.get(file.metadata_url).body
            shown = self.http.shown(file.metadata_url)
            if file.metadata_sha256 and hashlib.sha256(body).hexdigest() != file.metadata_sha256:
                raise BadAnswer(f"{shown}: sha256 differs from the index's")
            try:
                return parse_metadata(body, "pep658")
            except BadMetadata as exc:
                raise BadAnswer(f"{shown}: {exc}") from None
        try:
            return self._api_metadata(project, file)
        except (NotOnIndex, BadAnswer) as exc:
            self.note(f"no usable JSON API answer for {project} {file.version} ({exc}); "
                      "reading its wheels")
        if not file.is_wheel:
            raise BadAnswer(f"{self.http.shown(file.url)}: no metadata offered and not a wheel")
        return wheel_metadata(self.http, file.url)

    def _api_metadata(self, project: str, file: DistFile) -> CoreMetadata:
        resp = self.http.get(f"{self.json_base}/pypi/{canonicalize_name(project)}/"
                             f"{file.version}/json", accept="application/json")
        info = _json_object(resp).get("info")
        if not isinstance(info, Mapping):
            raise BadAnswer(f"{resp.shown}: no 'info' object")
        requires = info.get("requires_dist") or []
        python = info.get("requires_python") or ""
        if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires) \
                or not isinstance(python, str):
            raise BadAnswer(f"{resp.shown}: info.requires_dist must be a list of strings and "
                            "info.requires_python a string")
        return CoreMetadata(requires_dist=requirements(requires), requires_python=python,
                            source="json-api")


def _fields(entry: _Entry) -> dict[str, Any]:
    return {"filename": entry.filename, "url": entry.url, "yanked": entry.yanked,
            "requires_python": entry.requires_python, "metadata_url": entry.metadata_url,
            "metadata_sha256": entry.metadata_sha256, "uploaded": entry.uploaded}


# -- reading answers -------------------------------------------------------------------------
def _kind(value: Any) -> str:
    return "nothing" if value is None else f"a {type(value).__name__}"


def _utf8(resp: Response) -> str:
    try:
        return resp.body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadAnswer(f"{resp.shown}: the answer is not UTF-8 text (byte {exc.start})") from None


def _json_object(resp: Response) -> Mapping[str, Any]:
    try:
        data = json.loads(_utf8(resp))
    except (ValueError, RecursionError) as exc:
        raise BadAnswer(f"{resp.shown}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadAnswer(f"{resp.shown}: expected a JSON object, got {_kind(data)}")
    return data


def _optional_text(item: Mapping[str, Any], key: str) -> str:
    value = item.get(key)
    return value if isinstance(value, str) else ""


def _entry_from_json(item: Any, base: str) -> _Entry | str:
    """A PEP 691 file entry, or why it is unusable."""
    entry = _entry_from_api(item, base, requires_python="requires-python",
                            uploaded="upload-time")
    if isinstance(entry, str):
        return entry
    meta = item.get("core-metadata", item.get("dist-info-metadata", False))
    sha = meta.get("sha256") if isinstance(meta, Mapping) else None
    return replace(entry, metadata_url=entry.url.split("#", 1)[0] + ".metadata" if meta else "",
                   metadata_sha256=sha if isinstance(sha, str) else "")


def _entry_from_api(item: Any, base: str, *, requires_python: str = "requires_python",
                    uploaded: str = "upload_time_iso_8601") -> _Entry | str:
    """A file of the JSON API's ``releases`` (or the common part of a PEP 691 entry, whose key
    for the Python range is spelt ``requires-python``), or why it is unusable."""
    if not isinstance(item, Mapping):
        return f"expected an object, got {_kind(item)}"
    filename, href = item.get("filename"), item.get("url")
    if not isinstance(filename, str) or not isinstance(href, str):
        return "'filename' and 'url' must be strings"
    return _Entry(filename=filename, url=urljoin(base, href), yanked=bool(item.get("yanked")),
                  requires_python=_optional_text(item, requires_python),
                  uploaded=_optional_text(item, uploaded))


def _entry_from_html(link: Mapping[str, str | None], base: str) -> _Entry | None:
    href = link.get("href")
    if not href:
        return None
    url = urljoin(base, href)
    meta = link.get("data-core-metadata", link.get("data-dist-info-metadata"))
    sha = meta.split("=", 1)[1] if meta and meta.startswith("sha256=") else ""
    filename = url.split("#", 1)[0].rsplit("/", 1)[-1]
    return _Entry(filename=filename, url=url, yanked="data-yanked" in link,
                  requires_python=link.get("data-requires-python") or "",
                  metadata_url=url.split("#", 1)[0] + ".metadata"
                  if meta is not None and meta != "false" else "",
                  metadata_sha256=sha)

