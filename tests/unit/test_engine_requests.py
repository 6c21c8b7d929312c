"""The engine door's run requests are data (env, mounts, device access); only the Docker engine
turns them into `docker create` argv. The argv function is pure: each shipped vendor's device
access is checked here word for word, with no fake and no Docker."""

from __future__ import annotations

from pathlib import Path

import pytest

from oota.config.matrix import load_matrix
from oota.engine.base import DeviceAccess, Mount, RunRequest
from oota.engine.cli import create_argv
from oota.execute.verify import device_request, exited

REPO = Path(__file__).resolve().parents[2]
VENDORS = {name: vm.vendor for name, vm in load_matrix(REPO / "matrix.yaml").vendors.items()}
ASCEND_MOUNTS = ["/usr/local/dcmi", "/usr/local/bin/npu-smi", "/usr/local/Ascend/driver/lib64/",
                 "/usr/local/Ascend/driver/version.info", "/etc/ascend_install.info"]

# What each vendor's verify container is created with (vendor.yaml host: and run:), as the
# vendors' own instructions give it (see the sources in each vendor.yaml).
EXPECTED = {
    "cpu": [],
    "reference": [],
    "xla": [],
    "cuda": ["--gpus", "all", "--ipc", "host"],
    "rocm": ["--ipc", "host", "--device", "/dev/kfd", "--device", "/dev/dri",
             "--group-add", "video", "--security-opt", "seccomp=unconfined"],
    "xpu": ["--mount", "type=bind,source=/dev/dri/by-path,target=/dev/dri/by-path",
            "--device", "/dev/dri"],
    "gaudi": ["--env", "HABANA_VISIBLE_DEVICES=all",
              "--env", "OMPI_MCA_btl_vader_single_copy_mechanism=none",
              "--runtime", "habana", "--ipc", "host", "--network", "host",
              "--cap-add", "sys_nice"],
    "ascend": [arg for path in ASCEND_MOUNTS
               for arg in ("--mount", f"type=bind,source={path.rstrip('/')},target={path}")]
    + ["--device", "/dev/davinci0", "--device", "/dev/davinci_manager",
       "--device", "/dev/devmm_svm", "--device", "/dev/hisi_hdc"],
}


def test_every_shipped_vendor_is_covered() -> None:
    assert set(EXPECTED) == set(VENDORS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_vendor_device_access_argv(name: str) -> None:
    request = device_request(VENDORS[name], "oota/x:cell", ["oota-verify", "--out", "/tmp/o"])
    assert create_argv("docker", request) == [
        "docker", "create", "--init", *EXPECTED[name],
        "oota/x:cell", "oota-verify", "--out", "/tmp/o"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_unsupported_here_drops_device_access_and_says_why(name: str) -> None:
    request = device_request(VENDORS[name], "img", ["oota-verify"], unsupported="no /dev/kfd")
    assert request.device is None and not request.mounts
    assert create_argv("docker", request) == [
        "docker", "create", "--init",
        "--env", "OOTA_UNSUPPORTED_HERE=no /dev/kfd", "img", "oota-verify"]


def test_labels_env_and_mounts_are_one_argv_word_each() -> None:
    request = RunRequest(
        image="img", command=["bash", "-c", "echo $A; touch /lock/x"],
        labels={"oota.run": "r1", "oota.cell": "cpu-x"},
        env={"B": "two words", "A": 'quote " and $dollar'},
        mounts=(Mount(source=Path("/tmp/a,b"), target="/lock", read_only=False),
                Mount(source=Path("/etc/pip.conf"), target="/run/secrets/pipconf")),
        device=DeviceAccess(shm_size="8g"))
    assert create_argv("/usr/bin/docker", request) == [
        "/usr/bin/docker", "create", "--init",
        "--label", "oota.cell=cpu-x", "--label", "oota.run=r1",
        "--env", 'A=quote " and $dollar', "--env", "B=two words",
        # --mount reads its value as CSV: a comma inside a path is quoted, not split.
        "--mount", 'type=bind,"source=/tmp/a,b",target=/lock',
        "--mount", "type=bind,source=/etc/pip.conf,target=/run/secrets/pipconf,readonly",
        "--shm-size", "8g",
        "img", "bash", "-c", "echo $A; touch /lock/x"]


def test_a_request_without_device_access_has_no_device_options() -> None:
    argv = create_argv("docker", RunRequest(image="img", command=[]))
    assert argv == ["docker", "create", "--init", "img"]


@pytest.mark.parametrize(("code", "said"), [
    (139, "exited with 139 (SIGSEGV)"), (137, "exited with 137 (SIGKILL)"),
    (1, "exited with 1"), (200, "exited with 200")])
def test_a_suite_killed_by_a_signal_is_named_so(code: int, said: str) -> None:
    assert exited(code) == said
