"""release-check against a real HTTP index served by the test (PEP 503 HTML, PEP 691 JSON,
the PyPI JSON API, PEP 658 metadata files, and plain wheels read with HTTP range requests)."""

from __future__ import annotations

import contextlib
import hashlib
import html
import io
import json
import threading
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from packaging.version import Version

from oota.config.matrix import load_matrix
from oota.errors import InputError, MatrixError
from oota.plan import plan
from oota.releases import update as updating
from oota.releases.check import release_check
from oota.releases.command import run
from oota.releases.errors import IndexProblem
from oota.releases.index import SIMPLE_JSON, PackageIndex
from oota.releases.output import format_check
from oota.releases.update import update_matrix
from tests.conftest import write_vendor_project

X86 = "manylinux_2_28_x86_64"
ARM = "manylinux_2_28_aarch64"


# -- the index -------------------------------------------------------------------------------
def _metadata(name: str, version: str, requires_python: str, requires: list[str]) -> bytes:
    lines = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}",
             "Summary: test fixture", f"Requires-Python: {requires_python}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    return ("\n".join(lines) + "\n\nlong description\n").encode()


def _wheel(dist: str, version: str, metadata: bytes) -> bytes:
    """A real wheel (zip) whose METADATA sits after 256 KiB of payload, like real wheels."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(f"{dist}/payload.bin", bytes(range(256)) * 1024)
        zf.writestr(f"{dist}-{version}.dist-info/METADATA", metadata)
        zf.writestr(f"{dist}-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    return buf.getvalue()


@dataclass
class Release:
    project: str
    version: str
    requires_python: str
    requires: list[str]
    wheels: list[tuple[str, str]]     # (python tag, platform)
    yanked: bool = False


# Shaped like PyPI on 2026-11-21 (see shared/VENDOR_FACTS.md): torch 2.15.0 (>=3.11),
# 2.14.1/2.14.0, a 2.16.0rc1 pre-release, a yanked 2.15.1; torch-npu 2.14.0 pins 2.14.0.*.
RELEASES = [
    Release("torch", "2.13.0", ">=3.10", ["filelock"],
            [(f"cp3{m}", X86) for m in range(10, 15)]),
    Release("torch", "2.14.0", ">=3.10", ["filelock"],
            [(f"cp3{m}", p) for m in range(10, 15) for p in (X86, ARM)]),
    Release("torch", "2.14.1", ">=3.10", ["filelock"],
            [(f"cp3{m}", p) for m in range(10, 15) for p in (X86, ARM)]),
    Release("torch", "2.15.0", ">=3.11",
            ["filelock", "cuda-toolkit==13.2.2; platform_system == 'Linux'"],
            [(f"cp3{m}", p) for m in range(11, 15) for p in (X86, ARM)]
            + [("cp310", "win_amd64"), ("cp311", "macosx_11_0_arm64")]),
    Release("torch", "2.15.1", ">=3.11", ["filelock"], [("cp312", X86)], yanked=True),
    Release("torch", "2.16.0rc1", ">=3.11", ["filelock"],
            [(f"cp3{m}", X86) for m in range(11, 15)]),
    Release("torch-npu", "2.13.0", ">=3.10", ["torch==2.13.0.*", "pyyaml", "numpy"],
            [(f"cp3{m}", p) for m in range(10, 14) for p in (X86, ARM)]),
    Release("torch-npu", "2.14.0", ">=3.10", ["torch==2.14.0.*", "pyyaml", "numpy"],
            [(f"cp3{m}", p) for m in range(10, 15) for p in (X86, ARM)]),
]


@dataclass
class FakeIndex:
    """Routes for one index flavour; ``served`` counts body bytes per path."""

    mode: str
    files: dict[str, bytes] = field(default_factory=dict)
    metadata: dict[str, bytes] = field(default_factory=dict)
    served: dict[str, int] = field(default_factory=dict)
    base: str = ""

    def project_files(self, project: str):
        for rel in RELEASES:
            if rel.project != project:
                continue
            dist = project.replace("-", "_")
            for py, plat in rel.wheels:
                name = f"{dist}-{rel.version}-{py}-{py}-{plat}.whl"
                meta = _metadata(project, rel.version, rel.requires_python, rel.requires)
                self.metadata[name] = meta
                self.files.setdefault(name, _wheel(dist, rel.version, meta))
                yield rel, name

    def simple_json(self, project: str) -> bytes:
        files = []
        for rel, name in self.project_files(project):
            entry = {"filename": name, "url": f"../../files/{name}",
                     "hashes": {"sha256": hashlib.sha256(self.files[name]).hexdigest()},
                     "requires-python": rel.requires_python, "yanked": rel.yanked}
            if self.mode == "pep691":
                digest = hashlib.sha256(self.metadata[name]).hexdigest()
                entry["core-metadata"] = entry["dist-info-metadata"] = {"sha256": digest}
            files.append(entry)
        return json.dumps({"meta": {"api-version": "1.1"}, "name": project,
                           "files": files}).encode()

    def simple_html(self, project: str) -> bytes:
        links = []
        for rel, name in self.project_files(project):
            attrs = f' data-requires-python="{html.escape(rel.requires_python)}"'
            if rel.yanked:
                attrs += ' data-yanked="broken build"'
            if self.mode == "pep503":
                digest = hashlib.sha256(self.metadata[name]).hexdigest()
                attrs += f' data-dist-info-metadata="sha256={digest}"' \
                         f' data-core-metadata="sha256={digest}"'
            sha = hashlib.sha256(self.files[name]).hexdigest()
            links.append(f'<a href="../../files/{name}#sha256={sha}"{attrs}>{name}</a><br/>')
        return ("<!DOCTYPE html><html><body><h1>Links for " + project + "</h1>"
                + "\n".join(links) + "</body></html>").encode()

    def json_api(self, project: str, version: str | None) -> bytes | None:
        rels = [r for r in RELEASES if r.project == project]
        if not rels:
            return None
        urls = {r.version: [] for r in rels}
        for rel, name in self.project_files(project):
            urls[rel.version].append({"filename": name, "url": f"{self.base}/files/{name}",
                                      "yanked": rel.yanked, "requires_python": rel.requires_python,
                                      "packagetype": "bdist_wheel"})
        pick = next((r for r in rels if r.version == version), None) if version else rels[-1]
        if pick is None:
            return None
        info = {"name": project, "version": pick.version, "requires_dist": pick.requires,
                "requires_python": pick.requires_python}
        return json.dumps({"info": info, "releases": urls, "urls": urls[pick.version]}).encode()

    def route(self, path: str, accept: str) -> tuple[int, str, bytes]:
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["simple"] and len(parts) == 2 and self.mode != "json-api":
            known = any(r.project == parts[1] for r in RELEASES)
            if not known:
                return 404, "text/plain", b"not found"
            if self.mode == "pep691" and SIMPLE_JSON in accept:
                return 200, SIMPLE_JSON, self.simple_json(parts[1])
            return 200, "text/html", self.simple_html(parts[1])
        if parts[:1] == ["pypi"] and parts[-1] == "json" and self.mode in ("json-api", "pep691"):
            body = self.json_api(parts[1], parts[2] if len(parts) == 4 else None)
            return (200, "application/json", body) if body else (404, "text/plain", b"")
        if parts[:1] == ["files"] and len(parts) == 2:
            name = parts[1]
            if name.endswith(".metadata") and self.mode in ("pep691", "pep503"):
                return 200, "application/octet-stream", self.metadata[name[: -len(".metadata")]]
            if name in self.files:
                return 200, "application/octet-stream", self.files[name]
        return 404, "text/plain", b"not found"


@contextlib.contextmanager
def serve(mode: str):
    """An index served over HTTP on 127.0.0.1 (random port) while the block runs."""
    fake = FakeIndex(mode=mode)
    for project in ("torch", "torch-npu"):
        list(fake.project_files(project))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            code, ctype, body = fake.route(self.path.split("?", 1)[0],
                                           self.headers.get("Accept", ""))
            rng = self.headers.get("Range")
            if code == 200 and rng and fake.mode == "range" and self.path.startswith("/files/"):
                first, _, last = rng.removeprefix("bytes=").partition("-")
                start, end = int(first), min(int(last), len(body) - 1)
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
                body = body[start:end + 1]
            else:
                self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            fake.served[self.path] = fake.served.get(self.path, 0) + len(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(params=["pep691", "pep503", "json-api", "range", "download"])
def index(request):
    """Each index flavour: metadata by PEP 658, the JSON API, range reads, downloads."""
    with serve(request.param) as fake:
        yield fake


@pytest.fixture
def pep691():
    """PyPI's own flavour, for tests whose subject is not the index."""
    with serve("pep691") as fake:
        yield fake


