"""Invoke tasks: parse flags, call one function of oota.api, map errors to exit codes.

Exit codes: 0 all selected cells passed; 1 a cell failed or generated files are stale;
2 bad input (matrix, vendor, cell, flag); 3 environment (Docker, BuildKit, host tool);
130 interrupted. See README.md.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from invoke import Exit, task

from oota import api
from oota.console import Console
from oota.errors import EXIT_FAILED, EXIT_INTERRUPTED, OotaError
from oota.execute.build import BuildOptions
from oota.execute.interrupts import signal_name, signals_as_interrupts
from oota.execute.lock import LockOptions

HELP_MATRIX = "matrix file (default: matrix.yaml)"


def _errors_to_exit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The one place errors become exit codes, and where SIGINT and SIGTERM become the same
    interruption (exit 130) for the whole task (oota/execute/interrupts.py)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if os.environ.get("OOTA_DEBUG"):
            logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
        try:
            with signals_as_interrupts():
                return fn(*args, **kwargs)
        except OotaError as exc:
            raise Exit(f"error: {exc}", code=exc.exit_code) from None
        except KeyboardInterrupt as exc:
            raise Exit(f"interrupted ({signal_name(exc)})", code=EXIT_INTERRUPTED) from None
        except BrokenPipeError:  # `invoke matrix | head`: the reader left; no traceback
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise Exit(code=0) from None
    return wrapper


def _vendors(vendor):
    return [v for item in vendor for v in item.split(",") if v] if vendor else None


@task(iterable=["vendor"], help={"vendor": "vendor name (repeatable)", "matrix": HELP_MATRIX,
                                 "format": "table or json"})
@_errors_to_exit
def matrix(c, vendor=None, matrix="matrix.yaml", format="table"):
    """List the expanded cells of the matrix."""
    rows = api.matrix_rows(matrix, _vendors(vendor))
    print(api.format_rows(rows, format))


@task(iterable=["vendor"], help={"vendor": "vendor name (repeatable)", "matrix": HELP_MATRIX,
                                 "check": "only compare; exit 1 and show the diff when stale"})
@_errors_to_exit
def generate(c, vendor=None, matrix="matrix.yaml", check=False):
    """Render images/<vendor>/<cell>/Dockerfile for every cell."""
    written, drift = api.generate(matrix, _vendors(vendor), check_only=check)
    if drift is not None:
        if not drift.clean:
            sys.stdout.write(drift.stale_diff)
            raise Exit(f"{len(drift.changed)} generated file(s) are stale; run `invoke generate`",
                       code=EXIT_FAILED)
        print("generated files are up to date")
        return
    for path in written:
        print(f"wrote {path}")
    print(f"{len(written)} file(s) changed")


def _options(results, ca_bundle, index_url, find_links, no_host_pip_config, rebuild, layer,
             verify=True, registry_mirror=None):
    return BuildOptions(results_dir=Path(results), ca_bundle=ca_bundle,
                        index_url=index_url, find_links=tuple(find_links or ()),
                        use_host_pip_config=not no_host_pip_config, rebuild=rebuild,
                        verify=verify, layers=tuple(x for x in (layer or "").split(",") if x),
                        registry_mirrors=api.registry_mirrors(registry_mirror))


def _finish(results, results_dir):
    report = api.report(results_dir, "reports")
    for r in results:
        print(f"{r['status']:>16}  {r['cell']['id']}" + (f"  ({r['message']})" if r.get("message") else ""))
    print(f"report: reports/matrix.md, reports/index.html ({len(report.results)} cells)")
    code = api.exit_code_for(results)
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
}


@task(iterable=["vendor", "cell", "find_links", "registry_mirror"], help=_BUILD_HELP)
@_errors_to_exit
def build(c, vendor=None, cell=None, matrix="matrix.yaml", all=False, ca_bundle=None,
          index_url=None, find_links=None, no_host_pip_config=False, rebuild=False,
          results="results", layer="", no_verify=False, registry_mirror=None):
    """Build each selected cell's image with BuildKit, verify it, and write the report."""
    options = _options(results, ca_bundle, index_url, find_links, no_host_pip_config, rebuild,
                       layer, verify=not no_verify, registry_mirror=registry_mirror)
    out = api.build(matrix, _vendors(vendor), cell, all, options, Console())
    _finish(out, results)


@task(iterable=["vendor", "cell"],
      help={**{k: _BUILD_HELP[k] for k in ("vendor", "cell", "matrix", "all", "results", "layer")},
            "here": "verify a Python environment and this host's devices, without Docker",
            "python": "with --here: the interpreter whose torch is verified (default: this one)"})
@_errors_to_exit
def verify(c, vendor=None, cell=None, matrix="matrix.yaml", all=False, results="results",
           layer="", here=False, python=None):
    """Verify already built images (no build), or the current environment with --here."""
    layers = tuple(x for x in layer.split(",") if x)
    if here:
        names = _vendors(vendor) or []
        if len(names) != 1:
            raise Exit("error: --here needs exactly one --vendor", code=2)
        out = [api.verify_here(matrix, names[0], results, layers, python)]
    else:
        options = _options(results, None, None, None, False, False, layer)
        out = api.build(matrix, _vendors(vendor), cell, all, options, Console(),
                        build_images=False)
    _finish(out, results)


