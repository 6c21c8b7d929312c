"""Invoke tasks: parse flags, check them, call one function of oota.api, map errors to exit codes.

Exit codes: 0 all selected cells passed; 1 a cell failed or generated files are stale;
2 bad input (matrix, vendor, cell, flag); 3 environment (Docker, BuildKit, host tool);
5 `pull` refused an image (signature or provenance); 130 interrupted. See README.md. Run
through ``oota`` (oota/cli.py) a command line that cannot be parsed is exit 2 as well; plain
``invoke`` exits 1 for that.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import Task

from oota import api
from oota.console import Console
from oota.errors import EXIT_FAILED
from oota.exits import errors_to_exit

if TYPE_CHECKING:   # only for annotations: the signing library loads when a task signs
    from oota.supply.signing import PrivateKey

HELP_MATRIX = "matrix file (default: matrix.yaml)"
HELP_FORMAT = "table or json"
HELP_HISTORY = ("where runs are kept: a database URL (sqlite:///file, postgresql://user@host/db; "
                "default: OOTA_HISTORY, else history.db beside matrix.yaml)")
# Where the traceback of an unexpected error goes, so the user sees one line, not a traceback.
ERROR_LOG = Path(__file__).resolve().parent / ".oota-cache" / "last-error.log"

TaskBody = Callable[..., None]


def task(*, help: dict[str, str], iterable: tuple[str, ...] = ()
         ) -> Callable[[TaskBody], Task[TaskBody]]:
    """invoke's ``@task`` with a type (invoke's own decorator returns a bare Callable, which
    mypy cannot check), the body wrapped in our mapping of errors to exit codes."""
    def make(body: TaskBody) -> Task[TaskBody]:
        return Task(errors_to_exit(body, ERROR_LOG), help=help, iterable=iterable)
    return make


def _vendors(items: list[str] | None) -> list[str] | None:
    return api.name_list("--vendor", items)


NO_TESTS_COLLECTED = 5   # pytest's exit code when a -k selects no test of a session


@task(iterable=("vendor",), help={
    "vendor": "vendor name (repeatable)", "matrix": HELP_MATRIX,
    "format": "table, json, or github: the job matrix of .github/workflows/oota.yml, one line "
              "of JSON for fromJSON",
    "all": "with --format github: every cell, not just the vendors' defaults"})
def matrix(c: Context, vendor: list[str] | None = None, matrix: str = "matrix.yaml",
           format: str = "table", all: bool = False) -> None:
    """List the expanded cells of the matrix, or the GitHub Actions job matrix."""
    fmt = api.choice("--format", format, api.MATRIX_FORMATS)
    print(api.matrix_text(matrix, _vendors(vendor), fmt, everything=all))


@task(iterable=("vendor",), help={"vendor": "vendor name (repeatable)", "matrix": HELP_MATRIX,
                                  "check": "only compare; exit 1 and show the diff when stale"})
def generate(c: Context, vendor: list[str] | None = None, matrix: str = "matrix.yaml",
             check: bool = False) -> None:
    """Render images/<vendor>/<cell>/Dockerfile for every cell."""
    written, drift = api.generate(matrix, _vendors(vendor), check_only=check)
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


def _finish(ran: api.Ran, results_dir: str, history: api.History,
            key: PrivateKey | None = None) -> None:
    # Each cell's outcome first: a report that cannot be written must not hide them.
    for r in ran.results:
        print(f"{r.status:>16}  {r.cell.id}" + (f"  ({r.message})" if r.message else ""))
    for lost in ran.lost:
        print(f"{'host lost':>16}  {lost}")
    _stderr(api.sign_results(ran.results, results_dir, key))
    _stderr(api.record_history(history, ran.results))
    done = api.finish_report(results_dir, history)
    _stderr(list(done.notes))
    hud = ", reports/hud.html" if done.hud else ""
    print(f"report: reports/matrix.md, reports/index.html{hud} ({done.cells} cells)"
          if done.cells is not None else "report: reports/ left as it was (see the note)")
    code = api.exit_code_for(ran)
    if code:
        raise Exit(code=code)


_BUILD_HELP = {
    "vendor": "vendor name (repeatable)", "cell": "cell id (repeatable)", "matrix": HELP_MATRIX,
    "all": "every cell of the vendor, not just its defaults",
    "ca_bundle": "CA bundle for TLS-intercepting proxies (default: PIP_CERT, REQUESTS_CA_BUNDLE, "
                 "SSL_CERT_FILE, pip's cert)",
    "index_url": "package index replacing the vendor's and the host's", "find_links":
    "wheel folder or URL (repeatable)", "no_host_pip_config": "ignore the host's pip configuration",
    "rebuild": "build even when an image with the same fingerprint exists",
    "results": "results folder (default: results)", "layer": "verify layers, comma-separated",
    "no_verify": "build only",
    "registry_mirror": "REGISTRY=MIRROR: pull base images of REGISTRY from MIRROR (repeatable), "
                       "e.g. vault.habana.ai=registry.lab:5000",
    "hosts": "hosts.yaml: run the cells on its Docker Engines (schema/hosts-v1.json)",
    "jobs": "cells the local engine runs at once (default 1; with --hosts: each host's jobs)",
    "reverify": "verify up-to-date images even when their last verification still holds",
    "history": HELP_HISTORY, "no_history": "do not append this run to the history",
    "key": "the lab's signing key (oota.key from `invoke keygen`; its password in "
           "OOTA_SIGNING_PASSWORD): each result is signed (result.sig beside it)",
}


@task(iterable=("vendor", "cell", "find_links", "registry_mirror"), help=_BUILD_HELP)
def build(c: Context, vendor: list[str] | None = None, cell: list[str] | None = None,
          matrix: str = "matrix.yaml", all: bool = False, ca_bundle: str | None = None,
          index_url: str | None = None, find_links: list[str] | None = None,
          no_host_pip_config: bool = False, rebuild: bool = False, results: str = "results",
          layer: str = "", no_verify: bool = False,
          registry_mirror: list[str] | None = None, hosts: str | None = None, jobs: str = "1",
          reverify: bool = False, history: str | None = None, no_history: bool = False,
          key: str | None = None) -> None:
    """Build each selected cell's image with BuildKit, verify it, and write the report."""
    kept = api.history_target(history, no_history, "build", Path(matrix).parent)
    signer = api.signing_key(key)
    options = api.build_options(results=results, layer=layer, ca_bundle_file=ca_bundle,
                                index=index_url, find_links=find_links,
                                no_host_pip_config=no_host_pip_config, rebuild=rebuild,
                                verify=not no_verify, registry_mirror=registry_mirror,
                                reverify=reverify)
    out = api.build(matrix, _vendors(vendor), api.name_list("--cell", cell), all, options,
                    Console(), hosts_file=hosts, jobs=api.jobs(jobs))
    _finish(out, results, kept, signer)