# -- the project -----------------------------------------------------------------------------
MATRIX = """\
# Release-check fixture: every comment here must survive --update.
version: 1
os:
  debian12:
    image: debian:bookworm-slim
    python: ["3.11"]   # bookworm's python3
vendors:
  cpu:
    os: [debian12]
    python: ["3.11"]
    torch: ["2.13.0"]   # tracks torch: rewritten by release-check --update
    default:
      - {os: debian12, python: "3.11", torch: "2.13.0"}
  cuda:
    os: [debian12]
    python: ["3.11"]
    cuda: ["13.2"]
    torch: ["2.14.0"]
  ascend:
    os: [debian12]
    python: ["3.11"]
    torch:
      - "2.13.0"   # torch_npu pins one torch
  rocm:
    os: [debian12]
    python: ["3.11"]
    rocm: ["7.2"]
    torch:
      - '2.13.0'
      # more ROCm releases below this line
  gaudi:
    os: [debian12]
    python: ["3.11"]
    torch: ["2.9.0"]
"""

VENDORS = {
    "cpu": """\
        name: cpu
        device: cpu
        requirements: ["torch=={torch}+cpu"]
        facts: {python: ">=3.10", torch_index: pypi}
        """,
    "cuda": """\
        name: cuda
        device: cuda
        toolkit: {axis: cuda, id_prefix: cu, name: CUDA}
        requirements: ["torch=={torch}"]
        facts:
          sources: {t: {url: "https://example.org/table"}}
          python: ">=3.10,<3.16"
          torch_index: pypi
          compat:
            - {torch: "2.15", toolkit: "13.2", python: ">=3.11,<3.16",
               source: t, verified: "2026-11-21"}
            - {torch: "2.14", toolkit: "13.0", python: ">=3.10,<3.15",
               source: t, verified: "2026-11-21"}
        """,
    "ascend": """\
        name: ascend
        device: npu
        requirements: ["torch=={torch}", "torch-npu=={torch}"]
        facts:
          python: ">=3.10,<3.15"
          torch_index: pypi
          extension: {distribution: torch-npu, import: torch_npu, index: pypi}
        """,
    "rocm": """\
        name: rocm
        device: cuda
        toolkit: {axis: rocm, id_prefix: rocm, name: ROCm}
        requirements: ["torch=={torch}"]
        facts:
          sources: {t: {url: "https://example.org/table"}}
          python: ">=3.10,<3.15"
          torch_index: data
          compat:
            - {torch: "2.14", toolkit: "7.2", python: ">=3.10,<3.14",
               source: t, verified: "2026-11-21"}
        """,
    "gaudi": """\
        name: gaudi
        device: hpu
        requirements: ["torch=={torch}"]
        facts:
          sources: {t: {url: "https://example.org/table"}}
          python: ">=3.10,<3.13"
          torch_index: data
          extension: {distribution: habana-torch-plugin, import: habana_frameworks, index: data}
          compat:
            - {torch: "2.10.0", extension: "1.24.0", python: ">=3.10,<3.13",
               source: t, verified: "2026-11-21"}
            - {torch: "2.9", extension: "1.23.0", python: ">=3.10,<3.13",
               source: t, verified: "2026-11-21"}
        """,
}


