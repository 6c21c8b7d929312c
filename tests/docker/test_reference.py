"""The reference out-of-tree backend, built from source in the pipeline and verified on refdev."""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

import pytest

from oota.api.runs import judge
from oota.history.policy import Policy
from oota.history.timeline import judge as judge_cell
from oota.report import hud
from oota.report.write import write_report
from oota.results.assemble import overall_status, suite_test
from oota.results.store import CASES_FILE
from oota.vocab import CPU_PREFIX
from tests.history.synthetic import STATUS, day, timeline
from tests.history.test_timeline import TORCH_BUMP

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "verify"))
import oota_ops  # noqa: E402 - the suite's own module, beside verify/'s others

REFERENCE_CELL = "reference-torch2.13.0-py3.11-debian12"


def test_reference_cell_builds_from_source_and_verifies(reference_built):
    (result,) = reference_built.results
    assert result["cell"]["id"] == REFERENCE_CELL
    assert result["status"] == "passed", result.get("message")
    build_log = (reference_built.results_dir / REFERENCE_CELL / "build.log").read_text()
    # Built in the pipeline, not downloaded: the wheel came out of `pip wheel` in the builder.
    assert "pip wheel --no-build-isolation" in build_log
    assert "oota_refdev" in build_log


def test_device_and_model_layers_ran_on_refdev_not_skipped(reference_built):
    tests = reference_built.results[0]["tests"]
    device = [t for t in tests if t["layer"] == "device"]
    models = [t for t in tests if t["layer"] == "models"]
    # Every device test ran on refdev: passed, or skipped by the suite's own rule with a reason
    # (int64 matmul); none failed, none was unsupported here.
    assert device and {t["status"] for t in device} <= {"passed", "skipped"}, device
    assert sum(t["status"] == "passed" for t in device) >= 10
    assert all(t.get("message") for t in device if t["status"] == "skipped")
    assert {t["data"]["model"] for t in models if t["status"] == "passed"} >= {
        "llama", "mistral", "qwen2", "resnet"}
    for test in models:
        if test["status"] == "passed":
            # A real comparison against CPU, not the CPU vendor's trivial one.
            assert test["data"]["trivial"] is False
            assert test["data"]["peak_bytes"] and test["data"]["peak_bytes"] > 0


def test_the_dispatcher_tells_refdevs_own_kernels_from_its_fallback(reference_built, tmp_path):
    """The ops layer asks PyTorch's dispatcher how refdev's key (PrivateUse1) serves each
    operator a sample called there: reshape's samples call view, refdev's own kernel, and
    pass on the device; matmul's call dot, which only refdev's boxed CPU fallback serves, so
    matmul ran on the CPU. The report's operators table counts both, per vendor and on the
    cell's page."""
    pairs = {t["data"]["op"] + "-" + t["data"]["dtype"]: t
             for t in reference_built.results[0]["tests"] if (t.get("data") or {}).get("op")}
    reshape, matmul = pairs["reshape-float32"], pairs["matmul-float32"]
    assert reshape["data"]["dispatch_key"] == "PrivateUse1" and reshape["data"]["boxed_fallback"]
    assert reshape["data"]["dispatch"]["kernel"] == ["view"]
    assert reshape["status"] == "passed" and reshape["data"]["ran_on"] == "device"
    assert "dot" in matmul["data"]["dispatch"]["fallback"]  # the dispatcher's own answer
    assert matmul["status"] == "cpu-fallback" and matmul["data"]["served"] == "fallback"
    assert "the dispatcher sends aten::dot to PrivateUse1's boxed fallback" in matmul["message"]
    write_report(reference_built.results_dir, tmp_path / "reports")
    served = json.loads((tmp_path / "reports" / "results.json").read_text())["coverage"]
    view = served["vendors"]["reference"]["served"]
    assert view["operators"]["kernel"] >= 1 and view["operators"]["fallback"] >= 1
    assert "matmul" in view["fell_back"]["dot"]
    assert served["operators"]["reshape"]["reference"] == {"device": 5}  # every dtype
    assert served["operators"]["matmul"]["reference"] == {"cpu": 5}
    index = (tmp_path / "reports" / "index.html").read_text()
    assert (f"PrivateUse1, with a boxed fallback: {view['operators']['kernel']} operators on "
            f"its own kernels") in index
    assert '<tr><td><code>reshape</code></td><td class="passed">5✓</td></tr>' in index
    page = (tmp_path / "reports" / "cells" / f"{REFERENCE_CELL}.html").read_text()
    assert "<td><code>aten::dot</code></td><td><code>matmul</code></td>" in page


