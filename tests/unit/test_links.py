"""Files opened where they belong: the default history and the results and report folders
refuse a symbolic link in the project that points outside it, or nowhere, naming the link
(exit 2), before anything is opened or created through it. Links that stay inside the
project, and paths outside it that the user names, are theirs to use."""

from __future__ import annotations

from pathlib import Path

import pytest

from oota.api import flags
from oota.api.fields import parse
from oota.api.requests import ReportRequest
from oota.errors import InputError
from oota.files import link_problem
from oota.history.location import locate


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "checkout"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    monkeypatch.chdir(root)
    return root


def test_a_dangling_default_history_is_refused_and_nothing_is_created(project: Path) -> None:
    (project / "history.db").symlink_to(project.parent / "elsewhere" / "h.db")
    with pytest.raises(InputError, match=r"^the default history: .*/checkout/history.db is a "
                       r"symbolic link to .*/elsewhere/h.db, which does not exist; remove the "
                       "link, or name the store with --history or OOTA_HISTORY"):
        locate(None, {}, project)
    assert not (project.parent / "elsewhere").exists()


def test_a_default_history_linked_out_of_the_project_is_refused(project: Path) -> None:
    (project.parent / "outside" / "h.db").write_bytes(b"")
    (project / "history.db").symlink_to(project.parent / "outside" / "h.db")
    with pytest.raises(InputError, match="outside the project"):
        locate(None, {}, project)


def test_links_inside_the_project_and_named_stores_are_used(project: Path) -> None:
    (project / "data").mkdir()
    (project / "data" / "h.db").write_bytes(b"")
    (project / "history.db").symlink_to("data/h.db")
    assert locate(None, {}, project).url == f"sqlite:///{project / 'data' / 'h.db'}"
    (project / "history.db").unlink()
    (project / "history.db").symlink_to("/nonexistent/h.db")
    named = locate(None, {"OOTA_HISTORY": "sqlite:////srv/h.db"}, project)
    assert named.url == "sqlite:////srv/h.db"


@pytest.mark.parametrize("name", ["results", "reports"])
def test_a_folder_linked_out_is_refused_naming_the_link(project: Path, name: str) -> None:
    (project / name).symlink_to(project.parent / "outside", target_is_directory=True)
    with pytest.raises(InputError, match=rf"^--x {name}/cell: .*/checkout/{name} is a symbolic "
                       r"link to .*/outside, outside the project"):
        flags.folder("--x", f"{name}/cell")


def test_the_report_flags_refuse_a_dangling_link(project: Path) -> None:
    (project / "reports").symlink_to("gone")
    with pytest.raises(InputError, match="--out reports: .* which does not exist"):
        parse(ReportRequest, out="reports").project()
    with pytest.raises(InputError, match="--results results: "):
        (project / "results").symlink_to("/nonexistent")
        parse(ReportRequest).project()


def test_a_path_outside_the_project_is_the_users(project: Path) -> None:
    outside = project.parent / "outside"
    (outside / "link").symlink_to("/nonexistent")
    assert link_problem(outside / "link", project) == ""
    assert link_problem(Path("new/folder"), project) == ""
    assert link_problem(Path("../outside/x"), project) == ""