@pytest.fixture
def matrix_file(tmp_path: Path) -> Path:
    return write_vendor_project(tmp_path, MATRIX, VENDORS)


NPU_GAP = ("ascend py{py} x86_64+aarch64: no torch-npu for torch {t} (newest 2.14.0 requires "
           "torch==2.14.0.*) (index)")
ROCM_DATA = "(vendor data: vendors/rocm/vendor.yaml facts.compat"
GAUDI_GAP = ("gaudi py3.{m} x86_64: no habana-torch-plugin for torch {t} (newest "
             "habana-torch-plugin 1.24.0 pairs torch 2.10.0) (vendor data: "
             "vendors/gaudi/vendor.yaml facts.compat)")
EXPECTED_GAPS = (
    [NPU_GAP.format(py=f"3.{m}", t="2.15.0") for m in range(11, 15)]
    + [f"rocm py3.{m} x86_64: no ROCm pairing for torch 2.15.0 (newest: torch 2.14 with ROCm 7.2) "
       f"{ROCM_DATA})" for m in range(11, 15)]
    + [GAUDI_GAP.format(m=m, t="2.15.0") for m in (11, 12)]
    + [NPU_GAP.format(py=f"3.{m}", t="2.14.1") for m in range(10, 15)]
    + [f"rocm py3.14 x86_64: ROCm 7.2 for torch 2.14 supports Python >=3.10,<3.14 {ROCM_DATA}[0])"]
    + [GAUDI_GAP.format(m=m, t="2.14.1") for m in (10, 11, 12)]
)