def test_extension_pairs_with_torch_in_compat_layer(reference_built):
    compat = {t["id"]: t for t in reference_built.results[0]["tests"] if t["layer"] == "compat"}
    pairing = [t for i, t in compat.items() if "test_extension_pairs_with_torch" in i]
    native = [t for i, t in compat.items() if "test_extension_native_modules_load" in i]
    assert pairing and all(t["status"] == "passed" for t in pairing)
    assert native and all(t["status"] == "passed" for t in native)


def test_runtime_image_has_the_wheel_but_no_compiler(reference_built, docker_client):
    out = docker_client.containers.run(
        reference_built.tag, ["bash", "-c", "command -v g++ gcc cc || true; "
                              "python -c 'import torch_refdev, torch; "
                              "print(torch.ones(2, device=\"refdev\").sum().item())'"],
        remove=True, labels={"oota.run": reference_built.options.run_id})
    assert out.decode().strip() == "2.0"


def refdev_wheel(docker_client, tag: str) -> tuple[str, bytes]:
    """The wheel the builder compiled, taken out of the runtime image."""
    container = docker_client.containers.create(tag, ["true"])
    try:
        stream, _ = container.get_archive("/opt/oota/wheels")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            (member,) = [m for m in tar.getmembers() if m.name.endswith(".whl")]
            return member.name.rsplit("/", 1)[-1], tar.extractfile(member).read()
    finally:
        container.remove(force=True)


@pytest.mark.cuda
def test_abi_mismatch_is_caught_by_the_compat_layer(reference_built, cuda_built, docker_client,
                                                    tmp_path):
    """refdev compiled against torch 2.13.0+cpu, loaded in an image with torch 2.15.0: the CUDA
    cell's, the only other torch release this environment reaches (PyPI serves CUDA builds;
    download.pytorch.org's CPU wheels are out of reach), so the test is opt-in with it."""
    name, wheel = refdev_wheel(docker_client, reference_built.tag)
    (tmp_path / name).write_bytes(wheel)
    cell = json.loads(docker_client.containers.run(
        cuda_built.tag, ["cat", "/opt/oota/cell.json"], remove=True))
    cell["verify"]["extensions"] = [{"import": "torch_refdev", "distribution": "oota-refdev",
                                     "torch": "=={torch}".format(torch=cell["torch"])}]
    (tmp_path / "cell.json").write_text(json.dumps(cell))
    script = (f"pip install --no-deps --no-index --quiet /x/{name} && "
              "OOTA_CELL_FILE=/x/cell.json oota-verify --layer compat --out /x/out -q; true")
    docker_client.containers.run(
        cuda_built.tag, ["bash", "-c", script], user="root", remove=True,
        volumes={str(tmp_path): {"bind": "/x", "mode": "rw"}},
        labels={"oota.run": cuda_built.options.run_id})
    tests = json.loads((tmp_path / "out" / "tests.json").read_text())["tests"]
    failed = {t["id"]: t["message"] for t in tests if t["status"] == "failed"}
    pairing = [m for i, m in failed.items() if "test_extension_pairs_with_torch" in i]
    loading = [m for i, m in failed.items() if "test_extension_native_modules_load" in i]
    assert pairing and "2.15.0" in pairing[0], failed
    assert loading and "built against torch 2.13.0" in loading[0], failed


# Operators of the must-pass list that run beside the broken tanh: a matmul, elementwise
# arithmetic, reductions and activations (sigmoid and softmax are tanh's neighbours in the
# models; none of them calls tanh).
BESIDE_TANH = frozenset({"mm", "add", "mul", "neg", "exp", "sum", "softmax", "sigmoid",
                         "nn.functional.relu"})


