"""release-check against indexes that misbehave: a private index that demands a password, a
server that drips one byte at a time, answers that are not what the index API promises; and
``--update`` on the shipped matrix. Each served on 127.0.0.1 by a thread of this test; what is
asserted is what a user sees: the exit code, the one line on stderr, the file on disk."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from oota.config.matrix import load_matrix
from oota.errors import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EnvironmentProblem,
    InputError,
)
from oota.net import split_credentials
from oota.plan import plan, select
from oota.releases.command import run
from oota.releases.errors import BadAnswer, IndexProblem, NotOnIndex
from oota.releases.index import SIMPLE_JSON
from tests import forkcli
from tests.conftest import write_vendor_project

ROOT = Path(__file__).resolve().parents[2]
X86, ARM = "manylinux_2_28_x86_64", "manylinux_2_28_aarch64"
USER, PASSWORD = "ci-bot", "s3cret-Pa55"


# -- a tiny index ------------------------------------------------------------------------------
def _metadata(name: str, version: str, requires: list[str]) -> bytes:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             "Requires-Python: >=3.10"] + [f"Requires-Dist: {r}" for r in requires]
    return ("\n".join(lines) + "\n\n").encode()


# project -> version -> (platforms, Requires-Dist)
PROJECTS: dict[str, dict[str, tuple[tuple[str, ...], list[str]]]] = {
    "torch": {"2.9.0": ((X86,), []), "2.10.0": ((X86,), []), "2.13.0": ((X86,), []),
              "2.14.0": ((X86, ARM), []), "2.14.1": ((X86, ARM), []), "2.15.0": ((X86, ARM), [])},
    "torch-npu": {"2.13.0": ((X86, ARM), ["torch==2.13.0.*"]),
                  "2.14.0": ((X86, ARM), ["torch==2.14.0.*"])},
}


def _files(project: str) -> dict[str, bytes]:
    """filename -> METADATA, for every wheel of the project (cp311 and cp312)."""
    dist = project.replace("-", "_")
    return {f"{dist}-{version}-{py}-{py}-{plat}.whl": _metadata(project, version, requires)
            for version, (plats, requires) in PROJECTS[project].items()
            for py in ("cp311", "cp312") for plat in plats}


def project_page(project: str, *, hashed: bool = True) -> bytes:
    files = [{"filename": name, "url": f"/files/{name}", "hashes": {},
              "requires-python": ">=3.10",
              "core-metadata": {"sha256": hashlib.sha256(meta).hexdigest()} if hashed else True}
             for name, meta in _files(project).items()]
    return json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files}).encode()


def metadata_file(name: str) -> bytes | None:
    for project in PROJECTS:
        meta = _files(project).get(name.removesuffix(".metadata"))
        if meta is not None:
            return meta
    return None


Answer = tuple[int, str, bytes]
FLOOD = "flood"   # an answer's content type that makes the server send a page without end


def good_index(path: str) -> Answer:
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["simple"] and len(parts) == 2 and parts[1] in PROJECTS:
        return 200, SIMPLE_JSON, project_page(parts[1])
    if parts[:1] == ["files"] and len(parts) == 2 and parts[1].endswith(".metadata"):
        meta = metadata_file(parts[1])
        if meta is not None:
            return 200, "application/octet-stream", meta
    return 404, "text/plain", b"not found"


@dataclass
class Server:
    base: str
    seen: list[tuple[str, str]] = field(default_factory=list)   # (path, Authorization)

    def url(self, credentials: str = "") -> str:
        return self.base.replace("http://", f"http://{credentials}@" if credentials else "http://")


@contextlib.contextmanager
def serve(answer: Callable[[str], Answer], *, password: str | None = None,
          drip: str | None = None) -> Iterator[Server]:
    """Serve ``answer(path)``. With ``password``, every request needs basic auth for
    USER:password (401 otherwise). ``drip`` = "headers" or "body": send that part one byte
    every 0.3 s, forever."""
    token = "Basic " + base64.b64encode(f"{USER}:{password}".encode()).decode()
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            auth = self.headers.get("Authorization", "")
            server.seen.append((self.path, auth))
            if password is not None and auth != token:
                self._send(401, "text/plain", b"who are you?")
                return
            if drip:
                self._drip(drip)
                return
            self._send(*answer(self.path.split("?", 1)[0]))

        def _send(self, code: int, ctype: str, body: bytes) -> None:
            if ctype == FLOOD:
                self._flood()
                return
            self.send_response(code)
            if 300 <= code < 400:  # a redirect: the body is where to
                self.send_header("Location", body.decode())
                body = b""
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _flood(self) -> None:
            """A page without end (no Content-Length), until the reader hangs up."""
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            with contextlib.suppress(OSError):
                while not stop.is_set():
                    self.wfile.write(b"<a>x</a>" * 8192)

        def _drip(self, part: str) -> None:
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n"
            payload = head if part == "headers" else b"x" * 100000
            if part == "body":
                self.wfile.write(head)
            with contextlib.suppress(OSError):
                for byte in payload:
                    if stop.wait(0.3):
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server = Server(base=f"http://127.0.0.1:{httpd.server_address[1]}")
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


# -- the project -------------------------------------------------------------------------------
MATRIX = """\
version: 1
os:
  debian12:
    image: debian:bookworm-slim
    python: ["3.11"]