# -- detection and gaps ----------------------------------------------------------------------
def test_detects_newest_final_release_and_previous_minor(index, matrix_file):
    check = release_check(load_matrix(matrix_file), index_url=index.base)
    assert (check.current, check.previous, check.detected) == (Version("2.15.0"),
                                                              Version("2.14.1"), True)
    pythons = {str(t.version): [str(p) for p in t.pythons] for t in check.torch}
    # cp310 of 2.15.0 exists only for Windows, cp311 also for macOS: Linux x86_64 is what counts.
    assert pythons == {"2.15.0": ["3.11", "3.12", "3.13", "3.14"],
                       "2.14.1": ["3.10", "3.11", "3.12", "3.13", "3.14"]}


def test_every_gap_says_why(index, matrix_file):
    check = release_check(load_matrix(matrix_file), index_url=index.base)
    assert [r.sentence for r in check.gaps] == EXPECTED_GAPS
    ok = [r.sentence for r in check.rows if r.ok]
    assert "cpu py3.14 x86_64: torch 2.15.0 has a cp314 wheel (index)" in ok
    assert f"rocm py3.13 x86_64: ROCm 7.2 for torch 2.14 {ROCM_DATA}[0])" in ok
    assert ("cuda py3.12 x86_64: torch 2.15.0 has a cp312 wheel (index); CUDA 13.2 for torch "
            "2.15 (vendor data: vendors/cuda/vendor.yaml facts.compat[0])") in ok
    assert len(ok) == 2 * (4 + 5) + 4  # cpu and cuda for both, rocm 2.14.1 on 3.10-3.13


def test_named_release_pairs_from_wheel_metadata(index, matrix_file):
    check = release_check(load_matrix(matrix_file), index_url=index.base, torch="2.13.0",
                          vendors=["ascend"])
    assert (check.current, check.previous, check.detected) == (Version("2.13.0"), None, False)
    by_py = {str(r.python): r for r in check.rows if r.platform == "x86_64"}
    assert by_py["3.12"].ok
    assert by_py["3.12"].detail == "torch-npu 2.13.0 (requires torch==2.13.0.*) (index)"
    assert by_py["3.14"].sentence == ("ascend py3.14 x86_64: torch-npu 2.13.0 has no cp314 wheel "
                                      "(has: cp310, cp311, cp312, cp313) (index)")
    # torch-npu publishes aarch64 wheels too, so aarch64 is checked; torch 2.13.0 has none here.
    arm = {str(r.python): r.sentence for r in check.rows if r.platform == "aarch64"}
    assert arm["3.12"] == "ascend py3.12 aarch64: torch 2.13.0 has no cp312 wheel (index)"


EXPECTED_SOURCE = {"pep691": "pep658", "pep503": "pep658", "json-api": "json-api",
                   "range": "wheel-range", "download": "wheel-download"}


def test_metadata_comes_from_the_cheapest_source(index):
    idx = PackageIndex(index.base + "/simple")
    files = idx.releases("torch-npu")[Version("2.14.0")]
    wheel = next(f for f in files if f.filename.endswith("cp312-cp312-manylinux_2_28_x86_64.whl"))
    meta = idx.metadata("torch-npu", wheel)
    assert meta.source == EXPECTED_SOURCE[index.mode]
    assert [str(r) for r in meta.requires_dist] == ["torch==2.14.0.*", "pyyaml", "numpy"]
    assert meta.requires_python == ">=3.10"
    if index.mode == "range":  # only the zip directory and METADATA were fetched
        assert index.served[f"/files/{wheel.filename}"] < len(index.files[wheel.filename]) / 4


def test_prereleases_and_yanked_files_are_ignored(index):
    versions = list(PackageIndex(index.base).releases("torch"))
    assert versions == [Version(v) for v in ("2.15.0", "2.14.1", "2.14.0", "2.13.0")]


def test_an_unknown_project_is_a_gap_not_a_crash(index, matrix_file):
    text = matrix_file.parent / "vendors" / "ascend" / "vendor.yaml"
    text.write_text(text.read_text().replace("distribution: torch-npu", "distribution: torch-xyz"))
    check = release_check(load_matrix(matrix_file), index_url=index.base, vendors=["ascend"])
    assert {r.detail for r in check.rows} == {"no torch-xyz on the index (index)"}


def test_unreachable_index_is_an_environment_problem(matrix_file):
    with pytest.raises(IndexProblem, match=r"127\.0\.0\.1:9/simple/torch/"):
        release_check(load_matrix(matrix_file), index_url="http://127.0.0.1:9")


def test_bad_torch_and_format_are_input_errors(index, matrix_file):
    with pytest.raises(InputError, match="--torch 2.x: not a version"):
        release_check(load_matrix(matrix_file), index_url=index.base, torch="2.x")
    with pytest.raises(InputError, match="--format yaml"):
        run(matrix_file, index_url=index.base, fmt="yaml")


