"""The committed lock of the default CPU cell installs with --require-hashes in that cell's own
builder stage (the session's build, by its hashes), a tampered hash is refused in that builder,
and re-locking in the container gives the same pins.

The relock asks the real PyPI (pip-compile resolves there and takes every file's hash from it),
so it is opt-in like the other tests that do (``-m network``): its outcome follows PyPI's
current files (a wheel uploaded later for a pinned version changes that pin's hashes) and its
time the network's (82 to 236 s on three runs of 2026-11-26), neither of which is oota's."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import RUN_LABEL, Mount, RunRequest
from oota.execute.lock import LockOptions, build_builder, lock_cell, mounts
from oota.lockfile import lock_path, pins
from oota.plan import plan
from tests.conftest import skip_for_host

REPO = Path(__file__).resolve().parents[2]
CELL = "cpu-torch2.13.0-py3.11-debian12"
# Constant script; the lock arrives through the read-only /lock mount.
INSTALL = r"""
set -euo pipefail
if [ -f /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi
if [ -f /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi
/opt/venv/bin/python -m venv /tmp/v
/tmp/v/bin/pip install --quiet --no-cache-dir --require-hashes $OOTA_PIP_ARGS -r /lock/$OOTA_LOCK
/tmp/v/bin/python -c "import torch, numpy, pytest; print('installed torch', torch.__version__)"
"""


@pytest.fixture(scope="module")
def default_cell():
    matrix = load_matrix(REPO / "matrix.yaml")
    return matrix, next(c for c in plan(matrix, ["cpu"]) if c.id == CELL)


@pytest.fixture(scope="module")
def options(run_id, tmp_path_factory) -> LockOptions:
    return LockOptions(run_id=run_id, work=tmp_path_factory.mktemp("lock-work"))


@pytest.fixture(scope="module")
def builder(engine, default_cell, options) -> str:
    matrix, cell = default_cell
    return build_builder(matrix, cell, engine, options)


def install(engine, cell, builder, options, lock_dir: Path, lock: str, pip_args: str = ""):
    return engine.run(RunRequest(image=builder, command=["bash", "-c", INSTALL],
                                 mounts=mounts(cell, options, lock_dir)
                                 + (Mount(source=lock_dir, target="/lock"),),
                                 env={"OOTA_LOCK": lock, "OOTA_PIP_ARGS": pip_args},
                                 labels={RUN_LABEL: options.run_id}, timeout_s=900,
                                 log_path=lock_dir / "install.log"))


def test_lock_pins_the_wheelhouse_torch_by_its_sha256(default_cell):
    matrix, cell = default_cell
    wheels = sorted(Path("/opt/wheels").glob("torch-2.13.0+cpu-*.whl"))
    if not wheels:
        skip_for_host("the local wheel folders", "no torch-2.13.0+cpu wheel in /opt/wheels")
    digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
    assert pins(lock_path(matrix, cell).read_text())["torch"] == ("2.13.0+cpu",
                                                                  frozenset({digest}))


def test_the_session_build_installed_the_committed_lock_by_its_hashes(built, default_cell):
    """The default CPU cell's builder stage installs the committed lock with --require-hashes,
    and every package of the session's build (``built``, pip's own report of that install) is
    the lock's pin with one of the lock's hashes. On a fresh machine that build ran the install;
    on a warm one BuildKit took the layer an install of these very bytes made (the lock is in
    the cell's fingerprint and bind-mounted into that step), so no second install of torch is
    needed here to show the committed lock installs."""
    matrix, cell = default_cell
    dockerfile = (REPO / "images" / "cpu" / cell.id / "Dockerfile").read_text()
    assert "pip install --require-hashes" in dockerfile, dockerfile
    assert "-r /tmp/oota-lock.txt" in dockerfile
    (result,) = built.results
    assert result["stages"]["build"]["status"] == "passed", result.get("message")
    locked = pins(lock_path(matrix, cell).read_text())
    installed = {name.replace("_", "-"): package
                 for name, package in result["installed"]["packages"].items()}
    assert "torch" in installed and set(installed) <= set(locked), set(installed) - set(locked)
    for name, package in installed.items():
        version, hashes = locked[name]
        assert package["version"] == version, (name, package)
        # pip reports an archive's hash when it downloaded it; a wheel of the host's own
        # wheelhouse (torch here, file://) it checked against the lock without reporting one.
        if package["sha256"] is not None or not str(package["source"]).startswith("file:"):
            assert package["sha256"] in hashes, (name, package)
    hashed = [name for name, package in installed.items() if package["sha256"] is not None]
    print(f"{len(hashed)} of {len(installed)} packages reported with a hash of the lock")
    assert len(hashed) >= len(installed) // 2, hashed


def test_a_tampered_hash_is_refused(engine, default_cell, builder, options, tmp_path):
    matrix, cell = default_cell
    version, _hashes = pins(lock_path(matrix, cell).read_text())["iniconfig"]
    # The locked pin with every hash swapped: what a replaced file on a mirror looks like.
    (tmp_path / "one.txt").write_text(f"iniconfig=={version} --hash=sha256:{'0' * 64}\n")
    outcome = install(engine, cell, builder, options, tmp_path, "one.txt", "--no-deps")
    assert outcome.exit_code != 0
    assert "DO NOT MATCH THE HASHES" in outcome.output_tail


@pytest.mark.network
def test_relocking_in_the_builder_gives_the_committed_pins(engine, default_cell, options,
                                                           tmp_path):
    matrix, cell = default_cell
    dest = tmp_path / "relocked.txt"
    outcome = lock_cell(matrix, cell, engine, Console(), options, dest=dest)
    assert outcome.status == "written", outcome.message
    assert pins(dest.read_text()) == pins(lock_path(matrix, cell).read_text())
