"""Build: for each cell, assemble its context, build its image with BuildKit, then verify it.

The executor is a short loop over cells. One cell's failure (build, verify, or a bug in oota
itself) becomes that cell's result and never stops the next cell.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import tempfile
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from oota import __version__, reproducible
from oota.config.matrix import Matrix
from oota.console import Console
from oota.engine.base import SEALED_FROM_LABEL, BuildRequest, Engine, StepEvent
from oota.errors import InputError, OotaError, StepFailed
from oota.execute import samebytes
from oota.execute.bases import Base
from oota.execute.buildinfo import BuildRecords, requirements_of
from oota.execute.context import source_stamp, stage_context
from oota.execute.interrupts import Interrupted, deferred, signal_name
from oota.execute.leftovers import context_root
from oota.execute.samebytes import host_identity, same_verification
from oota.execute.sources import PipSources, resolve_sources
from oota.execute.verify import (
    EXPECTED_IN_IMAGE,
    ExpectedResults,
    device_request,
    expected_results,
    passed_env,
    verify_image,
)
from oota.lockfile import lock_path, lock_status
from oota.plan import Cell
from oota.render import VOCAB_FILE, context_files, fingerprint, render_cell
from oota.results.assemble import assemble, cell_ref, now
from oota.results.jsonfields import JSONObject, ResultFormatError, json_object
from oota.results.model import BaseImage, Host, Image, Result, Sealed, Skips, Stage, TestOutcome
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


class CellRun:
    """Builds and verifies one cell, recording every stage into its result."""

    def __init__(self, matrix: Matrix, cell: Cell, engine: Engine, console: Console,
                 options: BuildOptions, base_for: Callable[[Cell], Base], host: Host,
                 *, unsupported: str = "", stopping: Callable[[], str] = lambda: ""):
        self.matrix, self.cell, self.engine = matrix, cell, engine
        self.console, self.options, self.base_for, self.host = console, options, base_for, host
        self.unsupported = unsupported   # why this host cannot run the device tests ('' if it can)
        # The signal that is stopping a parallel run ('' while none is): a stage that fails
        # then failed because the run stopped it, and is recorded as interrupted.
        self.stopping = stopping
        self.lost = ""   # why the engine stopped answering during this cell ('' if it did not)
        self.folder = options.results_dir / cell.id
        # What the result is assembled from (_save), filled in by the stages as they run.
        self.stages: dict[str, Stage] = {}
        self.tests: tuple[TestOutcome, ...] = ()
        self.image = Image(tag=options.tag_for(cell))
        self.base: BaseImage | None = None
        self.installed: Installed | None = None
        self.sources: Sources | None = None
        self.skips: Skips | None = None
        # The vendor's run.pass_env switches set for this run (a fault injected, an operator
        # slowed): recorded with the verification, passed or failed, for the history's blame.
        self.env = passed_env(cell.vendor)
        # Another Engine of the run by its identity (for the files of a layer that differs).
        self.elsewhere: samebytes.Elsewhere = lambda _: None
        self.differs: JSONObject = {}
        self.rendered = render_cell(matrix, cell)
        self.files = context_files(matrix, self.rendered)
        self.fingerprint = fingerprint(self.files)
        self.tag = options.tag_for(cell)

    def run(self, *, build: bool) -> Result:
        """Build (optionally) and verify the cell, and save its result. SIGINT or SIGTERM
        (:mod:`oota.execute.interrupts`) ends the stage running then as ``interrupted``: the
        result says so, the run's containers are removed, and the interruption goes on to stop
        the run (no later cell starts)."""
        started = now()
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "build.log").unlink(missing_ok=True)
        stage, since = "", dt.datetime.now()
        try:
            if build:
                stage, since = "build", dt.datetime.now()
                self._stage("build", self._build)
            # A build that failed or ended in error left no image of today's inputs: verifying
            # whatever image the tag still names would judge other inputs.
            if self.options.verify and not self._ended_badly("build") and not self.lost:
                previous = self._verification_that_holds() if build else None
                if previous is not None:
                    self._reuse(previous)
                else:
                    (self.folder / "verify.log").unlink(missing_ok=True)
                    stage, since = "verify", dt.datetime.now()
                    self._stage("verify", self._verify)
        except KeyboardInterrupt as exc:
            with deferred():  # a second Ctrl-C must not cut the clean-up or the result short
                self._interrupted(stage or "start", since, signal_name(exc))
                self._save(started)
            raise
        with deferred():
            return self._save(started)

    def _interrupted(self, stage: str, since: dt.datetime, signal: str) -> None:
        """Record ``stage`` as interrupted and remove the run's containers at once (a verify
        container would otherwise go on running the suite)."""
        self._record(stage, since, "interrupted", f"interrupted by {signal} during {stage}", None)
        try:
            self.engine.cleanup(self.options.run_id, images=False)
        except Exception as exc:  # noqa: BLE001 - the result must still be written
            self.console.warn(f"{self.cell.id}: could not remove the run's containers: {exc}")

    def _ended_badly(self, name: str) -> bool:
        stage = self.stages.get(name)
        return stage is not None and stage.status != "passed"

    # -- a verification that still holds ---------------------------------------------------
    def _verification_that_holds(self) -> Result | None:
        """The previous result of this cell, when its verification holds for this run: the
        image was built from the same inputs (verify/ included) and is the very build output
        that result verified and sealed, on this Engine or another
        (:mod:`oota.execute.samebytes`), the run verifies every layer with the same pass_env
        switches set, the host is the same kind of host (Docker, kernel, runtimes, the vendor
        check), and that result did not fail. ``--reverify`` runs the suite again."""
        build = self.stages.get("build")
        if self.options.reverify or self.options.layers or build is None:
            return None
        try:
            previous = load(self.folder / "result.json")
        except (ResultFormatError, OSError):
            return None
        if (previous.status in BAD or previous.pass_env() != self.env
                or previous.cell.fingerprint != self.fingerprint
                or host_identity(previous.host) != host_identity(self.host)):
            return None
        found = samebytes.compare(self.engine, self.tag, previous, self.elsewhere)
        if found.why:
            self.console.warn(f"{self.cell.id}: {found.why}; verifying it here")
            self.differs = found.detail
        return previous if found.same else None

    def _reuse(self, previous: Result) -> None:
        """Take ``previous``'s verification as this run's, saying from when. An image that
        does not carry it yet (the same bytes, verified on another Engine) is sealed with it."""
        self.tests, self.installed, self.skips = previous.tests, previous.installed, previous.skips
        if previous.image is not None:
            self.image = replace(previous.image, base=None)
        verify = previous.stages.get("verify")
        sealed = previous.image.sealed if previous.image else None
        at = sealed.at if sealed and sealed.at else previous.finished_at
        # The run that verified it: ``previous`` may itself have reused that verification.
        earlier = verify.detail.get("reused") if verify else None
        run_id = str(earlier.get("run_id") or "") if isinstance(earlier, dict) else ""
        run_id = run_id or previous.run_id or self.options.run_id
        if sealed is not None and sealed.id != self.engine.image_id(self.tag):
            self._seal(run_id, at, previous.host)
        reused: JSONObject = {"run_id": run_id, "verified_at": at}
        self.stages["verify"] = Stage(
            status=verify.status if verify else "passed", duration_s=0.0,
            message=f"the verification of {at} (run {run_id}) holds: same image, "
                    "suite and host; --reverify runs it again",
            detail={"reused": reused, **self._env_detail()}, log=verify.log if verify else None)
        self.console.line("cached", f"{self.cell.id}: verify: the verification of {at} holds "
                          "(same image, suite and host; --reverify runs it again)")

    def _stage(self, name: str, body: Callable[[], JSONObject | None]) -> None:
        """Run one stage and record it; an interrupt goes on up to :meth:`run`, which records it."""
        t0 = dt.datetime.now()
        status: Status = "passed"
        message, detail, tail = "", None, ""
        try:
            detail = body()
        except StepFailed as exc:
            status, message, tail = "failed", str(exc), exc.log_tail
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
        self._record(name, t0, status, message, detail)

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
                detail: JSONObject | None) -> None:
        log_name = f"{name}.log"
        if name == "verify":
            differs: JSONObject = {"not_the_verified_image": self.differs} if self.differs else {}
            detail = {**(detail or {}), **self._env_detail(), **differs}
        stage = Stage(status=status, message=message, detail=detail or {},
                      duration_s=round((dt.datetime.now() - t0).total_seconds(), 3),
                      log=log_name if (self.folder / log_name).exists() else None)
        self.stages[name] = stage
        kind = {"passed": "ok", "failed": "fail", "error": "fail",
                "interrupted": "fail"}.get(status, "skip")
        text = f"{self.cell.id}: {name} {status}"
        if status == "interrupted":  # the message says which signal, during which stage
            text = f"{self.cell.id}: {message}"
        elif message and status != "passed":
            text += f": {message.splitlines()[0]}"
        self.console.line(kind, text, stage.duration_s)

    # -- build -------------------------------------------------------------------------------
    def _build(self) -> JSONObject | None:
        if lock_status(self.matrix, self.cell) == "stale":
            rel = lock_path(self.matrix, self.cell).relative_to(self.matrix.root)
            raise InputError(f"{rel} is stale (the cell's requirements changed); run `./oota.sh "
                             f"lock --vendor={self.cell.vendor.name} --cell={self.cell.id}` or "
                             "delete it to build unlocked")
        labels = self.engine.image_labels(self.tag) or {}
        if labels.get("oota.fingerprint") == self.fingerprint and not self.options.rebuild:
            self.console.info(f"{self.cell.id}: image {self.tag} is up to date "
                              f"({self.fingerprint[:19]}); --rebuild forces a build")
            record = BuildRecords(self.matrix.root, self.cell.id).reused(
                labels, self.engine.image_id(self.tag), self.folder)
            self.sources, self.base = record.sources, record.base
            return {"up_to_date": True, **record.detail}
        base = self.base_for(self.cell)
        sources = resolve_sources(vendor_index=self.cell.index_url,
                                  index_url=self.options.index_url,
                                  find_links=self.options.find_links,
                                  use_host_config=self.options.use_host_pip_config)
        for note in sources.notes:
            self.console.info(f"{self.cell.id}: {note}")
        self.sources = Sources.from_json(sources.describe())
        self.base = BaseImage(ref=base.ref, how=base.how, note=base.note)
        # The run's own folder, which its clean-up (or the next run's, after a SIGKILL) removes
        # whole: a context holds the pip configuration, a secret.
        work = context_root(self.matrix.root / ".oota-cache", self.options.run_id)
        work.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{self.cell.id}-", dir=work) as tmp:
            request = self._request(Path(tmp), sources, base)
            built = self.engine.build(request, self._on_step)
        BuildRecords(self.matrix.root, self.cell.id).keep(
            built, self.folder / "build.log", run_id=self.options.run_id, sources=self.sources,
            base=self.base)
        return {"base": base.ref, "base_how": base.how, "image": built}

    def _request(self, tmp: Path, sources: PipSources, base: Base) -> BuildRequest:
        channel = [self.cell.index_url] if self.cell.channel is not None else []
        context, secrets = stage_context(tmp, self.files, sources, self.options.ca_bundle,
                                         netrc_urls=channel)
        # Nothing here may change between two builds of the same inputs (no clock, no run id;
        # the run id is in the result): a fully cached rebuild then makes the same image.
        stamp = source_stamp(self.matrix.root, self._inputs())
        labels = {
            "oota.fingerprint": self.fingerprint,
            "oota.version": __version__,
            **stamp.labels(),
            "org.opencontainers.image.version": self.cell.id,
            "org.opencontainers.image.vendor": "oota",
            "org.opencontainers.image.source": "https://github.com/oota/oota",
            "org.opencontainers.image.base.name": base.ref,
            # How to run its suite on a device, for `invoke pull` on a host without our data.
            runflags.LABEL: runflags.to_label(device_request(self.cell.vendor, self.tag, [])),
            **dict(self.options.extra_labels),
        }
        epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
        return BuildRequest(context=context, tag=self.tag, labels=labels, secrets=secrets,
                            build_args={"BASE_IMAGE": base.ref, **(
                                {"SOURCE_DATE_EPOCH": epoch} if epoch.isdigit() else {})},
                            log_path=self.folder / "build.log",
                            timeout_s=self.options.build_timeout_s,
                            epoch=stamp.epoch or reproducible.epoch(os.environ))

    def _inputs(self) -> list[Path]:
        """The files and folders the cell's image is made from (its fingerprint's sources, and
        the templates and matrix its Dockerfile is rendered from)."""
        vendor = self.cell.vendor.folder
        return [self.matrix.file, self.matrix.templates_dir, vendor,
                self.matrix.root / "verify", lock_path(self.matrix, self.cell), VOCAB_FILE]

    def _on_step(self, event: StepEvent) -> None:
        if event.cached:
            return
        kind = "fail" if event.failed else "ok"
        instruction = " ".join(_MOUNT_FLAG.sub("", event.instruction).split())
        self.console.line(kind, f"{self.cell.id}: [{' '.join(event.name.split())}] "
                          f"{instruction[:90]}", event.seconds)

    # -- verify ------------------------------------------------------------------------------
    def _verify(self) -> JSONObject | None:
        built_from = (self.engine.image_labels(self.tag) or {}).get("oota.fingerprint")
        if built_from and built_from != self.fingerprint:
            self.console.warn(f"{self.cell.id}: {self.tag} was built from other inputs than the "
                              "current ones (matrix, vendor folder or verify/ changed); "
                              "`./oota.sh build` rebuilds it")
        outcome = verify_image(self.engine, self.cell, self.tag, self.folder,
                               run_id=self.options.run_id, layers=self.options.layers,
                               timeout_s=self.options.verify_timeout_s,
                               unsupported=self.unsupported)
        self.tests, self.installed, self.skips = outcome.tests, outcome.installed, outcome.skips
        self.image = outcome.image
        if outcome.problem:
            raise StepFailed(outcome.problem, log_tail=outcome.log_tail)
        if not self.options.layers:  # only a whole run is the image's expected result
            self._seal()
        return None

    def _env_detail(self) -> JSONObject:
        """The verify stage's record of the run's pass_env switches (none: nothing)."""
        return {"env": dict(self.env)} if self.env else {}

    def _seal(self, run_id: str = "", at: str | None = None, host: Host | None = None) -> None:
        """Put this verification into the image (/opt/oota/expected.json), so `oota-verify` on
        a user's host compares its run with it. A failure to seal is noted, not a failed cell.
        ``at`` and ``host``: of a verification made earlier (on an Engine of the same kind)."""
        expected = expected_results(self.cell, self.tests, self.installed, host or self.host,
                                    run_id or self.options.run_id, verified_at=at)
        # A verification taken from another Engine is sealed exactly as there (its seal, and
        # so the image id, is then the same); a new one keeps an equivalent older seal.
        kept = self._sealed_already(expected, exact=at is not None)
        if kept is not None:
            self.image = replace(self.image, sealed=kept)
            return
        try:
            image_id = self.engine.seal(
                self.tag, {EXPECTED_IN_IMAGE: expected.to_bytes()},
                {"oota.verified": expected.status, "oota.verified-at": expected.verified_at},
                run_id=self.options.run_id)
        except Exception as exc:  # noqa: BLE001 - the verification itself stands
            self.console.warn(f"{self.cell.id}: could not put the results into the image: {exc}")
            error = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
            self.image = replace(self.image, sealed=Sealed(error=error))
            return
        self.image = replace(self.image, sealed=Sealed(id=image_id, file=EXPECTED_IN_IMAGE,
                                                       at=expected.verified_at))

    def _sealed_already(self, expected: ExpectedResults, *, exact: bool = False
                        ) -> Sealed | None:
        """The image's seal, when it already holds this verification (the same outcome of every
        test on the same kind of host; only the time and the run differ): resealing would make
        a new image id for the same software and the same results. ``exact``: only a seal of
        these very bytes."""
        labels = self.engine.image_labels(self.tag) or {}
        image_id = self.engine.image_id(self.tag)
        if SEALED_FROM_LABEL not in labels or image_id is None:
            return None
        try:
            carried = self.engine.read_file(self.tag, EXPECTED_IN_IMAGE,
                                            run_id=self.options.run_id)
            sealed = json.loads(carried)
        except (OSError, ValueError, OotaError) as exc:
            log.debug("no usable seal in %s: %s", self.tag, exc)
            return None
        if not isinstance(sealed, dict) or not same_verification(sealed, expected.document) \
                or (exact and carried != expected.to_bytes()):
            return None
        self.console.info(f"{self.cell.id}: the image's results ({EXPECTED_IN_IMAGE}, "
                          f"{sealed.get('verified_at')}) match this verification; kept")
        return Sealed(id=image_id, file=EXPECTED_IN_IMAGE, at=str(sealed.get("verified_at")))

    def _save(self, started: str) -> Result:
        image = replace(self.image, base=self.base) if self.base else self.image
        # The flags of the image's oota.run-flags label, for the report's `docker run` line.
        flags = runflags.to_flags(device_request(self.cell.vendor, self.tag, []))
        image = replace(image, run_flags=json_object(flags, "image.run_flags"))
        result = assemble(
            cell=cell_ref(self.cell.coordinates(), id=self.cell.id,
                          fingerprint=self.fingerprint),
            stages=self.stages, tests=self.tests, host=self.host, started_at=started,
            run_id=self.options.run_id, image=image, installed=self.installed,
            sources=self.sources, skips=self.skips, requested=self.rendered.requirements,
            requirements=requirements_of(self.matrix, self.cell, self.rendered))
        save(self.folder, result)
        return result