def must_pass_of(names: set[str] | frozenset[str]) -> str:
    """verify/ops-must-pass.yaml with only the entries of ``names`` (each must be there), read
    by the ops layer's own parser."""
    entries = {entry.op: entry for entry in oota_ops.load_must_pass()}
    assert names <= entries.keys(), names - entries.keys()
    return "".join(f"- op: {op}\n  reason: {entry.reason}\n"
                   for op, entry in entries.items() if op in names)


def _verify_refdev(docker_client, reference_built, folder, command: str,
                   environment: dict[str, str], volumes: dict | None = None) -> list[dict]:
    """oota-verify in the reference image with refdev's fault switches; its tests.json."""
    folder.chmod(0o777)  # the image's user writes the results
    docker_client.containers.run(
        reference_built.tag, ["bash", "-c", f"{command} --out /x/out -q; true"],
        environment=environment, remove=True,
        volumes={str(folder): {"bind": "/x", "mode": "rw"}, **(volumes or {})},
        labels={"oota.run": reference_built.options.run_id})
    return json.loads((folder / "out" / "tests.json").read_text())["tests"]


def test_a_refdev_hidden_from_its_container_fails_the_cell(reference_built, docker_client,
                                                          tmp_path):
    """The reference device present but hidden from its container (REFDEV_DEVICE_COUNT=0, as
    CUDA_VISIBLE_DEVICES='' hides a GPU): the device layer's visibility test fails saying what
    to check, the ops and device tests that need it skip naming it, and the cell is failed."""
    tests = _verify_refdev(docker_client, reference_built, tmp_path,
                           "oota-verify --layer device,ops",
                           {"REFDEV_DEVICE_COUNT": "0", "OOTA_OPS_BUDGET_S": "0"})
    visible = next(t for t in tests if t["id"] == "test_device.py::test_device_visible")
    assert visible["status"] == "failed", visible
    assert "no refdev device visible here (torch.refdev.is_available() is False)" in \
        visible["message"]
    assert "a *_VISIBLE_DEVICES variable set to none" in visible["message"]
    assert not any(t["status"] == "passed" for t in tests if t["layer"] == "device")
    outcomes = [suite_test(t, f"tests[{i}]") for i, t in enumerate(tests)]
    assert overall_status(outcomes, {}) == "failed"


@pytest.fixture(scope="module")
def tanh_broken(reference_built, docker_client, tmp_path_factory) -> dict[str, object]:
    """refdev with tanh made wrong (REFDEV_WRONG_OP), its ops layer run twice: judged by the
    pytest process and one worker (``w1``, the Docker tests' default) and by two workers
    (``w2``), every case recorded (OOTA_RECORD_EVERY=1); then both recordings judged again in one
    judge container. The must-pass list is cut to tanh, tanhshrink (which calls it; added so that
    a budget of 0 s runs it) and the operators of ``BESIDE_TANH``: the whole list takes twice
    as long on refdev (49 s against 24 s, idle), and it already runs, unbroken, in the
    session's verification of the reference cell. (Two tests read these runs: a run of each
    for each test cost two more containers, each importing torch and op_db.)"""
    root = tmp_path_factory.mktemp("tanh")
    must = root / "must-pass.yaml"
    must.write_text(must_pass_of(BESIDE_TANH | {"tanh"})
                    + "- op: nn.functional.tanhshrink\n  reason: built on tanh (this test)\n")
    must.chmod(0o644)
    mount = {str(must): {"bind": "/opt/oota/verify/ops-must-pass.yaml", "mode": "ro"}}
    runs: dict[str, object] = {}
    for workers in ("1", "2"):
        folder = root / f"w{workers}"
        folder.mkdir()
        runs[f"w{workers}"] = _verify_refdev(
            docker_client, reference_built, folder, "oota-verify --layer ops",
            {"OOTA_OPS_BUDGET_S": "0", "OOTA_OPS_WORKERS": workers, "OOTA_RECORD_EVERY": "1",
             "REFDEV_WRONG_OP": "tanh"}, mount)
    replay = judge([str(root / f"w{w}" / "out" / CASES_FILE) for w in ("1", "2")],
                   python=None, image=reference_built.tag,
                   matrix_path=str(REPO / "matrix.yaml"), check=True)
    runs["replay"] = {w: [c for c in replay.cases if Path(c.file).parent.parent.name == w]
                      for w in ("w1", "w2")}
    runs["replayed"] = len(replay.cases)
    return runs


