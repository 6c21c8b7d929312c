"""Package sources of a build: a credentialed vendor index is reached with basic auth, and its
password never reaches a note, a result or the console."""

from __future__ import annotations

from oota.execute.sources import reachable, resolve_sources
from oota.net import host_pip_config
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


def test_pip_variables_outrank_the_configuration_files(tmp_path, monkeypatch):
    """pip's own precedence: PIP_EXTRA_INDEX_URL over a pip.conf's [install] over its [global]
    (the variable used to lose to /etc/pip.conf). pip itself reads them here."""
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nextra-index-url = https://global.example/simple\n"
                    "index-url = https://global.example/root\n"
                    "[install]\nindex-url = https://install.example/root\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://env.example/simple")
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    host_pip_config.cache_clear()
    try:
        config = host_pip_config()
    finally:
        host_pip_config.cache_clear()
    assert config["extra-index-url"] == "https://env.example/simple"
    assert config["index-url"] == "https://install.example/root"
