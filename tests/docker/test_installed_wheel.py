"""oota installed from its wheel, in a fresh folder holding only a vendor that `oota init`
scaffolded, as a vendor's own repository would: the wheel is built from this checkout and
installed into a fresh virtual environment; `oota init`, `oota build` (a real image, built and
verified on the Engine) and `oota report` then run there, far from the checkout.

The fresh environment takes oota's dependencies from the test's own (a path file naming its
site-packages, whose own path files stay unread, so this checkout's editable oota is not
seen): what is under test is the wheel and the command it installs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import REPO

from .conftest import NAMESPACE

# A vendor repository's own invoke tasks (oota must not load them: issue 40).
VENDOR_TASKS = ("from invoke import task\n\n\n@task\ndef lint(c):\n"
                "    \"\"\"lint the vendor's own way\"\"\"\n")


def run(argv: list[str], cwd: Path, timeout: int = 1200) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin/ folder of a fresh virtual environment with the wheel of this checkout."""
    root = tmp_path_factory.mktemp("wheel")
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                 str(root / "dist"), str(REPO)], cwd=root, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = (root / "dist").glob("oota-*.whl")
    made = run([sys.executable, "-m", "venv", "--without-pip", str(root / "env")], cwd=root)
    assert made.returncode == 0, made.stderr
    python = root / "env" / "bin" / "python"
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
               cwd=root).stdout.strip()
    (Path(site) / "oota-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    added = run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                 "-q", str(wheel)], cwd=root, timeout=600)
    assert added.returncode == 0, added.stderr[-2000:]
    return python.parent


def test_the_wheel_builds_verifies_and_reports_in_a_fresh_folder(installed, debian12_base,
                                                                  docker_client, tmp_path):
    oota = str(installed / "oota")
    where = run([str(installed / "python"), "-c", "import oota; print(oota.__file__)"],
                cwd=tmp_path)
    assert where.stdout.startswith(str(installed.parent)), where.stdout  # not the checkout's
    # One name per test namespace: sessions apart on one Engine never share a tag, and a
    # session's next run finds its builder stage in BuildKit's cache.
    vendor = "wheel-" + re.sub(r"[^a-z0-9-]", "-", NAMESPACE.lower())
    cell = f"{vendor}-torch2.13.0-py3.11-debian12"
    # A vendor's repository with invoke tasks of its own: oota runs its own tasks there.
    (tmp_path / "tasks.py").write_text(VENDOR_TASKS, encoding="utf-8")
    listed = run([oota, "--list"], cwd=tmp_path)
    assert listed.returncode == 0 and "build" in listed.stdout, listed.stderr
    assert "lint the vendor's own way" not in listed.stdout
    init = run([oota, "init", "--vendor", vendor], cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    try:
        build = run([oota, "build", "--vendor", vendor, "--no-history"], cwd=tmp_path)
        assert build.returncode == 0, build.stdout + build.stderr[-3000:]
        result = json.loads((tmp_path / "results" / cell / "result.json").read_text())
        assert result["status"] == "passed"
        passed = [t["id"] for t in result["tests"] if t["status"] == "passed"]
        module = f"test_{vendor.replace('-', '_')}.py"
        assert any(i.endswith(f"{module}::test_a_tensor_on_the_device_adds_up")
                   for i in passed), passed
        assert "test_install.py::test_core_imports[torch]" in passed
        report = run([oota, "report", "--no-history"], cwd=tmp_path)
        assert report.returncode == 0, report.stderr
        shown = json.loads((tmp_path / "reports" / "results.json").read_text())
        assert [c["id"] for c in shown["cells"]] == [cell]
        assert not (tmp_path / "verify").exists()
        assert (tmp_path / "tasks.py").read_text(encoding="utf-8") == VENDOR_TASKS
    finally:
        for image in docker_client.images.list(name=f"oota/{vendor}"):
            docker_client.images.remove(image.id, force=True)