vendors:
  cpu:
    os: [debian12]
    python: ["3.11"]
    torch: ["2.13.0"]
    default:
      - {os: debian12, python: "3.11", torch: "2.13.0"}
  ascend:
    os: [debian12]
    python: ["3.11"]
    torch: ["2.14.0"]
"""
VENDORS = {
    "cpu": """\
        name: cpu
        device: cpu
        requirements: ["torch=={torch}+cpu"]
        facts: {python: ">=3.10", torch_index: pypi}
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
}


@pytest.fixture
def matrix_file(tmp_path: Path) -> Path:
    return write_vendor_project(tmp_path, MATRIX, VENDORS)


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    """``invoke release-check ARGS`` as a user runs it, from this checkout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return forkcli.run([sys.executable, "-m", "invoke", "release-check", *args],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


# -- credentials -------------------------------------------------------------------------------
def test_credentials_in_the_url_are_sent_as_basic_auth_and_never_shown(matrix_file):
    with serve(good_index, password=PASSWORD) as index:
        url = index.url(f"{USER}:{PASSWORD}") + "/simple"
        outputs = [run(matrix_file, index_url=url, fmt=fmt, update=fmt == "json").text
                   for fmt in ("table", "markdown", "json")]
    assert all(auth for _, auth in index.seen)             # every request authenticated
    assert f"{USER}:***@127.0.0.1" in outputs[0]
    for text in outputs:
        assert PASSWORD not in text
    assert json.loads(outputs[2])["index"].startswith(f"http://{USER}:***@")


def test_a_wrong_password_is_exit_3_and_the_password_is_not_echoed(matrix_file):
    with serve(good_index, password=PASSWORD) as index:
        proc = invoke("--matrix", str(matrix_file), "--index-url", index.url(f"{USER}:wr0ng-pw"))
    assert proc.returncode == EXIT_ENVIRONMENT
    line = one_line_error(proc)
    assert "HTTP 401" in line and f"{USER}:***@127.0.0.1" in line and "user and password" in line
    assert "wr0ng-pw" not in proc.stdout + proc.stderr


def test_a_token_as_user_is_sent_and_never_shown(matrix_file):
    """``https://TOKEN@host/simple`` (how registries hand out tokens): basic auth with the
    token as user and an empty password, as pip sends it; shown as ``***@host``."""
    with serve(good_index, password="") as index:
        url = index.url(USER)
        text = run(matrix_file, index_url=url, vendors=["cpu"]).text
        proc = invoke("--matrix", str(matrix_file), "--index-url", url, "--torch", "9.9")
    assert text.startswith("torch N 2.15.0 (detected), N-1 2.14.1 on http://***@127.0.0.1")
    assert proc.returncode == EXIT_BAD_INPUT
    assert "http://***@127.0.0.1" in one_line_error(proc)
    assert USER not in text + proc.stdout + proc.stderr


def test_credentials_go_to_the_index_only(matrix_file):
    """Files hosted elsewhere (a CDN) never see the index's password."""
    with serve(good_index) as files:
        def index_pointing_elsewhere(path: str) -> Answer:
            code, ctype, body = good_index(path)
            return code, ctype, body.replace(b'"/files/', f'"{files.base}/files/'.encode())

        with serve(index_pointing_elsewhere, password=PASSWORD) as index:
            run(matrix_file, index_url=index.url(f"{USER}:{PASSWORD}"), vendors=["ascend"])
    assert any(path.endswith(".metadata") for path, _ in files.seen)
    assert not any(auth for _, auth in files.seen)