def test_ops_layer_catches_an_operator_broken_on_purpose(tanh_broken):
    """refdev with tanh made wrong: the ops layer fails tanh in every dtype, and tanhshrink,
    which calls it, says it fails through tanh; none of the other operators run beside them
    fails. The run's recording judged again gives the same verdicts."""
    tests = tanh_broken["w1"]
    failed = {t["id"]: t for t in tests if t["status"] == "failed"}
    tanh = [t for t in tests if "[tanh-" in t["id"]]
    assert tanh and all(t["status"] == "failed" for t in tanh), tanh  # every dtype
    assert {i.split("[", 1)[1].rsplit("-", 1)[0] for i in failed} == {
        "tanh", "nn.functional.tanhshrink"}, list(failed)
    message = failed["test_ops.py::test_op_matches_cpu[tanh-float32]"]["message"]
    assert "differs from the CPU: max abs diff 1" in message
    half = failed["test_ops.py::test_op_matches_cpu[tanh-float16]"]["message"]
    assert "where float64 gives" in half and "element(s) beyond (oota's float64 rule)" in half
    shrink = failed["test_ops.py::test_op_matches_cpu[nn.functional.tanhshrink-float32]"]
    assert "tanh" in shrink["data"]["calls"]  # the report: "fails through tanh"
    # The other must-pass operators still match: most through refdev's host fallback, so the
    # suite reports them as run on the CPU (skipped with CPU_PREFIX), the rest as passed.
    matched = [t for t in tests if "test_op_matches_cpu" in t["id"] and (
        t["status"] == "passed" or t["message"].startswith(CPU_PREFIX))]
    assert len(matched) > 30
    on_host = {t["data"]["op"] for t in matched if t["data"].get("ran_on") == "cpu"}
    assert {"mm", "add", "softmax"} <= on_host, on_host
    cases = tanh_broken["replay"]["w1"]
    assert cases and not any(c.moved for c in cases)
    assert sum(c.status == "failed" for c in cases) == len(failed)


def test_a_small_bias_in_an_operator_the_models_use_fails_training(reference_built,
                                                                  docker_client, tmp_path):
    """refdev's mm made 0.1% too large (REFDEV_SCALE_OP): one training step of every model
    leaves the float64 step far more than the CPU's own float32 step does, and llama's
    20-step curve leaves the float64 curve (resnet's curve is chaotic at this learning
    rate: its curve rule lets a bias this small through, its one-step check does not)."""
    tests = _verify_refdev(docker_client, reference_built, tmp_path,
                           "oota-verify --layer models,workload",
                           {"REFDEV_SCALE_OP": "mm:1.001"})
    models = {t["data"]["model"]: t for t in tests if t["layer"] == "models"}
    assert models and all(t["status"] == "failed" for t in models.values()), models
    assert "error against the float64 reference" in models["llama"]["message"]
    workload = {t["data"]["model"]: t for t in tests if t["layer"] == "workload"}
    assert workload["llama"]["status"] == "failed"
    assert "the device's loss curve: drift" in workload["llama"]["message"]
    assert workload["llama"]["data"]["loss_drift"] > 100 * workload["llama"]["data"][
        "loss_drift_cpu"]


def _timeless(data: dict | None) -> dict | None:
    """A test's data without the seconds its attempts took (a failed pair is run again in a
    fresh process, and both attempts are kept with their durations)."""
    if not data or "attempts" not in data:
        return data
    return {**data, "attempts": [{k: v for k, v in a.items() if k != "duration_s"}
                                 for a in data["attempts"]]}


