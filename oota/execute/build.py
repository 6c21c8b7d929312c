"""Build: for each cell, assemble its context, build its image with BuildKit, then verify it.

The executor is a short loop over cells. One cell's failure (build, verify, or a bug in oota
itself) becomes that cell's result and never stops the next cell.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import tempfile
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from oota.config.matrix import Matrix
from oota.console import Console
from oota.engine.base import BuildRequest, Engine, StepEvent
from oota.errors import EnvironmentFault, InputError, OotaError, StepFailed
from oota.execute import samebytes, sealing
from oota.execute.bases import Base
from oota.execute.buildinfo import BuildRecords, requirements_of
from oota.execute.context import build_request, cell_inputs
from oota.execute.faults import disk_full
from oota.execute.interrupts import Interrupted, deferred, signal_name
from oota.execute.issueskips import KnownFailures, known_for
from oota.execute.leftovers import context_root
from oota.execute.samebytes import host_identity
from oota.execute.sources import PipSources, resolve_sources
from oota.execute.verify import (
    device_request,
    expected_results,
    passed_env,
    verify_image,
)
from oota.lockfile import lock_path, lock_status
from oota.plan import Cell
from oota.project import CACHE, command_name
from oota.results.assemble import assemble, cell_ref, now
from oota.results.jsonfields import JSONObject, ResultFormatError, json_object
from oota.results.model import (
    BaseImage,
    Host,
    Image,
    Result,
    Skips,
    Stage,
    TestOutcome,
    host_key,
)
from oota.results.software import Installed, Sources
from oota.results.store import load, save
from oota.supply import runflags
from oota.vocab import BAD, Status

log = logging.getLogger("oota.build")
_MOUNT_FLAG = re.compile(r"--mount=\S+\s*")


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildOptions:
    results_dir: Path
    ca_bundle: str | None = None
    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    use_host_pip_config: bool = True
    rebuild: bool = False
    verify: bool = True
    reverify: bool = False     # verify an up-to-date image even when its verification holds
    layers: tuple[str, ...] = ()
    build_timeout_s: int = 3600
    verify_timeout_s: int = 1800
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    extra_labels: tuple[tuple[str, str], ...] = ()
    namespace: str = "oota"   # image repository prefix: <namespace>/<vendor>:<cell-id>
    # registry -> mirror to pull base images from (--registry-mirror vault.habana.ai=MIRROR)
    registry_mirrors: tuple[tuple[str, str], ...] = ()

    def tag_for(self, cell: Cell) -> str:
        return f"{self.namespace}/{cell.vendor.name}:{cell.id}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Built:
    """What the build stage found out: where the packages come from and the base image (None
    until found; an up-to-date image's are those recorded when it was built)."""

    sources: Sources | None = None
    base: BaseImage | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildPlan:
    """What a build takes: its base image and the package sources pip is pointed at."""

    base: Base
    sources: PipSources


@dataclass(frozen=True, kw_only=True, slots=True)
class Verified:
    """What the verify stage found, or took from an earlier verification that holds."""

    image: Image
    tests: tuple[TestOutcome, ...] = ()
    installed: Installed | None = None
    skips: Skips | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Holding:
    """The previous result whose verification holds for this run (None: verify again), and,
    when the image here is not the one it verified, what differs (for the verify stage)."""

    previous: Result | None = None
    differs: JSONObject = field(default_factory=dict)


@dataclass(kw_only=True, slots=True)
class _Detail:
    """The detail a stage's steps give its record (None: none)."""

    value: JSONObject | None = None


class CellRun:
    """Builds and verifies one cell: a pipeline of stages, each returning what it found (a
    :class:`Built`, a :class:`Verified`) and recorded as a :class:`Stage`, then the result
    assembled from them."""

    def __init__(self, matrix: Matrix, cell: Cell, engine: Engine, console: Console,
                 options: BuildOptions, base_for: Callable[[Cell], Base], host: Host,
                 *, unsupported: str = "", stopping: Callable[[], str] = lambda: "",
                 elsewhere: samebytes.Elsewhere = lambda _: None):
        self.matrix, self.cell, self.engine = matrix, cell, engine
        self.console, self.options, self.base_for, self.host = console, options, base_for, host
        self.unsupported = unsupported   # why this host cannot run the device tests ('' if it can)
        # The signal that is stopping a parallel run ('' while none is): a stage that fails
        # then failed because the run stopped it, and is recorded as interrupted.
        self.stopping = stopping
        # Another Engine of the run by its identity (for the files of a layer that differs).
        self.elsewhere = elsewhere
        self.lost = ""   # why the engine stopped answering during this cell ('' if it did not)
        self.folder = options.results_dir / cell.id
        # The vendor's run.pass_env switches set for this run (a fault injected, an operator
        # slowed): recorded with the verification, passed or failed, for the history's blame.
        self.env = passed_env(cell.vendor)
        self.inputs = cell_inputs(matrix, cell, options.tag_for(cell))

    def run(self, *, build: bool) -> Result:
        """Build (optionally) and verify the cell, and save its result. SIGINT or SIGTERM
        (:mod:`oota.execute.interrupts`) ends the stage running then as ``interrupted``: the
        result says so, the run's containers are removed, and the interruption goes on to stop
        the run (no later cell starts)."""
        started = now()
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "build.log").unlink(missing_ok=True)
        stages: dict[str, Stage] = {}
        built, verified = Built(), Verified(image=Image(tag=self.inputs.tag))
        holding = Holding()
        stage, since = "", dt.datetime.now()
        try:
            if build:
                stage, since = "build", dt.datetime.now()
                with self._stage("build", stages) as detail:
                    self._check_lock()
                    kept = self._up_to_date()
                    if kept is not None:
                        built, detail.value = kept
                    else:
                        built, plan = self._build_plan()
                        detail.value = self._build_image(plan, built)
            # A build that failed or ended in error left no image of today's inputs: verifying
            # whatever image the tag still names would judge other inputs.
            if self.options.verify and not _ended_badly(stages.get("build")) and not self.lost:
                holding = self._verification_that_holds(stages.get("build")) if build \
                    else Holding()
                if holding.previous is not None:
                    stages["verify"], verified = self._reuse(holding.previous)
                else:
                    (self.folder / "verify.log").unlink(missing_ok=True)
                    stage, since = "verify", dt.datetime.now()
                    with self._stage("verify", stages, holding.differs):
                        verified, failure = self._verify()
                        if failure is not None:
                            raise failure
                        if not self.options.layers:  # only a whole run is the expected result
                            verified = self._seal(verified)
        except KeyboardInterrupt as exc:
            with deferred():  # a second Ctrl-C must not cut the clean-up or the result short
                stages[stage or "start"] = self._interrupted(
                    stage or "start", since, signal_name(exc), holding.differs)
                self._save(started, stages, built, verified)
            raise
        with deferred():
            return self._save(started, stages, built, verified)

    def _interrupted(self, stage: str, since: dt.datetime, signal: str,
                     differs: JSONObject) -> Stage:
        """The record of ``stage``, interrupted; the run's containers are removed at once (a
        verify container would otherwise go on running the suite)."""
        record = self._record(stage, since, "interrupted",
                              f"interrupted by {signal} during {stage}", None, differs)
        try:
            self.engine.cleanup(self.options.run_id, images=False)
        except Exception as exc:  # noqa: BLE001 - the result must still be written
            self.console.warn(f"{self.cell.id}: could not remove the run's containers: {exc}")
        return record

    # -- a verification that still holds ---------------------------------------------------
    def _verification_that_holds(self, build: Stage | None) -> Holding:
        """The previous result of this cell, when its verification holds for this run: the
        image was built from the same inputs (verify/ included) and is the very build output
        that result verified and sealed, on this Engine or another
        (:mod:`oota.execute.samebytes`), the run verifies every layer with the same pass_env
        switches set, the host is the same kind of host (Docker, kernel, runtimes, the vendor
        check), and that result did not fail. ``--reverify`` runs the suite again."""
        if self.options.reverify or self.options.layers or build is None:
            return Holding()
        try:
            previous = load(self.folder / "result.json")
        except (ResultFormatError, OSError):
            return Holding()
        if (previous.status in BAD or previous.pass_env() != self.env
                or previous.cell.fingerprint != self.inputs.fingerprint
                or host_identity(previous.host) != host_identity(self.host)):
            return Holding()
        found = samebytes.compare(self.engine, self.inputs.tag, previous, self.elsewhere)
        if found.why:
            self.console.warn(f"{self.cell.id}: {found.why}; verifying it here")
        return Holding(previous=previous if found.same else None,
                       differs=found.detail if found.why else {})

    def _reuse(self, previous: Result) -> tuple[Stage, Verified]:
        """``previous``'s verification as this run's, saying from when. An image that does not
        carry it yet (the same bytes, verified on another Engine) is sealed with it."""
        verified = Verified(image=replace(previous.image, base=None) if previous.image
                            else Image(tag=self.inputs.tag),
                            tests=previous.tests, installed=previous.installed,
                            skips=previous.skips)
        verify = previous.stages.get("verify")
        sealed = previous.image.sealed if previous.image else None
        at = sealed.at if sealed and sealed.at else previous.finished_at
        # The run that verified it, paired with ``at``: the seal's (``previous`` may have kept
        # an earlier equivalent seal, or reused that verification itself).
        earlier = verify.detail.get("reused") if verify else None
        run_id = str(earlier.get("run_id") or "") if isinstance(earlier, dict) else ""
        run_id = (sealed.run_id if sealed and sealed.at else "") or run_id \
            or previous.run_id or self.options.run_id
        if sealed is not None and sealed.id != self.engine.image_id(self.inputs.tag):
            verified = self._seal(verified, run_id, at, previous.host)
        reused: JSONObject = {"run_id": run_id, "verified_at": at}
        same = _sameness(previous.host, self.host)
        record = Stage(
            status=verify.status if verify else "passed", duration_s=0.0,
            message=f"the verification of {at} (run {run_id}) holds: {same}; --reverify runs "
                    "it again",
            detail={"reused": reused, **self._env_detail()}, log=verify.log if verify else None)
        self.console.line("cached", f"{self.cell.id}: verify: the verification of {at} holds "
                          f"({same}; --reverify runs it again)")
        return record, verified

    @contextmanager
    def _stage(self, name: str, stages: dict[str, Stage],
               differs: JSONObject | None = None) -> Iterator[_Detail]:
        """Run one stage's steps (the ``with`` body) and record it in ``stages``; what its
        steps returned before one failed stands. An interrupt goes on up to :meth:`run`, which
        records it."""
        t0 = dt.datetime.now()
        status: Status = "passed"
        message, tail, said = "", "", False
        detail = _Detail()
        # On GitHub Actions the stage's lines fold; its outcome and log tail stay outside.
        with self.console.group(f"{self.cell.id}: {name}"):
            try:
                yield detail
            except EnvironmentFault as exc:  # said in full where it happened (the base's line)
                status, message, said = "error", exc.short, True
            except StepFailed as exc:
                full = disk_full(f"{exc}\n{exc.log_tail}")
                status, message, tail = ("error", full, "") if full else \
                    ("failed", str(exc), exc.log_tail)
            except OotaError as exc:
                status, message = "error", str(exc)
            except Exception as exc:  # a bug in oota must not stop the other cells
                trace = traceback.format_exc()
                with (self.folder / f"{name}.log").open("a", encoding="utf-8") as log_file:
                    log_file.write(trace)
                status, message = "error", f"internal error: {type(exc).__name__}: {exc}"
                log.debug("%s", trace)
        if status != "passed" and self._stopped_or_lost(name, message):
            status, message = "error", self.lost
        elif tail:
            self.console.block(tail)
        stages[name] = self._record(name, t0, status, message, detail.value, differs or {},
                                    said=said)

    def _stopped_or_lost(self, stage: str, message: str) -> bool:
        """After a stage failed: was it because the run is stopping (then the interruption goes
        on up, and :meth:`run` records it) or because the engine stopped answering (then
        :attr:`lost` says so, and the stage is an error of the host, not a failure of the
        cell)? Anything else is the cell's own failure."""
        signal = self.stopping()
        if signal:
            raise Interrupted(signal)
        if not self.lost and not self.engine.alive():
            first = (message.splitlines() or [""])[0][:300]
            # The SDK's own failure to connect says no more than "stopped answering".
            first = "" if first.startswith("internal error: ConnectionError") else first
            self.lost = (f"host {self.engine.endpoint.name} stopped answering during {stage}"
                         + (f" ({first})" if first else ""))
        return bool(self.lost)

    def _record(self, name: str, t0: dt.datetime, status: Status, message: str,
                detail: JSONObject | None, differs: JSONObject | None = None, *,
                said: bool = False) -> Stage:
        """The record of stage ``name`` (the verify stage's with the run's pass_env switches
        and, when the image is not the one verified before, what differs); said on the
        console, without its message when that was ``said`` already."""
        log_name = f"{name}.log"
        if name == "verify":
            different: JSONObject = {"not_the_verified_image": differs} if differs else {}
            detail = {**(detail or {}), **self._env_detail(), **different}
        stage = Stage(status=status, message=message, detail=detail or {},
                      duration_s=round((dt.datetime.now() - t0).total_seconds(), 3),
                      log=log_name if (self.folder / log_name).exists() else None)
        kind = {"passed": "ok", "failed": "fail", "error": "error",
                "interrupted": "fail"}.get(status, "skip")
        text = f"{self.cell.id}: {name} {status}"
        if status == "interrupted":  # the message says which signal, during which stage
            text = f"{self.cell.id}: {message}"
        elif message and status != "passed" and not said:
            text += f": {message.splitlines()[0]}"
        self.console.line(kind, text, stage.duration_s)
        return stage

    # -- build -------------------------------------------------------------------------------
    def _check_lock(self) -> None:
        if lock_status(self.matrix, self.cell) == "stale":
            rel = lock_path(self.matrix, self.cell).relative_to(self.matrix.root)
            raise InputError(f"{rel} is stale (the cell's requirements changed); run "
                             f"`{command_name()} lock --vendor={self.cell.vendor.name} "
                             f"--cell={self.cell.id}` or delete it to build unlocked")

    def _up_to_date(self) -> tuple[Built, JSONObject] | None:
        """For an image built from today's inputs (no ``--rebuild``): what it was built from,
        and the build stage's detail; None when it is to be built."""
        tag, fingerprint = self.inputs.tag, self.inputs.fingerprint
        labels = self.engine.image_labels(tag) or {}
        if labels.get("oota.fingerprint") != fingerprint or self.options.rebuild:
            return None
        self.console.info(f"{self.cell.id}: image {tag} is up to date "
                          f"({fingerprint[:19]}); --rebuild forces a build")
        record = BuildRecords(self.matrix.root, self.cell.id).reused(
            labels, self.engine.image_id(tag), self.folder)
        return Built(sources=record.sources, base=record.base), \
            {"up_to_date": True, **record.detail}

    def _build_plan(self) -> tuple[Built, BuildPlan]:
        """The base image and the package sources the build uses, as the result records them
        and as the build takes them."""
        base = self.base_for(self.cell)
        sources = resolve_sources(vendor_index=self.cell.index_url,
                                  index_url=self.options.index_url,
                                  find_links=self.options.find_links,
                                  use_host_config=self.options.use_host_pip_config)
        for note in sources.notes:
            self.console.info(f"{self.cell.id}: {note}")
        built = Built(sources=Sources.from_json(sources.describe()),
                      base=BaseImage(ref=base.ref, how=base.how, note=base.note))
        return built, BuildPlan(base=base, sources=sources)

    def _build_image(self, plan: BuildPlan, built: Built) -> JSONObject:
        """Build the image; the build stage's detail."""
        # The run's own folder, which its clean-up (or the next run's, after a SIGKILL) removes
        # whole: a context holds the pip configuration, a secret.
        work = context_root(self.matrix.root / ".oota-cache", self.options.run_id)
        work.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{self.cell.id}-", dir=work) as tmp:
            request = self._request(Path(tmp), plan.sources, plan.base)
            image = self.engine.build(request, self._on_step)
        # Kept under the build output's id, the one an up-to-date run looks it up by: a rebuild
        # that reproduces a sealed image's output leaves the tag on the sealing (its id).
        BuildRecords(self.matrix.root, self.cell.id).keep(
            self.engine.build_output(image) or image, self.folder / "build.log",
            run_id=self.options.run_id, sources=built.sources, base=built.base)
        return {"base": plan.base.ref, "base_how": plan.base.how, "image": image}

    def _request(self, tmp: Path, sources: PipSources, base: Base) -> BuildRequest:
        return build_request(self.matrix, self.cell, self.inputs, tmp, sources, base,
                             ca_bundle=self.options.ca_bundle,
                             extra_labels=self.options.extra_labels,
                             log_path=self.folder / "build.log",
                             timeout_s=self.options.build_timeout_s)

    def _on_step(self, event: StepEvent) -> None:
        if event.cached:
            return
        kind = "fail" if event.failed else "ok"
        instruction = " ".join(_MOUNT_FLAG.sub("", event.instruction).split())
        self.console.line(kind, f"{self.cell.id}: [{' '.join(event.name.split())}] "
                          f"{instruction[:90]}", event.seconds)

    # -- verify ------------------------------------------------------------------------------
    def _verify(self) -> tuple[Verified, StepFailed | None]:
        """Run the image's suite: what it found, and why the run failed (None: it passed)."""
        tag = self.inputs.tag
        built_from = (self.engine.image_labels(tag) or {}).get("oota.fingerprint")
        if built_from and built_from != self.inputs.fingerprint:
            self.console.warn(f"{self.cell.id}: {tag} was built from other inputs than the "
                              "current ones (matrix, vendor folder or verify/ changed); "
                              f"`{command_name()} build` rebuilds it")
        known = self._known_failures()
        outcome = verify_image(self.engine, self.cell, tag, self.folder,
                               run_id=self.options.run_id, layers=self.options.layers,
                               timeout_s=self.options.verify_timeout_s,
                               unsupported=self.unsupported, extra_env=known.variable())
        verified = Verified(image=outcome.image, tests=outcome.tests,
                            installed=outcome.installed, skips=outcome.skips)
        failure = StepFailed(outcome.problem, log_tail=outcome.log_tail) if outcome.problem \
            else None
        return verified, failure

    def _known_failures(self) -> KnownFailures:
        """The entries the vendor's tracker gives (``known_failures``), said on the console."""
        known = known_for(self.cell.vendor, self.matrix.root / CACHE)
        if not known.note:
            return known
        self.console.info(f"{self.cell.id}: {known.note}")
        for problem in known.problems:
            self.console.warn(f"{self.cell.id}: known failures: {problem}")
        return known

    def _env_detail(self) -> JSONObject:
        """The verify stage's record of the run's pass_env switches (none: nothing)."""
        return {"env": dict(self.env)} if self.env else {}

    def _seal(self, verified: Verified, run_id: str = "", at: str | None = None,
              host: Host | None = None) -> Verified:
        """``verified`` with this verification put into the image (/opt/oota/expected.json), so
        `oota-verify` on a user's host compares its run with it. A failure to seal is noted,
        not a failed cell. ``at`` and ``host``: of a verification made earlier (on an Engine
        of the same kind)."""
        expected = expected_results(self.cell, verified.tests, verified.installed,
                                    host or self.host, run_id or self.options.run_id,
                                    verified_at=at)
        image = sealing.seal(self.engine, self.console, verified.image, expected,
                             sealing.Sealer(cell=self.cell.id, tag=self.inputs.tag,
                                            run_id=self.options.run_id),
                             verification_run=run_id or self.options.run_id,
                             exact=at is not None)
        return replace(verified, image=image)

    def _save(self, started: str, stages: dict[str, Stage], built: Built,
              verified: Verified) -> Result:
        image = replace(verified.image, base=built.base) if built.base else verified.image
        # The flags of the image's oota.run-flags label, for the report's `docker run` line.
        flags = runflags.to_flags(device_request(self.cell.vendor, self.inputs.tag, []))
        image = replace(image, run_flags=json_object(flags, "image.run_flags"))
        result = assemble(
            cell=cell_ref(self.cell.coordinates(), id=self.cell.id,
                          fingerprint=self.inputs.fingerprint),
            stages=stages, tests=verified.tests, host=self.host, started_at=started,
            run_id=self.options.run_id, image=image, installed=verified.installed,
            sources=built.sources, skips=verified.skips,
            requested=self.inputs.rendered.requirements,
            requirements=requirements_of(self.matrix, self.cell, self.inputs.rendered))
        save(self.folder, result)
        return result


def _sameness(verified_on: Host, here: Host) -> str:
    """What a reused verification shares with this run, naming the Engine it was made on when
    that is another one (of the same kind)."""
    if host_key(verified_on) == host_key(here):
        return "same image, suite and host"
    return (f"same image and suite, on the same kind of host: it was verified on "
            f"{verified_on.place()}, this run is on {here.place()}")


def _ended_badly(stage: Stage | None) -> bool:
    return stage is not None and stage.status != "passed"

