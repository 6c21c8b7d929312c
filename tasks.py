"""Invoke tasks: take the checked flags, call one function of oota.api, print what it returns,
map errors to exit codes.

A task's parameters are its flags; their help, defaults and checks are one table,
``oota/api/options.py`` (add a flag there, then take it here as a parameter of the type its
check returns). Exit codes: 0 all selected cells passed; 1 a cell failed or generated files
are stale; 2 bad input (matrix, vendor, cell, flag); 3 environment (Docker, BuildKit, host
tool); 5 `pull` refused an image (signature or provenance); 130 interrupted. See README.md.
Run through ``oota`` (oota/cli.py) a command line that cannot be parsed is exit 2 as well;
plain ``invoke`` exits 1 for that.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from invoke.context import Context
from invoke.exceptions import Exit

from oota import api
from oota.cli import task_of
from oota.console import Console
from oota.errors import EXIT_FAILED

if TYPE_CHECKING:   # only for annotations: these libraries load when a task uses them
    from oota.engine.base import RegistryAuth
    from oota.supply.signing import PrivateKey

# Where the traceback of an unexpected error goes, so the user sees one line, not a traceback.
ERROR_LOG = Path(__file__).resolve().parent / ".oota-cache" / "last-error.log"

task = task_of(ERROR_LOG)

NO_TESTS_COLLECTED = 5   # pytest's exit code when a -k selects no test of a session


@task
def matrix(c: Context, vendor: list[str] | None, matrix: str, format: str, all: bool) -> None:
    """List the expanded cells of the matrix, or the GitHub Actions job matrix."""
    print(api.matrix_text(matrix, vendor, format, everything=all))


@task
def generate(c: Context, vendor: list[str] | None, matrix: str, check: bool) -> None:
    """Render images/<vendor>/<cell>/Dockerfile for every cell."""
    written, drift = api.generate(matrix, vendor, check_only=check)
    if drift is not None:
        if not drift.clean:
            sys.stdout.write(drift.stale_diff)
            raise Exit(f"{len(drift.changed)} generated file(s) are stale; run "
                       "`./oota.sh generate`", code=EXIT_FAILED)
        print("generated files are up to date")
        return
    for path in written:
        print(f"wrote {path}")
    print(f"{len(written)} file(s) changed")


def _stderr(lines: list[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def _finish(ran: api.Ran, results: str | Path, history: api.History,
            key: PrivateKey | None = None) -> None:
    # Each cell's outcome first: a report that cannot be written must not hide them.
    for r in ran.results:
        print(f"{r.status:>16}  {r.cell.id}" + (f"  ({r.message})" if r.message else ""))
    for lost in ran.lost:
        print(f"{'host lost':>16}  {lost}")
    _stderr(api.sign_results(ran.results, str(results), key))
    _stderr(api.record_history(history, ran.results))
    done = api.finish_report(str(results), history)
    _stderr(list(done.notes))
    hud = ", reports/hud.html" if done.hud else ""
    print(f"report: reports/matrix.md, reports/index.html{hud} ({done.cells} cells)"
          if done.cells is not None else "report: reports/ left as it was (see the note)")
    code = api.exit_code_for(ran)
    if code:
        raise Exit(code=code)


@task
def build(c: Context, vendor: list[str] | None, cell: list[str] | None, matrix: str, all: bool,
          ca_bundle: str | None, index_url: str | None, find_links: tuple[str, ...],
          no_host_pip_config: bool, rebuild: bool, results: Path, layer: tuple[str, ...],
          no_verify: bool, registry_mirror: tuple[tuple[str, str], ...], hosts: str | None,
          jobs: int, reverify: bool, history: str | None, no_history: bool,
          key: PrivateKey | None) -> None:
    """Build each selected cell's image with BuildKit, verify it, and write the report."""
    kept = api.history_target(history, no_history, "build", Path(matrix).parent)
    options = api.build_options(results=results, layer=layer, ca_bundle=ca_bundle,
                                index_url=index_url, find_links=find_links,
                                no_host_pip_config=no_host_pip_config, rebuild=rebuild,
                                no_verify=no_verify, registry_mirror=registry_mirror,
                                reverify=reverify)
    out = api.build(matrix, vendor, cell, all, options, Console(), hosts_file=hosts, jobs=jobs)
    _finish(out, results, kept, key)


