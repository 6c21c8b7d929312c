"""What a cell's build context holds when the vendor folder has symbolic links
(oota/render.py context_files): followed inside the project, refused with the link's name
outside it, when dangling, or when they loop."""

from __future__ import annotations

import os

import pytest

from oota.config.matrix import load_matrix
from oota.errors import InputError
from oota.plan import plan
from oota.render import context_files, fingerprint, render_cell


def _files(project):
    matrix = load_matrix(project.matrix)
    cell = plan(matrix, ["cpu"])[0]
    return context_files(matrix, render_cell(matrix, cell))


def _extension_source(folder):
    (folder / "csrc").mkdir(parents=True)
    (folder / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (folder / "csrc" / "op.cpp").write_text("int op() { return 1; }\n")
    return folder


def test_a_linked_extension_folder_inside_the_project_is_followed(project):
    _extension_source(project.root / "src" / "ext")
    os.symlink("../../src/ext", project.root / "vendors" / "cpu" / "ext")
    files = _files(project)
    assert files["vendor/ext/setup.py"].read_text().startswith("from setuptools")
    assert "vendor/ext/csrc/op.cpp" in files


def test_a_linked_file_inside_the_project_is_followed(project):
    (project.root / "shared.txt").write_text("shared\n")
    os.symlink("../../shared.txt", project.root / "vendors" / "cpu" / "notes.txt")
    assert _files(project)["vendor/notes.txt"].read_text() == "shared\n"


def test_the_fingerprint_follows_the_linked_source(project):
    source = _extension_source(project.root / "src" / "ext")
    os.symlink("../../src/ext", project.root / "vendors" / "cpu" / "ext")
    before = fingerprint(_files(project))
    (source / "csrc" / "op.cpp").write_text("int op() { return 2; }\n")
    assert fingerprint(_files(project)) != before


def test_a_link_out_of_the_project_is_refused_by_name(project, tmp_path_factory):
    outside = _extension_source(tmp_path_factory.mktemp("elsewhere") / "ext")
    os.symlink(outside, project.root / "vendors" / "cpu" / "ext")
    with pytest.raises(InputError, match=r"^vendors/cpu/ext: the symbolic link points to .*"
                                         r"outside the project and the vendor's folder"):
        _files(project)


def test_a_dangling_link_is_refused_by_name(project):
    os.symlink("../../src/missing", project.root / "vendors" / "cpu" / "ext")
    with pytest.raises(InputError, match=r"^vendors/cpu/ext: .*which does not exist"):
        _files(project)


def test_a_link_that_loops_is_refused_by_name(project):
    os.symlink("..", project.root / "vendors" / "cpu" / "verify" / "up")
    with pytest.raises(InputError, match=r"^vendors/cpu/verify/up: the symbolic link loops"):
        _files(project)


def test_build_outputs_under_a_linked_folder_are_left_out(project):
    source = _extension_source(project.root / "src" / "ext")
    (source / "build").mkdir()
    (source / "build" / "op.o").write_bytes(b"\0")
    (source / "op.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\0")
    os.symlink("../../src/ext", project.root / "vendors" / "cpu" / "ext")
    names = set(_files(project))
    assert "vendor/ext/setup.py" in names
    assert not any(n.startswith("vendor/ext/build/") or n.endswith(".so") for n in names)


def test_without_links_the_context_is_what_it_was(project):
    names = set(_files(project))
    assert {"Dockerfile", "cell.json", "vendor/vendor.yaml", "verify/oota_vocab.py"} <= names
    assert not any("__pycache__" in n for n in names)