def test_a_token_in_the_query_string_is_redacted(matrix_file):
    with serve(good_index) as index:
        with pytest.raises(NotOnIndex) as caught:
            run(matrix_file, index_url=f"{index.base}/nowhere?token=t0ps3cret")
    assert "t0ps3cret" not in str(caught.value) and "token=***" in str(caught.value)


# -- deadlines ---------------------------------------------------------------------------------
@pytest.mark.parametrize("part", ["headers", "body"])
def test_a_server_that_drips_bytes_hits_the_deadline(matrix_file, part):
    with serve(good_index, drip=part) as index:
        started = time.monotonic()
        with pytest.raises(IndexProblem, match=r"no complete answer within 1 s"):
            run(matrix_file, index_url=index.base, timeout="1")
    assert time.monotonic() - started < 8


def test_a_dripping_server_is_exit_3_through_the_task(matrix_file):
    with serve(good_index, drip="body") as index:
        started = time.monotonic()
        proc = invoke("--matrix", str(matrix_file), "--index-url", index.base, "--timeout", "1")
    assert proc.returncode == EXIT_ENVIRONMENT
    assert "no complete answer within 1 s" in one_line_error(proc)
    assert time.monotonic() - started < 30


def test_a_page_without_end_is_cut_at_the_limit_and_exit_3(matrix_file):
    """The answer is read up to 64 MiB, then refused: memory stays bounded (this answer
    used to grow to 18 GB)."""
    with serve(lambda path: (200, FLOOD, b"")) as index:
        started = time.monotonic()
        proc = invoke("--matrix", str(matrix_file), "--index-url", index.base)
    assert proc.returncode == EXIT_ENVIRONMENT
    assert "the answer is larger than 64 MiB; not read further" in one_line_error(proc)
    assert time.monotonic() - started < 60


def test_a_redirect_out_of_http_is_refused(matrix_file):
    with serve(lambda path: (302, "text/plain", b"file:///etc/passwd")) as index:
        proc = invoke("--matrix", str(matrix_file), "--index-url", index.base)
    assert proc.returncode == EXIT_ENVIRONMENT
    line = one_line_error(proc)
    assert "redirects to a file: URL (file:///etc/passwd); only http(s) redirects are followed" \
        in line
    assert "root:" not in proc.stdout + proc.stderr


def test_a_redirect_to_another_host_is_followed_and_said(matrix_file):
    with serve(good_index) as files:
        with serve(lambda path: (302, "text/plain", f"{files.base}{path}".encode()),
                   password=PASSWORD) as index:
            check = run(matrix_file, index_url=index.url(f"{USER}:{PASSWORD}"), vendors=["cpu"])
    host = files.base.removeprefix("http://")
    assert f"redirects to another host, {host} (followed, without the index's credentials)" \
        in check.text
    assert files.seen and not any(auth for _, auth in files.seen)


@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf"])
def test_a_bad_timeout_is_an_input_error(matrix_file, value):
    with pytest.raises(InputError, match=f"--timeout {value}: expected a number of seconds"):
        run(matrix_file, index_url="http://127.0.0.1:9", timeout=value)


# -- malformed answers -------------------------------------------------------------------------
def _torch_page(ctype: str, body: bytes) -> Callable[[str], Answer]:
    def answer(path: str) -> Answer:
        return (200, ctype, body) if path == "/simple/torch/" else good_index(path)
    return answer


