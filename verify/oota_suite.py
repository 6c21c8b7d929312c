"""The oota pytest plugin: fixtures and the skip list of the in-image suite; it registers the
recorder (oota_recorder.py) where ``OOTA_VERIFY_OUT`` is set.

Loaded through ``pytest_plugins`` in ``conftest.py``, so it applies to the vendor's tests in
``/opt/oota/vendor-verify`` as well (hooks and fixtures of a conftest only reach its own folder).

Every test belongs to a layer (install, compat, smoke, device, runtime, ops, modules, ...:
oota_vocab.LAYERS): a module sets ``LAYER = "..."``; vendor modules default to ``vendor``.
``OOTA_VERIFY_LAYERS`` (comma list) selects layers; the ``skips`` layer (expired skip-list
entries) always runs, because an expired entry must fail every run until it is renewed or
removed. Each test's outcome is written (by oota_recorder) to
``$OOTA_VERIFY_OUT/tests.json``; a test adds measurements to its entry with ``record_data``.
The entries a layer's time budget left unrun (the ops layer's operator × dtype pairs, the
modules layer's module × dtype pairs, ...) are one entry per test there, with their count
(``oota_budget.fold_unrun``).

The cell file (``/opt/oota/cell.json``, or ``OOTA_CELL_FILE``) says what to expect: the torch
release, the vendor's ``verify`` section (dtypes, tolerances, models, extensions, workload) and
its skip list. No test fetches anything: the Hugging Face libraries are forced offline here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fnmatch
import glob
import importlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import oota_expected
import oota_hooks
import oota_summary  # noqa: F401 - first: it makes oota_vocab importable in a checkout too
import pytest
from oota_vocab import EVIDENCE_LAYERS, UNSUPPORTED_PREFIX

# Set before anything imports transformers/huggingface_hub: models are built from configs only.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

CELL_FILE = Path(os.environ.get("OOTA_CELL_FILE", "/opt/oota/cell.json"))
ALWAYS = "skips"


def read_cell() -> dict[str, Any]:
    """The cell file, or {} when it is missing (the ``cell`` fixture then fails the tests)."""
    try:
        return json.loads(CELL_FILE.read_text())
    except FileNotFoundError:
        return {}


def verify_spec() -> dict[str, Any]:
    return read_cell().get("verify") or {}


def layer_of(item: pytest.Item) -> str:
    return getattr(item.module, "LAYER", "vendor")


def _is_evidence(item: pytest.Item) -> bool:
    """Whether ``item`` is the device layer's test_device_visible: the positive evidence that
    the device ran, on which a cell's pass rests (docs/design/verdicts.md)."""
    return layer_of(item) == "device" and item.name == VISIBLE_TEST.rpartition("::")[2]


# -- the skip list ---------------------------------------------------------------------------
@dataclass
class SkipState:
    entries: list[dict[str, Any]]
    today: dt.date
    matched: dict[str, int] = field(default_factory=dict)
    expecting: dict[str, dict[str, Any]] = field(default_factory=dict)  # node id -> xfail entry
    unexpected: list[str] = field(default_factory=list)  # xfail entries whose tests passed

    def expired(self) -> list[str]:
        return [e["id"] for e in self.entries
                if dt.date.fromisoformat(e["expires"]) < self.today]

    def to_json(self) -> dict[str, Any]:
        return {"entries": [{**e, "matched": self.matched.get(e["id"], 0)} for e in self.entries],
                "expired": self.expired(),
                "unmatched": [e["id"] for e in self.entries if not self.matched.get(e["id"])],
                "unexpected_pass": sorted(set(self.unexpected))}


SKIPS_KEY = pytest.StashKey[SkipState]()


def _names_of(item: pytest.Item) -> set[str]:
    """What a skip entry may name: the node id (with or without its folder), the test's own
    name with parameters, the model a models-layer or workload-layer test runs (an entry
    'llama' skips both), the operator an ops-layer test runs (an entry
    'nn.functional.conv2d' skips it in every dtype), the module a modules-layer test runs
    ('nn.LSTM'), the optimizer an optimizers-layer test runs ('LBFGS', every
    implementation and dtype) and the collective a distributed-layer test judges
    ('all_to_all', every dtype; 'ddp'; its ranks still run it)."""
    names = {item.nodeid, item.nodeid.rsplit("/", 1)[-1], item.name}
    params = getattr(getattr(item, "callspec", None), "params", {})
    for key in ("model_name", "workload_model", "op_name", "module_name", "optim_name",
                "compile_model", "compile_op"):
        if key in params:
            names.add(str(params[key]))
    if params.get("dist_case") is not None:
        names.add(str(params["dist_case"].collective))
    return names


