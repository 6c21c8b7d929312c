"""A nightly cell, built and verified for real against a local PEP 503 index.

download.pytorch.org is not reachable here, so the test makes its own "nightly": the host's
torch 2.13.0+cpu wheel with its version rewritten to 2.13.0.dev<day>+cpu (dist-info folder,
METADATA, torch/version.py, RECORD hashes), served with torch's dependencies (taken from the
host's local package mirror) over HTTP on the address the host has on Docker's default bridge
(``tests.engines.host_address``): a build step's network reaches the host there, not on the
host's loopback. The index holds a nightly dated 10 days ago. Built with the channel's
``max_age_days: 30`` the cell passes and records version, date, commit and age; built with the
default 3 days the compat layer fails it. The two builds differ only in the cell file, so the
second takes the first one's torch install from BuildKit's cache (the age limit is the cell's,
read at verification; building a second nightly wheel and index would test nothing more).

The indexes want a password, a canary: the channel's index and the vendor's index_url carry it
as ``user:password@``. The build passes only if pip got it (as BuildKit secrets: netrc and
pip.conf), and it must then be in no layer of the image, no result, report or history.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import hashlib
import http.server
import re
import struct
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from oota.api.history import History, record_history
from oota.config.matrix import load_matrix
from oota.console import Console
from oota.execute.build import BuildOptions
from oota.history.location import Location
from oota.net import without_credentials
from oota.plan import plan, select
from oota.report.write import write_report
from oota.results.store import load
from tests import image_scan
from tests.conftest import skip_for_host
from tests.engines import host_address, steady_port
from tests.runs import build_cells

from .conftest import NAMESPACE, copy_project, lean_cpu_vendor, made_by

WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
MIRROR = Path("/opt/pypi/simple")
# torch 2.13.0's Requires-Dist (without extras) and theirs: what `pip install --pre torch`
# from the nightly index alone needs beside torch.
DEPENDENCIES = ("filelock", "typing-extensions", "setuptools", "sympy", "mpmath", "networkx",
                "jinja2", "markupsafe", "fsspec")
OLD = "2.13.0+cpu"
CELL = "cpu-torchnightly-py3.11-debian12"
GIT_VERSION = "cf30153c4c131c8164ee7798e5022d810682e2cb"   # the 2.13.0 wheel's own
AGE_DAYS = 10   # the nightly's age: inside 30 days, past the default 3
CANARY = "canary-7d1c2e9b"   # the indexes' password
AUTH = "Basic " + base64.b64encode(f"oota:{CANARY}".encode()).decode()


class _PasswordIndex(http.server.SimpleHTTPRequestHandler):
    """A static index that answers only requests carrying the canary password."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.headers.get("Authorization") != AUTH:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="nightly"')
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


def index_server(host: str, folder: str, name: str) -> http.server.ThreadingHTTPServer:
    """An index serving ``folder`` with the password, on ``host`` at the steady port of
    ``name`` (a free one when that is taken): the index URL in the cell's Dockerfile is then
    the same from run to run, and a warm machine's BuildKit cache holds its install."""
    handler = functools.partial(_PasswordIndex, directory=folder)
    try:
        return http.server.ThreadingHTTPServer((host, steady_port(name)), handler)
    except OSError:
        return http.server.ThreadingHTTPServer((host, 0), handler)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _copy_raw(src: zipfile.ZipFile, info: zipfile.ZipInfo, out: zipfile.ZipFile,
              name: str) -> None:
    """Copy one entry's compressed bytes under ``name``, without inflating and deflating it
    again (the wheel is 190 MB compressed: recompressing it takes minutes on a shared host)."""
    assert src.fp is not None and out.fp is not None
    src.fp.seek(info.header_offset)
    header = struct.unpack("<4s2B4HL2L2H", src.fp.read(30))
    src.fp.seek(info.header_offset + 30 + header[10] + header[11])  # name, extra field
    raw = src.fp.read(info.compress_size)
    entry = zipfile.ZipInfo(name, info.date_time)
    entry.compress_type, entry.external_attr = info.compress_type, info.external_attr
    entry.CRC, entry.compress_size, entry.file_size = info.CRC, info.compress_size, info.file_size
    entry.create_system = info.create_system
    entry.header_offset = out.fp.tell()
    out.fp.write(entry.FileHeader())
    out.fp.write(raw)
    out.filelist.append(entry)
    out.NameToInfo[name] = entry
    out.start_dir = out.fp.tell()   # where zipfile writes the next entry and the directory
    out._didModify = True  # type: ignore[attr-defined]  # so that close() writes the directory