MALFORMED = {
    "json-list": (SIMPLE_JSON, b"[1, 2]", "expected a JSON object, got a list"),
    "json-files-not-a-list": (SIMPLE_JSON, b'{"files": {"a": 1}}',
                              "a PEP 691 project page needs a 'files' list, got a dict"),
    "json-truncated": (SIMPLE_JSON, b'{"files": [', "not JSON"),
    "json-not-utf8": (SIMPLE_JSON, b'{"files": ["\xff\xfe"]}', "not UTF-8 text"),
    "json-deep": (SIMPLE_JSON, b"[" * 100000, "not JSON"),
    "html-not-utf8": ("text/html", b"<a href='torch-2.15.0-cp311-cp311-\xff.whl'>x</a>",
                      "not UTF-8 text"),
    "html-garbage": ("text/html", b"<<<>>>& garbage <a>no href</a>",
                     "lists no final, non-yanked torch release"),
    "wrong-type": ("application/octet-stream", b"\x00\x01",
                   "answered application/octet-stream, not a simple index page"),
}


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_a_malformed_index_page_is_one_clear_environment_error(matrix_file, case):
    ctype, body, message = MALFORMED[case]
    with serve(_torch_page(ctype, body)) as index:
        with pytest.raises(IndexProblem) as caught:
            run(matrix_file, index_url=index.base)
    assert message in str(caught.value)
    assert f"{index.base}/simple/torch/" in str(caught.value)


def test_a_malformed_page_through_the_task_is_exit_3_without_traceback(matrix_file):
    with serve(_torch_page(SIMPLE_JSON, b'["not", "an", "object"]')) as index:
        proc = invoke("--matrix", str(matrix_file), "--index-url", index.base)
    assert proc.returncode == EXIT_ENVIRONMENT
    assert one_line_error(proc) == (f"error: {index.base}/simple/torch/: expected a JSON object, "
                                    "got a list")


def test_a_broken_json_api_is_exit_3(matrix_file):
    def answer(path: str) -> Answer:
        if path.startswith("/simple/"):
            return 404, "text/plain", b""
        return 200, "application/json", b'{"releases": [1, 2, 3]}'

    with serve(answer) as index, pytest.raises(BadAnswer, match="needs a 'releases' object"):
        run(matrix_file, index_url=index.base)


def test_one_bad_file_entry_is_a_note_and_the_check_goes_on(matrix_file):
    page = json.loads(project_page("torch"))
    page["files"] += [{"filename": 2.15, "url": "/files/x"}, "junk"]

    with serve(_torch_page(SIMPLE_JSON, json.dumps(page).encode())) as index:
        text = run(matrix_file, index_url=index.base, vendors=["cpu"]).text
    assert text.startswith(f"torch N 2.15.0 (detected), N-1 2.14.1 on {index.base}")
    good = len(_files("torch"))
    assert f"note: {index.base}/simple/torch/: file entry {good} skipped: 'filename' and 'url' " \
           "must be strings" in text
    assert f"file entry {good + 1} skipped: expected an object, got a str" in text


UNREADABLE = {"not-utf8": (b"\xff\xfe\x00garbage", "METADATA is not UTF-8 text"),
              "not-metadata": (b"just some text\n\n", "not a core metadata file"),
              "hash-differs": (None, "sha256 differs from the index's")}


@pytest.mark.parametrize("case", list(UNREADABLE), ids=list(UNREADABLE))
def test_unreadable_metadata_skips_that_release_with_a_note(matrix_file, case):
    body, message = UNREADABLE[case]

    def answer(path: str) -> Answer:
        if path == "/simple/torch-npu/" and body is not None:  # no hash: the body is parsed
            return 200, SIMPLE_JSON, project_page("torch-npu", hashed=False)
        if path.startswith("/files/torch_npu-2.14.0-"):
            return 200, "application/octet-stream", body or b"Metadata-Version: 2.1\n"
        return good_index(path)

    with serve(answer) as index:
        data = json.loads(run(matrix_file, index_url=index.base, torch="2.14.0",
                              vendors=["ascend"], fmt="json").text)
    # 2.14.0's metadata cannot be read: that release is skipped, never read as "declares no
    # torch requirement"; the older release is still looked at.
    rows = [row for row in data["rows"] if row["torch"] == "2.14.0"]
    assert rows and not any(row["ok"] for row in rows)
    assert {row["detail"] for row in rows} == {
        "no torch-npu for torch 2.14.0 (newest 2.13.0 requires torch==2.13.0.*) (index)"}
    assert any(note.startswith(f"torch-npu 2.14.0 skipped: {index.base}/files/torch_npu-2.14.0-")
               and message in note for note in data["notes"])


