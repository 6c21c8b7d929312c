"""The words oota and its in-image suite share: statuses and their order, the suite's layers,
and how the suite marks a test the host could not run.

Standard library only, no imports from oota: this file is also shipped into every image
(beside ``oota-verify``) so the suite in the image and the toolkit outside it can never
disagree on what a status means or which one wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final, Literal

Status = Literal["passed", "failed", "error", "skipped", "unsupported-here", "interrupted",
                 "cpu-fallback", "not-claimed", "flaky"]
# A status, or "" where there is none: nothing ran (an empty table entry, a cell not in a run).
MaybeStatus = Literal[Status, ""]

# Every status, worst first: the status of a layer, a cell or a run is the first of these that
# any of its parts has. 'interrupted' (the run was stopped by a signal) and 'error' (oota or the
# environment broke) outrank 'failed' (the stack is wrong). 'flaky' (failed, then passed when
# run once more in a fresh process: verify/oota_rerun.py) comes next: not a failure of the cell
# (exit code 0, the history blames no change for it) and never a pass; it outranks
# 'unsupported-here' because it is something the stack did, which a reader must see, where
# 'unsupported-here' only says what could not run. 'unsupported-here' (the host lacks the
# hardware) is never shown as a pass; 'cpu-fallback' (an operator the backend ran on the
# CPU, so its result is the CPU's own) is never a pass either; 'not-claimed' (a capability the
# vendor does not claim, such as streams or fused optimizers: not tested) wins only over
# 'skipped'; 'skipped' wins only when nothing else ran.
STATUS_ORDER: Final[tuple[Status, ...]] = (
    "interrupted", "error", "failed", "flaky", "unsupported-here", "passed", "cpu-fallback",
    "not-claimed", "skipped")
STATUSES: Final[frozenset[str]] = frozenset(STATUS_ORDER)
# Statuses that make a run's exit code 1 (docs/reference/exit-codes.md).
BAD: Final[frozenset[str]] = frozenset({"interrupted", "error", "failed"})

# The layer whose tests record workload figures (training stability, latency, throughput; run
# only for vendors that ask for it): the one definition of a workload metric's layer, read by
# the history (trends, regression verdicts) and by the report (a row per model).
WORKLOAD_LAYER: Final = "workload"
# The layer whose tests compile the models with torch.compile on the device and record the
# compile time and the speedup over eager (verify/test_compile.py): figures the history keeps
# per model beside the workload layer's.
COMPILE_LAYER: Final = "compile"
# The layers whose figures the history charts and judges by history-policy.yaml (the HUD).
METRICS_LAYERS: Final[tuple[str, ...]] = (WORKLOAD_LAYER, COMPILE_LAYER)
# The in-image suite's layers, in report order (verify/oota_suite.py, oota-verify).
LAYERS: Final[tuple[str, ...]] = (
    "install", "compat", "smoke", "device", "runtime", "ops", "autograd", "modules", "optimizers",
    "models", WORKLOAD_LAYER, COMPILE_LAYER, "distributed", "vendor", "skips")

# The layers that walk one of PyTorch's test databases (the ops and autograd layers: OpInfo; the
# modules layer: ModuleInfo; the optimizers layer: OptimizerInfo), each with what one entry of
# one of its test functions is. Their hundreds of skips are counted by why, not listed; their
# must-run lists always run and a time budget the rest, whose unrun entries are folded into one
# entry per test function (verify/oota_budget.py). The autograd layer's test functions are its
# checks: an entry is an operator × dtype of one check.
DATABASE_UNITS: Final[Mapping[str, str]] = {
    "ops": "operator×dtype pairs", "autograd": "operator×dtype pairs",
    "modules": "module×dtype pairs", "optimizers": "optimizer tests"}

# The layers whose tests use the vendor's device: a run passes only where one of their tests
# passed (positive evidence that the device ran), whenever any of them is in the run.
DEVICE_LAYERS: Final[tuple[str, ...]] = ("device", "runtime", "ops", "autograd", "modules",
                                          "optimizers", "models", WORKLOAD_LAYER, COMPILE_LAYER,
                                          "distributed")
# The layers a run of which brings the device layer's evidence (test_device_visible) along:
# the device layers, and the smoke layer, which is not one (most of its checks are PyTorch's
# release validation on the CPU, and must never stand as evidence that the device ran) but
# runs a C++ extension on the device, so a run of it alone still rests on that evidence.
EVIDENCE_LAYERS: Final[tuple[str, ...]] = (*DEVICE_LAYERS, "smoke")

# The three environments of PyTorch's smoke test (the Compute Platform Quality Levels RFC,
# pytorch/pytorch#167282, prerequisite 1), as the smoke layer records which one a run was in
# (its test data's ``environment``): the whole stack on a host with the hardware; the whole
# stack without the hardware (the vendor's driver libraries are there, the device is not);
# and a minimal OS without the compute stack (not even the driver's libraries). Each: (key,
# how the report words it).
SMOKE_ENVIRONMENTS: Final[tuple[tuple[str, str], ...]] = (
    ("hardware", "full stack, with the hardware"),
    ("no-hardware", "full stack, without the hardware"),
    ("minimal-os", "minimal OS, without the compute stack"),
)

# How the suite words a skip caused by the host check (no hardware here), so that oota can
# give it its own status instead of 'skipped'.
UNSUPPORTED_PREFIX: Final = "unsupported-here: "
# How the ops layer words a skip of an operator × dtype whose device run went through the
# backend's CPU fallback (verify/oota_hooks.py), so that oota gives it the status
# 'cpu-fallback' ("ran on the CPU"): counted apart, never as a pass.
CPU_PREFIX: Final = "ran on the CPU: "
FALLBACK: Final = "cpu-fallback"
# How a test of a capability the vendor does not claim (verify.capabilities in vendor.yaml;
# verify/oota_claims.py) words its skip, so that oota gives it the status 'not-claimed'.
NOT_CLAIMED_PREFIX: Final = "not claimed: "
NOT_CLAIMED: Final = "not-claimed"
# A test that failed and then passed when run once more in a fresh process (verify/oota_rerun.py):
# its entry keeps both attempts (data 'attempts'). Never a pass, never a failure of the cell.
FLAKY: Final = "flaky"
# The statuses of a test that ran: a layer's flaky share (report, HUD) is of these.
RAN: Final[frozenset[str]] = frozenset({"passed", *BAD, FLAKY})
# How a test the ops layer's time budget left unrun begins its skip reason. Which operators a
# budget reaches depends on the host's speed, so two runs are not compared on those tests.
BUDGET_PREFIX: Final = "time budget of "
# The pairs a budget left unrun are folded into one skipped test per run, its id the test's
# name with this parameter ('test_ops.py::test_op_runs[unrun-by-budget]'), its data holding how
# many pairs (UNRUN_KEY): thousands of identical skips said nothing a count does not. Results
# of images from before the fold hold one skipped test per pair instead; both read alike here.
UNRUN_PARAM: Final = "unrun-by-budget"
UNRUN_KEY: Final = "unrun_pairs"


# What a count of tests per layer shows (oota-verify's table in verify.log, the cell page's):
# every status that makes a run fail counts as failed.
COUNT_COLUMNS: Final[tuple[str, ...]] = ("passed", "cpu-fallback", "not-claimed", "skipped",
                                         "unsupported-here", "flaky", "failed")


def layer_counts(tests: Iterable[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """How many tests of each layer ended in each of COUNT_COLUMNS, from (layer, status)
    pairs with statuses already :func:`normalized`; layers in report order, then any other.
    The one count of tests: verify.log and the report both show it."""
    counts: dict[str, dict[str, int]] = {}
    for layer, status in tests:
        column = "failed" if status in BAD else status
        per = counts.setdefault(layer, dict.fromkeys(COUNT_COLUMNS, 0))
        if column in per:
            per[column] += 1
    order = {layer: i for i, layer in enumerate(LAYERS)}
    return dict(sorted(counts.items(), key=lambda item: order.get(item[0], len(order))))


def worst(statuses: Iterable[MaybeStatus]) -> MaybeStatus:
    """The status that wins among ``statuses`` (``""`` when there are none)."""
    present = set(statuses)
    return next((status for status in STATUS_ORDER if status in present), "")


def run_status(tests: Iterable[tuple[str, MaybeStatus]],
               others: Iterable[MaybeStatus] = ()) -> MaybeStatus:
    """The status of a run (a cell) from its tests' (layer, status) and the statuses of its
    other parts (its stages): the :func:`worst`, except that a run is never ``passed`` without
    evidence that its device ran: where it holds tests of DEVICE_LAYERS and none of them
    passed, it is the worst of theirs ('cpu-fallback', 'not-claimed' or 'skipped') instead
    (docs/design/verdicts.md)."""
    tests = list(tests)
    found = worst([*others, *(status for _, status in tests)])
    facing = [status for layer, status in tests if layer in DEVICE_LAYERS]
    if found == "passed" and facing and "passed" not in facing:
        return worst(facing)
    return found


def normalized(status: str, message: str) -> tuple[str, str]:
    """(status, message) with the suite's unsupported-here, ran-on-the-CPU and not-claimed
    skips given their own status."""
    if status == "skipped" and message.startswith(UNSUPPORTED_PREFIX):
        return "unsupported-here", message.removeprefix(UNSUPPORTED_PREFIX)
    if status == "skipped" and message.startswith(CPU_PREFIX):
        return FALLBACK, message.removeprefix(CPU_PREFIX)
    if status == "skipped" and message.startswith(NOT_CLAIMED_PREFIX):
        return NOT_CLAIMED, message.removeprefix(NOT_CLAIMED_PREFIX)
    return status, message


def budget_unrun(status: str, message: str, data: Mapping[str, object]) -> int:
    """How many operator × dtype pairs a test says the ops layer's time budget left unrun:
    its count when folded, 1 for an unfolded pair, 0 for any other test."""
    if status != "skipped" or not message.startswith(BUDGET_PREFIX):
        return 0
    count = data.get(UNRUN_KEY)
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1


def entry_unrun(test: Mapping[str, object]) -> int:
    """:func:`budget_unrun` of one test as JSON holds it (tests.json, expected.json)."""
    data = test.get("data")
    return budget_unrun(str(test.get("status", "")), str(test.get("message") or ""),
                        data if isinstance(data, Mapping) else {})


def unrun_by_id(tests: Iterable[Mapping[str, object]]) -> dict[str, int]:
    """Test id -> :func:`entry_unrun` of each of ``tests`` (JSON entries)."""
    return {str(test.get("id")): entry_unrun(test) for test in tests}


def budget_blind(before: Mapping[str, int], after: Mapping[str, int]) -> frozenset[str]:
    """The test ids two runs cannot be compared on: those the time budget left unrun in either
    (``before`` and ``after`` map every test id to :func:`budget_unrun`), and, where a run
    folded its unrun pairs, the pairs of that test present in one run only (the fold hides
    which pairs it holds). Which pairs a budget reaches depends on the host's speed."""
    unrun = {test_id for side in (before, after) for test_id, n in side.items() if n}
    folded = tuple({test_id.partition("[")[0] + "[" for test_id in unrun
                    if test_id.endswith(f"[{UNRUN_PARAM}]")})
    one_side = before.keys() ^ after.keys()
    return frozenset(unrun | {test_id for test_id in one_side if test_id.startswith(folded)})


