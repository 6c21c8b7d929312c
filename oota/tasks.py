"""The tasks of ``oota`` (and of ``invoke`` in a checkout, whose tasks.py loads these): each
takes its typed request (the checked flags), calls one job of oota.api, prints what it returns,
and maps errors to exit codes.

A task's flags are the fields of its request in ``oota/api/requests.py`` (help, default and
check; add a flag there); each body imports the job it calls, so a command line loads only
the modules of its own task. Folders: :mod:`oota.project`. Exit codes: the ``EXIT_*`` of
:mod:`oota.errors`, said in docs/reference/exit-codes.md (and docs/reference/tasks.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from invoke.context import Context
from invoke.exceptions import Exit

from oota.api.requests import (
    BuildRequest,
    GenerateRequest,
    HistoryRequest,
    HostsRequest,
    JudgeRequest,
    KeygenRequest,
    LockRequest,
    MatrixRequest,
    PublishRequest,
    PullRequest,
    ReleaseCheckRequest,
    ReportRequest,
    TestRequest,
    VerifyRequest,
)
from oota.api.vendorrequests import InitRequest, KnownFailuresRequest, LintRequest
from oota.console import Console
from oota.errors import EXIT_BAD_INPUT, EXIT_FAILED
from oota.project import DEFAULT_MATRIX, Project, command_name
from oota.tasking import task_of

if TYPE_CHECKING:   # only for annotations: these load when a task uses them
    from oota.api.history import History
    from oota.api.runs import Ran
    from oota.supply.signing import PrivateKey

# Where the traceback of an unexpected error goes, so the user sees one line, not a traceback:
# in the project's cache, the folder oota runs in.
ERROR_LOG = Path(".oota-cache") / "last-error.log"

task = task_of(ERROR_LOG)

NO_TESTS_COLLECTED = 5   # pytest's exit code when a -k selects no test of a session


@task
def matrix(c: Context, r: MatrixRequest) -> None:
    """List the expanded cells of the matrix, or the GitHub Actions job matrix."""
    from oota.api.cells import matrix_text

    print(matrix_text(r.matrix, r.vendor, r.format, everything=r.all))


@task
def generate(c: Context, r: GenerateRequest) -> None:
    """Render images/<vendor>/<cell>/Dockerfile for every cell."""
    from oota.api.cells import generate

    written, drift = generate(r.matrix, r.vendor, check_only=r.check)
    if drift is not None:
        if not drift.clean:
            sys.stdout.write(drift.stale_diff)
            raise Exit(f"{len(drift.changed)} generated file(s) are stale; run "
                       f"`{command_name()} generate`", code=EXIT_FAILED)
        print("generated files are up to date")
        return
    for path in written:
        print(f"wrote {path}")
    print(f"{len(written)} file(s) changed")


def _stderr(lines: list[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def _finish(ran: Ran, project: Project, history: History,
            key: PrivateKey | None = None) -> None:
    from oota.api.history import record_history
    from oota.api.reports import finish_report
    from oota.api.runs import exit_code_for, sign_results

    # Each cell's outcome first: a report that cannot be written must not hide them.
    for r in ran.results:
        print(f"{r.status:>16}  {r.cell.id}" + (f"  ({r.message})" if r.message else ""))
    for lost in ran.lost:
        print(f"{'host lost':>16}  {lost}")
    _stderr(sign_results(ran, project.results, key))
    _stderr(record_history(history, ran.results))
    done = finish_report(ran.held(), project, history)
    _stderr(list(done.notes))
    out = project.reports
    hud = f", {out}/hud.html" if done.hud else ""
    print(f"report: {out}/matrix.md, {out}/index.html{hud} ({done.cells} cells)"
          if done.cells is not None else f"report: {out}/ left as it was (see the note)")
    code = exit_code_for(ran)
    if code:
        raise Exit(code=code)


@task
def build(c: Context, r: BuildRequest) -> None:
    """Build each selected cell's image with BuildKit, verify it, and write the report."""
    from oota.api.history import history_target
    from oota.api.runs import build
    from oota.results.store import Writer

    project = r.project()
    kept = history_target(r.history, r.no_history, "build", project.root)
    with Writer(project.results) as results:
        out = build(r.matrix, r.vendor, r.cell, r.all, r.options(), Console(),
                    hosts_file=r.hosts, jobs=r.jobs, hold=results.take)
        _finish(out, project, kept, r.key)


