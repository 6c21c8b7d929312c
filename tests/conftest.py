"""Shared fixtures: a throw-away oota project (matrix, vendors, templates, verify) in tmp_path."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The same shape as the repo's matrix.yaml, kept here so tests do not follow edits to it.
BASE_MATRIX = """\
version: 1
os:
  debian12:
    image: debian:bookworm-slim
    python: ["3.11"]
  debian13:
    image: debian:trixie-slim
    python: ["3.13"]
vendors:
  cpu:
    os: [debian12, debian13]
    python: ["3.11", "3.13"]
    torch: ["2.13.0"]
    exclude:
      - {os: debian12, python: "3.13"}
      - {os: debian13, python: "3.11"}
"""


class Project:
    """A minimal oota project rooted at ``root`` (the current directory during the test)."""

    def __init__(self, root: Path):
        self.root = root
        self.matrix = root / "matrix.yaml"

    def write(self, text: str) -> Path:
        self.matrix.write_text(textwrap.dedent(text), encoding="utf-8")
        return self.matrix

    def add_vendor(self, name: str, vendor_yaml: str,
                   template: str = '{% extends "base.Dockerfile.j2" %}\n') -> Path:
        folder = self.root / "vendors" / name
        folder.mkdir(parents=True)
        (folder / "vendor.yaml").write_text(textwrap.dedent(vendor_yaml), encoding="utf-8")
        (folder / "Dockerfile.j2").write_text(template, encoding="utf-8")
        return folder


def _make_project(root: Path) -> Project:
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "vendors" / "cpu", root / "vendors" / "cpu", ignore=skip)
    shutil.copytree(REPO / "templates", root / "templates", ignore=skip)
    shutil.copytree(REPO / "verify", root / "verify", ignore=skip)
    project = Project(root)
    project.write(BASE_MATRIX)
    return project


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    """A fresh project; the test runs inside it so messages name ``matrix.yaml`` as users see it."""
    monkeypatch.chdir(tmp_path)
    return _make_project(tmp_path)


@pytest.fixture
def make_project():
    """Build a project at a given folder (for tests that need more than one)."""
    return _make_project


def write_vendor_project(root: Path, matrix: str, vendors: dict[str, str]) -> Path:
    """A checkout of just ``matrix.yaml`` and minimal vendor folders (indented vendor.yaml
    texts, each with a Dockerfile.j2 that only extends the shared stages); the matrix's path."""
    for name, text in vendors.items():
        folder = root / "vendors" / name
        folder.mkdir(parents=True)
        (folder / "vendor.yaml").write_text(textwrap.dedent(text))
        (folder / "Dockerfile.j2").write_text('{% extends "base.Dockerfile.j2" %}\n')
    path = root / "matrix.yaml"
    path.write_text(matrix)
    return path
