"""Reproducible images and verifications that follow the bytes (oota/reproducible.py,
oota/execute/samebytes.py), without Docker: the configuration oota writes, which history
entries made layers, where two copies of a layer differ, and when an earlier verification
holds for an image on another Engine. The real builds on two Engines are
tests/docker/test_daily_loop.py."""

from __future__ import annotations

import json

import pytest

from oota import reproducible
from oota.engine.base import ImageLayer
from oota.execute import samebytes
from oota.reproducible import Entry, Step
from oota.results.assemble import assemble, cell_ref, now
from oota.results.model import Host, Image, Layer, Sealed, TestOutcome

INSPECTED = {"Architecture": "amd64", "Os": "linux",
             "Config": {"Env": ["PATH=/usr/bin"], "Cmd": ["oota-verify"],
                        "Labels": {"oota.cell": "c"}, "Image": "", "Hostname": ""},
             "RootFS": {"Layers": ["sha256:" + "1" * 64, "sha256:" + "2" * 64]}}
STEPS = [Step(created_by="", comment="Imported from -", layer=True),
         Step(created_by="ENV PATH=/usr/bin", comment="buildkit.dockerfile.v0", layer=False),
         Step(created_by="RUN make # buildkit", comment="buildkit.dockerfile.v0", layer=True)]


def test_the_configuration_has_one_time_and_one_spelling() -> None:
    config = reproducible.canonical_config(INSPECTED, STEPS, 1577836800)
    doc = json.loads(config)
    assert doc["created"] == "2020-01-01T00:00:00Z"
    assert {h["created"] for h in doc["history"]} == {"2020-01-01T00:00:00Z"}
    assert [h.get("empty_layer", False) for h in doc["history"]] == [False, True, False]
    assert doc["config"]["Labels"] == {"oota.cell": "c", reproducible.LAYERS_LABEL: "101"}
    assert config == json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    # The same inspect and history on another Engine: the same bytes, the same image id.
    again = reproducible.canonical_config(json.loads(json.dumps(INSPECTED)), list(STEPS),
                                          1577836800)
    assert reproducible.config_id(again) == reproducible.config_id(config)


def test_the_layers_label_lets_the_configuration_be_written_again() -> None:
    history = [(s.created_by, s.comment) for s in STEPS]
    assert reproducible.steps_from_label(history, "101") == STEPS
    assert reproducible.steps_from_label(history, "10") is None      # another history
    assert reproducible.steps_from_label(history, "1x1") is None


@pytest.mark.parametrize(("sizes", "layers", "flags"), [
    ((199, 0, 5), 2, [True, False, True]),        # sizes alone tell
    ((199, 0, 0), 2, [True, False, True]),        # ENV never makes one; the zero-sized RUN does
    ((199, 0, 0), 1, [True, False, False]),       # the RUN changed nothing: BuildKit dropped it
], ids=["sizes", "zero-sized-run-is-a-layer", "zero-sized-run-is-not"])
def test_which_steps_made_layers_from_the_history(sizes, layers, flags) -> None:
    history = [(s.created_by, s.comment, size) for s, size in zip(STEPS, sizes, strict=True)]
    found = reproducible.steps_from_sizes(history, layers)
    assert found is not None and [s.layer for s in found] == flags


def test_an_undecidable_history_says_so() -> None:
    runs = [("RUN a # buildkit", "", 0), ("RUN b # buildkit", "", 0), ("", "x", 9)]
    assert reproducible.steps_from_sizes(runs, 2) is None   # one of the two RUNs: which?


def test_the_etc_layer_and_a_seal_layer_are_the_same_bytes_every_time() -> None:
    assert reproducible.etc_layer() == reproducible.etc_layer()
    files = {"/opt/oota/expected.json": b"{}\n"}
    assert reproducible.files_layer(files, 5) == reproducible.files_layer(dict(files), 5)
    assert reproducible.files_layer(files, 5) != reproducible.files_layer(files, 6)