# -- output ----------------------------------------------------------------------------------
def test_table(pep691, matrix_file):
    text = run(matrix_file, index_url=pep691.base, fmt="table").text
    lines = text.splitlines()
    assert lines[:3] == [
        f"torch N 2.15.0 (detected), N-1 2.14.1 on {pep691.base}",
        "torch 2.15.0: Linux x86_64 wheels for cp311, cp312, cp313, cp314; Linux aarch64 wheels "
        "for cp311, cp312, cp313, cp314 (Requires-Python >=3.11)",
        "torch 2.14.1: Linux x86_64 wheels for cp310, cp311, cp312, cp313, cp314; Linux aarch64 "
        "wheels for cp310, cp311, cp312, cp313, cp314 (Requires-Python >=3.10)"]
    assert lines[4].split() == ["vendor", "torch", "python", "platform", "stack", "source",
                                "detail"]
    assert lines[5].split()[:6] == ["cpu", "2.15.0", "3.11", "x86_64", "yes", "index"]
    gap_rows = [line for line in lines if "  GAP  " in line]
    assert len(gap_rows) == len(EXPECTED_GAPS)
    assert sum(line.endswith(gap.split(": ", 1)[1]) for line in gap_rows
               for gap in EXPECTED_GAPS) >= len(EXPECTED_GAPS)
    per = {v: sum(g.startswith(v + " ") for g in EXPECTED_GAPS)
           for v in dict.fromkeys(g.split()[0] for g in EXPECTED_GAPS)}
    gaps_line = (f"{len(EXPECTED_GAPS)} gap(s), in the GAP rows above: "
                 + ", ".join(f"{v} {n}" for v, n in per.items()))
    # After the gaps, the facts no source confirms (these fixtures name no source for Python).
    after = lines[lines.index(gaps_line) + 1:]
    assert after[0].endswith("unverified fact(s) in the checked vendors' data:")
    assert ("  vendors/gaudi/vendor.yaml facts: Python >=3.10,<3.13, torch from data: "
            "UNVERIFIED: no source recorded") in after
    for gap in EXPECTED_GAPS:  # each gap is said once, in its row
        assert text.count(gap.split(": ", 1)[1]) == sum(
            g.split(": ", 1)[1] == gap.split(": ", 1)[1] for g in EXPECTED_GAPS)


def test_json(pep691, matrix_file):
    data = json.loads(run(matrix_file, index_url=pep691.base, fmt="json").text)
    assert (data["current"], data["previous"], data["gaps"]) == ("2.15.0", "2.14.1", EXPECTED_GAPS)
    assert data["torch"][0] == {"version": "2.15.0", "requires_python": ">=3.11",
                                "wheels": {"Linux x86_64": ["3.11", "3.12", "3.13", "3.14"],
                                           "Linux aarch64": ["3.11", "3.12", "3.13", "3.14"]}}
    gap = "no torch-npu for torch 2.15.0 (newest 2.14.0 requires torch==2.14.0.*)"
    assert {"vendor": "ascend", "torch": "2.15.0", "python": "3.12",
            "platforms": ["Linux x86_64", "Linux aarch64"], "ok": False,
            "detail": f"{gap} (index)",
            "claims": [{"text": gap, "source": "index", "where": pep691.base, "verified": True}]
            } in data["rows"]


def test_markdown(pep691, matrix_file):
    text = run(matrix_file, index_url=pep691.base, fmt="markdown").text
    assert text.startswith("## PyTorch release check\n\n- torch N 2.15.0 (detected)")
    assert "| vendor | torch | python | platform | stack | source | detail |" in text
    assert ("| cpu | 2.15.0 | 3.11 | x86_64 | ✓ | index | torch 2.15.0 has a cp311 wheel "
            "(index) |") in text
    assert ("| ascend | 2.15.0 | 3.11 | x86_64+aarch64 | ✗ | index | no torch-npu for torch "
            "2.15.0 (newest 2.14.0 requires torch==2.14.0.\\*) (index) |") in text
    assert f"{len(EXPECTED_GAPS)} gap(s), in the ✗ rows above: " in text
    assert text.count("| ✗ |") == len(EXPECTED_GAPS)


