"""Locks: inputs, header, fresh/stale/missing, and the pip-compile run (engine faked)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from oota.config.matrix import load_matrix
from oota.engine.base import RunOutcome, RunRequest
from oota.errors import InputError, StepFailed
from oota.execute.lock import LockOptions, compile_lock
from oota.lockfile import (
    INPUTS_LINE,
    cell_requirements,
    closure,
    header,
    inputs_digest,
    lock_path,
    lock_status,
    pins,
    write_lock,
)
from oota.plan import plan

REPO = Path(__file__).resolve().parents[2]
CELL = "cpu-torch2.13.0-py3.11-debian12"
# --index-url keeps the vendor's index (download.pytorch.org) from being probed.
OPTIONS = LockOptions(run_id="r1", index_url="https://pypi.org/simple", use_host_pip_config=False)
LOCKED = """\
numpy==2.4.6 \\
    --hash=sha256:{a} \\
    --hash=sha256:{b}
    # via -r /lock/requirements.in
torch==2.13.0+cpu \\
    --hash=sha256:{c}
    # via -r /lock/requirements.in
""".format(a="a" * 64, b="b" * 64, c="c" * 64)


def cell_of(project, cell_id=CELL):
    matrix = load_matrix(project.matrix)
    return matrix, next(c for c in plan(matrix) if c.id == cell_id)


def test_inputs_are_the_formatted_requirements(project):
    _, cell = cell_of(project)
    reqs = cell_requirements(cell)
    assert reqs[0] == "torch==2.13.0+cpu"
    assert set(cell.vendor.test_requirements) <= set(reqs)


def test_status_missing_fresh_stale(project):
    matrix, cell = cell_of(project)
    path = lock_path(matrix, cell)
    assert path == project.root / "locks" / "cpu" / f"{CELL}.txt"
    assert lock_status(matrix, cell) == "missing"
    write_lock(path, header(cell) + LOCKED)
    assert lock_status(matrix, cell) == "fresh"
    vendor_yaml = project.root / "vendors" / "cpu" / "vendor.yaml"
    vendor_yaml.write_text(vendor_yaml.read_text().replace('"pytest>=8,<10"', '"pytest>=8,<11"'))
    matrix, cell = cell_of(project)
    assert lock_status(matrix, cell) == "stale"


def test_a_damaged_lock_is_an_input_error_and_a_new_lock_replaces_it(project):
    matrix, cell = cell_of(project)
    path = lock_path(matrix, cell)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"# oota-lock-inputs: \xff\xfe\n")
    with pytest.raises(InputError) as info:
        lock_status(matrix, cell)
    assert info.value.exit_code == 2
    assert str(info.value) == (f"locks/cpu/{CELL}.txt: not UTF-8 text (invalid start byte at "
                               "byte 20), so not a lock oota wrote; regenerate it with "
                               "`oota lock` (or delete it)")  # a project without oota.sh
    assert write_lock(path, header(cell) + LOCKED) is True
    assert lock_status(matrix, cell) == "fresh"


def test_digest_depends_on_python_and_os(project):
    matrix = load_matrix(project.matrix)
    first, second = plan(matrix)
    assert inputs_digest(first) != inputs_digest(second)
    assert f"{INPUTS_LINE}{inputs_digest(first)}" in header(first).splitlines()


def test_write_lock_is_atomic_and_idempotent(tmp_path):
    path = tmp_path / "locks" / "cpu" / "x.txt"
    assert write_lock(path, "a\n") is True
    assert write_lock(path, "a\n") is False
    assert path.read_text() == "a\n" and [p.name for p in path.parent.iterdir()] == ["x.txt"]


def test_pins_reads_versions_and_hashes():
    found = pins(LOCKED)
    assert found["torch"] == ("2.13.0+cpu", frozenset({"c" * 64}))
    assert found["numpy"] == ("2.4.6", frozenset({"a" * 64, "b" * 64}))


class FakeEngine:
    """Plays the container: writes out.txt into the folder mounted at /lock."""

    def __init__(self, exit_code: int = 0):
        self.exit_code = exit_code
        self.requests: list[RunRequest] = []

    def run(self, request: RunRequest) -> RunOutcome:
        self.requests.append(request)
        job = next(m.source for m in request.mounts if m.target == "/lock")
        assert (job / "requirements.in").read_text().startswith("torch==2.13.0+cpu\n")
        if self.exit_code == 0:
            (job / "out.txt").write_text(LOCKED)
        return RunOutcome(exit_code=self.exit_code, timed_out=False, output_tail="resolver said no")


def test_compile_lock_runs_pip_compile_in_the_builder(project, tmp_path):
    _, cell = cell_of(project)
    engine = FakeEngine()
    text = compile_lock(engine, cell, "oota-lock/cpu:x-builder", OPTIONS, tmp_path / "work")
    assert text == header(cell) + LOCKED
    request = engine.requests[0]
    assert request.image == "oota-lock/cpu:x-builder"
    assert request.command[:2] == ["bash", "-c"] and "pip-compile" in request.command[2]
    assert "--generate-hashes" in request.command[2]
    assert request.labels == {"oota.run": "r1"}
    read_only = {m.target for m in request.mounts if m.read_only}
    assert {"/run/secrets/pipconf", "/wheelhouse"} <= read_only
    # The lock's header names the command of its project, which has no oota.sh here.
    assert request.env["CUSTOM_COMPILE_COMMAND"] == "oota lock --vendor=cpu --cell=" + CELL


@pytest.mark.parametrize("upgrade", [False, True])
def test_a_relock_starts_from_the_existing_lock_unless_upgrading(project, tmp_path, upgrade):
    """pip-compile keeps the pins of the output file it finds; --upgrade starts empty."""
    _, cell = cell_of(project)
    existing = tmp_path / "existing.txt"
    existing.write_text(header(cell) + LOCKED)
    seen: list[str | None] = []

    class Seeing(FakeEngine):
        def run(self, request: RunRequest) -> RunOutcome:
            job = next(m.source for m in request.mounts if m.target == "/lock")
            out = job / "out.txt"
            seen.append(out.read_text() if out.exists() else None)
            return super().run(request)

    options = dataclasses.replace(OPTIONS, upgrade=upgrade)
    compile_lock(Seeing(), cell, "img", options, tmp_path / "work", existing=existing)
    assert seen == [None if upgrade else header(cell) + LOCKED]


def test_compile_lock_failure_carries_the_log(project, tmp_path):
    _, cell = cell_of(project)
    with pytest.raises(StepFailed, match="pip-compile for .* exited with 1") as info:
        compile_lock(FakeEngine(exit_code=1), cell, "img", OPTIONS, tmp_path)
    assert info.value.log_tail == "resolver said no"


def test_repo_lock_of_the_default_cell_is_fresh():
    matrix = load_matrix(REPO / "matrix.yaml")
    cell = next(c for c in plan(matrix, ["cpu"]) if c.id == CELL)
    assert lock_status(matrix, cell) == "fresh", "run: ./oota.sh lock --vendor=cpu --cell=" + CELL
    assert pins(lock_path(matrix, cell).read_text())["torch"][0] == "2.13.0+cpu"


# -- the vendor's part of a lock (what the get-started page installs) ---------------------------
VIA = """\
filelock==4.2.11 \\
    --hash=sha256:{a}
    # via
    #   huggingface-hub
    #   torch