def test_the_ops_layer_on_two_workers_gives_one_workers_results(tanh_broken):
    """The ops layer's pairs judged by two worker processes (OOTA_OPS_WORKERS=2) and by the
    pytest process and one worker, with refdev's tanh broken: the same tests in the same order
    with the same verdicts and records (coverage included), and the same cases recorded (each
    pair's samples come from its own seed, whichever process makes them)."""
    runs = {w: [(t["id"], t["status"], t["message"], _timeless(t.get("data")))
                for t in tanh_broken[w]] for w in ("w1", "w2")}
    failed = [t[0] for t in runs["w1"] if t[1] == "failed"]
    assert failed and all("[tanh-" in t or "[nn.functional.tanhshrink-" in t
                          for t in failed), failed
    assert runs["w2"] == runs["w1"]
    cases = tanh_broken["replay"]
    assert cases["w1"] and len(cases["w1"]) + len(cases["w2"]) == tanh_broken["replayed"]
    assert not any(c.moved for c in cases["w2"])
    assert [(c.status, c.message) for c in cases["w2"]] == [
        (c.status, c.message) for c in cases["w1"]]


def test_runtime_layer_passes_on_refdev_and_each_runtime_fault_fails_only_its_tests(
        reference_built, docker_client, tmp_path):
    """refdev claims every capability the runtime layer tests, and each holds: no runtime test
    is skipped. Its two runtime faults, on together in one run, fail exactly the tests of what
    they break, each saying what: a wait that orders nothing (REFDEV_STREAM_NOWAIT) the stream
    and event tests, an allocator that never gives memory back (REFDEV_LEAK_ALLOC) the memory
    and empty_cache tests; every other test of the layer, and the device's evidence, still
    pass. (One run for both: the faults touch disjoint tests, and each failure must carry its
    own fault's words; a run per fault cost a second container and import of torch.)"""
    failing = {
        "test_side_stream_work_is_ordered_by_wait_stream": "after current.wait_stream(side): "
        "the wait did not order the side stream's work before the default stream's",
        "test_events_order_and_complete_work": "after current.wait_event(event recorded on "
        "the side stream): the wait did not order",
        "test_memory_comes_back_after_del": "memory_allocated is 4194304 bytes above its "
        "baseline",
        "test_empty_cache_returns_memory": "memory_allocated (after empty_cache) is 8388608 "
        "bytes above its baseline"}
    # Unbroken, the session's verification of the reference cell ran the layer already.
    runs = {"clean": (reference_built.results[0]["tests"], {}),
            "broken": (_verify_refdev(docker_client, reference_built, tmp_path,
                                      "oota-verify --layer runtime",
                                      {"REFDEV_STREAM_NOWAIT": "1", "REFDEV_LEAK_ALLOC": "1"}),
                       failing)}
    for name, (tests, expected) in runs.items():
        runtime = {t["id"].split("::")[1]: t for t in tests if t["layer"] == "runtime"}
        assert len(runtime) == 16, sorted(runtime)
        failed = {test: t["message"] for test, t in runtime.items() if t["status"] != "passed"}
        assert failed.keys() == expected.keys(), (name, failed)
        for test, words in expected.items():
            assert runtime[test]["status"] == "failed" and words in failed[test], (name, test)
        visible = next(t for t in tests if t["id"] == "test_device.py::test_device_visible")
        assert visible["status"] == "passed", (name, visible)
        generator = runtime["test_generator_state_saves_and_restores"]["data"]
        assert generator["generator_device"] == "cpu"  # refdev's generator is the CPU's


MUST_RUN_ONLY = {"OOTA_MODULES_BUDGET_S": "0", "OOTA_OPTIMIZERS_BUDGET_S": "0"}
MODULES_MUST_RUN = {line.split(":", 1)[1].strip() for line in (
    REPO / "verify" / "modules-must-run.yaml").read_text().splitlines()
    if line.startswith("- module:")}


