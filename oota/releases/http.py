"""HTTPS GET for release-check: the host's CA bundle, basic auth, and a deadline that holds.

Each request runs under :mod:`oota.httpio`'s watchdog (its deadline holds for the whole
answer, connect to last byte) and reads at most :data:`oota.httpio.MAX_ANSWER` bytes; the whole
run has a budget of its own. Redirects are followed here, not by urllib, so that the index's
credentials go only to the index's own origin, never to a file host it redirects to; one that
leaves http(s) is refused, and one to another host is followed and said (:attr:`Http.notes`).
"""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import cached_property
from http.client import HTTPException
from urllib.parse import urljoin, urlsplit

from oota import httpio
from oota.net import find_ca_bundle, redact, split_credentials
from oota.releases.errors import IndexProblem, NotOnIndex

REQUEST_TIMEOUT = 60.0      # seconds for one request, connect to last byte
RUN_BUDGET_FACTOR = 5       # the whole check may take five requests' worth
MAX_REDIRECTS = 5
USER_AGENT = "oota-release-check"


@dataclass(frozen=True, kw_only=True, slots=True)
class Response:
    url: str
    shown: str                     # the URL for messages: user:***@ where auth was sent
    status: int
    content_type: str
    headers: dict[str, str]        # lower-case names
    body: bytes


