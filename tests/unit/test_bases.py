"""Base images: local first, then the registry's mirror (--registry-mirror), then the registry,
then (for an OS's own image) a bootstrap; unit-tested against a fake engine."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from oota.config.matrix import OsSpec
from oota.errors import EnvironmentFault, InputError
from oota.execute.bases import ensure_base, mirrored, parse_mirrors, split_registry

GAUDI = "vault.habana.ai/gaudi-docker/1.23.0/ubuntu24.04/habanalabs/pytorch-installer-2.9.0:latest"
UBUNTU = OsSpec(key="ubuntu24.04", image="ubuntu:24.04", python=(), bootstrap=None)


class FakeEngine:
    """Images by name; pulls succeed only for the names in ``reachable``."""

    def __init__(self, local=(), reachable=()):
        self.images = set(local)
        self.reachable = set(reachable)
        self.calls: list[tuple[str, ...]] = []

    def image_labels(self, ref):
        return {} if ref in self.images else None

    def pull(self, ref):
        self.calls.append(("pull", ref))
        if ref in self.reachable:
            self.images.add(ref)
            return None
        return f"{ref.split('/')[0]}: no such host"

    def tag(self, source, target):
        self.calls.append(("tag", source, target))
        self.images.add(target)


@pytest.mark.parametrize(("ref", "parts"), [
    ("debian:bookworm-slim", ("docker.io", "library/debian:bookworm-slim")),
    ("nvidia/cuda:13.2.1-cudnn-runtime-ubuntu24.04",
     ("docker.io", "nvidia/cuda:13.2.1-cudnn-runtime-ubuntu24.04")),
    ("quay.io/ascend/cann:9.2.0", ("quay.io", "ascend/cann:9.2.0")),
    ("localhost:5000/x:1", ("localhost:5000", "x:1")),
    (GAUDI, ("vault.habana.ai", GAUDI.split("/", 1)[1])),
])
def test_split_registry(ref, parts):
    assert split_registry(ref) == parts


def test_a_base_comes_from_the_mirror_and_keeps_its_upstream_name(tmp_path: Path):
    mirrors = parse_mirrors(["vault.habana.ai=registry.lab:5000/habana/"])
    from_mirror = mirrored(GAUDI, mirrors)
    assert from_mirror == "registry.lab:5000/habana/" + GAUDI.split("/", 1)[1]
    engine = FakeEngine(reachable=[from_mirror])
    base = ensure_base(engine, GAUDI, UBUNTU, tmp_path, mirrors)
    assert (base.ref, base.how, base.note) == (GAUDI, "pulled", f"from the mirror {from_mirror}")
    assert engine.calls == [("pull", from_mirror), ("tag", from_mirror, GAUDI)]
    # Next time the image is local: no registry is asked.
    assert ensure_base(engine, GAUDI, UBUNTU, tmp_path, mirrors).how == "local"


def test_docker_hub_images_have_a_mirror_too(tmp_path: Path):
    engine = FakeEngine(reachable=["mirror.lab/library/ubuntu:24.04"])
    base = ensure_base(engine, "ubuntu:24.04", UBUNTU, tmp_path, {"docker.io": "mirror.lab"})
    assert base.ref == "ubuntu:24.04" and ("tag", "mirror.lab/library/ubuntu:24.04",
                                           "ubuntu:24.04") in engine.calls


def test_when_nothing_answers_the_error_names_both_and_the_flag(tmp_path: Path):
    """No registry answered: the environment's fault (the cell is an error, not a failure)."""
    engine = FakeEngine()
    with pytest.raises(EnvironmentFault) as info:
        ensure_base(engine, GAUDI, UBUNTU, tmp_path, {"vault.habana.ai": "registry.lab"})
    text = str(info.value)
    assert "the mirror's registry.lab/gaudi-docker" in text and "vault.habana.ai: no such host" \
        in text
    assert "--registry-mirror vault.habana.ai=MIRROR" in text
    assert info.value.short == (f"base image {GAUDI} could not be pulled: its registry "
                                "vault.habana.ai did not answer")


@pytest.mark.parametrize("bad", ["vault.habana.ai", "=mirror", "vault.habana.ai=",
                                 "docker.io/library=mirror"])
def test_bad_mirror_flags_are_input_errors(bad):
    with pytest.raises(InputError, match="write it as REGISTRY=MIRROR"):
        parse_mirrors([bad])


def test_two_runs_that_need_one_base_bootstrap_it_once(tmp_path: Path, monkeypatch):
    """Two oota runs on one host (two vendors' builds, two test sessions) need Debian 12's base
    at once: the second waits for the first one's bootstrap and takes its image."""
    from oota.config.matrix import Bootstrap
    from oota.execute import bases

    spec = OsSpec(key="debian12", image="debian:bookworm-slim", python=(),
                  bootstrap=Bootstrap(tool="debootstrap", suite="bookworm",
                                      mirror="http://deb.debian.org/debian"))
    engine = FakeEngine()
    labels: dict[str, dict[str, str]] = {}
    engine.image_labels = labels.get  # type: ignore[method-assign]
    made: list[str] = []
    started = threading.Event()

    def bootstrap(engine_: object, spec_: OsSpec, tag: str, workdir: Path) -> None:
        started.set()
        time.sleep(0.3)  # the other run asks meanwhile
        made.append(tag)
        labels[tag] = bases._bootstrap_labels(spec_)  # noqa: SLF001 - what a bootstrap labels

    monkeypatch.setattr(bases, "_debootstrap_and_import", bootstrap)
    found: list[str] = []
    first = threading.Thread(target=lambda: found.append(
        ensure_base(engine, spec.image, spec, tmp_path).how))
    first.start()
    assert started.wait(5)
    found.append(ensure_base(engine, spec.image, spec, tmp_path).how)
    first.join(5)
    assert made == ["oota/base:debian12"]
    assert sorted(found) == ["bootstrapped", "bootstrapped-earlier"]