def test_the_modules_and_optimizers_layers_pass_on_refdev_with_their_counts(reference_built,
                                                                            tmp_path):
    """The session's verification of the reference cell (budgets of 0 s: the must-run
    entries): every must-run module matches the CPU forward and backward in each of its dtypes,
    nn.Conv2d on refdev's own kernels and in channels_last too; SGD and Adam match the CPU's
    for-loop steps with refdev's for-loop and foreach steps (it claims foreach, not fused,
    which optim_db does not declare for it), and their state dicts move both ways; the report
    shows both layers passed."""
    tests = {t["id"]: t for t in reference_built.results[0]["tests"]}
    modules = [t for t in tests.values() if t["layer"] == "modules" and
               (t.get("data") or {}).get("module")]
    assert modules and {t["status"] for t in modules} == {"passed"}
    assert {t["data"]["module"] for t in modules} == MODULES_MUST_RUN
    assert all(t["data"]["compared"] and t["data"]["ran"] == t["data"]["samples"]
               for t in modules)
    conv = tests["test_modules.py::test_module_matches_cpu[nn.Conv2d-float32]"]["data"]
    assert (conv["formats"], conv["ran_on"]) == (2, "device")
    linear = tests["test_modules.py::test_module_matches_cpu[nn.Linear-float32]"]["data"]
    assert linear["ran_on"] == "cpu" and "aten::addmm.out" in linear["note"]
    for name in ("SGD", "Adam"):
        for dtype in ("float32", "float64", "float16", "bfloat16"):
            for impl in ("forloop", "foreach"):
                step = tests[f"test_optimizers.py::test_optimizer_matches_cpu[{name}-{impl}-"
                             f"{dtype}]"]
                assert step["status"] == "passed" and step["data"]["compared"], step
            fused = tests[f"test_optimizers.py::test_optimizer_matches_cpu[{name}-fused-{dtype}]"]
            assert fused["status"] == "skipped" and "not on refdev" in fused["message"]
        moves = tests[f"test_optimizers.py::test_optimizer_state_dict_moves[{name}-float32]"]
        assert moves["status"] == "passed", moves
        assert moves["data"]["ran"] == moves["data"]["configs"] > 0
    write_report(reference_built.results_dir, tmp_path / "reports")
    report = json.loads((tmp_path / "reports" / "results.json").read_text())
    (cell,) = [c for c in report["cells"] if c["id"] == REFERENCE_CELL]
    assert cell["layers"]["modules"]["status"] == cell["layers"]["optimizers"]["status"] == \
        "passed"


def test_each_refdev_fault_fails_exactly_its_layer_naming_what_is_wrong(reference_built,
                                                                       docker_client, tmp_path):
    """refdev broken on purpose, the must-run entries of both layers: a wrong gradient
    (REFDEV_WRONG_OP=tanh_backward) fails nn.Tanh's input gradient in the modules layer and
    nothing else; a foreach path that drops the last tensor (REFDEV_FOREACH_DROP_LAST=
    _foreach_addcdiv_, Adam's update) fails Adam's foreach steps naming the last parameter of
    each group, in the optimizers layer alone (both in one run: each touches the other layer
    not at all, so each failure is one fault's). An optimizer step that skips a parameter
    group (REFDEV_SKIP_PARAM_GROUP=1) fails the optimizers layer naming the group, while the
    models layer's one-group SGD step still trains."""
    first, second = tmp_path / "gradient-foreach", tmp_path / "group"
    first.mkdir()
    second.mkdir()
    tests = _verify_refdev(docker_client, reference_built, first,
                           "oota-verify --layer modules,optimizers",
                           {"REFDEV_WRONG_OP": "tanh_backward",
                            "REFDEV_FOREACH_DROP_LAST": "_foreach_addcdiv_", **MUST_RUN_ONLY})
    failed = {t["id"]: t["message"] for t in tests if t["status"] == "failed"}
    assert set(failed) == {"test_modules.py::test_module_matches_cpu[nn.Tanh-float32]",
                           "test_modules.py::test_module_matches_cpu[nn.Tanh-float64]",
                           *(f"test_optimizers.py::test_optimizer_matches_cpu[Adam-foreach-{d}]"
                             for d in ("float32", "float64", "float16", "bfloat16"))}, failed
    assert "sample 0 (default), train: gradient of args[0] on refdev" in failed[
        "test_modules.py::test_module_matches_cpu[nn.Tanh-float32]"]
    assert ("param_groups[0].params[1] (first.bias, the last of its group); param_groups[1]."
            "params[2] (second.bias, the last of its group) kept their initial values on refdev "
            "after 7 steps") in failed["test_optimizers.py::test_optimizer_matches_cpu[Adam-"
                                       "foreach-float32]"]
    tests = _verify_refdev(docker_client, reference_built, second,
                           "oota-verify --layer optimizers,models",
                           {"REFDEV_SKIP_PARAM_GROUP": "1", **MUST_RUN_ONLY})
    by_layer = {layer: {t["status"] for t in tests if t["layer"] == layer}
                for layer in ("optimizers", "models")}
    assert "failed" in by_layer["optimizers"] and by_layer["models"] == {"passed"}, by_layer
    sgd = next(t for t in tests if "[SGD-forloop-float32]" in t["id"])
    assert ("all 3 parameters of param_groups[1] (scale, second.weight, second.bias) kept their "
            "initial values on refdev after 7 steps") in sgd["message"]


