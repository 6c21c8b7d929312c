"""Verify: run the image's own suite (``oota-verify``) with the vendor's device flags and
collect what it wrote. The same command is what a user runs by hand on a pulled image."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from oota import __version__
from oota.config.vendors import Vendor
from oota.engine.base import RUN_LABEL, DeviceAccess, Engine, Mount, RunRequest
from oota.plan import Cell
from oota.project import command_name
from oota.results.assemble import now, overall_status, read_suite_output, summarize
from oota.results.jsonfields import JSONObject, ResultFormatError
from oota.results.model import Host, Image, Layer, Skips, TestOutcome
from oota.results.software import Installed
from oota.results.store import CASES_FILE, keep_recording
from oota.vocab import BAD, UNRUN_KEY, Status

log = logging.getLogger("oota.verify")
RESULTS_IN_CONTAINER = "/tmp/oota-results"
# What a verified image carries of its own verification; verify/oota-verify compares with it.
EXPECTED_IN_IMAGE = "/opt/oota/expected.json"


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyOutcome:
    """What a verify run produced for the cell's result; ``problem`` says why it failed."""

    image: Image
    tests: tuple[TestOutcome, ...] = ()
    installed: Installed | None = None
    skips: Skips | None = None
    problem: str = ""
    log_tail: str = ""


# Settings of the suite a user may give oota's own environment for the verify container.
FORWARDED = ("OOTA_OPS_BUDGET_S", "OOTA_OPS_WORKERS", "OOTA_AUTOGRAD_BUDGET_S",
             "OOTA_AUTOGRAD_WORKERS", "OOTA_MODULES_BUDGET_S", "OOTA_OPTIMIZERS_BUDGET_S",
             "OOTA_COMPILE_BUDGET_S", "OOTA_DISTRIBUTED_TIMEOUT_S", "OOTA_DISTRIBUTED_DTYPES")


def forwarded_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The suite settings set in oota's environment (e.g. ``OOTA_OPS_BUDGET_S=60 invoke
    build``), passed on into the verify container."""
    return {name: environ[name] for name in FORWARDED if environ.get(name, "").strip()}


def passed_env(vendor: Vendor, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables the vendor's ``run.pass_env`` names that are set in oota's environment
    (e.g. ``REFDEV_SLOW_OP=mm:20 invoke verify --vendor=reference``)."""
    return {name: environ[name] for name in vendor.run.pass_env if name in environ}


def verify_image(engine: Engine, cell: Cell, image: str, folder: Path, *, run_id: str,
                 layers: tuple[str, ...] = (), timeout_s: int = 1800,
                 unsupported: str = "", extra_env: Mapping[str, str] | None = None
                 ) -> VerifyOutcome:
    """Run the image's suite. ``unsupported`` (the host check's reason) drops the vendor's device
    flags, which would stop the container from starting, and tells the suite why;
    ``extra_env`` reaches the suite too (the vendor's known failures from its tracker)."""
    if engine.image_labels(image) is None:
        return VerifyOutcome(image=Image(tag=image), problem=f"image {image} not found; build "
                             f"it first ({command_name()} build --cell {cell.id})")
    found = Image(tag=image, digest=engine.image_digest(image), id=engine.build_output(image),
                  layers=layers_of(engine, image))
    command = ["oota-verify", "--out", RESULTS_IN_CONTAINER]
    if layers:
        command += ["--layer", ",".join(layers)]
    collected = folder / "verify"
    for stale in ("tests.json", "junit.xml", "installed.json", CASES_FILE):
        (collected / stale).unlink(missing_ok=True)
    request = device_request(cell.vendor, image, command, unsupported)
    run = engine.run(dataclasses.replace(
        request, env={**request.env, **forwarded_env(), **passed_env(cell.vendor),
                      **(extra_env or {})},
        labels={RUN_LABEL: run_id, "oota.cell": cell.id}, collect=RESULTS_IN_CONTAINER,
        collect_to=collected, log_path=folder / "verify.log", timeout_s=timeout_s))
    keep_recording(collected, folder)
    try:
        suite = read_suite_output(collected)
    except ResultFormatError as exc:
        return VerifyOutcome(image=found, log_tail=run.output_tail,
                             problem=f"the verify suite wrote unreadable results: {exc}")
    if not suite.found:
        why = "timed out" if run.timed_out else exited(run.exit_code)
        return VerifyOutcome(image=found, log_tail=run.output_tail,
                             problem=f"the verify suite wrote no results ({why})")
    return VerifyOutcome(image=found, tests=suite.tests, installed=suite.installed,
                         skips=suite.skips, log_tail=run.output_tail,
                         problem=_problem(suite.tests, run.exit_code))


