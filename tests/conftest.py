"""Shared fixtures: a throw-away oota project (matrix, vendors, templates, verify) in tmp_path.

The session's order and its temporary files are set here too:

- Unit tests run first, then the browser tests, then the Docker tests (``tests/docker``, minutes
  each). When a unit or browser test failed, the session stops before the first Docker test
  (exit 1, like ``-x``): a broken unit is reported in about a minute, not after the builds.
  ``./oota.sh test`` runs the same order as two sessions: unit and browser tests on every CPU
  (pytest-xdist: each worker has its own tmp folder under the session's), then the Docker
  tests when those passed.
- Every temporary file of the session (pytest's ``tmp_path``s and whatever the tests and the
  programs they start put in ``TMPDIR``) goes into one folder that is removed when the session
  ends, whatever its outcome: a run leaves nothing in /tmp. ``OOTA_KEEP=1`` keeps it (and the
  Docker tests' images) for debugging; ``--basetemp DIR`` names the folder and keeps it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
UNIT, BROWSER, DOCKER = 0, 1, 2
_SESSION_TMP = pytest.StashKey[Path]()


def test_group(item: pytest.Item) -> int:
    """Where ``item`` runs in the session: unit tests (and the opt-in network ones) first."""
    path = Path(str(item.path))
    parts = path.relative_to(REPO).parts if path.is_relative_to(REPO) else ()
    if "docker" in item.keywords or parts[:2] == ("tests", "docker"):
        return DOCKER
    return BROWSER if parts[:2] == ("tests", "browser") else UNIT


test_group.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@pytest.hookimpl(trylast=True)  # after tests/docker/conftest.py has marked its items
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=test_group)  # stable: each group keeps pytest's own order


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    result = yield
    session = item.session
    if (session.testsfailed and nextitem is not None and test_group(item) < DOCKER
            and test_group(nextitem) == DOCKER):
        session.shouldfail = (f"{session.testsfailed} unit or browser test(s) failed: the Docker "
                              "tests were not started (fix those first, or run tests/docker alone)")
    return result


@pytest.hookimpl(tryfirst=True)  # before pytest's tmpdir plugin reads --basetemp
def pytest_configure(config: pytest.Config) -> None:
    if config.option.basetemp or hasattr(config, "workerinput"):
        return
    top = Path(tempfile.mkdtemp(prefix="oota-tests-"))
    top.chmod(0o755)  # servers the tests start as another user (PostgreSQL) reach their folders
    (top / "tmp").mkdir(mode=0o1777)
    (top / "tmp").chmod(0o1777)  # like /tmp itself (mkdir's mode is cut by the umask)
    config.stash[_SESSION_TMP] = top
    config.option.basetemp = str(top / "pytest")
    os.environ["TMPDIR"] = str(top / "tmp")  # inherited by every program the tests start
    os.environ["OOTA_TEST_TRASH"] = str(top.parent)  # tests/engines.py: ExtraEngine.remove
    tempfile.tempdir = None  # tempfile reads TMPDIR again


# A test that cannot run on this host for what the host is (its CPU, its number of cores, this
# environment's local wheel folders), not for what oota does, says so with skip_for_host; such
# skips are listed at the end of every run, so CI shows what a machine did not check.
HOST_PREFIX = "depends on this host: "


def skip_for_host(what: str, reason: str) -> None:
    """Skip the running test because this host lacks ``what`` (the CPU, cores, a wheel
    folder), saying so in a way the end of the run lists."""
    pytest.skip(f"{HOST_PREFIX}{what}: {reason}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """After the run: every test skipped for what this host is (HOST_PREFIX)."""
    found = []
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)
        if HOST_PREFIX in reason:
            found.append(f"{report.nodeid}: {reason.split(HOST_PREFIX, 1)[1]}")
    if found:
        terminalreporter.section("skipped for what this host is (CPU, cores, local wheels)")
        for line in sorted(set(found)):
            terminalreporter.line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    top = config.stash.get(_SESSION_TMP, None)
    if top is None:
        return
    if os.environ.get("OOTA_KEEP"):
        print(f"\nOOTA_KEEP: the session's temporary files are kept in {top}")
        return
    shutil.rmtree(top, ignore_errors=True)

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
