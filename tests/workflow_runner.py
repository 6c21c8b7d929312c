"""Run the shipped workflow's jobs on this machine, in order, as GitHub's runners would: each
job in a fresh export of the committed tree, its ``run:`` steps under ``bash -eo pipefail``
with their ``env:`` (expressions evaluated), ``if:`` conditions, step outputs and
``$GITHUB_OUTPUT``/``$GITHUB_STEP_SUMMARY``; the actions the workflow uses done locally:
checkout (the export), setup-python (a virtual environment), cache restore and save (a folder
keyed like GitHub's cache), upload and download of artifacts (a folder per artifact), the
GitHub Pages artifact (a tar made as the action makes it) and its deployment (unpacked into
``WORK/pages``), and the relay's callback (its payload written, not sent). GitHub Actions
cannot run here (no runner, no ``act``): this checks what the workflow's own commands do, with
a real Docker Engine, a real PostgreSQL and a real registry, while actionlint checks the rest.

    python -m tests.workflow_runner --work /tmp/oota-wf --event schedule \\
        --var OOTA_VENDORS=cpu --var OOTA_REGISTRY=127.0.0.1:5000 \\
        --secret OOTA_HISTORY_URL=postgresql://... --secret OOTA_SIGNING_KEY=@oota.key

Each job's log is ``WORK/logs/<job>.log``; the artifacts are under ``WORK/artifacts``. A test
tool, not part of oota.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "oota.yml"
_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_TOKEN = re.compile(r"\s*(\|\||&&|==|!=|\(|\)|,|!|'(?:[^']|'')*'|[A-Za-z_][\w.\-]*|\d+)")


# -- expressions ---------------------------------------------------------------------------------

class Expression:
    """The part of GitHub's expression language the workflow uses: literals, contexts
    (``a.b.c``), ``== != ! && ||``, parentheses and ``success() always() failure()
    fromJSON() toJSON()``. Values are Python values; a missing property is ''."""

    def __init__(self, text: str, context: dict[str, Any], status: str) -> None:
        self.tokens = [t for t in _TOKEN.findall(text) if t]
        if "".join(self.tokens).replace(" ", "") != re.sub(r"\s", "", text):
            raise ValueError(f"cannot read expression: {text!r}")
        self.context, self.status, self.at = context, status, 0

    def value(self) -> Any:
        found = self._or()
        if self.at != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.at]!r}")
        return found

    def _peek(self) -> str:
        return self.tokens[self.at] if self.at < len(self.tokens) else ""

    def _take(self) -> str:
        self.at += 1
        return self.tokens[self.at - 1]

    def _or(self) -> Any:
        left = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            left = left or right
        return left

    def _and(self) -> Any:
        left = self._compare()
        while self._peek() == "&&":
            self._take()
            right = self._compare()
            left = left and right
        return left

    def _compare(self) -> Any:
        left = self._unary()
        while self._peek() in ("==", "!="):
            op, right = self._take(), self._unary()
            same = str(left).lower() == str(right).lower() if isinstance(left, str) \
                or isinstance(right, str) else left == right
            left = same if op == "==" else not same
        return left

    def _unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not self._unary()
        return self._atom()

    def _atom(self) -> Any:
        token = self._take()
        if token == "(":
            found = self._or()
            self._take()
            return found
        if token.startswith("'"):
            return token[1:-1].replace("''", "'")
        if token.isdigit():
            return int(token)
        if token in ("true", "false"):
            return token == "true"
        if self._peek() == "(":
            return self._call(token)
        found: Any = self.context
        for part in token.split("."):
            found = found.get(part, "") if isinstance(found, dict) else ""
        return found

    def _call(self, name: str) -> Any:
        self._take()
        args = []
        while self._peek() != ")":
            args.append(self._or())
            if self._peek() == ",":
                self._take()
        self._take()
        calls = {"success": lambda: self.status == "success", "always": lambda: True,
                 "failure": lambda: self.status == "failure",
                 "fromJSON": lambda: json.loads(args[0]), "toJSON": lambda: json.dumps(args[0])}
        return calls[name]()


def evaluate(text: str, context: dict[str, Any], status: str = "success") -> Any:
    return Expression(text, context, status).value()


def substitute(text: str, context: dict[str, Any]) -> str:
    def one(match: re.Match[str]) -> str:
        found = evaluate(match.group(1), context)
        return json.dumps(found) if isinstance(found, (dict, list)) else \
            ("" if found is None else str(found).lower() if isinstance(found, bool) else str(found))
    return _EXPR.sub(one, text)


def condition(text: str | None, context: dict[str, Any], status: str) -> bool:
    """A step's or job's ``if:``; without a status function, success() is implied."""
    if text is None:
        return status == "success"
    text = _EXPR.sub(lambda m: m.group(1), str(text))
    implied = not re.search(r"\b(always|failure|success|cancelled)\(", text)
    return bool(evaluate(text, context, status)) and (status == "success" or not implied)


# -- jobs ------------------------------------------------------------------------------------------

@dataclass
class Run:
    work: Path
    event: str
    vars: dict[str, str]
    secrets: dict[str, str]
    inputs: dict[str, Any] = field(default_factory=dict)
    needs: dict[str, dict[str, Any]] = field(default_factory=dict)
    run_id: str = field(default_factory=lambda: str(int(time.time())))

    def context(self, job: str) -> dict[str, Any]:
        return {"github": {"event_name": self.event, "run_id": self.run_id, "job": job,
                           "server_url": "https://github.com", "repository": "lab/oota",
                           "workflow": "oota", "event": {}},
                "vars": self.vars, "secrets": self.secrets, "inputs": self.inputs,
                "needs": self.needs}


def export(folder: Path) -> Path:
    """The committed tree, as actions/checkout gives it."""
    folder.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def python_env(run: Run) -> Path:
    """setup-python: a virtual environment of this interpreter, made once per run."""
    venv = run.work / "python"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return venv / "bin"


def run_job(run: Run, name: str, job: dict[str, Any], matrix: dict[str, Any] | None,
            log: Any) -> dict[str, Any]:
    """One job (one matrix entry); its result and outputs."""
    label = f"{name}-{matrix['cell']}" if matrix else name
    workspace = export(run.work / "jobs" / label)
    context = {**run.context(name), "matrix": matrix or {}, "steps": {}, "job": {"status": ""},
               "env": {}}
    env = {**_env(job.get("env"), context)}
    path = os.environ["PATH"]
    status = "success"
    for step in job["steps"]:
        if not condition(step.get("if"), context, status):
            log.write(f"--- skip: {step.get('name') or step.get('uses')}\n")
            continue
        title = substitute(step.get("name") or step.get("uses", "run"), context)
        log.write(f"--- step: {title}\n")
        log.flush()
        ok, outputs, path = _step(run, step, workspace, context, env, path, log)
        if step.get("id"):
            context["steps"][step["id"]] = {"outputs": outputs,
                                            "outcome": "success" if ok else "failure"}
        if not ok:
            status = "failure"
    outputs = {k: substitute(v, context) for k, v in (job.get("outputs") or {}).items()}
    return {"result": status, "outputs": outputs}


def _env(given: dict[str, Any] | None, context: dict[str, Any]) -> dict[str, str]:
    return {k: substitute(str(v), context) for k, v in (given or {}).items()}


def _step(run: Run, step: dict[str, Any], workspace: Path, context: dict[str, Any],
          env: dict[str, str], path: str, log: Any) -> tuple[bool, dict[str, str], str]:
    uses = str(step.get("uses", ""))
    if uses:
        return _action(run, uses, step, workspace, context, log), {}, \
            (f"{python_env(run)}{os.pathsep}{path}" if "setup-python" in uses else path)
    files = Path(tempfile.mkdtemp(prefix="step-", dir=run.work))
    output, summary = files / "output", files / "summary"
    output.touch()
    step_env = {**os.environ, "PATH": path, **env, **_env(step.get("env"), context),
                "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary),
                "RUNNER_TEMP": str(files), "CI": "true", "GITHUB_ACTIONS": "true"}
    where = workspace / substitute(str(step.get("working-directory", ".")), context)
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                           step["run"]], cwd=where, env=step_env, stdout=log,
                          stderr=subprocess.STDOUT, timeout=6 * 3600)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    if summary.exists():
        shutil.copy(summary, run.work / "logs" / f"summary-{time.time_ns()}.md")
    log.write(f"--- exit {proc.returncode}\n")
    return proc.returncode == 0, outputs, path


def _action(run: Run, uses: str, step: dict[str, Any], workspace: Path,
            context: dict[str, Any], log: Any) -> bool:
    given = {k: substitute(str(v), context) for k, v in (step.get("with") or {}).items()}
    store = run.work / "store"
    if "actions/checkout" in uses or "actions/setup-python" in uses:
        return True
    if "actions/cache/restore" in uses:
        return _restore(store / "cache", given, workspace, log)
    if "actions/cache/save" in uses:
        target = store / "cache" / given["key"]
        if not target.exists():
            shutil.copytree(workspace / given["path"], target)
        return True
    if "upload-artifact" in uses:
        return _upload(store / "artifacts" / given["name"], given, workspace)
    if "download-artifact" in uses:
        pattern = re.compile(given["pattern"].replace("*", ".*") + "$")
        for artifact in sorted((store / "artifacts").iterdir()):
            if pattern.match(artifact.name):
                shutil.copytree(artifact, workspace / given["path"] / artifact.name,
                                dirs_exist_ok=True)
        return True
    if "upload-pages-artifact" in uses:
        return pages_artifact(workspace / given["path"],
                              store / "artifacts" / given.get("name", "github-pages"))
    if "deploy-pages" in uses:
        site = run.work / "pages"
        shutil.rmtree(site, ignore_errors=True)
        site.mkdir()
        archive = store / "artifacts" / "github-pages" / "artifact.tar"
        subprocess.run(["tar", "-x", "-f", str(archive), "-C", str(site)], check=True)
        log.write(f"pages deployed (here: {site})\n")
        return True
    if "cross-repo-ci-relay-callback" in uses:
        (run.work / "callback.json").write_text(json.dumps(given, indent=2))
        log.write(f"relay callback (not sent): {json.dumps(given)}\n")
        return True
    raise ValueError(f"no local stand-in for {uses}")


def pages_artifact(site: Path, target: Path) -> bool:
    """upload-pages-artifact on Linux: ``site`` as ``target/artifact.tar``, made with its own tar
    command (links followed; no .git, no .github, and no other dotfile: it leaves them out)."""
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "--dereference", "--hard-dereference", "--directory", str(site),
                    "-cf", str(target / "artifact.tar"), "--exclude=.git", "--exclude=.github",
                    "--exclude=.[^/]*", "."], check=True)
    return True


def _restore(cache: Path, given: dict[str, str], workspace: Path, log: Any) -> bool:
    keys = [given["key"], *given.get("restore-keys", "").split()]
    entries = sorted(cache.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True) \
        if cache.is_dir() else []
    for key in keys:
        found = next((e for e in entries if e.name == key or e.name.startswith(key)), None)
        if found is not None:
            shutil.copytree(found, workspace / given["path"], dirs_exist_ok=True)
            log.write(f"cache restored from {found.name}\n")
            return True
    log.write("cache: nothing to restore\n")
    return True


def _upload(target: Path, given: dict[str, str], workspace: Path) -> bool:
    paths = [p for p in given["path"].split("\n") if p.strip()]
    if target.exists() and given.get("overwrite") == "true":
        shutil.rmtree(target)
    for item in paths:
        source = workspace / item.strip()
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        elif source.is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target / source.name)
    return True


def run_action(run: Run, inputs: dict[str, str], *, action: Path = REPO / "action.yml",
               stand_ins: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """The composite action ``action`` as a workflow's ``uses:`` step runs it, in a fresh export
    of the committed tree (which is also ``github.action_path``): its ``inputs`` with their
    defaults, its steps in turn (a step after a failed one is skipped, as GitHub skips it),
    its outputs. ``stand_ins``: steps, by id, that are not run, with the outputs they give
    (the install step, whose ``pip install`` of oota took 116 s here, 2026-11-28; the wheel's
    install is tested on its own, tests/unit/test_installable.py)."""
    doc = yaml.safe_load(action.read_text())
    missing = [n for n, spec in doc["inputs"].items() if spec.get("required") and n not in inputs]
    if missing:
        raise ValueError(f"{action}: required inputs not given: {missing}")
    given = {n: str(inputs.get(n, spec.get("default", ""))) for n, spec in doc["inputs"].items()}
    (run.work / "logs").mkdir(parents=True, exist_ok=True)
    workspace = export(run.work / "jobs" / "action")
    context = {**run.context("action"), "inputs": given, "steps": {}, "env": {}}
    context["github"] = {**context["github"], "action_path": str(workspace)}
    status, path = "success", os.environ["PATH"]
    with (run.work / "logs" / "action.log").open("a", encoding="utf-8") as log:
        for step in doc["runs"]["steps"]:
            sid = step.get("id")
            if sid in (stand_ins or {}):
                context["steps"][sid] = {"outputs": (stand_ins or {})[sid], "outcome": "success"}
                continue
            if not condition(step.get("if"), context, status):
                continue
            ok, outputs, path = _step(run, step, workspace, context, {}, path, log)
            if sid:
                context["steps"][sid] = {"outputs": outputs,
                                         "outcome": "success" if ok else "failure"}
            status = status if ok else "failure"
    outputs = {k: substitute(str(v["value"]), context) for k, v in doc["outputs"].items()}
    return {"result": status, "outputs": outputs, "workspace": workspace}


def run_workflow(run: Run, only: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Every job, in the order of their needs; each matrix entry in turn (this machine is the
    runner of every label)."""
    doc = yaml.safe_load(WORKFLOW.read_text())
    (run.work / "logs").mkdir(parents=True, exist_ok=True)
    for name, job in doc["jobs"].items():
        if only and name not in only:
            continue
        context = run.context(name)
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        failed = any(run.needs.get(n, {}).get("result") != "success" for n in needs)
        if not condition(job.get("if"), context, "failure" if failed else "success"):
            run.needs[name] = {"result": "skipped", "outputs": {}}
            continue
        with (run.work / "logs" / f"{name}.log").open("a", encoding="utf-8") as log:
            run.needs[name] = _fan_out(run, name, job, context, log)
        print(f"{name}: {run.needs[name]['result']}", flush=True)
    return run.needs