def _matches(pattern: str, names: set[str]) -> bool:
    # Exact first: '[llama]' in a test id is a character class to fnmatch.
    return pattern in names or any(fnmatch.fnmatchcase(n, pattern) for n in names)


KNOWN_FAILURES = "OOTA_KNOWN_FAILURES"


def known_failures(environ: Any = os.environ) -> list[dict[str, Any]]:
    """The entries oota read from the vendor's tracker for this run (``known_failures`` in
    vendor.yaml: oota/config/issueskips.py), passed as a JSON list in OOTA_KNOWN_FAILURES:
    applied as skips.yaml's are. A value that is no such list stops the run (UsageError)."""
    text = str(environ.get(KNOWN_FAILURES) or "").strip()
    if not text:
        return []
    try:
        entries = json.loads(text)
    except ValueError as exc:
        raise pytest.UsageError(f"{KNOWN_FAILURES} is no JSON ({exc})") from None
    needed = ("id", "reason", "owner", "expires")
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and all(isinstance(e.get(k), str) for k in needed)
            for e in entries):
        raise pytest.UsageError(f"{KNOWN_FAILURES} is no list of skip entries (each with "
                                f"{', '.join(needed)})")
    for entry in entries:
        try:
            dt.date.fromisoformat(entry["expires"])
        except ValueError:
            raise pytest.UsageError(f"{KNOWN_FAILURES}: {entry['id']!r} expires on "
                                    f"{entry['expires']!r}, no date (YYYY-MM-DD)") from None
    return entries


def _apply_skips(config: pytest.Config, items: list[pytest.Item]) -> None:
    entries = list(read_cell().get("skips") or [])
    named = {e["id"] for e in entries}
    entries += [e for e in known_failures() if e["id"] not in named]
    state = SkipState(entries=entries, today=dt.date.today())
    config.stash[SKIPS_KEY] = state
    for item in items:
        if layer_of(item) == ALWAYS or _is_evidence(item):
            continue  # a vendor's skip list cannot skip the device's evidence either
        names = _names_of(item)
        for entry in state.entries:
            if _matches(entry["id"], names):
                state.matched[entry["id"]] = state.matched.get(entry["id"], 0) + 1
                late = entry["id"] in state.expired()
                if entry.get("kind") == "xfail":  # an expected failure runs (oota_expected)
                    state.expecting[item.nodeid] = entry
                    oota_expected.mark(item, entry, late)
                else:
                    item.add_marker(pytest.mark.skip(
                        reason=oota_expected.SKIP_LIST + oota_expected.entry_words(entry, late)))
                break


def pytest_collection_modifyitems(config, items):
    _apply_skips(config, items)  # over every collected test, so 'unmatched' ignores --layer
    wanted = {x.strip() for x in os.environ.get("OOTA_VERIFY_LAYERS", "").split(",") if x.strip()}
    if not wanted:
        return
    # The device layer's evidence runs with every layer that uses the device.
    evidence = bool(wanted & set(EVIDENCE_LAYERS))
    keep = [i for i in items
            if layer_of(i) in wanted | {ALWAYS} or (evidence and _is_evidence(i))]
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep


def pytest_generate_tests(metafunc):
    """Parameters that come from the cell's data: the vendor's dtypes, models and workload."""
    spec = verify_spec()
    if "dtype_name" in metafunc.fixturenames:
        metafunc.parametrize("dtype_name", list(spec.get("dtypes") or ["float32"]))
    if "model_name" in metafunc.fixturenames:
        metafunc.parametrize("model_name", _or_skip(
            [pytest.param(m, id=str(m)) for m in spec.get("models") or []],
            "the vendor declares no models (verify.models in vendor.yaml)"))
    if "workload_model" in metafunc.fixturenames:
        metafunc.parametrize("workload_model", _or_skip(
            [pytest.param(m, id=str(m)) for m in (spec.get("workload") or {}).get("models") or []],
            "the vendor runs no workload (verify.workload in vendor.yaml; off by default)"))
    if "extension" in metafunc.fixturenames:
        metafunc.parametrize("extension", _or_skip(
            [pytest.param(e, id=str(e.get("import", i)))
             for i, e in enumerate(spec.get("extensions") or [])],
            "the vendor declares no extension (verify.extensions in vendor.yaml)"))