# -- flags -------------------------------------------------------------------------------------
def test_an_unknown_format_is_exit_2_before_any_network_access(matrix_file):
    with serve(good_index) as index:
        proc = invoke("--matrix", str(matrix_file), "--index-url", index.base, "--format", "xml")
    assert proc.returncode == EXIT_BAD_INPUT
    assert one_line_error(proc) == "error: --format xml: expected table, json or markdown"
    assert index.seen == []


def test_an_unknown_vendor_is_an_input_error_before_any_network_access(matrix_file):
    with serve(good_index) as index, pytest.raises(InputError, match="--vendor cpx: not in"):
        run(matrix_file, index_url=index.base, vendors=["cpx"])
    assert index.seen == []


def test_fail_on_gap_sets_exit_1(matrix_file):
    with serve(good_index) as index:
        plain = invoke("--matrix", str(matrix_file), "--index-url", index.base)
        strict = invoke("--matrix", str(matrix_file), "--index-url", index.base, "--fail-on-gap")
    assert plain.returncode == 0, plain.stderr
    assert strict.returncode == EXIT_FAILED
    assert "gap(s) found (--fail-on-gap)" in one_line_error(strict)
    assert any(line.split()[:4] == ["ascend", "2.15.0", "3.11", "x86_64+aarch64"]
               and "  GAP  " in line and "no torch-npu for torch 2.15.0" in line
               for line in strict.stdout.splitlines())


def test_fail_on_gap_without_gaps_is_exit_0(matrix_file):
    with serve(good_index) as index:
        proc = invoke("--matrix", str(matrix_file), "--index-url", index.base, "--vendor", "cpu",
                      "--fail-on-gap")
    assert proc.returncode == 0, proc.stderr
    assert "0 gap(s)" in proc.stdout


@pytest.mark.parametrize(("given", "meant"), [("2.15", "2.15.0"), ("2.14", "2.14.1"),
                                              ("2.14.0", "2.14.0"), ("2", "2.15.0")])
def test_torch_names_the_release_it_means(matrix_file, given, meant):
    with serve(good_index) as index:
        data = json.loads(run(matrix_file, index_url=index.base, torch=given, fmt="json",
                              vendors=["cpu"]).text)
    assert data["current"] == meant


def test_torch_series_is_written_as_the_release_by_update(matrix_file):
    with serve(good_index) as index:
        text = run(matrix_file, index_url=index.base, torch="2.15", update=True).text
    assert 'torch: ["2.15.0", "2.14.1"]' in matrix_file.read_text()
    assert '"2.15"' not in matrix_file.read_text()
    assert "cpu torch [2.15.0, 2.14.1]" in text


def test_a_torch_release_not_on_the_index_is_exit_2(matrix_file):
    with serve(good_index) as index:
        proc = invoke("--matrix", str(matrix_file), "--index-url", index.base, "--torch", "2.16")
    assert proc.returncode == EXIT_BAD_INPUT
    assert one_line_error(proc) == (f"error: --torch 2.16: no final, non-yanked torch 2.16 on "
                                    f"{index.base}; newest there: 2.15.0")