# -- --update ----------------------------------------------------------------------------------
UPDATED = MATRIX.replace(
    'torch: ["2.13.0"]   # tracks torch', 'torch: ["2.15.0", "2.14.1"]   # tracks torch').replace(
    'torch: ["2.14.0"]', 'torch: ["2.15.0", "2.14.1"]').replace(
    "      - '2.13.0'\n      # more ROCm", "      - '2.14.1'\n      # more ROCm").replace(
    '{os: debian12, python: "3.11", torch: "2.13.0"}',   # the default moves with the axis
    '{os: debian12, python: "3.11", torch: "2.14.1"}')


def test_update_rewrites_torch_axes_and_keeps_comments(pep691, matrix_file):
    text = run(matrix_file, index_url=pep691.base, fmt="table", update=True).text
    assert matrix_file.read_text() == UPDATED
    assert (f"updated {matrix_file}: cpu torch [2.15.0, 2.14.1]; cuda torch [2.15.0, 2.14.1]; "
            "rocm torch [2.14.1]") in text
    assert ("moved: matrix.yaml:13: vendors.cpu.default[0].torch 2.13.0 -> 2.14.1 (2.13.0 left "
            "the axis)") in text
    assert "note: ascend: no pairing for torch 2.15.0 or 2.14.1; torch axis left as it is" in text
    load_matrix(matrix_file)  # still a valid matrix
    assert not list(matrix_file.parent.glob(".*"))  # no temp file left behind


def test_update_twice_changes_nothing(pep691, matrix_file):
    matrix = load_matrix(matrix_file)
    check = release_check(matrix, index_url=pep691.base)
    update_matrix(matrix, check)
    again = update_matrix(load_matrix(matrix_file), check)
    assert again.changed == {} and matrix_file.read_text() == UPDATED


def test_update_json_reports_changes(pep691, matrix_file):
    data = json.loads(run(matrix_file, index_url=pep691.base, fmt="json", update=True).text)
    assert data["update"]["changed"] == {"cpu": ["2.15.0", "2.14.1"], "cuda": ["2.15.0", "2.14.1"],
                                       "rocm": ["2.14.1"]}


@pytest.mark.parametrize(("before", "after"), [
    ('torch: ["2.13.0"]', 'torch: ["2.15.0", "2.14.1"]'),
    ("torch: ['2.13.0']", "torch: ['2.15.0', '2.14.1']"),
    ("torch: [2.13.0]", "torch: [2.15.0, 2.14.1]"),
    ('torch:\n      - "2.13.0"\n', 'torch:\n      - "2.15.0"\n      - "2.14.1"\n'),
    ("torch:\n    - 2.13.0  # pinned\n", "torch:\n    - 2.15.0\n    - 2.14.1  # pinned\n"),
], ids=["flow-double", "flow-single", "flow-plain", "block", "block-comment"])
def test_update_keeps_each_sequence_style(pep691, matrix_file, before, after):
    text = MATRIX.replace('    torch: ["2.13.0"]   # tracks torch: rewritten by release-check '
                          '--update\n', f"    {before}" + ("" if before.endswith("\n") else "\n"))
    matrix_file.write_text(text)
    matrix = load_matrix(matrix_file)
    update_matrix(matrix, release_check(matrix, index_url=pep691.base))
    assert f"    {after}" in matrix_file.read_text()


@pytest.mark.parametrize(("before", "after"), [
    ('torch: ["2.13.0", {channel: nightly, index: "http://n.test/simple"}]',
     'torch: ["2.15.0", "2.14.1", {channel: nightly, index: "http://n.test/simple"}]'),
    ('torch:\n      - "2.13.0"\n      - {channel: nightly, index: "http://n.test/simple"}\n',
     'torch:\n      - "2.15.0"\n      - "2.14.1"\n'
     '      - {channel: nightly, index: "http://n.test/simple"}\n'),
], ids=["flow", "block"])
def test_update_keeps_a_channel_entry(pep691, matrix_file, before, after):
    """A nightly channel is not a release: --update rewrites the releases and keeps it."""
    text = MATRIX.replace('    torch: ["2.13.0"]   # tracks torch: rewritten by release-check '
                          '--update\n', f"    {before}" + ("" if before.endswith("\n") else "\n"))
    matrix_file.write_text(text)
    matrix = load_matrix(matrix_file)
    update_matrix(matrix, release_check(matrix, index_url=pep691.base))
    assert f"    {after}" in matrix_file.read_text()
    cells = {c.id for c in plan(load_matrix(matrix_file), ["cpu"])}
    assert any("torchnightly" in c for c in cells) and any("torch2.15.0" in c for c in cells)


def test_quote_keeps_versions_strings():
    assert updating._quote("2.15", None) == '"2.15"'   # a plain 2.15 would load as a float
    assert updating._quote("2.15.0", None) == "2.15.0"


