"""The image's Inductor probes (verify/oota_isacache.py): oota-verify gives each run a fresh
Inductor cache seeded with them, never one a user chose, and preparing them never fails a
build. No torch here: the probes' compilation itself is checked in the CPU image
(tests/docker/test_cpu_cell.py)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "verify"))

import oota_isacache  # noqa: E402 - verify/ is put on the path above


@pytest.fixture
def probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An image's probes, and the seeded caches made under ``tmp_path`` (not the host's /tmp)."""
    monkeypatch.setattr(oota_isacache.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    folder = tmp_path / "inductor-isa"
    (folder / "q6").mkdir(parents=True)
    (folder / "q6" / "cq62.cpp").write_text("int main() {}\n")
    (folder / "q6" / "cq62.so").write_bytes(b"\x7fELF")
    return folder


def test_each_run_gets_a_fresh_cache_with_the_probes(probes: Path) -> None:
    env = {"PATH": "/usr/bin"}
    first = oota_isacache.seeded_cache(env, probes)
    second = oota_isacache.seeded_cache({}, probes)
    assert first is not None and second is not None and first != second
    assert env == {"PATH": "/usr/bin", "TORCHINDUCTOR_CACHE_DIR": str(first)}
    assert (first / "q6" / "cq62.so").read_bytes() == b"\x7fELF"
    (first / "q6" / "kernel.so").write_bytes(b"")   # a run's kernels stay in its own cache
    assert not (probes / "q6" / "kernel.so").exists()
    assert not (second / "q6" / "kernel.so").exists()


def test_a_cache_the_user_chose_is_left_alone(probes: Path) -> None:
    env = {"TORCHINDUCTOR_CACHE_DIR": "/home/me/cache"}
    assert oota_isacache.seeded_cache(env, probes) is None
    assert env == {"TORCHINDUCTOR_CACHE_DIR": "/home/me/cache"}


def test_an_image_without_probes_changes_nothing(tmp_path: Path, probes: Path) -> None:
    env: dict[str, str] = {}
    assert oota_isacache.seeded_cache(env, tmp_path / "none") is None
    assert env == {}


def test_a_probing_that_fails_is_said_and_fails_no_build(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each feature set's probing process fails here (``false`` stands in for Python), as in
    a build whose torch probes otherwise: the build's step says what it prepared and goes on
    (the verification compiles the probes)."""
    false = shutil.which("false")
    assert false is not None
    monkeypatch.setattr(oota_isacache.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(oota_isacache.sys, "executable", false)
    oota_isacache.prepare(tmp_path / "isa")
    said = capsys.readouterr().out
    assert "inductor-isa: 0 probes in" in said
    assert "the probing of 4 feature sets failed" in said
    assert list((tmp_path / "isa").iterdir()) == []


def test_other_machines_prepare_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oota_isacache.platform, "machine", lambda: "aarch64")
    oota_isacache.prepare(tmp_path / "isa")
    assert "aarch64: no x86-64 probes to prepare" in capsys.readouterr().out
    assert not (tmp_path / "isa").exists()
