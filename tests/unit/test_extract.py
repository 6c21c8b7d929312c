"""Copying a container's results out (oota/engine/archives.py extract_safely): the same outcome
with Python's tar 'data' filter and without it (stock Debian 12's Python 3.11.2 has none)."""

from __future__ import annotations

import io
import tarfile

import pytest

from oota.engine.archives import extract_safely
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