def _or_skip(params: list, reason: str) -> list:
    """The parameters, or one skipped placeholder that says why there are none."""
    return params or [pytest.param(None, id="none", marks=pytest.mark.skip(reason=reason))]


# -- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def cell() -> dict:
    if not CELL_FILE.exists():
        pytest.fail(f"{CELL_FILE} is missing: this is not an oota image (set OOTA_CELL_FILE)")
    return json.loads(CELL_FILE.read_text())


@pytest.fixture(scope="session")
def device_type(cell) -> str:
    return cell["device"]


@pytest.fixture(scope="session")
def spec(cell) -> dict[str, Any]:
    return cell.get("verify") or {}


def skip_without_device(message: str) -> None:
    """Skip a test that needs the vendor's device. When the host check found no hardware
    (OOTA_UNSUPPORTED_HERE), the skip is marked so the result says unsupported-here, not skipped.
    Where the host has it, the skip names the test that fails the cell for it: a device the
    host has but this container cannot see is never a skip alone (test_device_visible)."""
    unsupported = os.environ.get("OOTA_UNSUPPORTED_HERE")
    if unsupported:
        pytest.skip(f"{UNSUPPORTED_PREFIX}{unsupported}; {message}")
    pytest.skip(f"{message}; {VISIBLE_TEST} fails the cell for it")


VISIBLE_TEST = "test_device.py::test_device_visible"
# The recorded status of a test that failed because of the host, not the stack: a test sets it
# with record_status (the recorder writes 'error' where pytest says 'failed').
STATUS_KEY = "oota.status"


@dataclass(frozen=True)
class Unseen:
    """Why this container cannot use the vendor's device, and whether the host is the cause
    (it gave the container none of the device nodes the vendor's access brings)."""

    reason: str
    host_cause: bool = False

    def advice(self, cell: dict[str, Any]) -> str:
        """The reason and what to check, for the device layer's failure."""
        device = cell.get("device", "the device")
        if self.host_cause:
            return (f"{self.reason}. The host has the hardware (the host check found it), but "
                    "this container was given no access to it: check the verify run's device "
                    "flags (vendor.yaml run: and host.devices; docker run --gpus / --device / "
                    "--runtime) and that the container runtime is installed on the host")
        return (f"{self.reason}. The host has the hardware (the host check found it, or the "
                f"vendor needs none), but torch in this image cannot use it: check that the "
                f"host's driver is new enough for the wheel's runtime (torch.version: "
                f"{_torch_build()}), that the backend's libraries load (the install and compat "
                f"layers), and that nothing in the environment hides the {device} devices "
                "(a *_VISIBLE_DEVICES variable set to none)")


def _torch_build() -> str:
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - said as it is: the install layer has the detail
        return f"torch does not import: {type(exc).__name__}"
    builds = {name: getattr(torch.version, name, None) for name in ("cuda", "hip", "xpu")}
    shown = ", ".join(f"{k} {v}" for k, v in builds.items() if v)
    return f"{torch.__version__}" + (f", {shown}" if shown else ", no GPU runtime built in")


def missing_access(cell: dict[str, Any]) -> bool:
    """Whether the container holds none of the device nodes a container given the vendor's
    device sees (cell.json ``device_nodes``: glob patterns); False where the vendor names none
    (nothing tells the host's fault from the stack's then)."""
    patterns = list(cell.get("device_nodes") or ())
    return bool(patterns) and not any(glob.glob(p) for p in patterns)


def unseen(cell: dict[str, Any], reason: str) -> Unseen:
    return Unseen(reason=reason, host_cause=missing_access(cell))