def test_output_formats_are_consistent_with_the_data(pep691, matrix_file):
    check = release_check(load_matrix(matrix_file), index_url=pep691.base)
    table = format_check(check, "table").splitlines()
    for gap in EXPECTED_GAPS:  # 'vendor pyX.Y platform: detail' is the row of that gap
        head, detail = gap.split(": ", 1)
        vendor, python, platform = head.split()
        assert any(line.split()[:1] == [vendor] and line.split()[2:4] == [python[2:], platform]
                   and "  GAP  " in line and line.endswith(detail) for line in table), gap


def test_source_built_extension_and_toolkitless_table(index, matrix_file):
    """refdev-like vendors build their extension from source in each cell: every torch pairs,
    within their Python range; a vendor without a toolkit axis names its build, not 'None'."""
    import textwrap

    extra = {"ref": """\
        name: ref
        device: refdev
        requirements: ["torch=={torch}+cpu"]
        facts:
          python: ">=3.10,<3.14"
          torch_index: pypi
          extension: {distribution: oota-refdev, import: torch_refdev, index: source}
        """, "xpu": """\
        name: xpu
        display: Intel XPU
        device: xpu
        requirements: ["torch=={torch}+xpu"]
        facts:
          sources: {t: {url: "https://example.org/table"}}
          python: ">=3.10,<3.16"
          torch_index: pypi
          compat:
            - {torch: "2.15", python: ">=3.11,<3.16",
               source: t, verified: "2026-11-21"}
        """}
    for name, text in extra.items():
        folder = matrix_file.parent / "vendors" / name
        folder.mkdir(parents=True)
        (folder / "vendor.yaml").write_text(textwrap.dedent(text))
        (folder / "Dockerfile.j2").write_text('{% extends "base.Dockerfile.j2" %}\n')
    matrix_file.write_text(MATRIX + "".join(
        f'  {n}:\n    os: [debian12]\n    python: ["3.11"]\n    torch: ["2.13.0"]\n'
        for n in extra))
    check = release_check(load_matrix(matrix_file), index_url=index.base, torch="2.15.0",
                          vendors=["ref", "xpu"])
    sentences = {r.sentence: r.ok for r in check.rows if str(r.torch) == "2.15.0"}
    built = ("oota-refdev is built from source against torch 2.15.0 in each cell (vendor data: "
             "vendors/ref/vendor.yaml facts.extension)")
    assert sentences[f"ref py3.12 x86_64: {built}"] is True
    assert sentences[f"ref py3.13 x86_64: {built}"] is True
    assert sentences["xpu py3.11 x86_64: torch 2.15.0 has a cp311 wheel (index); Intel XPU "
                     "build for torch 2.15 (vendor data: vendors/xpu/vendor.yaml "
                     "facts.compat[0])"] is True
    assert not any("None" in s for s in sentences)


# -- pins: what --update keeps -----------------------------------------------------------------
PIN_REASON = "the only CPU wheel our hosts can install"


@pytest.mark.parametrize(("before", "after"), [
    (f'torch: ["2.13.0", {{release: "2.12.0", pinned: "{PIN_REASON}"}}]',
     f'torch: ["2.15.0", "2.14.1", {{release: "2.12.0", pinned: "{PIN_REASON}"}}]'),
    (f'torch:\n      - "2.13.0"\n      - {{release: "2.12.0", pinned: "{PIN_REASON}"}}\n'
     '      - {channel: nightly, index: "http://n.test/simple"}\n',
     f'torch:\n      - "2.15.0"\n      - "2.14.1"\n'
     f'      - {{release: "2.12.0", pinned: "{PIN_REASON}"}}\n'
     '      - {channel: nightly, index: "http://n.test/simple"}\n'),
], ids=["flow", "block-with-channel"])
def test_update_keeps_a_pinned_axis_entry(pep691, matrix_file, before, after):
    """A pinned release stays on the axis as it was written, with the rules naming it; the
    update says so (kept: where, why)."""
    text = MATRIX.replace('    torch: ["2.13.0"]   # tracks torch: rewritten by release-check '
                          '--update\n', f"    {before}" + ("" if before.endswith("\n") else "\n"))
    text = text.replace('{os: debian12, python: "3.11", torch: "2.13.0"}',
                        '{os: debian12, python: "3.11", torch: "2.12.0"}')
    matrix_file.write_text(text)
    out = run(matrix_file, index_url=pep691.base, fmt="table", update=True).text
    written = matrix_file.read_text()
    assert f"    {after}" in written
    assert '{os: debian12, python: "3.11", torch: "2.12.0"}' in written  # the default stays
    kept = [line for line in out.splitlines() if line.startswith("kept: ")]
    assert len(kept) == 1 and kept[0].startswith("kept: matrix.yaml:1") and kept[0].endswith(
        f": vendors.cpu.torch[1]: torch 2.12.0 stays (pinned: {PIN_REASON})"), kept
    assert "moved:" not in out
    cells = {c.id for c in plan(load_matrix(matrix_file), ["cpu"])}
    assert {"cpu-torch2.15.0-py3.11-debian12", "cpu-torch2.12.0-py3.11-debian12"} <= cells


