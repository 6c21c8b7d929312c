"""oota test's byte-compiling of the checkout (oota/testrun.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from oota.testrun import byte_compile


def _compiled(path: Path) -> bool:
    return Path(importlib.util.cache_from_source(str(path))).is_file()


def test_the_checkouts_sources_are_compiled_and_hidden_folders_left_alone(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # as PYTHONDONTWRITEBYTECODE=1 sets it
    (tmp_path / "tasks.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "mod.py").write_text("Y = 2\n")
    (tmp_path / ".venv" / "lib").mkdir(parents=True)
    (tmp_path / ".venv" / "lib" / "dep.py").write_text("Z = 3\n")
    (tmp_path / "pkg" / ".hidden").mkdir()
    (tmp_path / "pkg" / ".hidden" / "h.py").write_text("H = 4\n")

    assert byte_compile(tmp_path) is True
    assert _compiled(tmp_path / "tasks.py") and _compiled(tmp_path / "pkg" / "sub" / "mod.py")
    assert not _compiled(tmp_path / ".venv" / "lib" / "dep.py")
    assert not _compiled(tmp_path / "pkg" / ".hidden" / "h.py")


def test_a_file_that_does_not_compile_is_said_and_the_others_still_are(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "broken.py").write_text("def (:\n")
    (tmp_path / "pkg" / "fine.py").write_text("F = 1\n")
    assert byte_compile(tmp_path) is False
    assert _compiled(tmp_path / "pkg" / "fine.py")