def _fan_out(run: Run, name: str, job: dict[str, Any], context: dict[str, Any],
             log: Any) -> dict[str, Any]:
    strategy = (job.get("strategy") or {}).get("matrix")
    if strategy is None:
        return run_job(run, name, job, None, log)
    entries = json.loads(substitute(strategy, context))["include"] \
        if isinstance(strategy, str) else strategy["include"]
    results = [run_job(run, name, job, entry, log) for entry in entries]
    return {"result": "success" if all(r["result"] == "success" for r in results)
            else "failure", "outputs": {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--event", default="schedule")
    parser.add_argument("--var", action="append", default=[])
    parser.add_argument("--secret", action="append", default=[], help="NAME=VALUE or NAME=@FILE")
    parser.add_argument("--job", action="append", help="only these jobs")
    args = parser.parse_args()

    def pairs(items: list[str]) -> dict[str, str]:
        found = dict(item.split("=", 1) for item in items)
        return {k: Path(v[1:]).read_text() if v.startswith("@") else v for k, v in found.items()}

    run = Run(work=args.work, event=args.event, vars=pairs(args.var),
              secrets=pairs(args.secret))
    results = run_workflow(run, args.job)
    sys.exit(0 if all(r["result"] in ("success", "skipped") for r in results.values()) else 1)


if __name__ == "__main__":
    main()