def test_update_keeps_a_pinned_default_and_its_release(pep691, matrix_file):
    """A pinned default is not moved, and its release stays on the axis for it."""
    matrix_file.write_text(MATRIX.replace(
        '{os: debian12, python: "3.11", torch: "2.13.0"}',
        f'{{os: debian12, python: "3.11", torch: "2.13.0", pinned: "{PIN_REASON}"}}'))
    data = json.loads(run(matrix_file, index_url=pep691.base, fmt="json", update=True).text)
    assert data["update"]["changed"]["cpu"] == ["2.15.0", "2.14.1", "2.13.0"]
    assert data["update"]["moved"] == []
    assert data["update"]["kept"] == [
        "matrix.yaml:13:9: vendors.cpu.default[0]: default[0] stays on torch 2.13.0 "
        f"(pinned: {PIN_REASON})"]
    written = matrix_file.read_text()
    assert 'torch: ["2.15.0", "2.14.1", "2.13.0"]   # tracks torch' in written
    assert f'torch: "2.13.0", pinned: "{PIN_REASON}"' in written


def test_a_pin_that_is_n_or_n_minus_1_is_kept_once(pep691, matrix_file):
    matrix_file.write_text(MATRIX.replace(
        'torch: ["2.13.0"]   # tracks', f'torch: ["2.13.0", {{release: "2.14.1", pinned: '
        f'"{PIN_REASON}"}}]   # tracks'))
    out = run(matrix_file, index_url=pep691.base, fmt="table", update=True).text
    assert (f'torch: ["2.15.0", {{release: "2.14.1", pinned: "{PIN_REASON}"}}]   # tracks'
            in matrix_file.read_text())
    assert "is N or N-1 anyway" in out
    assert "moved: matrix.yaml:13: vendors.cpu.default[0].torch 2.13.0 -> 2.14.1" in out


@pytest.mark.parametrize(("entry", "problem"), [
    ('{release: "2.13.0", pined: "x"}',
     "vendors.cpu.torch[0].pined: unknown key 'pined'; did you mean 'pinned'?"),
    ('{relase: "2.13.0", pinned: "x"}',
     "vendors.cpu.torch[0].relase: unknown key 'relase'; did you mean 'release'?"),
    ('{release: "2.13.0", pinned: ""}',
     "vendors.cpu.torch[0].pinned: expected the reason for the pin, a string that is not empty"),
    ('{release: "2.13.0", pinned: true}',
     "vendors.cpu.torch[0].pinned: expected the reason for the pin, a string that is not empty"),
    ('{release: "2.1x.0", pinned: "x"}', "vendors.cpu.torch[0]: '2.1x.0' is not a version"),
], ids=["pined", "relase", "empty", "true", "bad-release"])
def test_a_bad_pin_on_the_axis_is_located_with_a_fix(matrix_file, entry, problem):
    matrix_file.write_text(MATRIX.replace('torch: ["2.13.0"]   # tracks', f"torch: [{entry}]  #"))
    with pytest.raises(MatrixError) as err:
        load_matrix(matrix_file)
    assert any(problem in p and "matrix.yaml:11:" in p for p in err.value.problems), \
        err.value.problems


@pytest.mark.parametrize(("rule", "problem"), [
    ('exclude:\n      - {python: "3.12", torch: "2.13.0", pinned: "x"}\n',
     "vendors.cpu.exclude[0].pinned: an exclude entry cannot be pinned"),
    ('include:\n      - {python: "3.11", pinned: "x"}\n',
     "vendors.cpu.include[0].pinned: a pin keeps a torch release through release-check "
     "--update, and this entry names none"),
], ids=["exclude", "no-torch"])
def test_a_pin_on_a_rule_that_cannot_hold_one(matrix_file, rule, problem):
    matrix_file.write_text(MATRIX.replace("    default:\n", f"    {rule}    default:\n", 1))
    with pytest.raises(MatrixError) as err:
        load_matrix(matrix_file)
    assert any(problem in p for p in err.value.problems), err.value.problems