@task
def verify(c: Context, vendor: list[str] | None, cell: list[str] | None, matrix: str, all: bool,
           results: Path, layer: tuple[str, ...], here: bool, python: str | None,
           hosts: str | None, jobs: int, history: str | None, no_history: bool,
           key: PrivateKey | None) -> None:
    """Verify already built images (no build), or the current environment with --here."""
    kept = api.history_target(history, no_history, "verify", Path(matrix).parent)
    api.check_here_flags(here=here, python=python, cells=cell, everything=all, hosts=hosts,
                         jobs=jobs)
    if here:
        out = api.Ran(results=[api.verify_here(matrix, vendor, results, layer, python)])
    else:
        options = api.build_options(results=results, layer=layer)
        out = api.build(matrix, vendor, cell, all, options, Console(), build_images=False,
                        hosts_file=hosts, jobs=jobs)
    _finish(out, results, kept, key)


@task
def publish(c: Context, registry: str, vendor: list[str] | None, cell: list[str] | None,
            matrix: str, all: bool, results: Path, registry_auth: RegistryAuth | None,
            namespace: str, key: str | None, registry_ca: Path | None, hosts: str | None,
            host: str | None) -> None:
    """Push verified images, with SBOM, provenance and signature, to a registry.

    Only images whose last verification passed and still holds are pushed, each from the
    Engine that verified it; every other cell is refused with the reason."""
    out = api.publish(matrix, vendor, cell, all, Console(), registry=registry,
                      results_dir=results, namespace=namespace, auth=registry_auth, key=key,
                      ca=registry_ca, hosts_file=hosts, host=host)
    for o in out:
        where = f"{o.ref}@{o.digest}" if o.status == "pushed" else o.reason
        signed = ("signed" if o.signed else "UNSIGNED") if o.status == "pushed" else ""
        print(f"{o.status:>8}  {o.cell}  {where}  {signed}".rstrip())
    if not out or any(o.status != "pushed" for o in out):
        raise Exit(code=EXIT_FAILED)


@task
def keygen(c: Context, out: str) -> None:
    """Make the lab's signing key pair (ECDSA P-256); set OOTA_SIGNING_PASSWORD to encrypt it."""
    files = api.keygen(out)
    print(f"private key: {files.private} (keep it secret; encrypted: "
          f"{'yes' if os.environ.get('OOTA_SIGNING_PASSWORD') else 'no'})")
    print(f"public key:  {files.public} (give it to users: ./oota.sh pull --key "
          f"{files.public.name})")


@task
def pull(c: Context, ref: str, key: str | None, registry_auth: RegistryAuth | None,
         registry_ca: Path | None, workdir: Path | None, host: str | None,
         matrix: str) -> None:
    """Check a published image's signature, provenance and SBOM, then pull and re-verify it.

    The image is pulled by digest into an Engine (this host's, or --host's) and its suite runs
    there with the device flags it carries; exit 5 when the image is refused."""
    out = api.pull(ref, key=key, auth=registry_auth, ca=registry_ca,
                   workdir=workdir or Path(matrix).parent / ".oota-cache" / "pull", host=host)
    print(f"image:       {out.ref} -> {out.digest}")
    print(f"signature:   {out.signature}")
    print(f"provenance:  cell {out.provenance.cell}, fingerprint "
          f"{out.provenance.fingerprint[:19]}, verified {out.provenance.verification}")
    print(f"sbom:        {out.sbom}")
    print(f"engine:      {out.engine}")
    print(f"verify:      {out.counts or 'no counts'} (exit {out.exit_code}; log {out.log})")
    print(out.comparison or "No comparison: the image carries no verification of its own.")
    if out.exit_code != 0:
        raise Exit(code=EXIT_FAILED)