@task(iterable=("vendor", "cell"),
      help={**{k: _BUILD_HELP[k] for k in ("vendor", "cell", "matrix", "all", "results", "layer",
                                           "hosts", "jobs", "history", "no_history", "key")},
            "here": "verify a Python environment and this host's devices, without Docker",
            "python": "with --here: the interpreter whose torch is verified (default: this one)"})
def verify(c: Context, vendor: list[str] | None = None, cell: list[str] | None = None,
           matrix: str = "matrix.yaml", all: bool = False, results: str = "results",
           layer: str = "", here: bool = False, python: str | None = None,
           hosts: str | None = None, jobs: str = "1", history: str | None = None,
           no_history: bool = False, key: str | None = None) -> None:
    """Verify already built images (no build), or the current environment with --here."""
    kept = api.history_target(history, no_history, "verify", Path(matrix).parent)
    signer = api.signing_key(key)
    options = api.build_options(results=results, layer=layer)
    cells = api.name_list("--cell", cell)
    api.check_here_flags(here=here, python=python, cells=cells, everything=all, hosts=hosts,
                         jobs=jobs)
    if here:
        out = api.Ran(results=[api.verify_here(matrix, _vendors(vendor), options.results_dir,
                                               options.layers, python)])
    else:
        out = api.build(matrix, _vendors(vendor), cells, all, options, Console(),
                        build_images=False, hosts_file=hosts, jobs=api.jobs(jobs))
    _finish(out, results, kept, signer)


_REGISTRY_HELP = {
    "registry_auth": "JSON file {username, password} (default: the engine's `docker login`)",
    "registry_ca": "PEM CA bundle the registry's TLS certificate chains to (default: the "
                   "system's)"}


