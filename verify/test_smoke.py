"""Smoke layer: what PyTorch checks of every binary it releases, checked of this image.

PyTorch validates each release with ``.ci/pytorch/smoke_test/smoke_test.py`` (pytorch/pytorch)
run by test-infra's ``validate_binaries.sh``: once with numpy 1.x and once with numpy 2.x,
comparing the cuDNN and NCCL that torch loads with their pip packages. The Compute Platform
Quality Levels RFC (pytorch/pytorch#167282) asks that smoke test of a platform in three
environments: the full stack with the hardware, the full stack without it, and a minimal OS
without the compute stack; each passing test here records which one its run was in
(``environment``, oota_vocab.SMOKE_ENVIRONMENTS). This layer:

* runs those smoke checks in a process of their own (oota_smokecheck.py) with the image's numpy
  2.x and with numpy 1.x, which the build put in a folder of its own (verify/smoke/numpy1.txt);
* checks that the companions (torchvision, torch_xla) are the releases the cell pairs with its
  torch, and that cuDNN, NCCL and the CUDA runtime agree with torch; what the compat layer
  checks (torch's release, the vendor's extensions, the toolkit version) stays there;
* on a host without the hardware (OOTA_UNSUPPORTED_HERE), checks that torch and the vendor's
  modules import and that the first device call fails with a clear error: a pass there, not a
  skip;
* where the vendor claims ``cpp_extension``, loads the C++ extension the builder compiled
  against this torch (smoke/build_ext.py) and runs its operator on the CPU and on the device.

Not a device layer (oota_vocab.DEVICE_LAYERS): its CPU checks are no evidence that the device
ran; a run of it brings the device layer's evidence along (EVIDENCE_LAYERS) for its device checks.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from oota_claims import require
from oota_smoke import (
    EXTENSION_DIR,
    NUMPY1_DIR,
    NUMPY1_FILE,
    companion_problem,
    cudnn_problem,
    cudnn_text,
    distribution_of,
    driver_libraries,
    environment,
    numpy1_absent,
    pip_agrees,
    unclear,
)
from oota_suite import Unseen
from packaging.version import Version
from test_compat import _requires_on_torch

LAYER = "smoke"
CHECK_SCRIPT = Path(__file__).resolve().parent / "oota_smokecheck.py"
# A fresh interpreter imports torch (and a vendor's stack) in seconds; a hang is a failure.
CHECK_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def smoke_environment(cell, device_seen) -> dict[str, Any]:
    """Which of PyTorch's three smoke environments this run is in, and what told."""
    patterns = list(cell.get("driver_libraries") or ())
    found = driver_libraries(patterns)
    where = environment(device_here=not isinstance(device_seen, Unseen),
                        unsupported=bool(os.environ.get("OOTA_UNSUPPORTED_HERE")),
                        patterns=patterns, found=found)
    return {"environment": where, "driver_libraries": found}


def _imports(cell: dict[str, Any]) -> list[str]:
    return [arg for name in cell.get("smoke_imports") or ["torch"] for arg in ("--import", name)]


def _ended(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited {code}"


def _run_checks(cell: dict[str, Any], mode: str, device: str | None,
                env: dict[str, str] | None = None) -> dict[str, Any]:
    """oota_smokecheck.py's JSON, run in a fresh interpreter with ``env`` added."""
    argv = [sys.executable, str(CHECK_SCRIPT), mode, *_imports(cell)]
    argv += ["--device", device] if device else []
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S,
                              env={**os.environ, **(env or {})}, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(argv[1:])} did not finish in {CHECK_TIMEOUT_S} s")
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        pytest.fail(f"{' '.join(argv[1:])} {_ended(proc.returncode)}: "
                    f"{(proc.stderr or proc.stdout)[-2000:]}")
    return json.loads(lines[-1])


@pytest.mark.parametrize("numpy_major", [2, 1], ids=["numpy2", "numpy1"])
def test_release_smoke_checks(numpy_major, cell, device_seen, smoke_environment, record_data):
    """PyTorch's release smoke checks with numpy 2.x (the image's own) and with numpy 1.x (the
    build's folder first on the path), and numpy data through the device where it is here."""
    env = _numpy_env(numpy_major)
    device = None if isinstance(device_seen, Unseen) else device_seen.type
    found = _run_checks(cell, "checks", device, env)
    record_data(numpy=found.get("numpy"), numpy_file=found.get("numpy_file"),
                torch=found.get("torch"), checked=found.get("checked"), device=device,
                imports_s=found.get("imports_s"), **smoke_environment)
    assert "import_error" not in found, f"the stack does not import: {found.get('import_error')}"
    numpy = found["numpy"]
    if numpy_major == 1:
        assert Version(numpy).major == 1 and found["numpy_file"].startswith(str(NUMPY1_DIR)), (
            f"numpy {numpy} from {found['numpy_file']} was imported, not {NUMPY1_DIR}'s 1.x")
    assert Version(numpy).major == numpy_major, f"numpy {numpy} was imported"
    failures = found["failures"]
    assert not failures, f"with numpy {numpy}: " + "; ".join(
        f"{name}: {why}" for name, why in failures.items())