@task
def verify(c: Context, r: VerifyRequest) -> None:
    """Verify already built images (no build), or the current environment with --here."""
    from oota.api.history import history_target
    from oota.api.runs import Ran, build, verify_here
    from oota.results.store import Writer

    project = r.project()
    kept = history_target(r.history, r.no_history, "verify", project.root)
    with Writer(project.results) as results:
        if r.here:
            out = Ran(results=[verify_here(r.matrix, r.vendor, project.results, r.layer,
                                           r.python, hold=results.take)])
        else:
            out = build(r.matrix, r.vendor, r.cell, r.all, r.options(), Console(),
                        build_images=False, hosts_file=r.hosts, jobs=r.jobs, hold=results.take)
        _finish(out, project, kept, r.key)


@task
def publish(c: Context, r: PublishRequest) -> None:
    """Push verified images, with SBOM, provenance and signature, to a registry.

    Only images whose last verification passed and still holds are pushed, each from the
    Engine that verified it; every other cell is refused with the reason."""
    from oota.api.runs import publish
    from oota.results.store import Writer

    project = r.project()
    with Writer(project.results) as results:
        out = publish(r.matrix, r.vendor, r.cell, r.all, Console(), registry=r.registry,
                      results_dir=project.results, namespace=r.namespace, auth=r.registry_auth,
                      key=r.key, ca=r.registry_ca, hosts_file=r.hosts, host=r.host,
                      hold=results.take)
    for o in out:
        where = f"{o.ref}@{o.digest}" if o.status == "pushed" else o.reason
        signed = ("signed" if o.signed else "UNSIGNED") if o.status == "pushed" else ""
        print(f"{o.status:>8}  {o.cell}  {where}  {signed}".rstrip())
    if not out or any(o.status != "pushed" for o in out):
        raise Exit(code=EXIT_FAILED)


@task
def keygen(c: Context, r: KeygenRequest) -> None:
    """Make the lab's signing key pair (ECDSA P-256); set OOTA_SIGNING_PASSWORD to encrypt it."""
    from oota.api.runs import keygen

    files = keygen(r.out)
    print(f"private key: {files.private} (keep it secret; encrypted: "
          f"{'yes' if os.environ.get('OOTA_SIGNING_PASSWORD') else 'no'})")
    print(f"public key:  {files.public} (give it to users: {command_name()} pull "
          f"--key {files.public.name})")


@task
def pull(c: Context, r: PullRequest) -> None:
    """Check a published image's signature, provenance and SBOM, then pull and re-verify it.

    The image is pulled by digest into an Engine (this host's, or --host's) and its suite runs
    there with the device flags it carries; exit 5 when the image is refused."""
    from oota.api.runs import pull

    out = pull(r.ref, key=r.key, auth=r.registry_auth, ca=r.registry_ca,
               workdir=r.workdir or r.project().cache / "pull", host=r.host, layers=r.layer)
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
def hosts(c: Context, r: HostsRequest) -> None:
    """Probe each Docker host for each vendor's driver, devices and container runtime."""
    from oota.api.runs import hosts
    from oota.api.tables import format_hosts, hosts_exit_code

    rows = hosts(r.matrix, r.vendor, Console(), r.hosts)
    print(format_hosts(rows, r.format))
    code = hosts_exit_code(rows)
    if code:
        silent = sorted({row.host for row in rows if not row.answered})
        raise Exit(f"error: {', '.join(silent)}: did not answer (see above)", code=code)


