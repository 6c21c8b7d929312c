"""oota.api loads its jobs lazily: every name it lists resolves, each to the module that
defines it, and importing the tasks (what every command line does first, `oota --version`
too) loads none of the large libraries a task may need: the SQL toolkit, the Docker SDK, the
schema checker, the crypto library, the template engine."""

from __future__ import annotations

import ast
import subprocess
import sys

from oota import api
from tests.conftest import REPO


def test_every_listed_name_resolves_and_only_those_are_lazy() -> None:
    assert set(api.__all__) == set(api._WHERE)  # noqa: SLF001 - the table under test
    for name in api.__all__:
        assert getattr(api, name) is not None, name


def test_what_mypy_reads_is_what_the_table_loads() -> None:
    """The TYPE_CHECKING imports (what mypy sees) name each module and name of the table."""
    tree = ast.parse((REPO / "oota" / "api" / "__init__.py").read_text())
    guarded = next(node for node in tree.body if isinstance(node, ast.If))
    imported = {alias.name: node.module.rsplit(".", 1)[-1] for node in guarded.body
                if isinstance(node, ast.ImportFrom) and node.module for alias in node.names}
    assert imported == api._WHERE  # noqa: SLF001 - the table under test


LARGE = ("sqlalchemy", "docker", "jsonschema", "cryptography", "jinja2", "requests")


def test_importing_the_tasks_loads_no_large_library() -> None:
    code = (f"import sys, tasks; "
            f"print(sorted(m for m in {LARGE!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]", out
