"""The smoke layer's decisions (verify/oota_smoke.py), what the build prepares for it (the
Dockerfiles, cell.json) and how the report shows the environments it covers. The layer itself
runs in the images (tests/docker/test_smoke_layer.py)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from oota import vocab
from oota.config.matrix import load_matrix
from oota.plan import plan
from oota.render import render_all
from oota.report.htmlpages import cell_page, to_html
from oota.report.smokeenv import smoke_environments
from tests.reports import build_report
from tests.unit.test_report import case, make_result, typed

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "verify"))
import oota_smoke  # noqa: E402

NUMPY1 = (REPO / "verify" / "smoke" / "numpy1.txt").read_text()
# What torch raised at its first device call, read on 2026-11-28: PyPI's torch 2.15.0+cu132 in
# the CUDA cell's image on this GPU-less host, and torch 2.13.0+cpu asked for CUDA.
NO_DRIVER = ("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU "
             "and installed a driver from http://www.nvidia.com/Download/index.aspx")
CPU_BUILD = "Torch not compiled with CUDA enabled"


def test_numpy1_is_the_last_1x_pinned_by_hash_for_the_pythons_it_has_wheels_for():
    requirement = oota_smoke.numpy1_requirement(NUMPY1)
    assert str(requirement.specifier) == "==1.26.4"
    hashes = re.findall(r"--hash=sha256:([0-9a-f]+)", NUMPY1)
    assert len(hashes) == 8 and all(len(h) == 64 for h in hashes)  # cp39-cp312, x86_64 + aarch64
    for python in ("3.10", "3.11", "3.12"):
        assert oota_smoke.numpy1_absent(NUMPY1, python) == ""


@pytest.mark.parametrize("python", ["3.13", "3.14"])
def test_numpy1_says_why_a_newer_python_has_none(python):
    assert oota_smoke.numpy1_absent(NUMPY1, python) == (
        f"numpy 1.x has no wheel for Python {python}: the last 1.x, ==1.26.4, is built for "
        'CPython 3.9 to 3.12 (verify/smoke/numpy1.txt: python_version < "3.13")')


@pytest.mark.parametrize(("device_here", "unsupported", "patterns", "found", "expected"), [
    (True, False, [], [], "hardware"),
    (True, False, ["libcuda.so*"], ["libcuda.so.1"], "hardware"),
    (False, True, ["libcuda.so*"], ["libcuda.so.1"], "no-hardware"),
    (False, True, ["libcuda.so*"], [], "minimal-os"),
    (False, True, [], [], "no-hardware"),       # a vendor that needs no driver (refdev)
    (False, False, ["libcuda.so*"], [], ""),    # the hardware is here, the container blind
], ids=["device", "device-with-driver", "driver-no-device", "no-driver", "no-driver-needed",
        "blind-container"])
def test_which_smoke_environment_a_run_is_in(device_here, unsupported, patterns, found,
                                             expected):
    assert oota_smoke.environment(device_here=device_here, unsupported=unsupported,
                                  patterns=patterns, found=found) == expected


def test_the_driver_libraries_are_read_from_ldconfigs_listing():
    listing = ("3 libs found in cache `/etc/ld.so.cache'\n"
               "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
               "\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
               "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\n")
    names = oota_smoke.library_names(listing)
    assert oota_smoke.matching(names, ["libcuda.so*", "libnvidia-*.so*"]) == [
        "libcuda.so.1", "libnvidia-ml.so.1"]


@pytest.mark.parametrize(("raised", "message", "problem"), [
    ("RuntimeError", NO_DRIVER, ""),
    ("AssertionError", CPU_BUILD, ""),
    ("RuntimeError", "refdev: no device (REFDEV_DEVICE_COUNT=0)", ""),
    (None, "made a tensor on cuda:0", "it did not raise: made a tensor on cuda:0"),
    ("RuntimeError", "  ", "it raised RuntimeError with no message"),
    ("ValueError", "bad value", "ValueError: 'bad value' names neither the device (cuda)"),
], ids=["no-driver", "cpu-build", "names-device", "no-error", "empty", "vague"])
def test_a_first_device_call_must_fail_clearly(raised, message, problem):
    found = oota_smoke.unclear("cuda" if "refdev" not in message else "refdev", raised, message)
    assert found.startswith(problem) and bool(found) == bool(problem), found


def test_cuda_libraries_compare_as_pytorchs_smoke_test_does():
    # The CUDA cell's image (torch 2.15.0+cu132) as pip and torch reported it on 2026-11-28.
    installed = {"nvidia-cudnn-cu13": "9.26.0.51", "nvidia-nccl-cu13": "2.30.7",
                 "nvidia-cuda-runtime": "13.2.86", "torch": "2.15.0"}
    assert oota_smoke.cudnn_text(92600) == "9.26.0" and oota_smoke.cudnn_text(8907) == "8.9.7"
    cudnn = oota_smoke.distribution_of("nvidia-cudnn", installed)
    assert cudnn == ("nvidia-cudnn-cu13", "9.26.0.51")
    assert oota_smoke.pip_agrees("cuDNN", "9.26.0", cudnn) == ""
    assert oota_smoke.pip_agrees("CUDA runtime", "13.2",
                                 oota_smoke.distribution_of("nvidia-cuda-runtime", installed)) == ""
    assert oota_smoke.pip_agrees("NCCL", "2.28.9", ("nvidia-nccl-cu13", "2.30.7")) == (
        "NCCL: torch loads 2.28.9, but nvidia-nccl-cu13 2.30.7 is installed")
    assert oota_smoke.pip_agrees("cuDNN", "9.26.0", None) == ""  # nothing from pip to compare


@pytest.mark.parametrize(("runtime", "compiled", "is_cuda", "problem"), [
    ((9, 10, 2), (9, 8, 0), True, ""),  # PyPI's torch 2.9.0: built 9.8.0, pins 9.10.2
    ((9, 8, 0), (9, 8, 0), True, ""),
    ((9, 7, 1), (9, 8, 0), True, "an older minor release than it needs"),
    ((8, 9, 7), (9, 8, 0), True, "another major release"),
    ((6, 1, 0), (6, 0, 0), True, "another minor release"),
    ((3, 1, 0), (3, 0, 0), False, "another minor release"),  # MIOpen: exact, as torch checks
])
def test_cudnn_is_judged_by_pytorchs_own_compatibility_rule(runtime, compiled, is_cuda,
                                                            problem):
    """The smoke layer failed the XLA cell's PyPI torch 2.9.0 for loading cuDNN 9.10.2 where it
    was built against 9.8.0: torch itself accepts that (cuDNN 7 on: a newer minor release of
    the same major is backward compatible), so a stack PyTorch ships must not fail here."""
    found = oota_smoke.cudnn_problem(runtime, compiled, is_cuda)
    assert (problem in found) if problem else found == ""


@pytest.mark.parametrize(("installed", "problem"), [
    ("0.28.0", ""), ("0.28.0+cu126", ""),
    ("0.27.1", "torchvision 0.27.1 is installed; the cell pairs 0.28.0 with its torch"),
    (None, "torchvision is not installed; the cell pairs 0.28.0 with its torch"),
])
def test_a_companion_is_the_release_the_cell_pairs(installed, problem):
    assert oota_smoke.companion_problem("torchvision", "0.28.0", installed).startswith(problem)


# -- what the build prepares ------------------------------------------------------------------

@pytest.fixture(scope="module")
def rendered():
    matrix = load_matrix(REPO / "matrix.yaml")
    return {item.cell.id: item for item in render_all(matrix, plan(matrix))}


def test_every_builder_installs_numpy1_and_compiles_the_extension_where_claimed(rendered):
    for cell_id, item in rendered.items():
        dockerfile = item.files["Dockerfile"]
        builder = dockerfile.split("AS runtime")[0]
        assert "pip install --target /opt/oota/numpy1" in builder, cell_id
        claimed = item.cell.vendor.verify.capabilities.get("cpp_extension") is True
        assert ("build_ext.py" in builder) == claimed, cell_id
        # The smoke layer's compiler stays in the builder: the runtime stage installs one only
        # for Inductor, where the vendor claims it (verify.compile.compiler).
        compile_spec = item.cell.vendor.verify.torch_compile
        needs = bool(compile_spec and compile_spec.compiler)
        assert ("g++" in dockerfile.split("AS runtime")[1]) == needs, cell_id
    claims = {item.cell.vendor.name for item in rendered.values()
              if "build_ext.py" in item.files["Dockerfile"]}
    assert {"cpu", "reference", "cuda", "rocm"} <= claims


def test_cell_json_names_the_companions_paired_with_the_cells_torch(rendered):
    def companions(cell_id):
        return json.loads(rendered[cell_id].files["cell.json"]).get("companions")

    assert companions("cuda-torch2.15.0-cu13.2-py3.11-debian12") == {"torchvision": "0.29.2"}
    assert companions("cpu-torch2.13.0-py3.11-debian12") is None
    assert companions("cpu-torchnightly-py3.11-debian12") is None  # the channel's, no pairing


# -- the report ---------------------------------------------------------------------------------

def _smoke(environment: str, status: str = "passed") -> list[dict]:
    return [case("test_device.py::test_device_visible", "device",
                 "passed" if environment == "hardware" else "unsupported-here",
                 "" if environment == "hardware" else "no NVIDIA GPU"),
            case("test_smoke.py::test_release_smoke_checks[numpy2]", "smoke", status,
                 "" if status == "passed" else "with numpy 2.4.6: svd: ...",
                 {"environment": environment, "numpy": "2.4.6"})]


def test_the_smoke_column_names_the_environments_a_cells_copies_passed_in():
    here = make_result("cuda", torch="2.15.0", toolkit="cuda", toolkit_version="13.2",
                       tests=_smoke("hardware"), host={"engine": "gpu-lab"})
    there = make_result("cuda", torch="2.15.0", toolkit="cuda", toolkit_version="13.2",
                        tests=_smoke("minimal-os"), host={"engine": "ci"})
    for result in (here, there):
        result["status"] = "passed" if result is here else "unsupported-here"
    report = build_report(typed([here, there]), [])
    (group,) = report.groups
    assert group.layers["smoke"].note == "hardware, minimal-os"
    assert {r.origin: r.layers["smoke"].note for r in group.copies} == {
        "gpu-lab": "hardware", "ci": "minimal-os"}
    page = cell_page(group, "../results")
    assert "PyTorch's smoke test environments" in page
    assert "full stack, without the hardware" in page and "not covered" in page
    assert "hardware, minimal-os" in to_html(report)


def test_an_environment_whose_smoke_checks_failed_is_not_covered():
    result = make_result(tests=_smoke("hardware", "failed"))
    result["status"] = "failed"
    (env, *others) = smoke_environments(typed([result])[0].tests)
    assert (env.key, env.status, env.covered) == ("hardware", "failed", False)
    assert all(e.status == "" for e in others)
    (group,) = build_report(typed([result]), []).groups
    assert group.layers["smoke"].note == ""


def test_the_smoke_layer_is_no_device_layer_but_brings_the_devices_evidence():
    assert "smoke" in vocab.LAYERS and "smoke" not in vocab.DEVICE_LAYERS
    assert set(vocab.EVIDENCE_LAYERS) == {*vocab.DEVICE_LAYERS, "smoke"}
    schema = json.loads((REPO / "schema" / "result-v1.json").read_text())
    data = schema["$defs"]["test"]["properties"]["data"]["properties"]
    assert data["environment"]["enum"] == [key for key, _ in vocab.SMOKE_ENVIRONMENTS] + [""]
