"""Package sources of a build: a credentialed vendor index is reached with basic auth, and its
password never reaches a note, a result or the console."""

from __future__ import annotations

from oota.execute.sources import reachable, resolve_sources
from tests.unit.test_releases_hostile import PASSWORD, USER, good_index, serve


def test_a_credentialed_index_is_reachable_with_basic_auth():
    with serve(good_index, password=PASSWORD) as server:
        assert reachable(server.url(f"{USER}:{PASSWORD}") + "/simple/torch") is None
        assert server.seen[-1][1].startswith("Basic ")
        why = reachable(server.url(f"{USER}:wrong") + "/simple/torch")
        assert why is not None and why.startswith("HTTP 401: check the user and password")


def test_an_unreachable_credentialed_index_is_noted_without_its_password():
    with serve(good_index) as server:
        dead = server.url(f"{USER}:{PASSWORD}").rsplit(":", 1)[0] + ":9/simple"
    sources = resolve_sources(vendor_index=dead, use_host_config=False)
    assert sources.notes and PASSWORD not in " ".join(sources.notes)
    assert f"{USER}:***@" in sources.notes[0]
    assert dead not in sources.extra_index_urls
