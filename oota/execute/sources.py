"""Where packages come from during a build: indexes, wheelhouses and the CA bundle.

Users sit behind TLS-intercepting proxies, use private mirrors and air-gapped wheelhouses.
This module reads what the host already trusts and uses (pip's own configuration, the usual
CA variables), merges it with the vendor's index and the command-line overrides, and turns
it into two BuildKit secrets (``ca``, ``pipconf``) plus a wheelhouse folder for the context.
Secrets never reach an image layer; the wheelhouse is bind-mounted, not copied.
"""

from __future__ import annotations

import os
import shutil
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from functools import lru_cache
from http.client import HTTPException
from pathlib import Path

from oota import httpio
from oota.net import find_ca_bundle, host_pip_config, redact, redact_text, split_credentials

WHEELHOUSE_IN_BUILD = "/wheelhouse"


@dataclass(frozen=True, kw_only=True, slots=True)
class PipSources:
    index_url: str
    extra_index_urls: tuple[str, ...]
    find_links_urls: tuple[str, ...]
    wheel_dirs: tuple[Path, ...]
    notes: tuple[str, ...] = field(default=())

    def pip_conf(self, *, with_wheelhouse: bool) -> str:
        """The pip.conf handed to the build as the ``pipconf`` secret."""
        lines = ["[global]", f"index-url = {self.index_url}"]
        if self.extra_index_urls:
            lines.append("extra-index-url = " + " ".join(self.extra_index_urls))
        links = ([WHEELHOUSE_IN_BUILD] if with_wheelhouse else []) + list(self.find_links_urls)
        if links:
            lines.append("find-links = " + " ".join(links))
        return "\n".join(lines) + "\n"

    def describe(self) -> dict[str, object]:
        """For results and labels: URLs with any credentials removed."""
        return {"index_url": redact(self.index_url),
                "extra_index_urls": [redact(u) for u in self.extra_index_urls],
                "find_links": [redact(u) for u in self.find_links_urls]
                + [str(d) for d in self.wheel_dirs],
                "notes": list(self.notes)}


@lru_cache(maxsize=32)
def reachable(url: str, timeout: float = 8.0) -> str | None:
    """None when ``url`` answers over HTTP(S); otherwise why not (one line)."""
    bare, authorization = split_credentials(url)
    ca = find_ca_bundle(None)
    context = ssl.create_default_context(cafile=str(ca) if ca else None)
    try:
        request = urllib.request.Request(bare.rstrip("/") + "/", method="GET")
        if authorization:  # urllib would take 'user:password@host' for a host name
            request.add_unredirected_header("Authorization", authorization)
        # The whole exchange within ``timeout`` (a server dripping its headers must not hold
        # the build); the answer itself is not read.
        with httpio.Watchdog(timeout) as watchdog, \
                httpio.opener(watchdog, tls=context).open(request, timeout=timeout):
            return None if not watchdog.expired else f"no answer within {timeout:g} s"
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return f"HTTP {exc.code}: check the user and password given in the index URL"
        return None if exc.code < 500 and exc.code != 404 else f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError, HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        return redact_text(str(reason).splitlines()[0][:200])


def resolve_sources(*, vendor_index: str, index_url: str | None = None,
                    find_links: tuple[str, ...] = (), use_host_config: bool = True,
                    probe: bool = True) -> PipSources:
    """Merge (in order of precedence) the command line, the host's pip configuration and the
    vendor's index. The vendor's index is left out, with a note, when it does not answer."""
    host = host_pip_config() if use_host_config else {}
    notes: list[str] = []
    primary = index_url or host.get("index-url") or "https://pypi.org/simple"
    extras: list[str] = []
    if vendor_index and not index_url:
        why = reachable(vendor_index) if probe else None
        if why:
            notes.append(f"vendor index {redact(vendor_index)} is unreachable from this host "
                         f"({why}); left out, packages come from the other sources")
        else:
            extras.append(vendor_index)
    for url in host.get("extra-index-url", "").split():
        if url.startswith("file:"):
            notes.append(f"host extra-index-url {redact(url)} is a local folder index: not visible "
                         "inside the build; use --find-links with a wheel folder instead")
        else:
            extras.append(url)
    links = list(find_links) + host.get("find-links", "").split()
    link_urls, dirs = [], []
    for link in links:
        path = Path(link.removeprefix("file://")).expanduser()
        if link.startswith(("http://", "https://")):
            link_urls.append(link)
        elif path.is_dir():
            dirs.append(path.resolve())
        else:
            notes.append(f"find-links {redact(link)} is neither a URL nor an existing folder; "
                         "ignored")
    return PipSources(index_url=primary, extra_index_urls=tuple(dict.fromkeys(extras)),
                      find_links_urls=tuple(dict.fromkeys(link_urls)),
                      wheel_dirs=tuple(dict.fromkeys(dirs)), notes=tuple(notes))


def fill_wheelhouse(dest: Path, dirs: tuple[Path, ...]) -> list[str]:
    """Hard-link (or copy) every wheel of the host's wheelhouses into the build context."""
    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for folder in dirs:
        for wheel in sorted(folder.glob("*.whl")):
            target = dest / wheel.name
            if target.exists():
                continue
            try:
                os.link(wheel, target)
            except OSError:
                shutil.copy2(wheel, target)
            names.append(wheel.name)
    return names