# -- aarch64 -----------------------------------------------------------------------------------
def test_aarch64_is_reported_where_it_differs(matrix_file):
    with serve(good_index) as index:
        data = json.loads(run(matrix_file, index_url=index.base, torch="2.13.0", fmt="json",
                              vendors=["ascend"]).text)
        same = json.loads(run(matrix_file, index_url=index.base, torch="2.14.0", fmt="json",
                              vendors=["ascend"]).text)
    rows = {(r["python"], tuple(r["platforms"])): r for r in data["rows"]
            if r["torch"] == "2.13.0"}
    assert rows[("3.11", ("Linux x86_64",))]["ok"] is True
    arm = rows[("3.11", ("Linux aarch64",))]
    assert arm["ok"] is False and arm["detail"] == "torch 2.13.0 has no cp311 wheel (index)"
    assert {tuple(r["platforms"]) for r in same["rows"] if r["torch"] == "2.14.0"} \
        == {("Linux x86_64", "Linux aarch64")}


# -- the shipped matrix and vendors ------------------------------------------------------------
@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    """A copy of this checkout's matrix.yaml and vendors/."""
    shutil.copytree(ROOT / "vendors", tmp_path / "vendors")
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    return tmp_path / "matrix.yaml"


def test_each_claim_says_where_it_comes_from(shipped):
    """Gaudi's 1.24.0 row is marked ``unverified: REASON`` in its vendor.yaml: it reads as
    unverified vendor data, never as an index fact; XPU names its build, never 'None'."""
    with serve(good_index) as index:
        data = json.loads(run(shipped, index_url=index.base, torch="2.10", fmt="json",
                              vendors=["gaudi", "xpu"]).text)
        table = run(shipped, index_url=index.base, torch="2.10", vendors=["gaudi", "xpu"]).text
    assert (data["current"], data["previous"]) == ("2.10.0", "2.9.0")
    rows = {(r["vendor"], r["torch"], r["python"]): r for r in data["rows"]}
    new = rows[("gaudi", "2.10.0", "3.12")]
    assert new["ok"] is True
    assert new["claims"] == [{
        "text": "habana-torch-plugin 1.24.0, Intel Gaudi software 1.24.0 (build 1007) for torch "
                "2.10.0", "source": "vendor data",
        "where": "vendors/gaudi/vendor.yaml facts.compat[0]", "verified": False}]
    assert new["detail"].endswith("(vendor data, UNVERIFIED: vendors/gaudi/vendor.yaml "
                                  "facts.compat[0])")
    old = rows[("gaudi", "2.9.0", "3.12")]["claims"][0]
    assert (old["verified"], old["where"]) == (True, "vendors/gaudi/vendor.yaml facts.compat[1]")
    xpu = rows[("xpu", "2.10.0", "3.11")]
    assert [c["source"] for c in xpu["claims"]] == ["index", "vendor data"]
    assert xpu["claims"][1]["text"] == "Intel XPU build (toolkit 2025.3) for torch 2.10"
    assert "None" not in table
    assert "gaudi   2.10.0  3.12    x86_64    yes    vendor data, UNVERIFIED" in table


# -- --update keeps the matrix loadable --------------------------------------------------------

def test_update_on_the_shipped_matrix_keeps_its_pins_and_still_loads(shipped):
    """matrix.yaml pins torch 2.13.0 for cpu and reference (the wheel this project's hosts can
    install): the update keeps it on both axes, with the defaults naming it, and says so."""
    with serve(good_index) as index:
        text = run(shipped, index_url=index.base, update=True).text
    matrix = load_matrix(shipped)
    select(matrix, plan(matrix))                       # what every task does first
    for vendor in ("cpu", "reference"):
        assert dict(matrix.vendors[vendor].axes)["torch"] == ("2.15.0", "2.14.1", "2.13.0")
        assert [dict(d)["torch"] for d in matrix.vendors[vendor].default] == ["2.13.0"]
    kept = [line for line in text.splitlines() if line.startswith("kept: matrix.yaml:")]
    assert [line.split(": ", 3)[3] for line in kept] == [
        "torch 2.13.0 stays (pinned: the CPU wheel a host without download.pytorch.org can "
        "install from its wheelhouse)",
        "torch 2.13.0 stays (pinned: the torch of the CPU cells refdev is compared with)"]
    assert "moved:" not in text
    assert "# The embedded default" in shipped.read_text()     # comments kept
    assert not list(shipped.parent.glob(".*"))                 # no temp file left


