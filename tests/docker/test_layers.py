"""The in-image suite's layers and skip list, run for real in the session's CPU image.

Nothing new is built: each test starts a container of the image that tests/docker/conftest.py
built (``built.tag``), runs ``oota-verify`` as a user would, and reads the ``tests.json`` it wrote.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

import pytest

from oota.engine.base import RUN_LABEL
from oota.results.assemble import overall_status, suite_test

REPO = Path(__file__).resolve().parents[2]
OUT = "/tmp/oota-results"
CELL_IN_IMAGE = "/opt/oota/cell.json"


def _read_file(container, path: str) -> bytes:
    stream, _ = container.get_archive(path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.getmembers()[0]
        return tar.extractfile(member).read()


def run_verify(docker_client, tag: str, run_id: str, *args: str, volumes=None,
               environment=None) -> tuple[int, dict, str]:
    """(exit code, tests.json, log) of ``oota-verify --out OUT -q ARGS`` in a fresh container."""
    container = docker_client.containers.create(
        tag, command=["oota-verify", "--out", OUT, "-q", *args], volumes=volumes or {},
        environment=environment or {}, labels={RUN_LABEL: run_id, "oota.test": "layers"})
    try:
        container.start()
        code = container.wait(timeout=900)["StatusCode"]
        log = container.logs().decode(errors="replace")
        try:
            data = json.loads(_read_file(container, f"{OUT}/tests.json"))
        except Exception:  # noqa: BLE001 - no tests.json: the caller asserts on code and log
            data = {}
        return code, data, log
    finally:
        container.remove(force=True)


@pytest.fixture(scope="module")
def image(built) -> str:
    assert built.results[0]["stages"]["build"]["status"] == "passed", built.results[0]
    return built.tag


@pytest.fixture(scope="module")
def cell_json(image, docker_client, run_id) -> dict:
    container = docker_client.containers.create(image, command=["true"],
                                                labels={RUN_LABEL: run_id})
    try:
        return json.loads(_read_file(container, CELL_IN_IMAGE))
    finally:
        container.remove(force=True)


def by_id(data: dict) -> dict[str, dict]:
    return {t["id"]: t for t in data["tests"]}


def test_device_layer_alone(image, docker_client, run_id, cell_json):
    code, data, log = run_verify(docker_client, image, run_id, "--layer", "device")
    assert code == 0, log[-3000:]
    assert data["layers"] == ["device"]
    # The skip list's expiry check runs whatever is selected; nothing else may.
    assert {t["layer"] for t in data["tests"]} == {"device", "skips"}
    tests = by_id(data)
    for dtype in cell_json["verify"]["dtypes"]:
        entry = tests[f"test_device.py::test_copies_preserve_values[{dtype}]"]
        assert entry["status"] == "passed" and entry["data"]["dtype"] == dtype
    matmul = tests["test_device.py::test_matmul_matches_cpu[float32]"]
    assert matmul["data"]["trivial"] is True and matmul["data"]["max_abs_diff"] == 0.0
    assert tests["test_device.py::test_matmul_matches_cpu[int64]"]["status"] == "skipped"
    assert data["counts"].get("failed", 0) == 0


def test_models_layer_records_each_model(image, docker_client, run_id, cell_json):
    code, data, log = run_verify(docker_client, image, run_id, "--layer", "models")
    assert code == 0, log[-3000:]
    models = [t for t in data["tests"] if t["layer"] == "models"]
    assert [t["id"] for t in models] == [
        f"test_models.py::test_forward_and_train_step[{m}]" for m in cell_json["verify"]["models"]]
    for test in models:
        assert test["status"] == "passed", test
        record = test["data"]
        assert record["model"] in test["id"] and record["dtype"] == "float32"
        assert record["seconds"] > 0 and record["parameters"] > 0
        assert record["peak_bytes"] is None          # torch.cpu keeps no memory statistics
        assert record["trivial"] is True and record["max_abs_diff"] == 0.0
    classes = {t["data"]["model"]: t["data"]["model_class"] for t in models}
    assert classes["llama"] == "LlamaForCausalLM" and classes["gemma"] == "GemmaForCausalLM"


# The modules and optimizers layers' must-run entries only, as in the session's verification.
BUDGETS_OF_0 = {"OOTA_MODULES_BUDGET_S": "0", "OOTA_OPTIMIZERS_BUDGET_S": "0"}


def test_the_modules_and_optimizers_layers_pass_on_the_cpu_with_their_counts(built):
    """The session's verification of the CPU cell (budgets of 0 s: the must-run entries): each
    must-run module ran forward and backward in each of its dtypes (the CPU vendor compares
    nothing: its device is the CPU), each must-run optimizer in every implementation the CPU
    claims, its foreach and fused steps judged against its for-loop ones; what the budgets left
    unrun is one entry per test, with its count; the state dict test is skipped saying why."""
    tests = {t["id"]: t for t in built.results[0]["tests"]}
    linear = tests["test_modules.py::test_module_runs[nn.Linear-float32]"]
    assert linear["status"] == "passed" and linear["data"]["compared"] is False
    assert (linear["data"]["samples"], linear["data"]["ran"]) == (3, 3)
    conv = tests["test_modules.py::test_module_runs[nn.Conv2d-float32]"]["data"]
    assert (conv["ran"], conv["formats"]) == (4, 2)  # two of its samples in channels_last
    assert tests["test_modules.py::test_module_runs[nn.BatchNorm2d-float64]"]["data"][
        "modes"] == ["train", "eval"]
    modules = [t for t in tests.values() if t["layer"] == "modules"]
    assert {t["status"] for t in modules if "unrun" not in t["id"]} == {"passed"}
    unrun = tests["test_modules.py::test_module_runs[unrun-by-budget]"]
    assert re.fullmatch(r"time budget of 0 s spent \(OOTA_MODULES_BUDGET_S\): \d+ module×dtype "
                        r"pairs of \d+ modules not run", unrun["message"]), unrun["message"]
    must = {line.split(":", 1)[1].strip() for line in (REPO / "verify" / "modules-must-run.yaml")
            .read_text().splitlines() if line.startswith("- module:")}
    assert {t["data"]["module"] for t in modules if t["status"] == "passed" and "data" in t
            and "module" in t["data"]} == must
    for impl in ("forloop", "foreach", "fused"):
        for dtype in ("float32", "float64", "float16", "bfloat16"):
            sgd = tests[f"test_optimizers.py::test_optimizer_matches_cpu[SGD-{impl}-{dtype}]"]
            assert sgd["status"] == "passed", sgd
            assert sgd["data"]["compared"] is (impl != "forloop")
            assert sgd["data"]["ran"] == sgd["data"]["configs"] == 3  # the first 3 on the CPU
    adam = tests["test_optimizers.py::test_optimizer_matches_cpu[Adam-fused-bfloat16]"]
    assert adam["status"] == "passed" and "on cpu: parameters and optimizer state after 7 " \
        "steps within error against float64" in adam["data"]["note"]
    moves = tests["test_optimizers.py::test_optimizer_state_dict_moves[Adam-float32]"]
    assert moves["status"] == "skipped" and "no other device" in moves["message"]
    assert tests["test_optimizers.py::test_optimizer_matches_cpu[unrun-by-budget]"]["data"][
        "unrun_optimizers"] == 13


def test_unknown_layer_is_refused(image, docker_client, run_id):
    code, data, log = run_verify(docker_client, image, run_id, "--layer", "modles")
    assert code == 2 and data == {}
    assert "unknown layer modles" in log


def test_expired_skip_entry_fails_the_run(image, docker_client, run_id, cell_json, tmp_path):
    skips = [
        {"id": "test_device.py::test_matmul_known_result", "reason": "old vendor bug",
         "owner": "someone", "expires": "2001-01-31"},
        {"id": "llama", "reason": "model name entry", "owner": "someone", "expires": "2099-12-31"},
        {"id": "test_nothing_*", "reason": "matches nothing", "owner": "someone",
         "expires": "2099-12-31"},
        {"id": "nn.Linear", "reason": "a module's entry", "owner": "someone",
         "expires": "2099-12-31"},
        {"id": "SGD", "reason": "an optimizer's entry", "owner": "someone",
         "expires": "2099-12-31"},
    ]
    override = Path(tmp_path) / "cell.json"
    override.write_text(json.dumps({**cell_json, "skips": skips}))
    override.chmod(0o644)
    code, data, log = run_verify(
        docker_client, image, run_id, "--layer", "device,models,modules,optimizers",
        volumes={str(override): {"bind": "/tmp/oota-cell.json", "mode": "ro"}},
        environment={"OOTA_CELL_FILE": "/tmp/oota-cell.json", **BUDGETS_OF_0})
    assert code == 1, log[-3000:]
    tests = by_id(data)
    expired = tests["test_skiplist.py::test_no_expired_entries"]
    assert expired["status"] == "failed"
    assert "test_device.py::test_matmul_known_result (expired 2001-01-31" in expired["message"]
    skipped = tests["test_device.py::test_matmul_known_result"]
    assert skipped["status"] == "skipped"
    assert skipped["message"].startswith("skip list: old vendor bug (owner someone, "
                                         "expires 2001-01-31 EXPIRED)")
    llama = tests["test_models.py::test_forward_and_train_step[llama]"]
    assert llama["status"] == "skipped" and llama["message"].startswith("skip list: model name")
    assert tests["test_models.py::test_forward_and_train_step[gemma]"]["status"] == "passed"
    assert data["skips"]["expired"] == ["test_device.py::test_matmul_known_result"]
    assert data["skips"]["unmatched"] == ["test_nothing_*"]
    # 'llama' names the model in the models, workload and compile layers (the CPU vendor
    # compiles llama): three tests; a module's name its dtypes (float32, float64), an
    # optimizer's its three implementations in each of four dtypes and its state dict's test
    # (float32).
    assert [e["matched"] for e in data["skips"]["entries"]] == [1, 3, 0, 2, 13]
    linear = tests["test_modules.py::test_module_runs[nn.Linear-float32]"]
    assert linear["message"].startswith("skip list: a module's entry")
    fused = tests["test_optimizers.py::test_optimizer_matches_cpu[SGD-fused-bfloat16]"]
    assert fused["message"].startswith("skip list: an optimizer's entry")
    assert "skip-list entries expired: test_device.py::test_matmul_known_result" in log


@pytest.mark.parametrize(("nodes", "status"), [
    (["/dev/null"], "failed"),                   # the container holds the nodes: the stack's fault
    (["/dev/nvidia[0-9]*"], "error"),            # it holds none: the host gave it no access
], ids=["device-given-torch-blind", "no-device-access"])
def test_a_gpu_the_container_cannot_use_is_never_passed(image, docker_client, run_id, cell_json,
                                                        tmp_path, nodes, status):
    """The CPU image told its device is CUDA, as a GPU host whose torch cannot see the GPU
    (torch's CPU build: torch.cuda.is_available() is False): the device layer's visibility test
    fails with what to check (an error where none of the vendor's device nodes is in the
    container), every other device-facing test skips naming it, and the cell oota derives from
    that tests.json is failed (error), never passed or skipped."""
    override = Path(tmp_path) / "cell.json"
    override.write_text(json.dumps({**cell_json, "device": "cuda", "device_nodes": nodes}))
    override.chmod(0o644)
    code, data, log = run_verify(
        docker_client, image, run_id, "--layer", "device,ops,models",
        volumes={str(override): {"bind": "/tmp/oota-cell.json", "mode": "ro"}},
        environment={"OOTA_CELL_FILE": "/tmp/oota-cell.json", "OOTA_OPS_BUDGET_S": "0"})
    assert code == 1, log[-3000:]
    tests = by_id(data)
    visible = tests["test_device.py::test_device_visible"]
    assert visible["status"] == status, visible
    assert "no cuda device visible here (torch.cuda.is_available() is False)" in visible["message"]
    assert ("given no access" in visible["message"]) == (status == "error")
    assert "torch.version: 2.13.0+cpu" in visible["message"] or status == "error"
    # Every other test of a device layer (but the must-pass list's own check) skips; those
    # that need the device name the visibility test (a pair whose dtype the OpInfo lacks, or
    # that a budget of 0 s leaves unrun, skips before it asks for the device).
    others = [t for i, t in tests.items() if t["layer"] in ("device", "ops", "models")
              and i != "test_device.py::test_device_visible" and "must_pass" not in i]
    assert {t["status"] for t in others} == {"skipped"}
    named = "test_device_visible fails the cell for it"
    assert all(named in t["message"] for t in others if t["layer"] in ("device", "models"))
    assert any(named in t["message"] for t in others if t["layer"] == "ops")
    outcomes = [suite_test(t, f"tests[{i}]") for i, t in enumerate(data["tests"])]
    assert overall_status(outcomes, {}) == status


# The runtime layer's tests every device must pass; the others hold only where claimed.
RUNTIME_MUST = {"test_device_count_and_index", "test_synchronize_completes_the_work",
                "test_same_seed_same_draws_in_two_processes", "test_save_load_round_trip"}


def test_runtime_layer_alone_shows_what_the_cpu_does_not_claim(image, docker_client, run_id,
                                                               cell_json):
    """The CPU's runtime contract on torch 2.13.0+cpu: what every device must do passes, what
    the CPU claims (a generator's state, fork) passes, and what it does not claim (streams,
    events, memory statistics, pinned memory) is skipped as not claimed, naming the key."""
    code, data, log = run_verify(docker_client, image, run_id, "--layer", "runtime")
    assert code == 0, log[-3000:]
    assert data["layers"] == ["runtime"]
    assert {t["layer"] for t in data["tests"]} == {"device", "runtime", "skips"}
    runtime = [t for t in data["tests"] if t["layer"] == "runtime"]
    claims = cell_json["verify"]["capabilities"]
    for test in runtime:
        name = test["id"].split("::")[1].split("[")[0]
        if test["status"] == "skipped":
            key = test["message"].split("verify.capabilities.")[1].split(" ")[0]
            assert test["message"].startswith("not claimed: ") and claims[key] is False, test
            assert name not in RUNTIME_MUST, test
        else:
            assert test["status"] == "passed", test
    passed = {t["id"].split("::")[1].split("[")[0] for t in runtime if t["status"] == "passed"}
    assert passed == RUNTIME_MUST | {"test_generator_state_saves_and_restores",
                                     "test_fork_after_the_device_was_opened"}
    unclaimed = {t["message"].split("verify.capabilities.")[1].split(" ")[0]
                 for t in runtime if t["status"] == "skipped"}
    assert unclaimed == {"streams", "events", "event_timing", "memory_stats", "empty_cache",
                         "pinned_memory"}
    assert "runtime" in log and "not claimed: work on a side stream ordered by wait_stream" in log
    outcomes = [suite_test(t, f"tests[{i}]") for i, t in enumerate(data["tests"])]
    assert overall_status(outcomes, {}) == "passed"


def test_the_distributed_layer_runs_gloo_in_every_dtype_the_cpu_claims(image, docker_client,
                                                                       run_id, cell_json):
    """The CPU vendor claims gloo on two ranks with all_to_all: alone, in every one of its
    dtypes (the session's other verifications run float32 only), barrier, each collective and
    the DDP training pass on two processes, each test naming its backend and world size."""
    code, data, log = run_verify(docker_client, image, run_id, "--layer", "distributed")
    assert code == 0, log
    tests = {t["id"]: t for t in data["tests"] if t["layer"] == "distributed"}
    dtypes = cell_json["verify"]["dtypes"]
    assert len(tests) == 1 + 5 * len(dtypes) + 1, sorted(tests)
    assert {t["status"] for t in tests.values()} == {"passed"}, tests
    assert {(t["data"]["backend"], t["data"]["world_size"]) for t in tests.values()} == {
        ("gloo", 2)}
    assert "test_distributed.py::test_collective[world2-all_to_all-int64]" in tests