# Why an entry of a layer that walks one of PyTorch's test databases (DATABASE_UNITS: the ops
# layer's operator × dtype, the autograd layer's operator × dtype of one check, the modules
# layer's module × dtype, the optimizers layer's optimizer × implementation × dtype) was not
# compared, from the words its skip begins with (verify/test_ops.py, test_autograd.py,
# oota_opinfo.py, oota_ops.py, oota_autograd.py, oota_suite.py, test_modules.py,
# test_optimizers.py, oota_claims.py): a reader of "N not run" needs to tell PyTorch's own skips
# and dtypes the database lacks from a budget cut. (pattern, reason), the first that matches wins.
NOT_COMPARED: Final[tuple[tuple[str, str], ...]] = (
    (re.escape(BUDGET_PREFIX), "time budget spent"),
    (r"the OpInfo of .* does not support \S+ on the CPU", "dtype the OpInfo lacks on the CPU"),
    (r"the OpInfo of .* does not declare \S+ for ", "dtype the OpInfo lacks on the device"),
    (r"the OpInfo of .* does not differentiate \S+ for ", "dtype the OpInfo lacks on the device"),
    (r"the ModuleInfo of .* declares none of ", "dtypes the ModuleInfo lacks"),
    (r"PyTorch's test_\w+ skips", "skipped by PyTorch's own test"),
    (r"PyTorch's test_\w+ expects", "expected to fail by PyTorch's own test"),
    (r"PyTorch's OptimizerInfo of .* declares no ", "implementation the OptimizerInfo lacks"),
    (r"PyTorch's OptimizerInfo of .* declares its fused implementation on ",
     "fused not declared for the device"),
    (r"not claimed: ", "not claimed by the vendor"),
    (r"not reached: the run on \d+ ranks ended", "not reached: the distributed run ended"),
    (r"skip list: ", "on the vendor's skip list"),
    (r"\S.* is not implemented on ", "not implemented on the device"),
    (r"the (OpInfo|ModuleInfo) of .* has no sample", "no sample inputs"),
    (r"every one of the \d+ samples .* raised on the CPU", "every sample refused by the CPU"),
    (r"none of the \d+ configurations .* ran", "every configuration refused on the CPU"),
    (re.escape(UNSUPPORTED_PREFIX) + "|no \\S+ device visible|torch has no torch\\.",
     "no device here"),
    (r"none of the \d+ samples of .* has anything to check", "nothing to check"),
    (f"the ({'|'.join(DATABASE_UNITS)}) layer is not selected", "layer not selected"),
)


def not_compared_reason(message: str) -> str:
    """The reason (one of NOT_COMPARED's) a skipped entry of a database layer was not
    compared."""
    for pattern, reason in NOT_COMPARED:
        if re.match(pattern, message):
            return reason
    return "other"