def _numpy_env(major: int) -> dict[str, str]:
    """The environment of the run with numpy ``major``, or skip saying why there is none."""
    if major == 2:
        try:
            version = md.version("numpy")
        except md.PackageNotFoundError:
            pytest.skip("numpy is not installed in this image (the vendor's test_requirements)")
        if Version(version).major != 2:
            pytest.skip(f"the image's own numpy is {version}, not 2.x (the vendor's "
                        "requirements pin it): numpy 2.x is not checked here")
        return {}
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    why = numpy1_absent(NUMPY1_FILE.read_text(), python)
    if why:
        pytest.skip(why)
    if not (NUMPY1_DIR / "numpy").is_dir():
        pytest.fail(f"the build put no numpy 1.x in {NUMPY1_DIR}, though verify/smoke/numpy1.txt "
                    f"installs one for Python {python}: an image built before the smoke layer, "
                    "or a Dockerfile.j2 that overrides the builder_smoke block")
    return {"PYTHONPATH": os.pathsep.join(filter(None, (str(NUMPY1_DIR),
                                                        os.environ.get("PYTHONPATH"))))}


def test_companions_are_the_cells_pairing(cell, record_data):
    """Each companion the cell installs (torchvision, torch_xla) is the release the cell pairs
    with its torch, and its own requirement on torch holds (test-infra checks torchvision and
    torchaudio against its release matrix the same way)."""
    paired = cell.get("companions") or {}
    if not paired:
        pytest.skip("the cell pairs no companion with its torch (vendor.yaml companions; a "
                    "channel's companions follow its torch instead)")
    import torch

    torch_version = Version(torch.__version__)
    installed = {name: _version_of(name) for name in paired}
    record_data(paired=paired, installed=installed, torch=str(torch_version))
    problems = [companion_problem(name, version, installed[name])
                for name, version in paired.items()]
    for name in (n for n in paired if installed[n]):
        problems += [f"{name} {installed[name]} requires {req}, but torch {torch_version} is "
                     "installed" for req in _requires_on_torch(name)
                     if not req.specifier.contains(torch_version, prereleases=True)]
    assert not any(problems), "; ".join(p for p in problems if p)


def _version_of(distribution: str) -> str | None:
    try:
        return md.version(distribution)
    except md.PackageNotFoundError:
        return None


def test_cuda_libraries_agree_with_torch(record_data):
    """A CUDA build's cuDNN is one torch accepts for the release it was built against (PyTorch's
    own rule: oota_smoke.cudnn_problem), and cuDNN, NCCL and
    the CUDA runtime are the releases their pip packages say (PyTorch's smoke test compares
    cuDNN and NCCL so; no GPU is needed to ask)."""
    import torch

    if not torch.version.cuda:
        pytest.skip(f"torch {torch.__version__} is no CUDA build (torch.version.cuda is None): "
                    "it carries no cuDNN, NCCL or CUDA runtime to compare")
    installed = {d.metadata["Name"]: d.version for d in md.distributions()}
    seen: dict[str, str] = {"cuda": torch.version.cuda}
    problems = [pip_agrees("CUDA runtime", torch.version.cuda,
                           distribution_of("nvidia-cuda-runtime", installed))]
    if torch.backends.cudnn.is_available():
        seen["cudnn"] = cudnn_text(torch.backends.cudnn.version())
        compiled = tuple(torch._C._cudnn.getCompileVersion())
        seen["cudnn_compiled"] = ".".join(map(str, compiled))
        problems.append(cudnn_problem(tuple(torch._C._cudnn.getRuntimeVersion()), compiled,
                                      bool(getattr(torch._C._cudnn, "is_cuda", True))))
        problems.append(pip_agrees("cuDNN", seen["cudnn"],
                                   distribution_of("nvidia-cudnn", installed)))
    nccl = _nccl_version(torch)
    if nccl:
        seen["nccl"] = nccl
        problems.append(pip_agrees("NCCL", nccl, distribution_of("nvidia-nccl", installed)))
    record_data(seen=seen, distributions=dict(filter(None, (
        distribution_of(p, installed) for p in ("nvidia-cuda-runtime", "nvidia-cudnn",
                                                "nvidia-nccl")))))
    assert not any(problems), "; ".join(p for p in problems if p)