@contextlib.contextmanager
def opened_device(cell: dict[str, Any]) -> Iterator[Any]:
    """The vendor's device, set up for comparison with the CPU: its backend imported, no TF32
    shortcuts. Yields a torch.device, or the text of why this container cannot see one (the
    ops layer's worker processes open it the same way)."""
    import torch

    for name in cell.get("smoke_imports", []):
        # An out-of-tree backend (torch_npu, torch_refdev) registers its device on import.
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - the install layer reports it in detail
            raise DeviceImportError(f"cannot import {name}, which registers the device: "
                                    f"{type(exc).__name__}: {exc}") from None
    try:
        oota_hooks.vendor_hook()  # may give torch the device module it lacks (oota_hooks)
    except oota_hooks.HookError as exc:
        raise DeviceImportError(f"the vendor's verify hook: {exc}") from None
    device_type = cell["device"]
    if device_type == "cpu":
        yield torch.device("cpu")
        return
    module = getattr(torch, device_type, None)
    # The host check (oota/hosts.py) already knows when this host lacks the hardware: then the
    # device tests are "unsupported here", not skipped by choice and never passed.
    why = _invisible(module, device_type)
    if why:
        yield why
        return
    # Results are compared with the CPU at full float32 precision: no TF32 shortcuts in matmuls
    # or (on CUDA/ROCm) cuDNN convolutions, which would differ from the CPU by ~1e-3.
    torch.set_float32_matmul_precision("highest")
    cudnn = getattr(torch.backends, "cudnn", None)
    if cudnn is None:
        yield torch.device(device_type)
        return
    # PyTorch's test utilities (which the ops layer imports for op_db) forbid setting cuDNN's
    # flags directly once imported; its flags() context manager works either way.
    with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark,
                     deterministic=cudnn.deterministic, allow_tf32=False):
        yield torch.device(device_type)


def _invisible(module: Any, device_type: str) -> str:
    """Why torch cannot use the device through ``module`` (torch.<device type>), or ''."""
    if module is None:
        return f"torch has no torch.{device_type} module: the backend is not registered"
    try:
        if not module.is_available():
            return (f"no {device_type} device visible here "
                    f"(torch.{device_type}.is_available() is False)")
        count = module.device_count() if hasattr(module, "device_count") else None
    except Exception as exc:  # noqa: BLE001 - a backend that raises here cannot be used
        return f"torch.{device_type} raised asking for its devices: {type(exc).__name__}: {exc}"
    if count is not None and count < 1:
        return f"torch.{device_type}.device_count() is {count}, though is_available() is True"
    return ""


class DeviceImportError(RuntimeError):
    """The vendor's backend module does not import."""


@pytest.fixture(scope="session")
def device_seen(cell) -> Iterator[Any]:
    """The vendor's device, opened once for the session, or :class:`Unseen` saying why this
    container cannot use it."""
    try:
        with opened_device(cell) as found:
            yield unseen(cell, found) if isinstance(found, str) else found
    except DeviceImportError as exc:
        yield Unseen(reason=str(exc))


@pytest.fixture(scope="session")
def device(device_seen):
    """The vendor's device; a test that needs it skips (with the reason) when this container
    cannot see one: unsupported here where the host lacks the hardware, and otherwise the
    device layer's test_device_visible fails the cell for it."""
    if isinstance(device_seen, Unseen):
        skip_without_device(device_seen.reason)
    return device_seen


@pytest.fixture
def record_status(request):
    """Record this test's failure as the host's ('error'), not the stack's ('failed')."""
    def record(status: str) -> None:
        request.node.user_properties.append((STATUS_KEY, status))
    return record


@pytest.fixture(scope="session")
def device_module(device):
    """``torch.<device type>`` (torch.cpu for the CPU vendor)."""
    import torch

    return getattr(torch, device.type)


@pytest.fixture(scope="session")
def workload(spec) -> dict[str, Any]:
    """The vendor's ``verify.workload`` as cell.json holds it: every default filled in."""
    return spec.get("workload") or {}


@pytest.fixture(scope="session")
def tolerance(spec):
    """rtol/atol for a dtype name from the vendor's ``verify.tolerances`` (float32 default)."""
    def lookup(dtype_name: str, key: str = "tolerances") -> dict[str, float]:
        table = spec.get(key) or spec.get("tolerances") or {}
        entry = table.get(dtype_name) or {}
        # vendor.yaml floats travel as text (oota/yamlsrc.py keeps versions exact).
        return {"rtol": float(entry.get("rtol", 1.3e-6)), "atol": float(entry.get("atol", 1e-5))}
    return lookup


@pytest.fixture
def record_data(request):
    """Attach measurements to this test's entry in tests.json (``data``)."""
    def record(**values: Any) -> None:
        request.node.user_properties.append(("oota.data", values))
    return record


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().oota_layer = layer_of(item)


def pytest_configure(config):
    out = os.environ.get("OOTA_VERIFY_OUT")
    if out:
        import oota_recorder  # it reads this module's keys: imported once this one is whole

        config.pluginmanager.register(oota_recorder.Recorder(Path(out), config),
                                      "oota-recorder")