def test_two_copies_of_a_layer_differ_by_file_and_how() -> None:
    here = {"var/log/dpkg.log": Entry(kind="file", mode=0o644, owner="0:0", size=10,
                                      mtime=1, content="a"),
            "opt": Entry(kind="dir", mode=0o755, owner="0:0", size=0, mtime=1795557276,
                         content=""),
            "opt/x": Entry(kind="file", mode=0o644, owner="0:0", size=1, mtime=1, content="c")}
    there = {**here, "var/log/dpkg.log": Entry(kind="file", mode=0o644, owner="0:0", size=11,
                                               mtime=1, content="b"),
             "opt": Entry(kind="dir", mode=0o755, owner="0:0", size=0, mtime=1795557281,
                          content="")}
    del there["opt/x"]
    assert reproducible.differences(here, there) == [
        "/opt: time 1795557276 here, 1795557281 there", "/opt/x: only here",
        "/var/log/dpkg.log: content"]


class Holder:
    """An engine holding one image: its build output id and layers."""

    def __init__(self, output: str, layers: tuple[str, ...], files: dict | None = None) -> None:
        self.output, self.layers, self.files = output, layers, files or {}

    def build_output(self, ref: str) -> str | None:
        return self.output

    def image_id(self, ref: str) -> str | None:
        return "sha256:sealed-" + self.output[-4:]

    def image_layers(self, ref: str) -> tuple[ImageLayer, ...]:
        steps = ("", "RUN apt-get install python3.11", "RUN pip install torch")
        return tuple(ImageLayer(id=i, step=s) for i, s in zip(self.layers, steps, strict=False))

    def layer_entries(self, ref: str, layer: str) -> dict[str, Entry]:
        return self.files[layer]


def _verified(output: str, layers: tuple[str, ...], engine_id: str = "id-e1"):
    image = Image(tag="oota/cpu:c", id=output, layers=tuple(Layer(id=x) for x in layers),
                  sealed=Sealed(id="sha256:sealed-" + output[-4:], at="2026-11-24T10:00:00"))
    tests = (TestOutcome(id="t::a", layer="install", status="passed", duration_s=0.1),)
    return assemble(cell=cell_ref({"vendor": "cpu", "os": "debian12", "python": "3.11",
                                   "torch": "2.13.0"}, id="c", fingerprint="sha256:f"),
                    stages={}, tests=tests, started_at=now(), image=image,
                    host=Host(facts={"engine": "e1", "engine_id": engine_id}))


L = tuple(f"sha256:{d * 64}" for d in "abc")


def test_the_same_build_output_on_another_engine_is_the_verified_image() -> None:
    found = samebytes.compare(Holder("sha256:out1", L), "t", _verified("sha256:out1", L),
                              lambda _: None)
    assert found.same and not found.why


def test_another_image_names_its_layer_and_the_files_that_differ() -> None:
    changed = (*L[:2], "sha256:" + "d" * 64)
    torch = {"opt/venv/x.pyc": Entry(kind="file", mode=0o644, owner="0:0", size=3, mtime=1,
                                     content="one")}
    there = Holder("sha256:out1", L, {L[2]: torch})
    here = Holder("sha256:out2", changed, {changed[2]: {"opt/venv/x.pyc": Entry(
        kind="file", mode=0o644, owner="0:0", size=3, mtime=1, content="two")}})
    found = samebytes.compare(here, "t", _verified("sha256:out1", L),
                              lambda engine_id: there if engine_id == "id-e1" else None)
    assert not found.same
    assert found.why == ("not the image verified on e1 (sha256:out1 there, sha256:out2 here): "
                         "layer 3 of 3 differs (RUN pip install torch); files: "
                         "/opt/venv/x.pyc: content")
    assert found.detail["layer"] == 3 and found.detail["files"] == ["/opt/venv/x.pyc: content"]
    alone = samebytes.compare(here, "t", _verified("sha256:out1", L), lambda _: None)
    assert alone.why.endswith("its files cannot be compared: e1 is not part of this run or "
                              "no longer holds that image")
