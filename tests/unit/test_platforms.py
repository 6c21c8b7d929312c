"""The platform axis: cells for linux/arm64 beside linux/amd64, named and built for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oota.config.matrix import load_matrix
from oota.errors import EnvironmentProblem, MatrixError
from oota.execute import bases
from oota.execute.context import build_request, cell_inputs
from oota.execute.sources import PipSources
from oota.github import job_for
from oota.plan import plan, select
from oota.render import cell_manifest, render_cell
from tests.conftest import REPO

SHIPPED = load_matrix(REPO / "matrix.yaml")


def cells(vendor: str) -> dict[str, object]:
    return {c.id: c for c in plan(SHIPPED, [vendor])}


def test_an_arm64_cell_says_so_in_its_id_and_an_amd64_cell_keeps_its_id() -> None:
    cpu = cells("cpu")
    assert "cpu-torch2.13.0-py3.11-debian12" in cpu
    arm = cpu["cpu-torch2.13.0-py3.11-debian12-arm64"]
    assert arm.platform == "linux/arm64" and (arm.arch, arm.machine) == ("arm64", "aarch64")
    assert arm.coordinates()["platform"] == "linux/arm64"
    assert "platform" not in cpu["cpu-torch2.13.0-py3.11-debian12"].coordinates()


def test_arm64_cells_for_cpu_cuda_sbsa_and_ascend() -> None:
    arm = [c.id for c in plan(SHIPPED) if c.platform == "linux/arm64"]
    assert {i.split("-")[0] for i in arm} == {"cpu", "cuda", "ascend"}
    assert "cuda-torch2.15.0-cu13.2-py3.12-ubuntu24.04-arm64" in arm


def test_defaults_never_pick_an_arm64_cell() -> None:
    """A default entry that names no platform means linux/amd64: a plain build never starts
    an emulated one."""
    chosen = select(SHIPPED, plan(SHIPPED))
    assert chosen and all(c.platform == "linux/amd64" for c in chosen)


def test_the_cell_manifest_image_labels_and_ci_job_name_the_platform() -> None:
    cell = cells("cuda")["cuda-torch2.15.0-cu13.2-py3.12-ubuntu24.04-arm64"]
    assert cell_manifest(cell)["platform"] == "linux/arm64"
    dockerfile = render_cell(SHIPPED, cell).files["Dockerfile"]
    assert 'oota.platform="linux/arm64"' in dockerfile
    job = job_for(cell, "sha256:0")
    assert job.runs_on == ("self-hosted", "linux", "ARM64", "nvidia-gpu")
    assert job.name.endswith("/ arm64")


def test_arm64_requirements_are_the_platforms_own() -> None:
    cpu = cells("cpu")
    arm = render_cell(SHIPPED, cpu["cpu-torch2.13.0-py3.11-debian12-arm64"])
    amd = render_cell(SHIPPED, cpu["cpu-torch2.13.0-py3.11-debian12"])
    assert arm.vendor_requirements == ("torch==2.13.0",)
    assert amd.vendor_requirements == ("torch==2.13.0+cpu",)


def test_the_build_request_asks_buildkit_for_the_platform(tmp_path: Path) -> None:
    cpu = cells("cpu")
    base = bases.Base(ref="oota/base:debian12-arm64", how="local")
    for cell_id, platform in (("cpu-torch2.13.0-py3.11-debian12-arm64", "linux/arm64"),
                              ("cpu-torch2.13.0-py3.11-debian12", None)):
        cell = cpu[cell_id]
        folder = tmp_path / cell_id
        folder.mkdir()
        request = build_request(SHIPPED, cell, cell_inputs(SHIPPED, cell, f"t:{cell_id}"),
                                folder, PipSources(index_url="https://pypi.org/simple",
                                                   extra_index_urls=(), find_links_urls=(),
                                                   wheel_dirs=()),
                                base, ca_bundle=None, extra_labels=(),
                                log_path=folder / "build.log", timeout_s=60)
        assert request.platform == platform


def test_a_platform_the_vendor_does_not_support_is_a_located_error(project) -> None:
    project.write(project.matrix.read_text().replace(
        'torch: ["2.13.0"]', 'torch: ["2.13.0"]\n    platform: [linux/arm64, linux/s390x]'))
    (project.root / "vendors" / "cpu" / "vendor.yaml").write_text(
        (project.root / "vendors" / "cpu" / "vendor.yaml").read_text().replace(
            "platforms: [linux/amd64, linux/arm64]\n", ""))
    with pytest.raises(MatrixError) as err:
        load_matrix(project.matrix)
    text = str(err.value)
    assert "vendors.cpu.platform[0]: vendor cpu does not support linux/arm64 (its vendor.yaml " \
           "platforms: linux/amd64); add linux/arm64 to vendors/cpu/vendor.yaml platforms" in text
    assert "vendors.cpu.platform[1]: unknown platform 'linux/s390x'" in text


def test_a_base_for_another_platform_is_its_own_and_needs_emulation(monkeypatch,
                                                                   tmp_path: Path) -> None:
    spec = SHIPPED.os["debian12"]
    assert bases.bootstrap_tag(spec) == "oota/base:debian12"
    assert bases.bootstrap_tag(spec, "linux/arm64") == "oota/base:debian12-arm64"
    monkeypatch.setattr(bases, "Path", lambda *a: tmp_path / "no-binfmt")
    with pytest.raises(EnvironmentProblem, match="needs QEMU registered with binfmt .* "
                       "apt-get install qemu-user-static binfmt-support"):
        bases._check_emulation("linux/arm64", "oota/base:debian12-arm64")


def test_the_result_schema_takes_the_platform() -> None:
    schema = json.loads((REPO / "schema" / "result-v1.json").read_text())
    assert schema["properties"]["cell"]["properties"]["platform"]["pattern"] == \
        "^linux/(amd64|arm64)$"
