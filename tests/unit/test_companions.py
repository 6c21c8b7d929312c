"""Companions derived from the index's metadata: the pairing rule, the cache that
``release-check --update`` writes, the check of hand-typed pairs against it, and the
comparison ``release-check`` makes (a real HTTP index served by the test, PEP 691 JSON with
upload times and PEP 658 metadata, shaped like PyPI on 2026-11-26)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from packaging.version import Version

from oota.config.companions import load_cache
from oota.config.matrix import load_matrix
from oota.errors import InputError, MatrixError
from oota.plan import plan
from oota.releases.command import run
from oota.releases.companions import choose
from tests.conftest import write_vendor_project

X86 = "manylinux_2_28_x86_64"
# (project, version, uploaded, Requires-Dist): torchvision's real pins (PyPI, 2026-11-26).
PROJECTS = [
    ("torch", "2.12.0", "2026-05-13", []),
    ("torch", "2.12.1", "2026-06-17", []),
    ("torch", "2.14.1", "2026-09-30", []),
    ("torch", "2.15.0", "2026-10-28", []),
    ("torchvision", "0.27.0", "2026-05-13", ["torch==2.12.0"]),
    ("torchvision", "0.27.1", "2026-06-17", ["torch==2.12.1"]),
    ("torchvision", "0.29.1", "2026-09-30", ["torch>=2.14.0"]),
    ("torchvision", "0.29.2", "2026-10-28", ["torch>=2.14.0", "numpy"]),
]


def _metadata(name: str, version: str, requires: list[str]) -> bytes:
    lines = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}",
             "Requires-Python: >=3.10"] + [f"Requires-Dist: {r}" for r in requires]
    return ("\n".join(lines) + "\n").encode()


@contextlib.contextmanager
def serve(projects: list[tuple[str, str, str, list[str]]]) -> Iterator[str]:
    """A PEP 691 index with PEP 658 metadata files on 127.0.0.1; yields its URL."""
    metadata = {f"{n.replace('-', '_')}-{v}-cp312-cp312-{X86}.whl": _metadata(n, v, r)
                for n, v, _, r in projects}

    def page(project: str) -> bytes:
        wheel = project.replace("-", "_") + "-{v}-cp312-cp312-" + X86 + ".whl"
        files = [{"filename": wheel.format(v=v), "url": f"../../files/{wheel.format(v=v)}",
                  "hashes": {}, "upload-time": f"{day}T12:00:00.000000Z",
                  "core-metadata": {"sha256": hashlib.sha256(
                      metadata[wheel.format(v=v)]).hexdigest()}}
                 for n, v, day, _ in projects if n == project]
        return json.dumps({"meta": {"api-version": "1.1"}, "name": project,
                           "files": files}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            parts = [p for p in self.path.split("/") if p]
            body, ctype = b"", "text/plain"
            if parts[:1] == ["simple"] and any(n == parts[1] for n, *_ in projects):
                body, ctype = page(parts[1]), "application/vnd.pypi.simple.v1+json"
            elif parts[:1] == ["files"] and parts[-1].removesuffix(".metadata") in metadata:
                body, ctype = metadata[parts[-1].removesuffix(".metadata")], "text/plain"
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


MATRIX = """\
version: 1
os:
  debian12:
    image: debian:bookworm-slim
    python: ["3.11"]
vendors:
  demo:
    os: [debian12]
    python: ["3.11"]
    torch: ["2.15.0", {release: "2.12.1", pinned: "the pair the metadata corrected"}]