def nightly_wheel(folder: Path, day: dt.date) -> Path:
    """The host's torch wheel as the nightly of ``day``, written into ``folder``."""
    return renamed_wheel(folder, f"2.13.0.dev{day:%Y%m%d}+cpu")


def renamed_wheel(folder: Path, new: str) -> Path:
    """The host's torch wheel with its version rewritten to ``new``, written into ``folder``:
    a nightly (2.13.0.dev20261123+cpu) or a release candidate (2.16.0+cpu)."""
    old_info, new_info = f"torch-{OLD}.dist-info/", f"torch-{new}.dist-info/"
    target = folder / WHEEL.name.replace(OLD, new)
    changed: dict[str, bytes] = {}
    with zipfile.ZipFile(WHEEL) as src, zipfile.ZipFile(target, "w") as out:
        for info in src.infolist():
            name = info.filename.replace(old_info, new_info, 1)
            if name == new_info + "RECORD":
                continue
            if info.filename == "torch/version.py":
                changed[name] = src.read(info).replace(f"__version__ = '{OLD}'".encode(),
                                                       f"__version__ = '{new}'".encode())
            elif info.filename == old_info + "METADATA":
                changed[name] = src.read(info).replace(f"\nVersion: {OLD}\n".encode(),
                                                       f"\nVersion: {new}\n".encode())
            if name in changed:
                out.writestr(zipfile.ZipInfo(name, info.date_time), changed[name],
                             compress_type=zipfile.ZIP_DEFLATED)
            else:
                _copy_raw(src, info, out, name)
        record = []
        for line in src.read(old_info + "RECORD").decode().splitlines():
            path, digest, size = line.rsplit(",", 2)
            path = path.replace(old_info, new_info, 1)
            if path in changed:
                digest, size = _record_hash(changed[path]), str(len(changed[path]))
            record.append(f"{path},{digest},{size}")
        out.writestr(new_info + "RECORD", "\n".join(record) + "\n",
                     compress_type=zipfile.ZIP_DEFLATED)
    assert f"__version__ = '{new}'".encode() in changed["torch/version.py"]
    assert f"Version: {new}".encode() in changed[new_info + "METADATA"]
    return target


def _links(project: str) -> list[tuple[str, str]]:
    """(file path in the mirror, sha256 fragment) of every file the mirror lists for it."""
    page = (MIRROR / project / "index.html").read_text()
    return [((MIRROR / project / href).resolve().as_posix(), fragment)
            for href, fragment in re.findall(r'href="([^"#]+)#(sha256=[0-9a-f]+)"', page)]


def make_index(root: Path, wheel: Path) -> None:
    """A PEP 503 index at ``root``: torch (the nightly) and its dependencies."""
    files = root / "files"
    files.mkdir(parents=True)
    entries = {"torch": [(wheel.as_posix(), "sha256=" + hashlib.sha256(
        wheel.read_bytes()).hexdigest())]}
    entries |= {name: _links(name) for name in DEPENDENCIES}
    for project, links in entries.items():
        (root / "simple" / project).mkdir(parents=True)
        anchors = []
        for path, fragment in links:
            name = Path(path).name
            (files / name).symlink_to(path)
            anchors.append(f'<a href="../../files/{name}#{fragment}">{name}</a>')
        (root / "simple" / project / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n" + "\n".join(anchors) + "\n</body></html>\n")


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A nightly index (a nightly 10 days old), served on the host's bridge address."""
    if not WHEEL.is_file() or not MIRROR.is_dir():
        skip_for_host("the local wheel folders",
                      f"needs {WHEEL} and the local package mirror {MIRROR}")
    top = tmp_path_factory.mktemp("nightly-index")
    day = dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=AGE_DAYS)
    wheels = top / "wheel"
    wheels.mkdir()
    make_index(top / "old", nightly_wheel(wheels, day))
    gateway = str(host_address().ip)
    server = index_server(gateway, str(top), "nightly-index")
    # pip inside a build may keep its connection open: closing the server does not wait for
    # the handler threads until it lets go.
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://oota:{CANARY}@{gateway}:{server.server_address[1]}"
    try:
        yield {"old": f"{base}/old/simple", "day": f"{day:%Y%m%d}"}
    finally:
        server.shutdown()
        server.server_close()