def test_update_refuses_a_matrix_that_would_not_load_and_leaves_it(matrix_file):
    # 2.14.1 with Python 3.11 is excluded, so the default moved there would match no cell.
    before = MATRIX.replace('    torch: ["2.13.0"]\n',
                            '    torch: ["2.13.0"]\n    exclude:\n      - {torch: "2.14.1"}\n')
    matrix_file.write_text(before)
    with serve(good_index) as index:
        proc = invoke("--matrix", str(matrix_file), "--index-url", index.base, "--update")
    assert proc.returncode == EXIT_BAD_INPUT
    assert "Traceback" not in proc.stderr
    assert f"release-check --update: {matrix_file} left unchanged" in proc.stderr
    assert "vendors.cpu.default[0].torch 2.13.0 -> 2.14.1" in proc.stderr
    assert "matches no cell" in proc.stderr
    assert matrix_file.read_text() == before
    assert not list(matrix_file.parent.glob(".*"))


@pytest.mark.parametrize(("url", "clean", "pair"), [
    ("https://u:p%40ss@host:8443/simple", "https://host:8443/simple", "u:p@ss"),
    ("https://TOKEN@host/simple", "https://host/simple", "TOKEN:"),
    ("https://host/simple", "https://host/simple", None),
], ids=["user-password", "token", "none"])
def test_split_credentials(url, clean, pair):
    got_clean, header = split_credentials(url)
    assert got_clean == clean
    expected = None if pair is None else "Basic " + base64.b64encode(pair.encode()).decode()
    assert header == expected


@pytest.mark.parametrize("url", ["pypi.org", "file:///srv/simple", "ftp://mirror/simple",
                                 "http://[::1/simple", "https://u:s3cret@host:99999/simple",
                                 "https:///simple"])
def test_an_unusable_index_url_is_an_input_error(matrix_file, url):
    with pytest.raises(InputError, match="expected an http\\(s\\) URL") as caught:
        run(matrix_file, index_url=url)
    assert "s3cret" not in str(caught.value)


def test_an_unwritable_matrix_folder_is_an_environment_problem(matrix_file, monkeypatch):
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    # The folder's permissions cannot stop root (tests may run as root): refuse at the call.
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with serve(good_index) as index, pytest.raises(
            EnvironmentProblem, match="cannot write beside it \\(Permission denied\\)"):
        run(matrix_file, index_url=index.base, update=True)
    assert matrix_file.read_text() == MATRIX


@pytest.mark.parametrize(("facts", "message"), [
    ("{compat: [{torch: ''}]}", "facts.compat[0].torch: '' is not a version"),
    ("{compat: [{torch: [2]}]}", "facts.compat[0].torch: expected a string, got a list"),
    ("{compat: {torch: '2.10'}}", "facts.compat: expected a list of mappings"),
    ("{compat: [{torch: '2.10', verified: 'no'}]}", "facts.compat[0].verified: 'no' is not a date "
                                                   "YYYY-MM-DD"),
    ("{extension: {distribution: x, index: pypy}}", "facts.extension.index: 'pypy' is not"),
], ids=["empty-version", "list-version", "compat-not-list", "verified-text", "unknown-index"])
def test_bad_vendor_facts_are_input_errors_naming_the_key(matrix_file, facts, message):
    """The vendor's loader (schema/vendor-v1.json) refuses them, located, before any request."""
    vendor = matrix_file.parent / "vendors" / "cpu" / "vendor.yaml"
    vendor.write_text(vendor.read_text().replace("facts: {python: \">=3.10\", torch_index: pypi}",
                                                 f"facts: {facts}"))
    with serve(good_index) as index, pytest.raises(InputError) as caught:
        run(matrix_file, index_url=index.base)
    assert re.search(rf"vendors/cpu/vendor.yaml:\d+:\d+: {re.escape(message)}",
                     str(caught.value)), str(caught.value)
    assert index.seen == []   # vendor data is read before the network