@task(iterable=["vendor"], help={"vendor": "vendor name (repeatable)", "matrix": HELP_MATRIX,
                                 "format": "table or json"})
@_errors_to_exit
def hosts(c, vendor=None, matrix="matrix.yaml", format="table"):
    """Probe this Docker host for each vendor's driver, devices and container runtime."""
    rows = api.hosts(matrix, _vendors(vendor))
    if format == "json":
        print(json.dumps(rows, indent=2))
        return
    for row in rows:
        state = "available" if row["supported"] else "unsupported here"
        driver = f" (driver {row['driver']})" if row["driver"] else ""
        print(f"{row['vendor']:<10} {state}{driver}" +
              ("" if row["supported"] else ": " + "; ".join(row["reasons"])))


@task(help={"results": "results folder (default: results)", "out": "report folder",
            "compare": "an earlier run's results folder: list what changed per cell"})
@_errors_to_exit
def report(c, results="results", out="reports", compare=None):
    """Write reports/ (matrix.md, results.json, index.html, cells/) from result files only."""
    rep = api.report(results, out, compare)
    print(f"{out}/matrix.md, {out}/results.json, {out}/index.html, {out}/cells/: "
          f"{len(rep.results)} cells")
    if rep.comparison is not None:
        print(rep.comparison.text())
    for problem in rep.problems:
        print(f"warning: {problem}", file=sys.stderr)


@task(iterable=["vendor"], help={
    "vendor": "vendor name (repeatable; default: all)", "matrix": HELP_MATRIX,
    "torch": "the release to check (default: the newest on the index); N-1 is derived",
    "format": "table, json or markdown", "index_url": "index root or simple URL (mirrors)",
    "update": "rewrite the torch axes of matrix.yaml to N and N-1 (comments kept)"})
@_errors_to_exit
def release_check(c, vendor=None, matrix="matrix.yaml", torch=None, format="table",
                  index_url="https://pypi.org", update=False):
    """For torch N and N-1: which vendors and Python versions have a working stack, and why not."""
    print(api.release_check(matrix, torch=torch, index_url=index_url, fmt=format, update=update,
                            vendors=_vendors(vendor)))


@task(iterable=["vendor", "cell", "find_links", "registry_mirror"], help={
    **{k: _BUILD_HELP[k] for k in ("vendor", "cell", "matrix", "all", "ca_bundle", "index_url",
                                   "find_links", "no_host_pip_config", "registry_mirror")},
    "check": "only report fresh/stale/missing per cell; exit 1 when a lock is stale"})
@_errors_to_exit
def lock(c, vendor=None, cell=None, matrix="matrix.yaml", all=False, check=False, ca_bundle=None,
         index_url=None, find_links=None, no_host_pip_config=False, registry_mirror=None):
    """Write hash-pinned locks/<vendor>/<cell>.txt (pip-compile inside each cell's builder)."""
    if check:
        rows = api.lock_status(matrix, _vendors(vendor))
        for cell_id, status, path in rows:
            print(f"{status:>8}  {cell_id}  {path}")
        if any(status == "stale" for _, status, _ in rows):
            raise Exit("stale lock(s): run `invoke lock`", code=EXIT_FAILED)
        return
    options = LockOptions(ca_bundle=ca_bundle, index_url=index_url,
                          find_links=tuple(find_links or ()),
                          use_host_pip_config=not no_host_pip_config,
                          registry_mirrors=api.registry_mirrors(registry_mirror))
    out = api.lock(matrix, _vendors(vendor), cell, all, Console(), options)
    for o in out:
        print(f"{o.status:>9}  {o.cell}  {o.path}" + (f"  ({o.message})" if o.message else ""))
    if any(o.status == "failed" for o in out):
        raise Exit(code=EXIT_FAILED)


@task(help={"matrix": HELP_MATRIX})
@_errors_to_exit
def lint(c, matrix="matrix.yaml"):
    """hadolint every generated Dockerfile and the templates' current output (.hadolint.yaml)."""
    problems = api.lint(matrix)
    for line in problems:
        print(line)
    if problems:
        raise Exit(f"{len(problems)} hadolint problem(s)", code=EXIT_FAILED)
    print("hadolint: no problems")


@task(help={"docker": "also run the tests marked docker (default: yes)", "k": "pytest -k"})
def test(c, docker=True, k=""):
    """Run the test suite: unit tests, then the Docker integration tests."""
    args = [sys.executable, "-m", "pytest"]
    if not docker:
        args += ["-m", "not docker and not network"]
    else:
        args += ["-m", "not network"]
    if k:
        args += ["-k", k]
    code = subprocess.call(args)  # argv list: -k text never reaches a shell
    if code:
        raise Exit(code=code)
