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
import shutil
import subprocess
import tempfile
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oota import __version__
from oota.config.matrix import Matrix
from oota.console import Console
from oota.engine.base import RUN_LABEL, BuildRequest, Engine, StepEvent
from oota.errors import InputError, OotaError, StepFailed
from oota.execute.bases import Base, ensure_base
from oota.execute.hostinfo import host_facts
from oota.execute.hosts import HostCheck, check_vendor, describe
from oota.execute.sources import PipSources, fill_wheelhouse, resolve_sources
from oota.execute.verify import EXPECTED_IN_IMAGE, expected_results, verify_image
from oota.lockfile import lock_path, lock_status
from oota.net import find_ca_bundle
from oota.plan import Cell
from oota.render import context_files, fingerprint, render_cell
from oota.results.store import now, overall_status, save, summarize

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


def git_revision(root: Path) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


class CellRun:
    """Builds and verifies one cell, recording every stage into its result."""

    def __init__(self, matrix: Matrix, cell: Cell, engine: Engine, console: Console,
                 options: BuildOptions, bases: dict[str, Base | StepFailed], host: dict[str, Any],
                 *, unsupported: str = ""):
        self.matrix, self.cell, self.engine = matrix, cell, engine
        self.console, self.options, self.bases, self.host = console, options, bases, host
        self.unsupported = unsupported   # why this host cannot run the device tests ('' if it can)
        self.folder = options.results_dir / cell.id
        self.stages: dict[str, dict[str, Any]] = {}
        self.tests: list[dict[str, Any]] = []
        self.extra: dict[str, Any] = {}
        self.rendered = render_cell(matrix, cell)
        self.files = context_files(matrix, self.rendered)
        self.fingerprint = fingerprint(self.files)
        self.tag = options.tag_for(cell)

    def run(self, *, build: bool) -> dict[str, Any]:
        started = now()
        self.folder.mkdir(parents=True, exist_ok=True)
        for name in ("build.log", "verify.log"):
            (self.folder / name).unlink(missing_ok=True)
        try:
            if build:
                self._stage("build", self._build)
            if self.options.verify and self.stages.get("build", {}).get("status") != "failed":
                self._stage("verify", self._verify)
        except KeyboardInterrupt:
            self.stages.setdefault("interrupted", {"status": "error", "duration_s": 0.0,
                                                   "message": "interrupted by the user"})
            self._save(started)
            raise
        return self._save(started)

    def _stage(self, name: str, body) -> None:
        t0 = dt.datetime.now()
        entry: dict[str, Any] = {"status": "passed", "log": f"{name}.log"}
        try:
            detail = body()
            if detail:
                entry.update(detail)
        except StepFailed as exc:
            entry.update(status="failed", message=str(exc))
            if exc.log_tail:
                self.console.block(exc.log_tail)
        except OotaError as exc:
            entry.update(status="error", message=str(exc))
        except Exception as exc:  # a bug in oota must not stop the other cells
            trace = traceback.format_exc()
            with (self.folder / f"{name}.log").open("a", encoding="utf-8") as log_file:
                log_file.write(trace)
            entry.update(status="error", message=f"internal error: {type(exc).__name__}: {exc}")
            log.debug("%s", trace)
        entry["duration_s"] = round((dt.datetime.now() - t0).total_seconds(), 3)
        if not (self.folder / entry["log"]).exists():
            entry.pop("log")
        self.stages[name] = entry
        kind = {"passed": "ok", "failed": "fail", "error": "fail"}.get(entry["status"], "skip")
        text = f"{self.cell.id}: {name} {entry['status']}"
        if entry.get("message") and entry["status"] != "passed":
            text += f": {entry['message'].splitlines()[0]}"
        self.console.line(kind, text, entry["duration_s"])

    # -- build -------------------------------------------------------------------------------
    def _build(self) -> dict[str, Any] | None:
        if lock_status(self.matrix, self.cell) == "stale":
            rel = lock_path(self.matrix, self.cell).relative_to(self.matrix.root)
            raise InputError(f"{rel} is stale (the cell's requirements changed); run `invoke lock "
                             f"--vendor={self.cell.vendor.name} --cell={self.cell.id}` or delete "
                             "it to build unlocked")
        labels = self.engine.image_labels(self.tag)
        if labels and labels.get("oota.fingerprint") == self.fingerprint and not self.options.rebuild:
            self.console.info(f"{self.cell.id}: image {self.tag} is up to date "
                              f"({self.fingerprint[:19]}); --rebuild forces a build")
            # The base it was built on, from its label, so a comparison with an earlier run
            # does not see the base image vanish when the image is only reused.
            base_ref = labels.get("org.opencontainers.image.base.name", "")
            self.extra["base"] = {"ref": base_ref, "how": "reused", "note": "image up to date"}
            return {"detail": {"up_to_date": True, "base": base_ref}}
        base = self.bases.get(self.cell.base_image)
        if isinstance(base, StepFailed):
            raise base
        assert base is not None
        sources = resolve_sources(vendor_index=self.cell.index_url,
                                  index_url=self.options.index_url,
                                  find_links=self.options.find_links,
                                  use_host_config=self.options.use_host_pip_config)
        for note in sources.notes:
            self.console.info(f"{self.cell.id}: {note}")
        self.extra["sources"] = sources.describe()
        self.extra["base"] = {"ref": base.ref, "how": base.how, "note": base.note}
        work = self.matrix.root / ".oota-cache" / "contexts"
        work.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{self.cell.id}-", dir=work) as tmp:
            request = self._request(Path(tmp), sources, base)
            self.engine.build(request, self._on_step)
        return {"detail": {"base": base.ref, "base_how": base.how}}

    def _request(self, tmp: Path, sources: PipSources, base: Base) -> BuildRequest:
        context, secrets = stage_context(tmp, self.files, sources, self.options.ca_bundle)
        self.extra["ca_bundle_used"] = "ca" in secrets
        labels = {
            RUN_LABEL: self.options.run_id,
            "oota.fingerprint": self.fingerprint,
            "oota.version": __version__,
            "org.opencontainers.image.created": now(),
            "org.opencontainers.image.version": self.cell.id,
            "org.opencontainers.image.vendor": "oota",
            "org.opencontainers.image.source": "https://github.com/oota/oota",
            "org.opencontainers.image.revision": git_revision(self.matrix.root),
            "org.opencontainers.image.base.name": base.ref,
            **dict(self.options.extra_labels),
        }
        return BuildRequest(context=context, tag=self.tag, labels=labels, secrets=secrets,
                            build_args={"BASE_IMAGE": base.ref},
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
    def _verify(self) -> dict[str, Any] | None:
        built_from = (self.engine.image_labels(self.tag) or {}).get("oota.fingerprint")
        if built_from and built_from != self.fingerprint:
            self.console.warn(f"{self.cell.id}: {self.tag} was built from other inputs than the "
                              "current ones (matrix, vendor folder or verify/ changed); "
                              "`invoke build` rebuilds it")
        outcome = verify_image(self.engine, self.cell, self.tag, self.folder,
                               run_id=self.options.run_id, layers=self.options.layers,
                               timeout_s=self.options.verify_timeout_s,
                               unsupported=self.unsupported)
        self.tests = outcome.tests
        self.extra["installed"] = outcome.installed
        self.extra["image"] = outcome.image
        self.extra["skips"] = outcome.skips
        if outcome.problem:
            raise StepFailed(outcome.problem, log_tail=outcome.log_tail)
        if not self.options.layers:  # only a whole run is the image's expected result
            self._seal()
        return None

    def _seal(self) -> None:
        """Put this verification into the image (/opt/oota/expected.json), so `oota-verify` on
        a user's host compares its run with it. A failure to seal is noted, not a failed cell."""
        expected = expected_results(self.cell, self.tests, self.extra.get("installed") or {},
                                    self.host, self.options.run_id)
        try:
            image_id = self.engine.seal(
                self.tag, {EXPECTED_IN_IMAGE: json.dumps(expected, indent=2).encode() + b"\n"},
                {"oota.verified": expected["status"], "oota.verified-at": expected["verified_at"]})
        except Exception as exc:  # noqa: BLE001 - the verification itself stands
            self.console.warn(f"{self.cell.id}: could not put the results into the image: {exc}")
            self.extra["image"]["sealed"] = {"error": str(exc).splitlines()[0][:300]}
            return
        self.extra["image"]["sealed"] = {"id": image_id, "file": EXPECTED_IN_IMAGE,
                                         "at": expected["verified_at"]}

    def _save(self, started: str) -> dict[str, Any]:
        result: dict[str, Any] = {
            "schema": "oota.result/v1",
            "cell": {**self.cell.coordinates(), "id": self.cell.id,
                     "fingerprint": self.fingerprint},
            "stages": self.stages,
            "tests": self.tests,
            "host": self.host,
            "toolkit": {"name": "oota", "version": __version__},
            "run_id": self.options.run_id,
            "started_at": started,
            "finished_at": now(),
        }
        image = dict(self.extra.get("image") or {"tag": self.tag})
        if "base" in self.extra:
            image["base"] = self.extra["base"]
        result["image"] = image
        for key in ("installed", "sources", "skips"):
            if self.extra.get(key):
                result[key] = self.extra[key]
        result["status"] = overall_status(self.tests, self.stages)
        result["summary"] = summarize(self.tests, self.stages)
        failing = [f"{name}: {s.get('message', '')}" for name, s in self.stages.items()
                   if s["status"] in ("failed", "error")]
        if failing:
            result["message"] = failing[0].splitlines()[0]
        save(self.folder, result)
        return result


def stage_context(tmp: Path, files: dict[str, Path | bytes], sources: PipSources,
                  ca_bundle: str | None) -> tuple[Path, dict[str, Path]]:
    """Lay out a cell's build context in ``tmp/context`` and the files a build gets as BuildKit
    secrets (the pip configuration, the CA bundle), which never enter a layer."""
    context = tmp / "context"
    for name, source in files.items():
        target = context / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, bytes):
            target.write_bytes(source)
        else:
            shutil.copy2(source, target)
    (context / "vendor" / "verify").mkdir(parents=True, exist_ok=True)
    wheels = fill_wheelhouse(context / "wheelhouse", sources.wheel_dirs)
    pipconf = tmp / "pip.conf"
    pipconf.write_text(sources.pip_conf(with_wheelhouse=bool(wheels)))
    os.chmod(pipconf, 0o600)
    secrets = {"pipconf": pipconf}
    ca = find_ca_bundle(ca_bundle)
    if ca:
        secrets["ca"] = ca
    return context, secrets