huggingface-hub==1.0.0 \\
    --hash=sha256:{b}
    # via transformers
jinja2==3.1.6 \\
    --hash=sha256:{c}
    # via torch
markupsafe==3.0.4 \\
    --hash=sha256:{d} \\
    --hash=sha256:{e}
    # via jinja2
pytest==9.2.0 \\
    --hash=sha256:{f}
    # via -r /lock/requirements.in
torch==2.13.0+cpu \\
    --hash=sha256:{c}
    # via -r /lock/requirements.in
transformers==5.23.0 \\
    --hash=sha256:{a}
    # via -r /lock/requirements.in

# The following packages are considered to be unsafe in a requirements file:
setuptools==84.2.1 \\
    --hash=sha256:{b}
    # via torch
""".format(**{k: k * 64 for k in "abcdef"})


def test_closure_is_the_vendor_requirements_and_what_they_need():
    """torch and its dependencies, found through pip-compile's `via` lines, however deep
    (markupsafe via jinja2 via torch); a package shared with the suite (filelock) is in; what
    only the suite needs (pytest, transformers, huggingface-hub) is out."""
    found = closure(VIA, ["torch==2.13.0+cpu"])
    assert [(e.name, e.version) for e in found] == [
        ("filelock", "4.2.11"), ("jinja2", "3.1.6"), ("markupsafe", "3.0.4"),
        ("torch", "2.13.0+cpu"), ("setuptools", "84.2.1")]
    assert found[2].hashes == ("d" * 64, "e" * 64)
    assert closure(VIA, []) == ()


def test_the_repo_locks_closure_of_torch_holds_no_test_package():
    text = (REPO / "locks" / "cpu" / f"{CELL}.txt").read_text()
    names = {e.name for e in closure(text, ["torch==2.13.0+cpu"])}
    assert "torch" in names and "sympy" in names and "markupsafe" in names
    assert not names & {"pytest", "transformers", "numpy", "huggingface-hub", "pluggy"}
    assert all(e.hashes for e in closure(text, ["torch==2.13.0+cpu"]))