def exited(code: int) -> str:
    """How the suite ended, for a message: a code over 128 is the shell's way of saying a
    signal killed it ("exited with 139 (SIGSEGV)": a crash, e.g. an import under emulation)."""
    try:
        killed = f" ({signal.Signals(code - 128).name})" if code > 128 else ""
    except ValueError:
        killed = ""
    return f"exited with {code}{killed}"


def layers_of(engine: Engine, image: str) -> tuple[Layer, ...]:
    """The image's layers with their build steps, for the result (none when the engine cannot
    say: the verification does not depend on them)."""
    try:
        return tuple(Layer(id=x.id, step=x.step) for x in engine.image_layers(image))
    except Exception as exc:  # noqa: BLE001 - a record for later comparisons, not a check
        log.debug("no layers of %s: %s", image, exc)
        return ()


def _problem(tests: tuple[TestOutcome, ...], exit_code: int | None) -> str:
    """Why a verify run that wrote its results failed ('' when it did not)."""
    failed = [t for t in tests if t.status in BAD]
    if failed:
        first = failed[0]
        return (f"{len(failed)} of {len(tests)} tests failed; first: "
                f"{first.id}: {first.message.partition(chr(10))[0]}")
    if exit_code != 0:
        return f"oota-verify exited with {exit_code} although no test failed"
    if not tests:
        return "the verify suite ran no test"
    return ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ExpectedResults:
    """The verification an image carries (format ``oota.expected/v1``, read back by
    ``oota-verify``): every test's outcome and the host it ran on, without the host name."""

    status: Status
    verified_at: str
    document: JSONObject = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        """The sealed file: canonical (keys sorted), so the same verification gives the same
        bytes, and the same sealed image id, whether it was just made or read back from a
        result.json (whose keys are sorted) to be sealed on another Engine."""
        return json.dumps(self.document, indent=2, sort_keys=True).encode() + b"\n"


def _expected_test(test: TestOutcome) -> JSONObject:
    """A test as the image carries it: no measurements, but the count of the pairs the ops
    layer's time budget left unrun where they are folded into one test (oota-verify says how
    many it compared)."""
    keys = ("id", "layer", "status", "message") + (("data",) if UNRUN_KEY in test.data else ())
    return {k: v for k, v in test.to_json().items() if k in keys}


def device_request(vendor: Vendor, image: str, command: list[str],
                   unsupported: str = "") -> RunRequest:
    """A run of ``image`` with the vendor's device access (``host`` and ``run`` of its
    vendor.yaml). Where the host lacks the hardware (``unsupported``, the host check's reason)
    the container gets no device access, which would stop it from starting, and the suite is
    told why instead."""
    if unsupported:
        return RunRequest(image=image, command=command,
                          env={"OOTA_UNSUPPORTED_HERE": unsupported})
    run, host = vendor.run, vendor.host
    device = DeviceAccess(gpus=run.gpus, devices=host.devices, group_add=run.group_add,
                          ipc=run.ipc, runtime=host.runtime, cap_add=run.cap_add,
                          security_opt=run.security_opt, network=run.network,
                          shm_size=run.shm_size)
    mounts = tuple(Mount(source=Path(m.source), target=m.target, read_only=m.read_only)
                   for m in run.mounts)
    return RunRequest(image=image, command=command, env=dict(run.env), mounts=mounts,
                      device=device if device != DeviceAccess() else None)


def expected_results(cell: Cell, tests: tuple[TestOutcome, ...], installed: Installed | None,
                     host: Host, run_id: str, *, verified_at: str | None = None
                     ) -> ExpectedResults:
    """What a sealed image carries of the run that verified it (at ``verified_at``, default
    now)."""
    status, verified_at = overall_status(tests, {}), verified_at or now()
    check = host.vendor_check
    facts: JSONObject = {key: host.text(key) for key in ("arch", "kernel", "os", "docker_server")}
    facts |= {"hardware": bool(check and check.supported),
              "reasons": list(check.reasons) if check else []}
    document: JSONObject = {
        "schema": "oota.expected/v1", "cell": cell.id, "status": status,
        "summary": dict(summarize(tests, {})), "verified_at": verified_at,
        "verified_by": f"oota {__version__}", "run_id": run_id,
        "torch": installed.torch.version if installed else None, "host": facts,
        "tests": [_expected_test(t) for t in tests]}
    return ExpectedResults(status=status, verified_at=verified_at, document=document)
