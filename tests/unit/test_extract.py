"""Copying a container's results out (oota/engine/archives.py extract_safely): the same outcome
with Python's tar 'data' filter and without it (stock Debian 12's Python 3.11.2 has none)."""

from __future__ import annotations

import io
import tarfile

import pytest

from oota.engine import archives
from oota.engine.archives import extract_results, extract_safely
from oota.errors import StepFailed


def _archive(*members: tuple[str, bytes | None, int]) -> tarfile.TarFile:
    """A tar of (name, content or None for a folder, mode)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data, mode in members:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return tarfile.open(fileobj=buffer)


@pytest.fixture(params=["with-filter", "python-3.11.2"])
def python(request, monkeypatch):
    if request.param == "python-3.11.2":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no tar filters")
    return request.param


def test_files_and_folders_are_extracted(python, tmp_path):
    with _archive(("sub", None, 0o755), ("sub/tests.json", b'{"tests": []}', 0o644),
                  ("run.sh", b"#!/bin/sh\n", 0o4777)) as tar:
        extract_safely(tar, tar.getmembers(), tmp_path)
    assert (tmp_path / "sub" / "tests.json").read_bytes() == b'{"tests": []}'
    mode = (tmp_path / "run.sh").stat().st_mode & 0o7777
    assert not mode & 0o7022   # no set-id bit, nothing writable by group or others
    assert mode & 0o100        # the owner may still run it


def test_an_absolute_name_lands_inside_the_destination(python, tmp_path):
    with _archive(("/abs/tests.json", b"{}", 0o644)) as tar:
        extract_safely(tar, tar.getmembers(), tmp_path)
    assert (tmp_path / "abs" / "tests.json").read_bytes() == b"{}"


@pytest.mark.parametrize("name", ["../escaped.txt", "sub/../../up.txt"],
                         ids=["parent", "nested-parent"])
def test_nothing_lands_outside_the_destination(python, tmp_path, name):
    dest = tmp_path / "dest"
    dest.mkdir()
    with _archive((name, b"x", 0o644)) as tar, \
            pytest.raises(StepFailed, match="refused to extract"):
        extract_safely(tar, tar.getmembers(), dest)
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "up.txt").exists()


def test_a_link_already_in_the_destination_is_no_way_out(python, tmp_path):
    dest, outside = tmp_path / "dest", tmp_path / "outside"
    dest.mkdir()
    outside.mkdir()
    (dest / "out").symlink_to(outside)
    with _archive(("out/planted.txt", b"x", 0o644)) as tar, \
            pytest.raises(StepFailed, match="refused to extract"):
        extract_safely(tar, tar.getmembers(), dest)
    assert not (outside / "planted.txt").exists()


# -- a pulled image's results, as the Engine streams them (oota/engine/archives.py) ----------
def _stream(*members: tarfile.TarInfo | tuple[str, bytes]) -> list[bytes]:
    """The Engine's tar of a container's results folder, ``results/`` on top, in chunks."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
            else:
                info = tarfile.TarInfo(member[0])
                info.size = len(member[1])
                tar.addfile(info, io.BytesIO(member[1]))
    data = buffer.getvalue()
    return [data[i:i + 4096] for i in range(0, len(data), 4096)]


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def test_a_malicious_images_results_land_in_their_folder_only(python, tmp_path):
    """Links (symbolic or hard, to /etc or climbing), a device, names climbing out: the files
    are extracted, the rest is left out, and nothing is written outside the folder."""
    device = tarfile.TarInfo("results/zero")
    device.type = tarfile.CHRTYPE
    dest = tmp_path / "pulled" / "results"
    extract_results(_stream(("results/result.json", b"{}"),
                            _link("results/etc", "/etc"),
                            _link("results/up", "../../.."),
                            _link("results/hard", "/etc/passwd", tarfile.LNKTYPE),
                            device), dest)
    assert sorted(p.name for p in dest.iterdir()) == ["result.json"]
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["pulled", "result.json", "results"]


@pytest.mark.parametrize("name", ["results/../../escape", "results/a/../../../escape"])
def test_a_result_name_that_climbs_is_refused(python, tmp_path, name):
    with pytest.raises(StepFailed, match="refused to extract"):
        extract_results(_stream((name, b"x")), tmp_path / "pulled" / "results")
    assert not list(tmp_path.rglob("escape"))


def test_results_past_the_limit_are_refused_without_being_read_into_memory(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setattr(archives, "RESULTS_LIMIT", 1 << 20)
    endless = (b"\0" * 65536 for _ in range(1 << 20))  # 64 GiB if it were read whole
    with pytest.raises(StepFailed, match="results are larger than"):
        extract_results(endless, tmp_path / "pulled" / "results")


def test_results_of_too_many_files_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(archives, "RESULTS_MEMBERS", 10)
    many = [(f"results/f{n}", b"") for n in range(20)]
    with pytest.raises(StepFailed, match="more than 10 files"):
        extract_results(_stream(*many), tmp_path / "pulled" / "results")