@task
def report(c: Context, r: ReportRequest) -> None:
    """Write reports/ from result files and the history.

    matrix.md, results.json, index.html, cells/, start/ (get started per vendor),
    scorecard/ (PyTorch's quality levels per vendor) and the history's HUD (hud.html,
    hud.md)."""
    from oota.api.flags import report_formats
    from oota.api.history import history_location, history_target
    from oota.api.reports import report_with_history

    project = r.project()
    root, out = project.root, project.reports
    kept = history_target(r.history, r.no_history, "merge", root, used=bool(r.merge))
    shown = history_location(r.history, off=r.no_history, root=root)
    done = report_with_history(str(project.results), str(out), r.compare, merge=r.merge,
                               formats=r.format, artifact_url=r.artifact_url, env=os.environ,
                               target=kept, shown=shown, hud_runs=r.hud_runs, keys=r.key,
                               replace=r.replace, matrix=r.matrix, parity=r.parity,
                               public_url=r.public_url)
    rep = done.report
    extra = "".join(f", {out}/{name}.json" for name in report_formats(r.format))
    extra += f", {out}/scorecard/ (quality levels)" if (Path(out) / "scorecard").is_dir() else ""
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
def history(c: Context, r: HistoryRequest) -> None:
    """Import, query or digest the history of runs.

    `import --dir results`; `query [--vendor V] [--cell ID] [--test ID]`: every run where an
    outcome changed, newest first, with what changed; `digest [--since 24h]`: what broke, was
    fixed, is past 72 h or was flaky, with blame."""
    from oota.api import history as runs

    root = r.project().root
    where = runs.history_location(r.history, root=root)
    if r.action in ("digest", "query"):
        shown = (runs.history_digest(where, window=r.since or runs.DEFAULT_SINCE, root=root)
                 if r.action == "digest" else
                 runs.history_query(where, vendor=r.vendor, cell=r.cell, test=r.test,
                                    fmt=r.format))
        print(shown.text, end="" if r.action == "digest" else "\n")
        _stderr(list(shown.warnings))
        return
    done = runs.history_import(where, r.dir)
    for run in done.appended:
        print(f"run {run.run_key}: {run.added} cell(s) added, {run.already} already there")
    _stderr([f"warning: {problem}" for problem in done.problems])


@task
def release_check(c: Context, r: ReleaseCheckRequest) -> None:
    """For torch N and N-1: which vendors and Python versions have a working stack, and why not."""
    from oota.api.cells import release_check

    outcome = release_check(r.matrix, torch=r.torch, index_url=r.index_url, fmt=r.format,
                            update=r.update, vendors=r.vendor, timeout=r.timeout)
    print(outcome.text)
    if r.fail_on_gap and outcome.gaps:
        raise Exit(f"{outcome.gaps} gap(s) found (--fail-on-gap)", code=EXIT_FAILED)


@task
def lock(c: Context, r: LockRequest) -> None:
    """Write hash-pinned locks/<vendor>/<cell>.txt (pip-compile inside each cell's builder)."""
    from oota.api.cells import lock, lock_status

    if r.check:
        rows = lock_status(r.matrix, r.vendor)
        for cell_id, status, path in rows:
            print(f"{status:>8}  {cell_id}  {path}")
        if any(status == "stale" for _, status, _ in rows):
            raise Exit(f"stale lock(s): run `{command_name()} lock`", code=EXIT_FAILED)
        return
    out = lock(r.matrix, r.vendor, r.cell, r.all, Console(), r.options())
    for o in out:
        print(f"{o.status:>9}  {o.cell}  {o.path}" + (f"  ({o.message})" if o.message else ""))
    if any(o.status == "failed" for o in out):
        raise Exit(code=EXIT_FAILED)


@task
def judge(c: Context, r: JudgeRequest) -> None:
    """Judge recorded cases again, without an accelerator.

    One verdict a line; exit 1 when a case fails (with --check: when a verdict moved from the
    recorded one, whatever the verdicts), 2 when a file or a case cannot be judged."""
    from oota.api.runs import judge

    out = judge([r.path], python=r.python, image=r.image, matrix_path=r.matrix, check=r.check,
                keys=r.key or ())
    _stderr(list(out.signatures))
    for case in out.cases:
        if not r.quiet or case.status in ("failed", "error") or case.moved:
            print(case.line())
            print("".join(f"         note: {note}\n" for note in case.notes), end="")
    _stderr([out.summary()])
    if out.count("error"):
        raise Exit(code=EXIT_BAD_INPUT)
    if (out.moved if r.check else out.count("failed")):
        raise Exit(code=EXIT_FAILED)