@task(iterable=("vendor", "cell"), help={
    **{k: _BUILD_HELP[k] for k in ("vendor", "cell", "matrix", "all", "results")},
    **_REGISTRY_HELP,
    "registry": "where to push: a registry host and optional path, e.g. registry.lab:5000",
    "namespace": "repository prefix in the registry (default: oota): REGISTRY/NS/VENDOR:CELL",
    "key": "the lab's signing key (oota.key from `./oota.sh keygen`; its password in "
           "OOTA_SIGNING_PASSWORD); without it images are published unsigned",
    "hosts": "hosts.yaml: push each image from the Engine of the file that verified it",
    "host": "the Docker Engine holding the verified images, as hosts.yaml writes one "
            "(default: DOCKER_HOST, else the local socket)"})
def publish(c: Context, registry: str, vendor: list[str] | None = None,
            cell: list[str] | None = None, matrix: str = "matrix.yaml", all: bool = False,
            results: str = "results", registry_auth: str | None = None,
            namespace: str = "oota", key: str | None = None,
            registry_ca: str | None = None, hosts: str | None = None,
            host: str | None = None) -> None:
    """Push verified images, with SBOM, provenance and signature, to a registry.

    Only images whose last verification passed and still holds are pushed, each from the
    Engine that verified it; every other cell is refused with the reason."""
    out = api.publish(matrix, _vendors(vendor), api.name_list("--cell", cell), all, Console(),
                      registry=api.registry(registry), results_dir=Path(results),
                      namespace=api.namespace(namespace),
                      auth=api.registry_auth(registry_auth), key=key, ca=registry_ca,
                      hosts_file=hosts, host=host)
    for o in out:
        where = f"{o.ref}@{o.digest}" if o.status == "pushed" else o.reason
        signed = ("signed" if o.signed else "UNSIGNED") if o.status == "pushed" else ""
        print(f"{o.status:>8}  {o.cell}  {where}  {signed}".rstrip())
    if not out or any(o.status != "pushed" for o in out):
        raise Exit(code=EXIT_FAILED)


@task(help={"out": "folder for oota.key (private, mode 0600) and oota.pub (default: .)"})
def keygen(c: Context, out: str = ".") -> None:
    """Make the lab's signing key pair (ECDSA P-256); set OOTA_SIGNING_PASSWORD to encrypt it."""
    files = api.keygen(out)
    print(f"private key: {files.private} (keep it secret; encrypted: "
          f"{'yes' if os.environ.get('OOTA_SIGNING_PASSWORD') else 'no'})")
    print(f"public key:  {files.public} (give it to users: ./oota.sh pull --key "
          f"{files.public.name})")


@task(help={**_REGISTRY_HELP,
            "key": "the lab's public key (oota.pub): the signature must verify with it",
            "host": "the Docker Engine to pull into and re-verify on, as hosts.yaml writes one: "
                    "unix:///PATH, tcp://HOST:PORT, ssh://USER@HOST or a docker context name "
                    "(default: DOCKER_HOST, else the local socket)",
            "workdir": "where the run's log and results go (default: .oota-cache/pull beside "
                       "the matrix)",
            "matrix": HELP_MATRIX})
def pull(c: Context, ref: str, key: str | None = None, registry_auth: str | None = None,
         registry_ca: str | None = None, workdir: str | None = None,
         host: str | None = None, matrix: str = "matrix.yaml") -> None:
    """Check a published image's signature, provenance and SBOM, then pull and re-verify it.

    The image is pulled by digest into an Engine (this host's, or --host's) and its suite runs
    there with the device flags it carries; exit 5 when the image is refused."""
    out = api.pull(ref, key=key, auth=api.registry_auth(registry_auth), ca=registry_ca,
                   workdir=Path(workdir) if workdir else
                   Path(matrix).parent / ".oota-cache" / "pull", host=host)
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


@task(iterable=("vendor",), help={"vendor": "vendor name (repeatable)", "matrix": HELP_MATRIX,
                                  "format": HELP_FORMAT, "hosts": _BUILD_HELP["hosts"]})
def hosts(c: Context, vendor: list[str] | None = None, matrix: str = "matrix.yaml",
          format: str = "table", hosts: str | None = None) -> None:
    """Probe each Docker host for each vendor's driver, devices and container runtime."""
    fmt = api.choice("--format", format, api.FORMATS)
    rows = api.hosts(matrix, _vendors(vendor), Console(), hosts)
    print(api.format_hosts(rows, fmt))
    code = api.hosts_exit_code(rows)
    if code:
        silent = sorted({row.host for row in rows if not row.answered})
        raise Exit(f"error: {', '.join(silent)}: did not answer (see above)", code=code)