"""
DEMO = """\
    name: demo
    device: cpu
    requirements: ["torch=={torch}"]
    test_requirements: ["torchvision=={torchvision}"]
    companions: COMPANIONS
    facts: {python: ">=3.10", torch_index: pypi}
    """


def project(tmp_path: Path, companions: str = "[torchvision]") -> Path:
    return write_vendor_project(tmp_path, MATRIX, {"demo": DEMO.replace("COMPANIONS",
                                                                         companions)})


@pytest.mark.parametrize(("torch", "expected", "why"), [
    ("2.12.1", "0.27.1", "pins torch==2.12.1"),
    ("2.14.1", "0.29.1", "released with torch 2.14.1 (2026-09-30)"),
    ("2.15.0", "0.29.2", "released with torch 2.15.0 (2026-10-28)"),
    ("2.16.0", "0.29.2", "the newest that allows torch 2.16.0 (>=2.14.0)"),
], ids=["exact-pin", "same-day-patch", "same-day-minor", "newest-allowing"])
def test_the_pairing_rule(torch: str, expected: str, why: str) -> None:
    requires = {v: r[0].removeprefix("torch") for n, v, _, r in PROJECTS if n == "torchvision"}
    uploaded = {v: day for n, v, day, _ in PROJECTS if n == "torchvision"}
    days = {"2.12.1": "2026-06-17", "2.14.1": "2026-09-30", "2.15.0": "2026-10-28"}
    pair = choose(requires, uploaded, Version(torch), days.get(torch, ""))
    assert pair is not None and (pair.version, pair.why) == (expected, why)


def test_no_release_accepting_the_torch_pairs_nothing() -> None:
    assert choose({"0.27.0": "==2.12.0"}, {}, Version("2.12.1"), "") is None


def test_update_writes_the_cache_and_the_cells_take_its_pairs(tmp_path: Path) -> None:
    matrix = project(tmp_path)
    with serve(PROJECTS) as url:
        outcome = run(matrix, index_url=url, update=True, torch="2.15.0")
    assert "updated vendors/companions.yaml" in outcome.text
    cache = load_cache(tmp_path / "vendors" / "companions.yaml", "vendors/companions.yaml")
    pairs = {t: p.version for t, p in cache.companions["torchvision"].pairs.items()}
    assert pairs == {"2.15.0": "0.29.2", "2.14.1": "0.29.1", "2.12.1": "0.27.1"}
    assert cache.companions["torchvision"].requires["0.27.0"] == "==2.12.0"
    cells = {str(c.torch): c.format("torchvision=={torchvision}", "test_requirements")
             for c in plan(load_matrix(matrix))}
    assert cells == {"2.15.0": "torchvision==0.29.2", "2.14.1": "torchvision==0.29.1",
                     "2.12.1": "torchvision==0.27.1"}


def test_a_typed_pair_the_metadata_contradicts_names_both(tmp_path: Path) -> None:
    matrix = project(tmp_path)
    with serve(PROJECTS) as url:
        run(matrix, index_url=url, update=True, torch="2.15.0")
    (tmp_path / "vendors" / "demo" / "vendor.yaml").write_text(
        (tmp_path / "vendors" / "demo" / "vendor.yaml").read_text().replace(
            "companions: [torchvision]", 'companions: {torchvision: {"2.12": "0.27.0", '
            '"2.15": "0.29.2"}}'))
    with pytest.raises(MatrixError) as err:
        load_matrix(matrix)
    text = str(err.value)
    assert 'matrix.yaml:10:5: vendors.demo.torch: vendors/demo/vendor.yaml ' \
           'companions.torchvision["2.12"] pairs torch 2.12.1 with torchvision 0.27.0, but ' \
           'torchvision 0.27.0 requires torch==2.12.0' in text
    assert "the index pairs torch 2.12.1 with torchvision 0.27.1 (pins torch==2.12.1)" in text


def test_a_typed_pair_the_metadata_accepts_is_kept(tmp_path: Path) -> None:
    matrix = project(tmp_path, '{torchvision: {"2.15": "0.29.1"}}')
    with serve(PROJECTS) as url:
        run(matrix, index_url=url, update=True, torch="2.15.0")
    cells = {str(c.torch): c.format("{torchvision}", "x") for c in plan(load_matrix(matrix))}
    assert cells == {"2.15.0": "0.29.1", "2.14.1": "0.29.1", "2.12.1": "0.27.1"}


def test_a_torch_release_missing_from_the_cache_says_how_to_fill_it(tmp_path: Path) -> None:
    cell = plan(load_matrix(project(tmp_path)))[0]
    with pytest.raises(InputError, match=r"no torchvision paired with torch 2\.15\.0 in "
                       r"vendors/companions\.yaml or companions\.torchvision: run "
                       r"\./oota\.sh release-check --update"):
        cell.format("torchvision=={torchvision}", "test_requirements")


def test_release_check_reports_where_the_cache_differs_from_the_index(tmp_path: Path) -> None:
    matrix = project(tmp_path)
    with serve(PROJECTS) as url:
        run(matrix, index_url=url, update=True, torch="2.15.0")
        cache = tmp_path / "vendors" / "companions.yaml"
        assert "vendors/companions.yaml agrees with" in run(matrix, index_url=url,
                                                           torch="2.15.0").text
        cache.write_text(cache.read_text().replace('version: "0.29.2"', 'version: "0.29.1"'))
        outcome = run(matrix, index_url=url, torch="2.15.0")
    assert ("companions: torchvision for torch 2.15.0: the cache says 0.29.1 (") in outcome.text
    assert "the index now 0.29.2 (released with torch 2.15.0 (2026-10-28))" in outcome.text
    assert outcome.gaps == 1