@task
def init(c: Context, r: InitRequest) -> None:
    """Scaffold vendors/NAME/ (and a matrix.yaml) that builds and verifies on the CPU.

    The matrix is written only where there is none; `oota build --vendor NAME` next."""
    from oota.scaffold import scaffold

    matrix_file = Path(r.matrix)
    done = scaffold(matrix_file.parent, r.vendor, matrix_file)
    for path in done.written:
        print(f"wrote {path}")
    if not done.matrix_written:
        print(f"{r.matrix} was there already: give the vendor its cells under `vendors:`, e.g. "
              f"{r.vendor}: {{os: [debian12], python: [\"3.11\"], torch: [\"2.13.0\"]}}")
    where = "" if r.matrix == DEFAULT_MATRIX else f" --matrix {r.matrix}"
    print(f"next: {command_name()} build --vendor {r.vendor}{where}, then open "
          f"{Project.of(matrix_file).reports}/index.html")


@task
def lint(c: Context, r: LintRequest) -> None:
    """hadolint every generated Dockerfile and the templates' current output (.hadolint.yaml)."""
    from oota.api.cells import lint

    problems = lint(r.matrix)
    for line in problems:
        print(line)
    if problems:
        raise Exit(f"{len(problems)} hadolint problem(s)", code=EXIT_FAILED)
    print("hadolint: no problems")


@task
def known_failures(c: Context, r: KnownFailuresRequest) -> None:
    """Read a vendor's known failures from its tracker now and list them.

    The open issues of the repository and label its vendor.yaml names (known_failures), as the
    next verification passes them to the suite; the list is cached for offline runs. Exit 1
    when the tracker could not be read (the cached list, if any, is listed)."""
    import json

    from oota.api.cells import known_failures as read

    known = read(r.matrix, r.vendor)
    print(known.note, file=sys.stderr)
    for problem in known.problems:
        print(f"warn: {problem}", file=sys.stderr)
    if r.json:
        print(json.dumps([e.to_json() for e in known.entries], indent=2, sort_keys=True))
    else:
        for e in known.entries:
            print(f"{e.kind:5}  {e.id}  (owner {e.owner}, expires {e.expires}, {e.issue})")
    if not known.read_now:
        raise Exit(f"the tracker of {r.vendor} was not read", code=EXIT_FAILED)


@task
def test(c: Context, r: TestRequest) -> None:
    """Run the test suite: unit tests first, then the browser and Docker tests.

    Two pytest sessions (order and clean-up in tests/conftest.py): the unit and browser tests
    on one pytest-xdist worker more than the CPUs, then, only when they all passed, the Docker
    tests on three workers, each taking one share of the files (tests/docker/conftest.py);
    neither session leaves anything in /tmp. The checkout's Python files are byte-compiled first."""
    from oota.testrun import byte_compile

    selected = ["-k", r.k] if r.k else []   # argv lists: -k text never reaches a shell
    pytest = [sys.executable, "-m", "pytest"]
    byte_compile(Path.cwd())
    passed = (0, NO_TESTS_COLLECTED) if r.k else (0,)   # -k may select none of a group
    # One worker more than the CPUs: the unit phase's tests often wait (on a subprocess, a
    # PostgreSQL server, a deadline), and with one per CPU a 2-core machine stood 13% idle.
    workers = str((os.cpu_count() or 1) + 1)
    code = subprocess.call([*pytest, "-m", "not docker and not network and not xla", "-n",
                            workers, *selected])
    if code not in passed:
        if r.docker:
            print("unit or browser tests failed: the Docker tests were not started (fix those "
                  "first, or run tests/docker alone)", file=sys.stderr)
        raise Exit(code=code)
    if r.docker:
        code = subprocess.call([*pytest, "-m", "not network and not xla", "-n", "3", "--dist",
                                "loadscope", "tests/docker", *selected])
        if code not in passed:
            raise Exit(code=code)
