"""The autograd layer (verify/test_autograd.py) in the session's CPU image: what the session's
own verification of the default CPU cell found (nothing new runs: the layer is part of every
verification, on its must-run operators with the default budget of 0 s).

On the CPU vendor the device is the CPU: the gradient check only runs each must-run operator's
backward (``test_grad_runs``, nothing compared), while the non-contiguous and out= checks
compare the CPU with itself, as PyTorch's own tests do on the CPU; none of them may fail.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.docker.conftest import Built

REPO = Path(__file__).resolve().parents[2]
MUST_RUN = [line.split(":", 1)[1].strip() for line in
            (REPO / "verify" / "ops-must-pass.yaml").read_text().splitlines()
            if line.startswith("- op:")]
UNRUN = re.compile(r"time budget of 0 s spent \(OOTA_AUTOGRAD_BUDGET_S\): (\d+) operator×dtype "
                   r"pairs of (\d+) operators not run")


def _layer(built: Built) -> list[dict]:
    return [t for t in built.results[0]["tests"] if t["layer"] == "autograd"]


def _check(tests: list[dict], name: str) -> list[dict]:
    return [t for t in tests if t["id"].startswith(f"test_autograd.py::{name}[")]


def _dtype(test: dict) -> str:
    """'float32' of 'test_autograd.py::test_out[add-float32]' (skipped tests have no data)."""
    return test["id"].rsplit("-", 1)[1].rstrip("]")


def test_the_cpu_cells_must_run_pairs_pass_every_check(built: Built) -> None:
    tests = _layer(built)
    assert tests and not [t for t in tests if t["status"] in ("failed", "error")], [
        (t["id"], t["message"]) for t in tests if t["status"] in ("failed", "error")]
    grads = [t for t in _check(tests, "test_grad_runs") if "unrun" not in t["id"]]
    noncontiguous = [t for t in _check(tests, "test_noncontiguous") if "unrun" not in t["id"]]
    outs = [t for t in _check(tests, "test_out") if "unrun" not in t["id"]]
    # Every must-run operator that PyTorch differentiates had its backward run in every dtype
    # (argmax has no gradient), and nothing was compared: the CPU is this vendor's device.
    ran = {t["data"]["op"] for t in grads if t["status"] == "passed"}
    assert set(MUST_RUN) - {"argmax"} <= ran
    assert all(t["data"]["compared"] is False and "nothing was compared" in t["data"]["note"]
               for t in grads if t["status"] == "passed")
    assert {_dtype(t) for t in grads} == {"float32", "float64", "float16", "bfloat16"}
    # Non-contiguous inputs in PyTorch's dtypes for that test, out= in one dtype per operator.
    assert {_dtype(t) for t in noncontiguous} == {"float32", "int64"}
    assert sum(t["status"] == "passed" for t in noncontiguous) > 50
    assert all("give the contiguous inputs' result" in t["data"]["note"] for t in noncontiguous
               if t["status"] == "passed")
    assert sum(t["status"] == "passed" for t in outs) > 15
    assert all("as PyTorch's test_out asks" in t["data"]["note"] for t in outs
               if t["status"] == "passed")
    # What PyTorch's own tests skip stays skipped, with PyTorch's reason.
    skipped = [t for t in tests if t["status"] == "skipped" and "unrun" not in t["id"]]
    assert all(t["message"].startswith("PyTorch's test_") for t in skipped), skipped


def test_the_rest_of_op_db_is_one_folded_entry_per_check(built: Built) -> None:
    tests = _layer(built)
    folded = [t for t in tests if t["id"].endswith("[unrun-by-budget]")]
    assert sorted(t["id"].split("::")[1].split("[")[0] for t in folded) == [
        "test_grad_runs", "test_noncontiguous", "test_out"]
    for test in folded:
        found = UNRUN.fullmatch(test["message"])
        assert test["status"] == "skipped" and found, test
        assert test["data"] == {"unrun_pairs": int(found[1]), "unrun_operators": int(found[2])}
        assert int(found[1]) > 300  # op_db's other operators, left to a larger budget