def test_an_operator_wrong_in_one_run_of_three_is_flaky_and_an_xfail_that_passes_is_named(
        reference_built, docker_client, tmp_path):
    """refdev's tanh wrong in the first process of every three that call it
    (REFDEV_FLAKY_OP=tanh:3; one ops worker, so that process is the one worker): tanh's pairs
    fail in the run and pass when run again in a fresh process, so they are flaky with both
    attempts kept, never failed; the cell is flaky and a history holding it blames no change.
    reshape, listed as an expected failure (kind: xfail), passes: the run says to remove the
    entry. Must-pass cut to tanh and reshape, budget 0 s: the ops layer's retry is the cost."""
    must = tmp_path / "must-pass.yaml"
    must.write_text(must_pass_of({"tanh", "reshape"}))
    cell = json.loads(docker_client.containers.run(
        reference_built.tag, ["cat", "/opt/oota/cell.json"], remove=True,
        labels={"oota.run": reference_built.options.run_id}))
    xfail = "test_ops.py::test_op_matches_cpu[[]reshape-float32]"
    cell["skips"] = [{"id": xfail, "reason": "listed to be noticed", "owner": "oota tests",
                      "expires": "2099-12-31", "kind": "xfail",
                      "issue": "https://github.com/pytorch/pytorch/issues/1"}]
    (tmp_path / "cell.json").write_text(json.dumps(cell))
    for path in (must, tmp_path / "cell.json"):
        path.chmod(0o644)
    tmp_path.chmod(0o777)
    log = docker_client.containers.run(
        reference_built.tag, ["bash", "-c", "oota-verify --layer ops --out /x/out -q; true"],
        environment={"REFDEV_FLAKY_OP": "tanh:3", "OOTA_OPS_BUDGET_S": "0",
                     "OOTA_OPS_WORKERS": "1"}, remove=True, stdout=True, stderr=True,
        volumes={str(tmp_path): {"bind": "/x", "mode": "rw"},
                 str(must): {"bind": "/opt/oota/verify/ops-must-pass.yaml", "mode": "ro"},
                 str(tmp_path / "cell.json"): {"bind": "/opt/oota/cell.json", "mode": "ro"}},
        labels={"oota.run": reference_built.options.run_id}).decode()
    data = json.loads((tmp_path / "out" / "tests.json").read_text())
    tanh = [t for t in data["tests"] if "[tanh-" in t["id"]]
    flaky = [t for t in tanh if t["status"] == "flaky"]
    assert flaky and not [t for t in tanh if t["status"] == "failed"], tanh
    first, again = flaky[0]["data"]["attempts"]
    assert (first["status"], again["status"]) == ("failed", "passed")
    assert "differs from the CPU" in first["message"]
    assert data["retries"]["flaky"] == [t["id"] for t in flaky]
    assert f"{len(flaky)} passed there, flaky" in log
    reshape = next(t for t in data["tests"] if t["id"].endswith("[reshape-float32]"))
    assert reshape["status"] == "passed"
    assert reshape["message"].startswith(f"unexpected pass: remove the entry '{xfail}'")
    assert data["skips"]["unexpected_pass"] == [xfail]
    assert f"oota-verify: unexpected pass: remove the entry '{xfail}'" in log
    outcomes = [suite_test(t, f"tests[{i}]") for i, t in enumerate(data["tests"])]
    status = overall_status(outcomes, {})
    assert status == "flaky"
    # In a history (torch bumped in the flaky run), no change is blamed and the HUD marks it.
    found = timeline({"reference-a": "PP~P"}, inputs={"reference-a": {2: TORCH_BUMP}})
    assert STATUS["~"] == status and judge_cell(found.cells[0]).failing is None
    page = hud.build(hud.HudInput(timeline=found, policy=Policy(file=None), now=day(4)), {})
    assert [m.symbol for m in page.sections[0].rows[0].marks] == ["✓", "≈", "✓", "✓"]