def prepare_bases(engine: Engine, cells: list[Cell], console: Console, workdir: Path,
                  mirrors: dict[str, str] | None = None) -> dict[str, Base | StepFailed]:
    """Each OS's base image, once per run; a failure is kept and becomes those cells' result."""
    bases: dict[str, Base | StepFailed] = {}
    for cell in cells:
        key = cell.base_image
        if key in bases:
            continue
        t0 = dt.datetime.now()
        try:
            with console.status(f"base image {key}"):
                bases[key] = ensure_base(engine, key, cell.os, workdir, mirrors)
            base = bases[key]
            assert isinstance(base, Base)
            took = (dt.datetime.now() - t0).total_seconds()
            note = f", {base.note}" if base.how == "pulled" and base.note else ""
            console.line("ok", f"base {key}: {base.ref} ({base.how}{note})", took)
        except StepFailed as exc:
            bases[key] = exc
            console.line("fail", f"base {key}: {exc}")
    return bases


def build_cells(matrix: Matrix, cells: list[Cell], engine: Engine, console: Console,
                options: BuildOptions, *, build: bool = True) -> list[dict[str, Any]]:
    """Build (optionally) and verify every cell; return their results, in order."""
    host = host_facts(engine)
    checks = check_hosts(cells, host, console)
    bases = prepare_bases(engine, cells, console, matrix.root / ".oota-cache",
                          dict(options.registry_mirrors)) if build else {}
    results = []
    for index, cell in enumerate(cells, 1):
        console.info(f"[{index}/{len(cells)}] {cell.id}")
        check = checks[cell.vendor.name]
        cell_host = {**host, "vendor_check": {"supported": check.supported,
                                              "reasons": list(check.reasons), **check.facts}}
        unsupported = check.reason_for(str(cell.toolkit) if cell.toolkit else None,
                                       cell.vendor.host.driver_min)
        with console.status(cell.id):
            results.append(CellRun(matrix, cell, engine, console, options, bases, cell_host,
                                   unsupported=unsupported).run(build=build))
    return results


def check_hosts(cells: list[Cell], docker_facts: dict[str, Any],
                console: Console) -> dict[str, HostCheck]:
    """Probe the host once per vendor before anything is built."""
    checks: dict[str, HostCheck] = {}
    for cell in cells:
        if cell.vendor.name not in checks:
            checks[cell.vendor.name] = check_vendor(cell.vendor, docker_facts)
            result = checks[cell.vendor.name]
            console.line("ok" if result.supported else "skip", "host " + describe(result))
    return checks
