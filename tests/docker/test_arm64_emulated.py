"""The CPU vendor's linux/arm64 cell, built and verified on an x86_64 host under emulation
(QEMU registered with binfmt; BuildKit --platform linux/arm64): through the install, compat and
device layers.

Opt-in (``-m emulation``): on this project's 2-core hosts it takes far more than 10 minutes
(docs/reference/matrix.md, "Platforms", gives the figures): every step of the build and the
suite runs under QEMU, and PyPI's aarch64 torch brings the CUDA wheels it depends on. It needs
QEMU 10 (``OOTA_EMULATION=1 scripts/ensure-env.sh``): under Debian 12's own 7.2, torch
segfaults on import.

Where PyTorch's CPU index does not answer (this project's hosts), the cell gets PyPI's aarch64
torch, the CUDA build (``2.13.0+cu130``), and the CPU vendor's compat checks rightly refuse
it: the test is then an expected failure, and only if those are its only failures.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.execute.build import BuildOptions
from oota.plan import plan, select
from oota.vocab import BAD
from tests.runs import build_cells

from .conftest import NAMESPACE, copy_project, made_by

CELL = "cpu-torch2.13.0-py3.11-debian12-arm64"
# What the CPU vendor's checks refuse in a CUDA build of torch.
CUDA_BUILD_REFUSED = {"test_cpu.py::test_torch_has_cpu_build_tag",
                      "test_cpu.py::test_cpu_build_has_no_gpu_runtime",
                      "test_cpu.py::test_no_gpu_runtime_is_bundled",
                      "test_compat.py::test_torch_native_modules_load"}
BINFMT = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")

pytestmark = pytest.mark.emulation


@pytest.fixture(autouse=True)
def opted_in(request: pytest.FixtureRequest) -> None:
    if "emulation" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("opt-in: -m emulation (an emulated arm64 build and verification takes "
                    "well over 10 minutes here)")
    if not BINFMT.is_file():
        pytest.skip(f"{BINFMT} is missing: apt-get install qemu-user-static binfmt-support")


def test_the_arm64_cpu_cell_installs_and_runs_under_emulation(engine: Any, run_id: str,
                                                               tmp_path: Path) -> None:
    matrix_file = copy_project(tmp_path / "project")
    data = yaml.safe_load(matrix_file.read_text())
    data["vendors"] = {"cpu": {"os": ["debian12"], "python": ["3.11"], "torch": ["2.13.0"],
                               "platform": ["linux/arm64"]}}
    matrix_file.write_text(yaml.safe_dump(data, sort_keys=False))
    matrix = load_matrix(matrix_file)
    cells = select(matrix, plan(matrix), everything=True)
    assert [c.id for c in cells] == [CELL]
    options = BuildOptions(results_dir=tmp_path / "results", run_id=run_id, namespace=NAMESPACE,
                           layers=("install", "compat", "device"),
                           extra_labels=made_by(run_id))
    [result] = [r.to_json() for r in build_cells(matrix, cells, engine, Console(), options)]
    assert result["stages"]["build"]["status"] == "passed", result.get("message")
    assert result["cell"]["platform"] == "linux/arm64"
    arch = subprocess.run(["docker", "image", "inspect", "--format", "{{.Architecture}}",
                           result["image"]["tag"]], capture_output=True, text=True, check=True)
    assert arch.stdout.strip() == "arm64"
    torch = result["installed"]["torch"]["version"]
    assert torch.startswith("2.13.0")
    tests = result["tests"]
    assert {"install", "compat", "device"} <= {t["layer"] for t in tests}
    failed = {t["id"] for t in tests if t["status"] in BAD}
    cpu_index_unreachable = any("download.pytorch.org/whl/cpu is unreachable" in note
                                for note in result["sources"]["notes"])
    if torch.endswith("+cpu") or not cpu_index_unreachable:
        assert result["status"] == "passed", result.get("message")
        return
    assert failed == CUDA_BUILD_REFUSED, result.get("message")
    assert {t["layer"] for t in tests if t["id"] in failed} == {"compat"}
    pytest.xfail(f"PyTorch's CPU index is unreachable here: torch {torch} is PyPI's aarch64 "
                 f"CUDA build, which the CPU vendor's compat checks refuse ({len(failed)} "
                 "tests); install and device passed")