@task(iterable=("merge", "key"), help={
    "results": "results folder (default: results)", "out": "report folder",
    "compare": "an earlier run's results folder: list what changed per cell",
    "merge": "a results folder to merge (repeatable: runners' or hosts' artifacts side by "
             "side); a cell found in several is kept once per host, shown agreeing or not",
    "format": "extra outputs, a comma list: crcr (crcr.json, the callback payload of "
              "PyTorch's cross-repository CI relay)",
    "artifact_url": "where the results can be downloaded, for crcr.json (default in GitHub "
                    "Actions: the run's page)",
    "history": "the history the HUD shows (hud.html, hud.md) and, with --merge, where the "
               "merged run is appended: " + HELP_HISTORY,
    "no_history": "no HUD, and with --merge: do not append the run to the history",
    "hud_runs": "how many runs the HUD shows, newest first (default 50)",
    "key": "a lab's public key (oota.pub; repeatable): each result's signature (result.sig) "
           "must check with one of them, or the result is refused; merge lists the unsigned",
    "replace": "replace the report in --out even when these results hold fewer than it shows "
               "(otherwise refused, exit 2)",
    "matrix": HELP_MATRIX + "; its folder holds history.db and the get-started pages judge "
              "staleness against it"})
def report(c: Context, results: str = api.DEFAULT_RESULTS, out: str = "reports",
           compare: str | None = None, merge: list[str] | None = None,
           format: str | None = None, artifact_url: str | None = None,
           history: str | None = None, no_history: bool = False, hud_runs: str = "50",
           key: list[str] | None = None, replace: bool = False,
           matrix: str = "matrix.yaml") -> None:
    """Write reports/ from result files and the history.

    matrix.md, results.json, index.html, cells/, start/ (get started per vendor) and the
    history's HUD (hud.html, hud.md)."""
    root = Path(matrix).parent
    kept = api.history_target(history, no_history, "merge", root, used=bool(merge))
    shown = api.history_location(history, off=no_history, root=root)
    done = api.report_with_history(results, out, compare, merge=merge, formats=format,
                                   artifact_url=artifact_url, env=os.environ, target=kept,
                                   shown=shown, hud_runs=api.hud_runs(hud_runs), keys=key,
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


@task(iterable=("dir",), help={
    "action": "import (load results folders), query (where outcomes changed) or digest "
              "(what broke, was fixed, is overdue or flaky, as Markdown)",
    "dir": "import: a results folder, one result.json per cell folder (repeatable)",
    "vendor": "query: one vendor's cells", "cell": "query: one cell id",
    "test": "query: one test id (e.g. test_device.py::test_matmul)", "format": HELP_FORMAT,
    "since": "digest: the window, in hours, days or weeks: 24h, 3d, 1w (default 24h)",
    "history": HELP_HISTORY, "matrix": HELP_MATRIX + "; its folder holds history.db"})
def history(c: Context, action: str, dir: list[str] | None = None, vendor: str | None = None,
            cell: str | None = None, test: str | None = None, format: str = "table",
            since: str | None = None, history: str | None = None,
            matrix: str = "matrix.yaml") -> None:
    """Import, query or digest the history of runs.

    `import --dir results`; `query [--vendor V] [--cell ID] [--test ID]`: every run where an
    outcome changed, newest first, with what changed; `digest [--since 24h]`: what broke, was
    fixed, is past 72 h or was flaky, with blame."""
    api.check_history_flags(action, dirs=dir, selection={"vendor": vendor, "cell": cell,
                                                         "test": test}, fmt=format,
                            window=since)
    root = Path(matrix).parent
    where = api.history_location(history, root=root)
    if action == "digest":
        print(api.history_digest(where, window=api.since(since or "24h"), root=root),
              end="")
        return
    if action == "query":
        print(api.history_query(where, vendor=vendor, cell=cell, test=test, fmt=format))
        return
    done = api.history_import(where, dir)
    for run in done.appended:
        print(f"run {run.run_key}: {run.added} cell(s) added, {run.already} already there")
    _stderr([f"warning: {problem}" for problem in done.problems])


@task(iterable=("vendor",), help={
    "vendor": "vendor name (repeatable; default: all)", "matrix": HELP_MATRIX,
    "torch": "the release to check, e.g. 2.15 (the newest 2.15.x) or 2.15.0 (default: the "
             "newest on the index); N-1 is derived",
    "format": "table, json or markdown",
    "index_url": "index root or simple URL (mirrors); https://user:password@host/simple sends "
                 "basic auth, shown as user:***@host",
    "update": "rewrite the torch axes of matrix.yaml to N and N-1 (comments kept; rules naming "
              "a removed release move to its replacement; refused if the result would not load)",
    "timeout": "seconds one index request may take in all, connect to last byte (default 60; "
               "the whole check gets 5 times that)",
    "fail_on_gap": "exit 1 when any vendor has a gap (for CI); default exit 0"})
def release_check(c: Context, vendor: list[str] | None = None, matrix: str = "matrix.yaml",
                  torch: str | None = None, format: str = "table",
                  index_url: str = "https://pypi.org", update: bool = False,
                  timeout: str | None = None, fail_on_gap: bool = False) -> None:
    """For torch N and N-1: which vendors and Python versions have a working stack, and why not."""
    outcome = api.release_check(matrix, torch=torch, index_url=index_url, fmt=format,
                                update=update, vendors=_vendors(vendor), timeout=timeout)
    print(outcome.text)
    if fail_on_gap and outcome.gaps:
        raise Exit(f"{outcome.gaps} gap(s) found (--fail-on-gap)", code=EXIT_FAILED)


@task(iterable=("vendor", "cell", "find_links", "registry_mirror"), help={
    **{k: _BUILD_HELP[k] for k in ("vendor", "cell", "matrix", "all", "ca_bundle", "index_url",
                                   "find_links", "no_host_pip_config", "registry_mirror")},
    "check": "only report fresh/stale/missing per cell; exit 1 when a lock is stale",
    "upgrade": "resolve every pin afresh (default: keep the existing lock's pins that still fit)"})
def lock(c: Context, vendor: list[str] | None = None, cell: list[str] | None = None,
         matrix: str = "matrix.yaml", all: bool = False, check: bool = False,
         ca_bundle: str | None = None, index_url: str | None = None,
         find_links: list[str] | None = None, no_host_pip_config: bool = False,
         registry_mirror: list[str] | None = None, upgrade: bool = False) -> None:
    """Write hash-pinned locks/<vendor>/<cell>.txt (pip-compile inside each cell's builder)."""
    options = api.lock_options(ca_bundle_file=ca_bundle, index=index_url, find_links=find_links,
                               no_host_pip_config=no_host_pip_config,
                               registry_mirror=registry_mirror, upgrade=upgrade)
    if check:
        rows = api.lock_status(matrix, _vendors(vendor))
        for cell_id, status, path in rows:
            print(f"{status:>8}  {cell_id}  {path}")
        if any(status == "stale" for _, status, _ in rows):
            raise Exit("stale lock(s): run `./oota.sh lock`", code=EXIT_FAILED)
        return
    out = api.lock(matrix, _vendors(vendor), api.name_list("--cell", cell), all, Console(),
                   options)
    for o in out:
        print(f"{o.status:>9}  {o.cell}  {o.path}" + (f"  ({o.message})" if o.message else ""))
    if any(o.status == "failed" for o in out):
        raise Exit(code=EXIT_FAILED)


@task(help={
    "path": "a recording (cases.pt beside an accelerator's result), or a folder: every *.pt "
            "under it",
    "python": "an interpreter with torch to judge with (default: this one if it has torch)",
    "image": "an image with torch to judge in (default: the CPU vendor's default cell)",
    "check": "exit 1 when a verdict or message differs from the recorded one",
    "quiet": "print failed and moved cases only",
    "matrix": HELP_MATRIX})
def judge(c: Context, path: str, python: str | None = None, image: str | None = None,
          check: bool = False, quiet: bool = False, matrix: str = "matrix.yaml") -> None:
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


@task(help={"matrix": HELP_MATRIX})
def lint(c: Context, matrix: str = "matrix.yaml") -> None:
    """hadolint every generated Dockerfile and the templates' current output (.hadolint.yaml)."""
    problems = api.lint(matrix)
    for line in problems:
        print(line)
    if problems:
        raise Exit(f"{len(problems)} hadolint problem(s)", code=EXIT_FAILED)
    print("hadolint: no problems")


@task(help={"docker": "also run the Docker tests (default: yes)", "k": "pytest -k"})
def test(c: Context, docker: bool = True, k: str = "") -> None:
    """Run the test suite: unit tests first, then the browser and Docker tests.

    Two pytest sessions (order and clean-up in tests/conftest.py): the unit and browser tests
    on every CPU (pytest-xdist), then, only when they all passed, the Docker tests, which take
    minutes and share one Engine's images; neither leaves anything in /tmp."""
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
        code = subprocess.call([*pytest, "-m", "not network", "tests/docker", *selected])
        if code not in passed:
            raise Exit(code=code)