@task
def hosts(c: Context, vendor: list[str] | None, matrix: str, format: str,
          hosts: str | None) -> None:
    """Probe each Docker host for each vendor's driver, devices and container runtime."""
    rows = api.hosts(matrix, vendor, Console(), hosts)
    print(api.format_hosts(rows, format))
    code = api.hosts_exit_code(rows)
    if code:
        silent = sorted({row.host for row in rows if not row.answered})
        raise Exit(f"error: {', '.join(silent)}: did not answer (see above)", code=code)


@task
def report(c: Context, results: str, out: str, compare: str | None, merge: list[str] | None,
           format: str | None, artifact_url: str | None, history: str | None,
           no_history: bool, hud_runs: int, key: list[str] | None, replace: bool,
           matrix: str) -> None:
    """Write reports/ from result files and the history.

    matrix.md, results.json, index.html, cells/, start/ (get started per vendor) and the
    history's HUD (hud.html, hud.md)."""
    root = Path(matrix).parent
    kept = api.history_target(history, no_history, "merge", root, used=bool(merge))
    shown = api.history_location(history, off=no_history, root=root)
    done = api.report_with_history(results, out, compare, merge=merge, formats=format,
                                   artifact_url=artifact_url, env=os.environ, target=kept,
                                   shown=shown, hud_runs=hud_runs, keys=key,
                                   replace=replace, matrix=matrix)
    rep = done.report
    extra = "".join(f", {out}/{name}.json" for name in api.report_formats(format))
    extra += f", {out}/hud.html, {out}/hud.md" if done.hud else ""
    print(f"{out}/matrix.md, {out}/results.json, {out}/index.html, {out}/cells/, "
          f"{out}/start/ (get started per vendor){extra}: "
          f"{len(rep.groups)} cells")
    if rep.merged:
        again = rep.repeated_on_one_host()
        print(f"merged {len(rep.results)} results from {len(rep.sources)} folders; cells "
              f"run on more than one host: {len(rep.on_several_hosts())}"
              + (f", run more than once on one host: {len(again)}" if again else "")
              + f", disagreeing: {len(rep.disagreeing())}")
        for group in rep.disagreeing():
            print(f"  {group.id}: " + "; ".join(group.differences))
    for line in done.signatures:
        print(line)
    if rep.comparison is not None:
        print(rep.comparison.text())
    for problem in rep.problems:
        print(f"warning: {problem}", file=sys.stderr)
    _stderr(list(done.notes))


@task
def history(c: Context, action: str, dir: list[str] | None, vendor: str | None,
            cell: str | None, test: str | None, format: str, since: dt.timedelta | None,
            history: str | None, matrix: str) -> None:
    """Import, query or digest the history of runs.

    `import --dir results`; `query [--vendor V] [--cell ID] [--test ID]`: every run where an
    outcome changed, newest first, with what changed; `digest [--since 24h]`: what broke, was
    fixed, is past 72 h or was flaky, with blame."""
    api.check_history_flags(action, dirs=dir, selection={"vendor": vendor, "cell": cell,
                                                         "test": test}, fmt=format,
                            window=since)
    root = Path(matrix).parent
    where = api.history_location(history, root=root)
    if action in ("digest", "query"):
        shown = (api.history_digest(where, window=since or api.DEFAULT_SINCE, root=root)
                 if action == "digest" else
                 api.history_query(where, vendor=vendor, cell=cell, test=test, fmt=format))
        print(shown.text, end="" if action == "digest" else "\n")
        _stderr(list(shown.warnings))
        return
    done = api.history_import(where, dir)
    for run in done.appended:
        print(f"run {run.run_key}: {run.added} cell(s) added, {run.already} already there")
    _stderr([f"warning: {problem}" for problem in done.problems])