# The compile layer's cases that compile an aten multiplication (mul.Tensor) on refdev: the
# operator itself in each dtype, the fused chain (layer_norm(...) * x), the guards' function
# (x.sin() * 2 + x), the graph break's second graph (y * x.sin()) and the model.
MULTIPLYING = {*(f"test_compile.py::test_compiled_op[refdev-{op}-{dtype}]"
                 for op in ("mul", "fused.mlp") for dtype in ("float32", "float16", "bfloat16")),
               "test_compile.py::test_guards_and_recompile[refdev]",
               "test_compile.py::test_graph_break[refdev]",
               "test_compile.py::test_compiled_model[refdev-llama]"}


def test_compile_layer_catches_a_miscompiled_fusion(reference_built, docker_client, tmp_path):
    """refdev's compiled path with mul made wrong (REFDEV_COMPILE_WRONG=mul; eager mul stays
    right): the whole compile layer runs (its default budget), exactly the cases whose graphs
    multiply fail, each message naming its case and backend; the device layer's evidence and
    the other compiled cases pass. 13 s on an idle 2-core host (87 s under a load of 12); the
    session's own verification runs the layer's must-run set unbroken."""
    tests = _verify_refdev(docker_client, reference_built, tmp_path, "oota-verify --layer compile",
                           {"REFDEV_COMPILE_WRONG": "mul"})
    failed = {t["id"]: t["message"] for t in tests if t["status"] == "failed"}
    assert set(failed) == MULTIPLYING, sorted(failed)
    assert ("mul (float32) compiled by refdev: output 0 on refdev: error against the float64 "
            "reference 1," in failed["test_compile.py::test_compiled_op[refdev-mul-float32]"])
    assert "llama (float32) compiled by refdev against the CPU's eager step" in \
        failed["test_compile.py::test_compiled_model[refdev-llama]"]
    by_id = {t["id"]: t for t in tests}
    assert by_id["test_device.py::test_device_visible"]["status"] == "passed"
    assert by_id["test_compile.py::test_compiled_op[refdev-matmul-float32]"]["status"] == "passed"
    inductor = by_id["test_compile.py::test_not_claimed[inductor]"]
    assert inductor["status"] == "skipped"
    assert inductor["message"].startswith("not claimed: inductor: refdev registers no Inductor")


def test_a_compiled_case_that_captured_no_graph_is_never_passed(reference_built, docker_client,
                                                                tmp_path):
    """Dynamo disabled (TORCHDYNAMO_DISABLE=1: torch.compile hands back the function itself, as
    a frame Dynamo skips or a backend error suppressed into eager mode would): what runs is
    eager mode, whose numbers are right. No compiled case passes on them: each fails saying
    that Dynamo captured no graph (the guard and graph-break cases on their own counts)."""
    tests = _verify_refdev(docker_client, reference_built, tmp_path, "oota-verify --layer compile",
                           {"TORCHDYNAMO_DISABLE": "1"})
    ran = [t for t in tests if t["layer"] == "compile" and t["status"] in ("passed", "failed")]
    compiled = [t for t in ran if t["id"].startswith(("test_compile.py::test_compiled_",
                                                      "test_compile_programs.py::test_compile_"))]
    assert compiled, [t["id"] for t in tests]
    eager = [t["id"] for t in compiled
             if t["status"] != "failed" or "Dynamo captured no graph, so what ran was eager "
             "mode, not the backend" not in t["message"]]
    assert not eager, eager
    # torch.export traces without Dynamo (non-strict, its default since torch 2.7): it runs.
    passed = {t["id"] for t in ran if t["status"] == "passed"}
    assert passed == {"test_compile.py::test_backend_registered[refdev]",
                      "test_compile_programs.py::test_export"}, passed