def origin(url: str) -> str:
    """``scheme://host:port`` of a URL, the unit credentials are scoped to."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}".lower()


class Http:
    """GET with the host's CA bundle (proxies re-sign TLS), basic auth per origin, a deadline
    per request (``timeout``) and one for the whole run (``RUN_BUDGET_FACTOR`` times it)."""

    def __init__(self, *, timeout: float = REQUEST_TIMEOUT, ca_bundle: str | None = None):
        self.timeout = timeout
        self.ca_bundle = ca_bundle
        self._run_end = time.monotonic() + timeout * RUN_BUDGET_FACTOR
        self._auth: dict[str, str] = {}
        self._users: dict[str, str] = {}
        self.notes: list[str] = []   # redirects to another host, said once each

    def authorize(self, url: str) -> None:
        """Send the credentials of ``url`` (``https://user:password@host/...``) as HTTP basic
        auth with every request to its origin, and to no other."""
        clean, header = split_credentials(url)
        if header:
            self._auth[origin(clean)] = header
            # A lone user is a token (https://TOKEN@host): it is shown as *** like a password.
            user, sep, _ = urlsplit(url).netloc.rpartition("@")[0].partition(":")
            self._users[origin(clean)] = f"{user}:***" if sep else "***"

    def shown(self, url: str) -> str:
        """``url`` as messages show it: redacted, with ``user:***@`` where auth is sent."""
        userinfo = self._users.get(origin(url))
        if userinfo is None:
            return redact(url)
        parts = urlsplit(url)
        return redact(parts._replace(netloc=f"{userinfo}@{parts.netloc}").geturl())

    @cached_property
    def _ssl(self) -> ssl.SSLContext:
        ca = find_ca_bundle(self.ca_bundle)
        return ssl.create_default_context(cafile=str(ca) if ca else None)

    def get(self, url: str, *, accept: str | None = None,
            byte_range: tuple[int, int] | None = None, limit: int | None = None) -> Response:
        for _ in range(MAX_REDIRECTS + 1):
            answer = self._get_once(url, accept=accept, byte_range=byte_range,
                                    limit=limit or httpio.MAX_ANSWER)
            if isinstance(answer, Response):
                return answer
            url = self._redirected(url, urljoin(url, answer))
        raise IndexProblem(f"{self.shown(url)}: more than {MAX_REDIRECTS} redirects")

    def _redirected(self, url: str, target: str) -> str:
        """``target`` of a redirect from ``url``: refused when it leaves http(s) (a
        ``file:///etc/passwd`` must never be read), said when it leaves the host."""
        scheme = urlsplit(target).scheme.lower()
        if scheme not in httpio.SCHEMES:
            raise IndexProblem(f"{self.shown(url)}: redirects to a {scheme or 'relative'}: URL "
                               f"({redact(target)[:200]}); only http(s) redirects are followed")
        if origin(target) != origin(url):
            host = urlsplit(target).netloc.rpartition("@")[2]
            note = (f"{self.shown(url)} redirects to another host, {host} (followed, without "
                    "the index's credentials)")
            if note not in self.notes:
                self.notes.append(note)
        return target

    def _headers(self, url: str, accept: str | None,
                 byte_range: tuple[int, int] | None) -> dict[str, str]:
        headers = {"User-Agent": USER_AGENT}
        if accept:
            headers["Accept"] = accept
        if byte_range:
            headers["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
        if origin(url) in self._auth:
            headers["Authorization"] = self._auth[origin(url)]
        return headers

    def _seconds_left(self, url: str) -> float:
        left = self._run_end - time.monotonic()
        if left <= 0:
            budget = self.timeout * RUN_BUDGET_FACTOR
            raise IndexProblem(f"{self.shown(url)}: not asked; release-check ran past its "
                               f"budget of {budget:g} s ({RUN_BUDGET_FACTOR} times --timeout)")
        return min(self.timeout, left)

    def _get_once(self, url: str, *, accept: str | None, byte_range: tuple[int, int] | None,
                  limit: int) -> Response | str:
        """The response, or the Location a redirect points to."""
        request = urllib.request.Request(url, headers=self._headers(url, accept, byte_range))
        seconds = self._seconds_left(url)
        with httpio.Watchdog(seconds) as watchdog:
            opener = httpio.opener(watchdog, tls=self._ssl if url.startswith("https:") else None,
                                   follow=False)
            try:
                answer = self._exchange(opener, request, seconds, limit)
            except (urllib.error.URLError, OSError, ValueError, HTTPException) as exc:
                if watchdog.expired:
                    raise _too_slow(self.shown(url), seconds) from None
                raise _unreachable(self.shown(url), exc) from None
        # A body read until the server closes ends early, without an error, when the
        # watchdog shuts the socket: the flag, not the data, says whether it is whole.
        if watchdog.expired:
            raise _too_slow(self.shown(url), seconds)
        return answer

    def _exchange(self, opener: urllib.request.OpenerDirector, request: urllib.request.Request,
                  seconds: float, limit: int) -> Response | str:
        url = self.shown(request.full_url)
        try:
            with opener.open(request, timeout=seconds) as resp:
                try:
                    body = httpio.read_body(resp, limit)
                except httpio.TooLargeAnswer as exc:
                    raise IndexProblem(f"{url}: the answer is {exc}") from None
                return Response(url=resp.geturl(), shown=self.shown(resp.geturl()),
                                status=resp.status, body=body,
                                content_type=resp.headers.get_content_type(),
                                headers={k.lower(): v for k, v in resp.headers.items()})
        except urllib.error.HTTPError as exc:
            exc.close()  # it holds the connection; a refusal must not leak the socket
            location = exc.headers.get("Location") if exc.headers else None
            if exc.code in (301, 302, 303, 307, 308) and location:
                return str(location)
            raise _refused(url, exc.code, str(exc.reason)) from None


def _refused(url: str, code: int, reason: str) -> IndexProblem | NotOnIndex:
    if code in (404, 410):
        return NotOnIndex(f"{url}: HTTP {code}")
    if code in (401, 403):
        return IndexProblem(f"{url}: HTTP {code} {reason}; check the user and password given "
                            "in --index-url")
    return IndexProblem(f"{url}: HTTP {code} {reason}")


def _too_slow(url: str, seconds: float) -> IndexProblem:
    return IndexProblem(f"{url}: no complete answer within {seconds:g} s; the index is slow or "
                        "stalled (raise --timeout for a slow mirror)")


def _unreachable(url: str, exc: BaseException) -> IndexProblem:
    reason = getattr(exc, "reason", exc)
    return IndexProblem(f"{url}: {reason}; check --index-url, the network and the CA "
                        "bundle (PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE)")
