"""The real package index, recorded: what ``release-check`` asked https://pypi.org for every
vendor of this repository, answered again without the network.

``tests/unit/data/pypi-index.json.gz`` holds, for one day, every page release-check read
(PEP 691 simple pages, the JSON API's answers and its 404s, byte for byte) and, for every
wheel whose metadata it read, that wheel's ``METADATA`` file as PyPI served it (read with HTTP
range requests, as release-check reads it). :class:`ReplayHttp` answers the same requests: a
page from the recording, a wheel as a small zip holding the recorded METADATA (range requests
served), and anything not recorded as a test failure that says how to record again::

    .venv/bin/python -m tests.unit.indexreplay    # needs https://pypi.org; writes the file

The recorder runs the check on this checkout's matrix twice, as it is and with each vendor's
``facts.extension.requires_torch`` removed (what a check without the rule asks: every
torch-xla release). The file in the repository was recorded from https://pypi.org on
2026-11-28 (its ``source`` and ``recorded`` fields): the simple pages of torch, torchvision,
torch-npu and torch-xla, and the METADATA of torchvision 0.27.0 to 0.29.2, torch-npu 2.14.0
and torch-xla 2.1.0 to 2.9.0. No vendor's check asks for intel-extension-for-pytorch (the xpu
vendor lists it as retired, which the check does not read from the index).
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import json
import re
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from oota.config.matrix import load_matrix
from oota.releases.check import release_check
from oota.releases.errors import NotOnIndex
from oota.releases.http import Http, Response
from oota.releases.wheels import _RangeReader

REPO = Path(__file__).resolve().parents[2]
RECORDING = Path(__file__).parent / "data" / "pypi-index.json.gz"
SOURCE = "https://pypi.org"
RECORD = "python -m tests.unit.indexreplay"


class ReplayHttp(Http):
    """:class:`Http` answered from a recording; an unrecorded request fails the test."""

    def __init__(self, file: Path = RECORDING):
        super().__init__()
        data = json.loads(gzip.decompress(file.read_bytes()))
        self.recorded: str = data["recorded"]
        self.file = file
        self.pages: dict[str, dict[str, Any]] = data["pages"]
        self.wheels: dict[str, dict[str, str]] = data["wheels"]
        self._zips: dict[str, bytes] = {}
        self.asked: list[str] = []

    def get(self, url: str, *, accept: str | None = None,
            byte_range: tuple[int, int] | None = None, limit: int | None = None) -> Response:
        self.asked.append(url)
        clean = url.split("#", 1)[0]
        if clean in self.wheels:
            return self._wheel(clean, byte_range)
        page = self.pages.get(clean)
        if page is None:
            raise AssertionError(f"{url}: not in {self.file.name} (recorded {self.recorded}); "
                                 f"record the index again: {RECORD}")
        if page["status"] != 200:
            raise NotOnIndex(f"{url}: HTTP {page['status']}")
        return Response(url=clean, shown=clean, status=200, content_type=page["content_type"],
                        headers={"content-type": page["content_type"]},
                        body=page["body"].encode("utf-8"))

    def _wheel(self, url: str, byte_range: tuple[int, int] | None) -> Response:
        if url not in self._zips:
            entry = self.wheels[url]
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w") as zf:
                zf.writestr(f"{entry['dist_info']}/METADATA", entry["metadata"])
            self._zips[url] = buf.getvalue()
        body = self._zips[url]
        if byte_range is None:
            return Response(url=url, shown=url, status=200, content_type="application/zip",
                            headers={}, body=body)
        first, last = byte_range[0], min(byte_range[1], len(body) - 1)
        return Response(url=url, shown=url, status=206, content_type="application/zip",
                        headers={"content-range": f"bytes {first}-{last}/{len(body)}"},
                        body=body[first:last + 1])


# -- recording -------------------------------------------------------------------------------
class _RecordingHttp(Http):
    def __init__(self) -> None:
        super().__init__(timeout=120)
        self.pages: dict[str, dict[str, Any]] = {}
        self.wheels: set[str] = set()

    def get(self, url: str, *, accept: str | None = None,
            byte_range: tuple[int, int] | None = None, limit: int | None = None) -> Response:
        if byte_range is not None:
            self.wheels.add(url.split("#", 1)[0])
            return super().get(url, accept=accept, byte_range=byte_range, limit=limit)
        try:
            resp = super().get(url, accept=accept, limit=limit)
        except NotOnIndex:
            self.pages[url] = {"status": 404}
            raise
        self.pages[url] = {"status": 200, "content_type": resp.content_type,
                           "body": resp.body.decode("utf-8")}
        return resp


def _metadata(http: Http, url: str) -> dict[str, str]:
    """The wheel's METADATA file as served, and its .dist-info folder's name."""
    probe = http.get(url, byte_range=(0, 0))
    size = int(probe.headers["content-range"].rsplit("/", 1)[1])
    reader = io.BufferedReader(_RangeReader(http, url, size), buffer_size=64 * 1024)
    with zipfile.ZipFile(reader) as wheel:
        name = next(n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        return {"dist_info": name.split("/", 1)[0],
                "metadata": wheel.read(name).decode("utf-8")}


def _without_rules(checkout: Path) -> Path:
    """A copy of matrix.yaml and vendors/ whose vendors have no requires_torch rule."""
    shutil.copy(REPO / "matrix.yaml", checkout / "matrix.yaml")
    shutil.copytree(REPO / "vendors", checkout / "vendors")
    for file in (checkout / "vendors").glob("*/vendor.yaml"):
        file.write_text(re.sub(r"(?m)^ *requires_torch:.*\n", "", file.read_text()))
    return checkout / "matrix.yaml"


def record(out: Path = RECORDING) -> None:
    http = _RecordingHttp()
    with tempfile.TemporaryDirectory() as tmp:
        for matrix in (REPO / "matrix.yaml", _without_rules(Path(tmp))):
            release_check(load_matrix(matrix), index_url=SOURCE, http=http)
    wheels = {url: _metadata(Http(timeout=120), url) for url in sorted(http.wheels)}
    data = {"source": SOURCE, "recorded": dt.date.today().isoformat(),
            "how": f"{RECORD}: every answer release-check read for this checkout's vendors",
            "pages": dict(sorted(http.pages.items())), "wheels": wheels}
    out.write_bytes(gzip.compress(json.dumps(data, indent=0, sort_keys=True).encode(), mtime=0))
    print(f"recorded {len(http.pages)} pages and {len(wheels)} wheels' METADATA from {SOURCE} "
          f"into {out} ({out.stat().st_size} bytes)", file=sys.stderr)


if __name__ == "__main__":
    record()