def _nccl_version(torch: Any) -> str | None:
    try:
        return ".".join(map(str, torch.cuda.nccl.version()))
    except (AttributeError, RuntimeError):  # a build without NCCL
        return None


def test_full_stack_without_hardware(cell, smoke_environment, record_data):
    """On a host without the hardware: torch and the vendor's modules import, torch.<device>
    says it is not available, and the first call that needs the device raises a clear error
    (the RFC's "full stack without the hardware"). A pass there; elsewhere not applicable."""
    device = cell["device"]
    unsupported = os.environ.get("OOTA_UNSUPPORTED_HERE")
    if device == "cpu":
        pytest.skip("not applicable: the CPU vendor's device is the host's own CPU")
    if not unsupported:
        pytest.skip("not applicable: the host check found the hardware here (or the vendor needs "
                    "none), so this run is the full stack with the hardware")
    found = _run_checks(cell, "first-call", device)
    record_data(**smoke_environment, imports_s=found.get("imports_s"),
                is_available=found.get("is_available"), raised=found.get("raised"),
                message=found.get("message"))
    assert "import_error" not in found, (
        f"the stack does not import on a host without the device: {found.get('import_error')}")
    assert found["module"], (f"torch has no torch.{device} after importing "
                             f"{', '.join(cell.get('smoke_imports') or ['torch'])}")
    assert found["is_available"] is not True, (
        f"torch.{device}.is_available() is True where the host check found no hardware "
        f"({unsupported})")
    problem = unclear(device, found["raised"], found["message"])
    assert not problem, (f"the first call on the device, torch.empty(1, device='{device}'), "
                         f"gives no clear error: {problem}")


_LOADED: dict[str, dict[str, Any]] = {}


def _smoke_ops(spec: dict[str, Any]) -> dict[str, Any]:
    """The build's record of the C++ extension, its library loaded into this process (once);
    fails the test where it is missing, did not build, or was built against another torch."""
    require(spec, "cpp_extension", "a C++ extension built against this torch, run on the device")
    if "record" in _LOADED:
        return _LOADED["record"]
    record_file = EXTENSION_DIR / "build.json"
    if not record_file.is_file():
        pytest.fail(f"the vendor claims cpp_extension, but {record_file} is missing: this image's "
                    "builder compiled no extension (an image built before the smoke layer, or "
                    "a Dockerfile.j2 that overrides the builder_smoke block)")
    record = json.loads(record_file.read_text())
    if record.get("status") != "built":
        pytest.fail(f"the C++ extension did not build against torch {record.get('torch')} "
                    f"({record.get('api')}, {record.get('compiler')}): {record.get('error')}\n"
                    f"{str(record.get('traceback') or '')[-1500:]}")
    import torch

    built = (record.get("torch"), record.get("git_version"))
    if built != (torch.__version__, torch.version.git_version):
        pytest.fail(f"the C++ extension was built against torch {built[0]} ({built[1]}); "
                    f"this image runs {torch.__version__} ({torch.version.git_version})")
    torch.ops.load_library(str(EXTENSION_DIR / record["library"]))
    _LOADED["record"] = record
    return record


def _inputs(device: Any) -> tuple[Any, Any, Any]:
    """x, y and x * 2.5 + y * y on the CPU: quarters and eighths, so every result is exact."""
    import torch

    x = torch.arange(-8, 8, dtype=torch.float32).reshape(4, 4) / 4
    y = torch.arange(16, dtype=torch.float32).reshape(4, 4) / 8
    return x.to(device), y.to(device), x * 2.5 + y * y


def test_cpp_extension_loads_and_runs(spec, record_data):
    """The extension the builder compiled against this torch loads, registers its operator
    with the dispatcher and computes it on the CPU (also where no device is here)."""
    record = _smoke_ops(spec)
    import torch

    x, y, expected = _inputs("cpu")
    out = torch.ops.oota_smoke.scaled_add(x, y, 2.5)
    record_data(torch=record["torch"], compiler=record["compiler"], api=record["api"],
                operators=record.get("operators"))
    assert torch.equal(out, expected), f"oota_smoke::scaled_add gave {out.tolist()}"


def test_cpp_extension_runs_on_the_device(spec, device, record_data):
    """The extension's operator on device tensors: its ATen calls run on the device, the
    result stays there and equals the CPU's."""
    _smoke_ops(spec)
    import torch

    x, y, expected = _inputs(device)
    out = torch.ops.oota_smoke.scaled_add(x, y, 2.5)
    record_data(device=str(out.device), trivial=device.type == "cpu")
    assert out.device.type == device.type, f"the result is on {out.device}, not on {device}"
    assert torch.equal(out.cpu(), expected), (
        f"oota_smoke::scaled_add on {device} gave {out.cpu().tolist()}, the CPU "
        f"{expected.tolist()}")
