"""What this host's network setup says, shared by builds and release-check: the CA bundle of a
TLS-intercepting proxy, pip's own configuration, and how credentials in URLs are kept out of
everything oota prints or writes.

A URL such as ``https://user:s3cret@host/simple`` is never shown as given: :func:`redact`
turns it into ``https://user:***@host/simple`` (and hides token-like query parameters), and
every message, log line, note and result goes through it.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from oota.errors import InputError

CA_VARIABLES = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
# Query parameters that carry a secret (a registry token, a signed URL's signature).
_SECRET_QUERY = re.compile(r"(?i)^(token|access_token|auth|key|api_key|apikey|password|"
                           r"secret|sig|signature|x-amz-signature|x-amz-credential)$")
_URL_IN_TEXT = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
# USER:PASSWORD@HOST written without a scheme (a --registry given one): its password too.
_BARE_USERINFO = re.compile(r"(?<![\w/:.@-])([\w.%+-]+):[^\s@/'\"<>]+@(?=[\w.\[-])")


def redact(url: str) -> str:
    """``url`` with its password (or lone token user) replaced by ``***`` and secret query
    parameters masked: ``https://user:***@host/simple``, ``https://***@host/``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, sep, _ = userinfo.partition(":")
        netloc = f"{user}:***@{host}" if sep else f"***@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_SECRET_QUERY.match(k) for k, _ in pairs):
            query = urlencode([(k, "***" if _SECRET_QUERY.match(k) else v) for k, v in pairs],
                              safe="*")
    if netloc == parts.netloc and query == parts.query:
        return url  # nothing secret; geturl() would also drop an empty netloc (sqlite:///f)
    return parts._replace(netloc=netloc, query=query).geturl()


def without_credentials(url: str) -> str:
    """``url`` without its ``user:password@`` and without secret query parameters: what a
    generated file, an image or a committed cell.json may hold. The credentials reach a build
    only as a BuildKit secret (the pip configuration, or :func:`netrc_for`)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    netloc = parts.netloc.rpartition("@")[2]
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = urlencode([(k, v) for k, v in pairs if not _SECRET_QUERY.match(k)])
    if netloc == parts.netloc and query == parts.query:
        return url
    return parts._replace(netloc=netloc, query=query).geturl()


def secret_query(url: str) -> str | None:
    """The name of a secret query parameter of ``url`` (``?token=...``), if it has one."""
    try:
        pairs = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    except ValueError:
        return None
    return next((k for k, _ in pairs if _SECRET_QUERY.match(k)), None)


def netrc_for(urls: list[str]) -> str:
    """A netrc file (``machine HOST login USER password PASS``) with the credentials of each
    of ``urls`` that has some: how pip, given a URL without them, finds them (``NETRC``)."""
    lines = []
    for url in urls:
        parts = urlsplit(url)
        userinfo, at, _ = parts.netloc.rpartition("@")
        if not at or not parts.hostname:
            continue
        user, _, password = userinfo.partition(":")
        lines.append(f"machine {parts.hostname} login {_netrc_token(unquote(user))} "
                     f"password {_netrc_token(unquote(password))}")
    return "".join(line + "\n" for line in dict.fromkeys(lines))


def _netrc_token(text: str) -> str:
    """A netrc value: as it is when it has no space, quote, backslash or '#' (every Python's
    netrc reads that), else quoted with \\ and \" escaped (Python 3.11 and later)."""
    if text and re.fullmatch(r'[^\s"\\#]+', text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def without_credentials_text(text: str) -> str:
    """Every URL in ``text`` :func:`without_credentials`."""
    return _URL_IN_TEXT.sub(lambda m: without_credentials(m.group(0)), text)


def redact_text(text: str) -> str:
    """Every URL in ``text`` redacted (:func:`redact`), and a password in a scheme-less
    ``user:password@host``: for messages, logs and notes."""
    return _BARE_USERINFO.sub(r"\1:***@", _URL_IN_TEXT.sub(lambda m: redact(m.group(0)), text))


def find_ca_bundle(explicit: str | None) -> Path | None:
    """``--ca-bundle``, else the first of PIP_CERT/REQUESTS_CA_BUNDLE/SSL_CERT_FILE, else pip's
    ``cert`` setting. None when the host configures no bundle (public CAs then suffice)."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise InputError(f"--ca-bundle {explicit}: no such file")
        return path.resolve()
    for name in CA_VARIABLES:
        value = os.environ.get(name)
        if value and Path(value).is_file():
            return Path(value).resolve()
    cert = host_pip_config().get("cert")
    return Path(cert).resolve() if cert and Path(cert).is_file() else None


# pip's own precedence for `pip install`: a [global] setting, then the command's own section
# over it, then a PIP_* variable over both (`pip config list` prints the variables first).
_PIP_SECTIONS = ("global", "download", "wheel", "install", ":env:")


@lru_cache(maxsize=1)
def host_pip_config() -> dict[str, str]:
    """pip's effective configuration on this host, as pip itself ranks it: PIP_* variables
    over the files' [install] section over their [global] one."""
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return pip_config_from(proc.stdout)


def pip_config_from(listing: str) -> dict[str, str]:
    """The settings of ``pip config list``'s output (``section.key='value'`` lines), each
    key's value taken from its highest-ranking section."""
    found: dict[tuple[int, str], str] = {}
    for line in listing.splitlines():
        match = re.match(r"^(global|install|download|wheel|:env:)\.([\w-]+)='(.*)'$", line)
        if match:
            found[(_PIP_SECTIONS.index(match.group(1)), match.group(2))] = match.group(3)
    return {key: value for (_, key), value in sorted(found.items())}


def split_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without its ``user:password@`` and the HTTP basic ``Authorization`` value for
    them (None when it has none). urllib would read ``user:password@host`` as a host name,
    so credentials must travel as a header instead; a lone token user gets an empty password,
    as pip sends it."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return parts._replace(netloc=host).geturl(), f"Basic {token}"