def build_nightly(engine: Any, run_id: str, root: Path, index: str,
                  max_age_days: int | None = None) -> dict[str, Any]:
    """Build and verify (install and compat layers) the CPU nightly cell from ``index``, with
    the channel's ``max_age_days`` when given (else the default, 3 days)."""
    matrix_file = copy_project(root)
    lean_cpu_vendor(root)
    vendor = root / "vendors/cpu/vendor.yaml"  # the vendor's own index, with the password
    vendor.write_text(vendor.read_text().replace("https://download.pytorch.org/whl/cpu", index))
    data = yaml.safe_load(matrix_file.read_text())
    channel: dict[str, Any] = {"channel": "nightly", "index": index}
    if max_age_days is not None:
        channel["max_age_days"] = max_age_days
    data["vendors"] = {"cpu": {"os": ["debian12"], "python": ["3.11"], "torch": [channel]}}
    matrix_file.write_text(yaml.safe_dump(data, sort_keys=False))
    matrix = load_matrix(matrix_file)
    cells = select(matrix, plan(matrix), everything=True)
    assert [c.id for c in cells] == [CELL]
    options = BuildOptions(results_dir=root / "results", run_id=run_id, namespace=NAMESPACE,
                           layers=("install", "compat"),
                           extra_labels=made_by(run_id))
    [result] = [r.to_json() for r in build_cells(matrix, cells, engine, Console(), options)]
    return result


def _test(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in result["tests"] if t["id"].endswith(name))


def test_a_nightly_cell_records_the_nightly_it_installed(
        engine: Any, run_id: str, indexes: dict[str, str], tmp_path: Path) -> None:
    result = build_nightly(engine, run_id, tmp_path / "project", indexes["old"],
                           max_age_days=30)
    assert result["status"] == "passed", result.get("message")
    version = f"2.13.0.dev{indexes['day']}+cpu"
    assert result["cell"]["torch"] == "nightly" and result["cell"]["channel"] == "nightly"
    assert result["installed"]["torch"]["version"] == version
    assert result["installed"]["torch"]["git_version"] == GIT_VERSION
    index = without_credentials(indexes["old"])   # pip records where it found the wheel
    assert result["installed"]["torch"]["source"].startswith(index.removesuffix("simple"))
    recent = _test(result, "test_nightly_is_recent")
    assert recent["status"] == "passed"
    day = dt.datetime.strptime(indexes["day"], "%Y%m%d").date()
    assert recent["data"] | {"index_url": None} == {
        "channel": "nightly", "version": version, "date": day.isoformat(),
        "commit": GIT_VERSION, "age_days": AGE_DAYS, "max_age_days": 30, "index_url": None}
    assert _test(result, "test_torch_release_matches_cell")["status"] == "skipped"
    no_canary_anywhere(tmp_path / "project", result)


def no_canary_anywhere(root: Path, result: dict[str, Any]) -> None:
    """The canary is in no layer or setting of the image, and in no file of the results, of
    a report written from them, or of a history they were appended to."""
    results = root / "results"
    write_report(results, root / "reports")
    record_history(History(location=Location(url=f"sqlite:///{root / 'history.db'}",
                                             source="test"), origin="build", root=root),
                   [load(results / CELL / "result.json")])
    written = [p for folder in (results, root / "reports") for p in folder.rglob("*")
               if p.is_file()] + [root / "history.db"]
    assert len(written) > 10
    assert [p for p in written if CANARY.encode() in p.read_bytes()] == []
    assert image_scan.holding(result["image"]["tag"], [CANARY.encode()]) == []


def test_a_stale_nightly_fails_the_age_check(engine: Any, run_id: str, indexes: dict[str, str],
                                             tmp_path: Path) -> None:
    result = build_nightly(engine, run_id, tmp_path / "project", indexes["old"])
    assert result["status"] == "failed"
    recent = _test(result, "test_nightly_is_recent")
    assert recent["status"] == "failed"
    assert "days old on" in recent["message"]
    assert "10 days old" in recent["message"]
    assert "more than the 3 days allowed (channel.max_age_days)" in recent["message"]
