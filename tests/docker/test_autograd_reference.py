"""The autograd layer (verify/test_autograd.py) on refdev, the reference backend: no false alarm
in the session's verification of the reference cell, and two kernel bugs put into refdev, each
failing exactly its check with a message that says what is wrong:

* a wrong gradient: refdev's ``tanh_backward`` 1 too large (``REFDEV_WRONG_OP``): the gradient
  check of tanh fails in every dtype, naming the operator, the input and the element;
* a stride bug: refdev's ``sigmoid`` reading its input as if it were contiguous (a kernel that
  ignores strides; registered by a verify hook of this test, as tests/docker/test_ops_layer.py
  registers a crashing one): the non-contiguous check of sigmoid fails in both of its dtypes,
  and nothing else.

One container (``oota-verify --layer autograd``, both faults at once: each must fail its own
pairs only; judged by one worker process, the pool a budget brings, where the session's
verification judges in the pytest process), beside the session's verification.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.docker.conftest import Built
from tests.docker.test_layers import run_verify
from tests.docker.test_ops_layer import _cell_file

# refdev's own hook (its fallback counters, vendors/reference/verify/oota_vendor.py) and a
# sigmoid kernel that reads its input's elements in storage order from its offset, whatever
# its strides: right on a contiguous tensor, wrong on PyTorch's non-contiguous samples (each
# element beside a NaN).
STRIDE_BUG = """\
import torch
import torch_refdev


def fallback_counts():
    return {name.removeprefix("aten::"): int(count)
            for name, count in torch_refdev.fallback_op_counts().items()}


def _dense_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.insert(0, step)
        step *= max(size, 1)
    return strides


def _sigmoid_ignoring_strides(self):
    read = torch.as_strided(self, self.shape, _dense_strides(self.shape), self.storage_offset())
    return torch.sigmoid(read.cpu()).to(self.device)


_library = torch.library.Library("aten", "IMPL")
_library.impl("sigmoid", _sigmoid_ignoring_strides, "PrivateUse1")
"""


def _layer(tests: list[dict]) -> list[dict]:
    return [t for t in tests if t["layer"] == "autograd"]


def _pair(test: dict) -> str:
    """'test_grad_matches_cpu[tanh-float32]' of a test id."""
    return test["id"].split("::", 1)[1]


def test_refdev_passes_the_must_run_pairs_without_a_false_alarm(reference_built: Built) -> None:
    tests = _layer(reference_built.results[0]["tests"])
    assert tests and not [t for t in tests if t["status"] in ("failed", "error")], [
        (t["id"], t["message"]) for t in tests if t["status"] in ("failed", "error")]
    # refdev computes most operators on the host (its boxed fallback): those pairs ran on the
    # CPU and are never a device pass; the few it computes itself pass (convolutions, views).
    passed = {_pair(t) for t in tests if t["status"] == "passed"}
    assert {"test_grad_matches_cpu[nn.functional.conv2d-float32]",
            "test_noncontiguous[nn.functional.conv2d-float32]",
            "test_grad_matches_cpu[reshape-float32]"} <= passed, sorted(passed)
    on_host = [t for t in tests if t["status"] == "cpu-fallback"]
    assert len(on_host) > 100 and all(t["data"]["ran_on"] == "cpu" for t in on_host)
    assert all("called the CPU fallback" in t["message"] for t in on_host)


def test_a_wrong_gradient_and_a_stride_bug_each_fail_their_own_check(
        reference_built: Built, docker_client, tmp_path: Path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "oota_vendor.py").write_text(STRIDE_BUG)
    skips = [{"id": "mul", "reason": "an operator's entry", "owner": "tests",
              "expires": "2099-12-31"}]
    cell = _cell_file(reference_built, docker_client, reference_built.options.run_id,
                      tmp_path, lambda data: {**data, "skips": skips})
    for path in (hook, hook / "oota_vendor.py"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    code, data, log = run_verify(
        docker_client, reference_built.tag, reference_built.options.run_id, "--layer", "autograd",
        volumes={str(hook): {"bind": "/x/hook", "mode": "ro"},
                 str(cell): {"bind": "/tmp/oota-cell.json", "mode": "ro"}},
        environment={"OOTA_VENDOR_VERIFY": "/x/hook", "OOTA_CELL_FILE": "/tmp/oota-cell.json",
                     "REFDEV_WRONG_OP": "tanh_backward", "OOTA_AUTOGRAD_WORKERS": "1"})
    assert data, (code, log[-3000:])
    assert code == 1 and data["layers"] == ["autograd"]
    tests = _layer(data["tests"])
    failed = {_pair(t): t["message"].removeprefix("Failed: ") for t in tests
              if t["status"] == "failed"}
    assert set(failed) == {*(f"test_grad_matches_cpu[tanh-{dtype}]" for dtype in (
        "float32", "float64", "float16", "bfloat16")), *(
        f"test_noncontiguous[sigmoid-{dtype}]" for dtype in ("float32", "int64"))}, \
        json.dumps(failed, indent=1)[:3000]
    wrong = failed["test_grad_matches_cpu[tanh-float32]"]
    assert wrong.startswith("tanh (float32): sample 0 (") and \
        "the gradient of input on refdev differs from the CPU: max abs diff 1" in wrong, wrong
    assert "; the largest difference is at element [" in wrong, wrong
    half = failed["test_grad_matches_cpu[tanh-float16]"]
    assert "the gradient of input on refdev: element [" in half and "where float64 gives" in half
    stride = failed["test_noncontiguous[sigmoid-float32]"]
    assert stride.startswith("sigmoid (float32): sample ") and (
        "with non-contiguous inputs the result on refdev is not the contiguous inputs' result: "
        "Tensor-likes are not close!") in stride and "Mismatched elements" in stride, stride
    # The stride bug is sigmoid's own kernel on refdev: its gradient and out= checks, whose
    # samples are contiguous, still pass or run on the host; the skip list names an operator.
    by_pair = {_pair(t): t for t in tests}
    assert by_pair["test_grad_matches_cpu[sigmoid-float32]"]["status"] != "failed"
    mul = [t for t in tests if "[mul-" in t["id"]]
    assert mul and all(t["status"] == "skipped" and t["message"].startswith(
        "skip list: an operator's entry") for t in mul)
    # The entry matches these and the compile layer's mul cases, which this run did not select.
    assert data["skips"]["entries"][0]["matched"] >= len(mul)