@task
def release_check(c: Context, vendor: list[str] | None, matrix: str, torch: str | None,
                  format: str, index_url: str, update: bool, timeout: str | None,
                  fail_on_gap: bool) -> None:
    """For torch N and N-1: which vendors and Python versions have a working stack, and why not."""
    outcome = api.release_check(matrix, torch=torch, index_url=index_url, fmt=format,
                                update=update, vendors=vendor, timeout=timeout)
    print(outcome.text)
    if fail_on_gap and outcome.gaps:
        raise Exit(f"{outcome.gaps} gap(s) found (--fail-on-gap)", code=EXIT_FAILED)


@task
def lock(c: Context, vendor: list[str] | None, cell: list[str] | None, matrix: str, all: bool,
         check: bool, ca_bundle: str | None, index_url: str | None,
         find_links: tuple[str, ...], no_host_pip_config: bool,
         registry_mirror: tuple[tuple[str, str], ...], upgrade: bool) -> None:
    """Write hash-pinned locks/<vendor>/<cell>.txt (pip-compile inside each cell's builder)."""
    if check:
        rows = api.lock_status(matrix, vendor)
        for cell_id, status, path in rows:
            print(f"{status:>8}  {cell_id}  {path}")
        if any(status == "stale" for _, status, _ in rows):
            raise Exit("stale lock(s): run `./oota.sh lock`", code=EXIT_FAILED)
        return
    options = api.lock_options(ca_bundle=ca_bundle, index_url=index_url, find_links=find_links,
                               no_host_pip_config=no_host_pip_config,
                               registry_mirror=registry_mirror, upgrade=upgrade)
    out = api.lock(matrix, vendor, cell, all, Console(), options)
    for o in out:
        print(f"{o.status:>9}  {o.cell}  {o.path}" + (f"  ({o.message})" if o.message else ""))
    if any(o.status == "failed" for o in out):
        raise Exit(code=EXIT_FAILED)


@task
def judge(c: Context, path: str, python: str | None, image: str | None, check: bool,
          quiet: bool, matrix: str) -> None:
    """Judge recorded cases again, without an accelerator.

    One verdict a line; exit 1 when a case fails, or with --check when a verdict moved from the
    recorded one."""
    out = api.judge([path], python=python, image=image, matrix_path=matrix, check=check)
    for case in out.cases:
        if not quiet or case.status == "failed" or case.moved:
            print(case.line())
    _stderr([out.summary()])
    if out.count("failed") or (check and out.moved):
        raise Exit(code=EXIT_FAILED)


@task
def lint(c: Context, matrix: str) -> None:
    """hadolint every generated Dockerfile and the templates' current output (.hadolint.yaml)."""
    problems = api.lint(matrix)
    for line in problems:
        print(line)
    if problems:
        raise Exit(f"{len(problems)} hadolint problem(s)", code=EXIT_FAILED)
    print("hadolint: no problems")


@task
def test(c: Context, docker: bool, k: str) -> None:
    """Run the test suite: unit tests first, then the browser and Docker tests.

    Two pytest sessions (order and clean-up in tests/conftest.py): the unit and browser tests
    on every CPU (pytest-xdist), then, only when they all passed, the Docker tests on three
    workers, each taking one share of the files (tests/docker/conftest.py); neither session
    leaves anything in /tmp."""
    selected = ["-k", k] if k else []   # argv lists: -k text never reaches a shell
    pytest = [sys.executable, "-m", "pytest"]
    passed = (0, NO_TESTS_COLLECTED) if k else (0,)   # -k may select none of a group
    code = subprocess.call([*pytest, "-m", "not docker and not network", "-n", "auto",
                            *selected])
    if code not in passed:
        if docker:
            print("unit or browser tests failed: the Docker tests were not started (fix those "
                  "first, or run tests/docker alone)", file=sys.stderr)
        raise Exit(code=code)
    if docker:
        code = subprocess.call([*pytest, "-m", "not network", "-n", "3", "--dist", "loadscope",
                                "tests/docker", *selected])
        if code not in passed:
            raise Exit(code=code)
