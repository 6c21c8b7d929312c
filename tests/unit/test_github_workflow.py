"""GitHub Actions as the scale-out engine: `invoke matrix --format github` against what the
shipped workflow (.github/workflows/oota.yml) reads, the workflow's safety rules, actionlint,
and the vendor.yaml ``ci:`` section behind the runner labels.

The matrix is produced by the real command (``python -m oota``), as the workflow's plan job
runs it; the workflow is read as YAML, so a key the workflow starts to read that the matrix
does not give fails here, not on a runner.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from oota import github
from oota.config.vendors import HOSTED_RUNNER, SCHEMA_FILE, discover, load_vendor
from oota.config.yamlsrc import load_yaml
from oota.errors import EXIT_BAD_INPUT, InputError, MatrixError
from tests import forkcli

REPO = Path(__file__).resolve().parents[2]
# The page that says how each action pin was checked (the docs' GitHub Actions guide).
PINS_PAGE = REPO / "docs" / "guides" / "github-actions.md"
WORKFLOWS = REPO / ".github" / "workflows"
WORKFLOW = WORKFLOWS / "oota.yml"
SHIPPED = discover(REPO / "vendors")
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)


def oota(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DOCKER_HOST": "unix:///nonexistent"}
    return forkcli.run([sys.executable, "-m", "oota", *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=120)


def github_matrix(*args: str, cwd: Path = REPO) -> dict[str, Any]:
    proc = oota("matrix", "--format", "github", *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1, "one line: $GITHUB_OUTPUT takes name=value lines"
    parsed: dict[str, Any] = json.loads(proc.stdout)
    return parsed


def workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def triggers(doc: dict[Any, Any]) -> dict[str, Any]:
    # YAML 1.1 (PyYAML) reads the key `on` as the boolean true.
    found: dict[str, Any] = doc["on"] if "on" in doc else doc[True]
    return found


def strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def matrix_keys_read(job: dict[str, Any]) -> set[str]:
    """Every ``matrix.<key>`` (or ``matrix['<key>']``) the job's expressions read."""
    keys: set[str] = set()
    for text in strings(job):
        for expression in EXPRESSION.findall(text):
            keys.update(re.findall(r"\bmatrix\.([A-Za-z_][\w-]*)", expression))
            keys.update(re.findall(r"\bmatrix\[['\"]([^'\"]+)['\"]\]", expression))
    return keys


def steps(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, job in doc["jobs"].items():
        for step in job.get("steps", ()):
            yield name, step


# -- the matrix the workflow fans out -------------------------------------------------------
def test_every_entry_has_every_key_the_cell_job_reads() -> None:
    cell_job = workflow()["jobs"]["cell"]
    read = matrix_keys_read(cell_job)
    assert {"cell", "vendor", "runs-on", "name"} <= read
    assert read <= set(github.KEYS), "the workflow reads a key the matrix does not promise"
    for args in ((), ("--all",)):
        entries = github_matrix(*args)["include"]
        assert entries
        for entry in entries:
            assert read <= set(entry), entry


def test_runs_on_is_the_vendors_labels_and_ids_are_unique() -> None:
    entries = github_matrix("--all")["include"]
    ids = [e["cell"] for e in entries]
    assert len(ids) == len(set(ids))
    assert {"cpu", "reference", "cuda", "gaudi"} <= {e["vendor"] for e in entries} <= set(SHIPPED)
    for entry in entries:
        labels = entry["runs-on"]
        assert isinstance(labels, list) and labels
        assert all(isinstance(label, str) and label for label in labels)
        platform = "linux/arm64" if entry["cell"].endswith("-arm64") else "linux/amd64"
        assert tuple(labels) == load_vendor(SHIPPED[entry["vendor"]]).ci.labels_for(platform)
        assert entry["cell"].startswith(entry["vendor"] + "-")
        assert entry["name"].startswith(entry["vendor"] + " / torch ")
    hosted = {e["vendor"] for e in entries if e["runs-on"] == list(HOSTED_RUNNER)}
    assert {"cpu", "reference"} <= hosted
    assert all(e["runs-on"][0] == "self-hosted" for e in entries if e["vendor"] not in hosted)


def test_without_all_the_matrix_is_what_build_picks() -> None:
    defaults = github_matrix()["include"]
    table = json.loads(oota("matrix", "--format", "json").stdout)
    assert [e["cell"] for e in defaults] == [row["id"] for row in table if row["default"]]


def test_vendor_filtering() -> None:
    gaudi = github_matrix("--vendor", "gaudi", "--all")["include"]
    assert gaudi and {e["vendor"] for e in gaudi} == {"gaudi"}
    assert len(gaudi) > len(github_matrix("--vendor", "gaudi")["include"])
    both = github_matrix("--vendor", "cpu,gaudi")["include"]
    assert {e["vendor"] for e in both} == {"cpu", "gaudi"}


def test_an_empty_selection_is_valid_and_the_workflow_skips_the_fan_out(tmp_path: Path) -> None:
    for name in ("vendors", "schema", "templates", "verify", "locks", "tasks.py"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name)
        else:
            shutil.copy2(source, tmp_path / name)
    text = (REPO / "matrix.yaml").read_text()
    (tmp_path / "matrix.yaml").write_text(text + (
        "  none:\n    os: [debian12]\n    python: [\"3.11\"]\n    torch: [\"2.13.0\"]\n"
        "    exclude:\n      - {os: debian12}\n"))
    shutil.copytree(SHIPPED["cpu"], tmp_path / "vendors" / "none")
    vendor_yaml = tmp_path / "vendors" / "none" / "vendor.yaml"
    vendor_yaml.write_text(vendor_yaml.read_text().replace("name: cpu\n", "name: none\n"))
    proc = oota("matrix", "--format", "github", "--vendor", "none", "--all", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"include": []}
    jobs = workflow()["jobs"]
    assert "needs.plan.outputs.cells != '0'" in jobs["cell"]["if"]
    assert "needs.plan.outputs.cells != '0'" in jobs["report"]["if"]
    plan = next(s for s in jobs["plan"]["steps"] if s.get("id") == "plan")
    assert 'len(json.load(sys.stdin)["include"])' in plan["run"]


def test_more_cells_than_github_starts_is_one_clear_error() -> None:
    job = github.Job(cell="c", vendor="v", name="n", runs_on=("ubuntu-latest",), torch="2.13.0",
                     python="3.11", os="debian12", fingerprint="sha256:f")
    assert json.loads(github.matrix_json([job] * github.MAX_JOBS))["include"][0] == {
        "cell": "c", "vendor": "v", "name": "n", "runs-on": ["ubuntu-latest"],
        "torch": "2.13.0", "python": "3.11", "os": "debian12", "fingerprint": "sha256:f"}
    with pytest.raises(InputError, match=r"257 cells are more jobs than GitHub starts from one "
                       r"matrix \(256\); select fewer with --vendor"):
        github.matrix_json([job] * (github.MAX_JOBS + 1))


def test_format_and_all_flags_are_checked() -> None:
    proc = oota("matrix", "--format", "gihub")
    assert proc.returncode == EXIT_BAD_INPUT
    assert "did you mean 'github'?" in proc.stderr
    proc = oota("matrix", "--all")
    assert proc.returncode == EXIT_BAD_INPUT
    assert "--all applies only with --format github" in proc.stderr


# -- the workflow ---------------------------------------------------------------------------
def test_the_cell_job_fans_out_over_the_plan() -> None:
    doc = workflow()
    plan, cell, report = (doc["jobs"][name] for name in ("plan", "cell", "report"))
    assert plan["runs-on"] == "ubuntu-latest"
    assert set(plan["outputs"]) >= {"matrix", "cells"}
    assert cell["needs"] == "plan"
    assert cell["strategy"]["fail-fast"] is False
    assert cell["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert cell["runs-on"] == "${{ matrix.runs-on }}"
    build = next(s["run"] for s in cell["steps"] if "oota.sh build" in s.get("run", ""))
    assert '--vendor="$VENDOR" --cell="$CELL" --results results' in build
    upload = next(s for s in cell["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["if"] == "always()"
    assert upload["with"]["name"] == "results-${{ matrix.cell }}"
    assert "always()" in report["if"] and set(report["needs"]) == {"plan", "cell"}
    download = next(s for s in report["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"] == {"pattern": "results-*", "path": "artifacts"}
    merge = next(s["run"] for s in report["steps"] if "oota report" in s.get("run", ""))
    assert 'args+=(--merge "${dir%/}")' in merge and '"${args[@]}"' in merge
    assert "--format crcr" in merge


def test_the_workflow_triggers() -> None:
    on = triggers(workflow())
    assert set(on) == {"workflow_dispatch", "schedule", "repository_dispatch"}
    assert set(on["workflow_dispatch"]["inputs"]) == {"vendor", "all"}
    assert on["schedule"][0]["cron"]
    # The relay's event types (pytorch/test-infra cross_repo_ci_relay, RFC-0050, and
    # pytorch-fdn/oota's relay).
    assert {"pull_request", "push", "pytorch-pr-trigger", "pytorch-pr-event"} \
        <= set(on["repository_dispatch"]["types"])


def _checked_pins() -> dict[str, tuple[str, str]]:
    """The docs' table of action pins: commit -> (action, tag or date), each checked in the
    action's own repository."""
    rows = re.findall(r"^\| ([\w./ (),-]+) \| `([0-9a-f]{40})` \| ([^|]+) \|",
                      PINS_PAGE.read_text(encoding="utf-8"), re.MULTILINE)
    return {sha: (action, tag.strip()) for action, sha, tag in rows}


def test_actions_are_pinned_to_commits_that_were_checked() -> None:
    checked = _checked_pins()
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text().splitlines():
            match = re.search(r"uses:\s*(\S+)", line)
            if match and not match.group(1).startswith("./"):
                assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", match.group(1)), line
                # The release; for an action published without releases, its branch and the
                # day of the commit.
                comment = re.search(r"# (v\d+\.\d+\.\d+|main, \d{4}-\d{2}-\d{2}) ?(\(no "
                                    r"releases\))?$", line)
                assert comment, f"{line}: name the version, or the branch and day"
                sha = match.group(1).rsplit("@", 1)[1]
                assert sha in checked, f"{line}: not in {PINS_PAGE.name}'s table of checked pins"
                assert checked[sha][1] == comment.group(1), (line, checked[sha])


def test_least_privilege_and_no_event_data_in_scripts() -> None:
    for path in sorted(WORKFLOWS.glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        assert doc["permissions"] == {"contents": "read"}, path
        assert doc.get("concurrency"), path
        for name, job in doc["jobs"].items():
            assert job.get("timeout-minutes"), f"{path.name}: job {name} has no timeout"
            # Two jobs may mint an OIDC token: the relay's callback, and pages, which alone may
            # also write, to GitHub Pages; no job may do more.
            allowed = {"callback": {"contents": "read", "id-token": "write"},
                       "pages": {"pages": "write", "id-token": "write"}}.get(name, {})
            assert "permissions" not in job or all(
                value == "read" or allowed.get(key) == value
                for key, value in job["permissions"].items()), (name, job["permissions"])
        for name, step in steps(doc):
            for expression in EXPRESSION.findall(step.get("run", "")):
                assert "github.event" not in expression and "inputs." not in expression \
                    and "secrets." not in expression, \
                    f"{path.name} {name}: pass {expression.strip()} through env:"
            if "actions/checkout" in step.get("uses", ""):
                assert step["with"]["persist-credentials"] is False


def test_the_upstream_values_are_checked_before_use() -> None:
    plan = workflow()["jobs"]["plan"]
    upstream = next(s for s in plan["steps"] if s.get("id") == "upstream")
    assert set(upstream["env"]) == {"PR", "SHA", "REPO"}
    for name in ("PR", "SHA", "REPO"):
        assert f'[[ "${name}" =~ ^' in upstream["run"]


# -- the workflow's scripts, run as a runner runs them (bash -e) -----------------------------
def step(job: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in workflow()["jobs"][job]["steps"]
                                 if name in (s.get("id"), s.get("name")))
    return found


def run_step(job: str, name: str, cwd: Path, env: dict[str, str],
             bin_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The step's script under ``bash -e`` in ``cwd``, with ``env`` as its step env and
    ``bin_dir`` first on PATH."""
    script = step(job, name)["run"]
    assert "${{" not in script, "values reach scripts through env:, never as text"
    path = os.environ["PATH"] if bin_dir is None else f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, capture_output=True,
                          text=True, env={"PATH": path, **env}, timeout=120)


def shim(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
    (bin_dir / name).chmod(0o755)


def outputs(file: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in file.read_text().splitlines())


def test_the_merge_passes_each_artifact_folder_as_one_argument(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    shim(bin_dir, "oota", 'printf "%s\\n" "$@"')
    for name in ("results-cpu-torch2.13.0-py3.11-debian12", "results-a b; touch pwned",
                 "not-results"):
        (tmp_path / "artifacts" / name).mkdir(parents=True)
    proc = run_step("report", "Merge them into one report", tmp_path, {}, bin_dir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "report", "--merge", "artifacts/results-a b; touch pwned",
        "--merge", "artifacts/results-cpu-torch2.13.0-py3.11-debian12",
        "--format", "crcr", "--out", "reports"]
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(("vendors", "everything"), [("", "false"), ("cpu,gaudi", "true"),
                                                    ("gaudi", "")],
                         ids=["nightly", "by-hand-all", "relayed"])
def test_the_plan_step_hands_the_matrix_to_the_cell_job(
        tmp_path: Path, vendors: str, everything: str) -> None:
    # The real oota, as the plan job installs it; `python` as setup-python provides it.
    bin_dir = tmp_path / "bin"
    shim(bin_dir, "oota", f'PYTHONPATH="{REPO}" exec "{sys.executable}" -m oota "$@"')
    shim(bin_dir, "python", f'exec "{sys.executable}" "$@"')
    out = tmp_path / "output"
    proc = run_step("plan", "plan", REPO, {"VENDORS": vendors, "ALL": everything,
                                           "GITHUB_OUTPUT": str(out)}, bin_dir)
    assert proc.returncode == 0, proc.stderr
    found = outputs(out)
    args = (["--vendor", vendors] if vendors else []) + (["--all"] if everything == "true"
                                                        else [])
    expected = github_matrix(*args)
    assert json.loads(found["matrix"]) == expected
    assert found["cells"] == str(len(expected["include"])) != "0"


def test_the_plan_step_fails_on_a_misspelled_vendor(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    shim(bin_dir, "oota", f'PYTHONPATH="{REPO}" exec "{sys.executable}" -m oota "$@"')
    proc = run_step("plan", "plan", REPO, {"VENDORS": "guadi", "ALL": "false",
                                           "GITHUB_OUTPUT": str(tmp_path / "out")}, bin_dir)
    assert proc.returncode == EXIT_BAD_INPUT
    assert "did you mean 'gaudi'?" in proc.stderr


def test_the_merge_fails_when_no_cell_uploaded_results(tmp_path: Path) -> None:
    (tmp_path / "artifacts").mkdir()
    proc = run_step("report", "Merge them into one report", tmp_path, {})
    assert proc.returncode == 1
    assert "::error::no cell uploaded results" in proc.stdout


@pytest.mark.parametrize(("given", "kept"), [
    ({"PR": "180352", "SHA": "0123456789abcdef0123456789abcdef01234567",
      "REPO": "pytorch/pytorch"},
     {"pr": "180352", "sha": "0123456789abcdef0123456789abcdef01234567",
      "repo": "pytorch/pytorch"}),
    ({"PR": "12; touch pwned", "SHA": "$(touch pwned)", "REPO": "a/b\nsha=evil"},
     {"pr": "", "sha": "", "repo": ""}),
    ({"PR": "", "SHA": "", "REPO": ""}, {"pr": "", "sha": "", "repo": ""}),
], ids=["relayed-pr", "hostile", "by-hand"])
def test_the_upstream_event_keeps_only_well_shaped_values(
        tmp_path: Path, given: dict[str, str], kept: dict[str, str]) -> None:
    out = tmp_path / "output"
    proc = run_step("plan", "upstream", tmp_path, {**given, "GITHUB_OUTPUT": str(out)})
    assert proc.returncode == 0, proc.stderr
    assert outputs(out) == kept
    assert not (tmp_path / "pwned").exists()


def test_the_pr_comment_fits_githubs_limit(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    # Two-byte characters, so a cut by bytes can land inside one.
    (tmp_path / "reports" / "matrix.md").write_text("| cell | é |\n" * 20000, encoding="utf-8")
    env = {"PR": "7", "SHA": "", "REPO": "pytorch/pytorch", "LIMIT": "60000",
           "RUN_URL": "https://github.com/lab/oota/actions/runs/1"}
    proc = run_step("report", "Write the pull request comment", tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    body = (tmp_path / "pr-comment" / "comment.md").read_bytes().decode("utf-8")
    assert len(body) < 65536
    assert body.startswith("oota results for pytorch/pytorch#7 ([run](https://github.com/")
    assert body.rstrip().endswith("(truncated to fit a comment: the whole report is in the "
                                  "run's \"report\" artifact)")
    assert json.loads((tmp_path / "pr-comment" / "pr.json").read_text()) == \
        {"repo": "pytorch/pytorch", "pr": 7, "sha": ""}


def test_a_long_summary_is_cut_at_a_whole_line(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "matrix.md").write_text("| é | passed |\n" * 100, encoding="utf-8")
    summary = tmp_path / "summary.md"
    proc = run_step("report", "Publish the matrix as the run's summary", tmp_path,
                    {"LIMIT": "100", "GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 0, proc.stderr
    lines = summary.read_text(encoding="utf-8").splitlines()
    assert lines[:-2] == ["| é | passed |"] * 6 and lines[-2] == ""
    assert lines[-1] == '(truncated: the whole report is in the "report" artifact)'


def test_a_short_report_is_the_whole_comment(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "matrix.md").write_text("# oota\n\nall passed\n")
    env = {"PR": "7", "SHA": "0" * 40, "REPO": "pytorch/pytorch", "LIMIT": "60000",
           "RUN_URL": "https://github.com/lab/oota/actions/runs/1"}
    proc = run_step("report", "Write the pull request comment", tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    body = (tmp_path / "pr-comment" / "comment.md").read_text()
    assert body.endswith("\n\n# oota\n\nall passed\n") and "truncated" not in body
    assert f"at {'0' * 40}" in body


def actionlint() -> str | None:
    """The actionlint of this environment (the test extra installs it beside python)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return shutil.which("actionlint", path=path)


def test_actionlint_passes_on_the_shipped_workflows() -> None:
    binary = actionlint()
    if binary is None:
        pytest.skip("actionlint is not installed (the test extra installs it; .ci/run also "
                    "runs it directly)")
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(binary).parent),
                                                  os.environ.get("PATH", "")])}
    proc = subprocess.run([binary, *sorted(str(p) for p in WORKFLOWS.glob("*.yml"))],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- vendor.yaml ci: ------------------------------------------------------------------------
VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
GAUDI_CI = "runs-on: [self-hosted, linux, x64, gaudi]"

# (replacement of gaudi's ci.runs-on line, the problem after file:line:col, whether the
# published schema alone rejects it)
BAD_CI = {
    "empty": ("runs-on: []", "ci.runs-on: must not be empty; give at least one entry", True),
    "a-string": ("runs-on: gaudi", "ci.runs-on: expected a list of strings, got a string; "
                 "write it as a list: [gaudi]", True),
    "label-with-space": ("runs-on: [self hosted, gaudi]",
                         "ci.runs-on[0]: 'self hosted' is not a runner label", True),
    "expression": ("runs-on: ['${{ github.event.x }}']", "ci.runs-on[0]: '${{ github.event.x "
                   "}}' is not a runner label", True),
    "repeated": ("runs-on: [linux, gaudi, linux]", "ci.runs-on: lists 'linux' more than once",
                 True),
    "repeated-in-another-case": ("runs-on: [linux, Linux]", "ci.runs-on[1]: 'Linux' is the "
                                 "label 'linux' again (GitHub compares runner labels without "
                                 "regard to case)", False),
    "key-typo": ("runs_on: [gaudi]", "ci.runs_on: unknown key 'runs_on'; did you mean "
                 "'runs-on'?", True),
    "a-number": ("runs-on: [self-hosted, 42]", "ci.runs-on[1]: expected a string, got a whole "
                 "number", True),
}


def gaudi_with(tmp_path: Path, line: str) -> Path:
    folder = tmp_path / "vendors" / "gaudi"
    shutil.copytree(SHIPPED["gaudi"], folder)
    file = folder / "vendor.yaml"
    text = file.read_text()
    assert text.count(GAUDI_CI) == 1
    file.write_text(text.replace(GAUDI_CI, line))
    return folder


@pytest.mark.parametrize("case", list(BAD_CI))
def test_a_bad_runner_label_is_one_located_problem(tmp_path: Path, case: str) -> None:
    line, expected, by_schema = BAD_CI[case]
    folder = gaudi_with(tmp_path, line)
    with pytest.raises(MatrixError) as info:
        load_vendor(folder, tmp_path)
    assert info.value.exit_code == EXIT_BAD_INPUT
    problems = info.value.problems
    assert len(problems) == 1, problems
    assert re.match(r"vendors/gaudi/vendor\.yaml:\d+:\d+: " + re.escape(expected), problems[0]), \
        problems[0]
    assert bool(list(VALIDATOR.iter_errors(load_yaml(folder / "vendor.yaml").data))) \
        == by_schema


def test_a_vendor_without_ci_runs_on_hosted_runners(tmp_path: Path) -> None:
    folder = gaudi_with(tmp_path, "")
    file = folder / "vendor.yaml"
    file.write_text(file.read_text().replace("\nci:\n", "\n"))
    assert load_vendor(folder, tmp_path).ci.runs_on == HOSTED_RUNNER == ("ubuntu-latest",)


def test_ci_without_runs_on_is_refused(tmp_path: Path) -> None:
    folder = gaudi_with(tmp_path, "")
    with pytest.raises(MatrixError) as info:
        load_vendor(folder, tmp_path)
    assert any("ci: expected a mapping, got empty" in p for p in info.value.problems), \
        info.value.problems


# -- the daily loop: reuse, publish, history, callback ---------------------------------------
def test_a_cells_results_are_kept_by_its_fingerprint_and_history_only_in_the_report() -> None:
    doc = workflow()
    cell, report = doc["jobs"]["cell"], doc["jobs"]["report"]
    restore = step("cell", "Restore the cell's last results")
    assert restore["with"]["path"] == "results/${{ matrix.cell }}"
    assert "${{ matrix.fingerprint }}" in restore["with"]["key"]
    assert restore["with"]["restore-keys"].endswith("${{ matrix.fingerprint }}-")
    assert step("cell", "Keep the results for the next run")["with"]["key"] == \
        restore["with"]["key"]
    assert cell["env"] == {"OOTA_SETUP": "build"}   # the cell's runner gets no test tools
    build = next(s["run"] for s in cell["steps"] if "oota.sh build" in s.get("run", ""))
    assert "--no-history" in build
    assert report["env"] == {"OOTA_HISTORY": "${{ secrets.OOTA_HISTORY_URL }}"}
    install = step("report", "Install oota")["run"]
    assert install.endswith("install --disable-pip-version-check -e .")   # no test extra
    hud = step("report", "Upload the HUD and the digest")
    assert hud["with"]["name"] == "hud" and "reports/digest.md" in hud["with"]["path"]
    publish = step("cell", "Publish the verified image")
    assert "github.event_name != 'repository_dispatch'" in publish["if"]
    assert "success()" in publish["if"] and "vars.OOTA_REGISTRY != ''" in publish["if"]


def test_the_publish_step_hands_the_key_over_in_a_file_only_its_user_reads(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    shim(tmp_path, "oota.sh", f'for a in "$@"; do echo "$a"; done >"{seen}"; '
         f'key=$(sed -n "/^--key$/{{n;p}}" "{seen}"); stat -c %a "$key" >>"{seen}"; '
         f'head -1 "$key" >>"{seen}"')
    env = {"VENDOR": "cpu", "CELL": "cpu-x", "REGISTRY": "registry.lab:5000",
           "SIGNING_KEY": "-----BEGIN ENCRYPTED PRIVATE KEY-----\nabc\n-----END...",
           "OOTA_SIGNING_PASSWORD": "pw", "REGISTRY_AUTH": '{"username": "u"}'}
    proc = run_step("cell", "Publish the verified image", tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    args = seen.read_text().splitlines()
    assert args[:8] == ["publish", "--vendor=cpu", "--cell=cpu-x", "--results", "results",
                        "--registry", "registry.lab:5000", "--key"]
    assert args[-2:] == ["600", "-----BEGIN ENCRYPTED PRIVATE KEY-----"]
    assert "--registry-auth" in args and "pw" not in args
    key = Path(args[8])
    assert not key.exists() and not key.parent.exists()   # removed at the end
    unsigned = run_step("cell", "Publish the verified image", tmp_path,
                        {**env, "SIGNING_KEY": "", "REGISTRY_AUTH": ""})
    assert "::warning::no OOTA_SIGNING_KEY secret: cpu-x is published unsigned" \
        in unsigned.stdout
    assert "--key" not in seen.read_text().split()


def test_the_conclusion_for_the_relay_comes_from_crcr_json(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "crcr.json").write_text(json.dumps({"workflow": {
        "conclusion": "failure", "test_results": {"passed": 3, "failed": 1, "skipped": 0,
                                                  "total": 4}}}))
    out = tmp_path / "output"
    shim(tmp_path / "bin", "python", f'exec "{sys.executable}" "$@"')
    proc = run_step("report", "verdict", tmp_path, {"GITHUB_OUTPUT": str(out)},
                    tmp_path / "bin")
    assert proc.returncode == 0, proc.stderr
    assert outputs(out) == {"conclusion": "failure",
                            "test-results": '{"passed":3,"failed":1,"skipped":0,"total":4}'}
    # With the failed tests and the triage verdict crcr.json holds, both reach the callback.
    detail = [{"name": "test_op_matches_cpu[tanh-float32]", "classname": "test_ops.py",
               "message": "differs from the CPU"}]
    verdict = {"schema_version": 1, "category": "backend", "confidence": "medium",
               "summary": "tanh (float32) fails since the extension moved"}
    (tmp_path / "reports" / "crcr.json").write_text(json.dumps({"workflow": {
        "conclusion": "failure", "test_results": {"passed": 3, "failed": 1, "skipped": 0,
                                                  "total": 4},
        "failed_tests_detail": detail, "triage_verdict": verdict}}))
    out.unlink()
    proc = run_step("report", "verdict", tmp_path, {"GITHUB_OUTPUT": str(out)},
                    tmp_path / "bin")
    assert proc.returncode == 0, proc.stderr
    found = outputs(out)
    assert json.loads(found["failed-tests-detail"]) == detail
    assert json.loads(found["triage-verdict"]) == verdict
    callback = workflow()["jobs"]["callback"]
    assert "vars.OOTA_RELAY_CALLBACK == 'true'" in callback["if"]
    assert callback["permissions"] == {"contents": "read", "id-token": "write"}
    relay = callback["steps"][0]
    assert relay["with"]["conclusion"] == "${{ needs.report.outputs.conclusion }}"
    assert relay["with"]["failed-tests-detail"] == \
        "${{ needs.report.outputs.failed-tests-detail }}"
    assert relay["with"]["triage-verdict"] == "${{ needs.report.outputs.triage-verdict }}"


def test_the_comment_is_posted_only_with_a_token_that_may(tmp_path: Path) -> None:
    (tmp_path / "pr-comment").mkdir()
    (tmp_path / "pr-comment" / "comment.md").write_text("oota results\n")
    shim(tmp_path / "bin", "gh", f'echo "$@" >"{tmp_path / "posted"}"')
    env = {"PR": "7", "REPO": "pytorch/pytorch"}
    proc = run_step("report", "Post the pull request comment", tmp_path,
                    {**env, "GH_TOKEN": ""}, tmp_path / "bin")
    assert proc.returncode == 0 and "no OOTA_COMMENT_TOKEN secret" in proc.stdout
    assert not (tmp_path / "posted").exists()
    proc = run_step("report", "Post the pull request comment", tmp_path,
                    {**env, "GH_TOKEN": "t0ken"}, tmp_path / "bin")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "posted").read_text().split() == [
        "api", "repos/pytorch/pytorch/issues/7/comments", "-F", "body=@pr-comment/comment.md",
        "--silent"]


def test_the_local_runner_reads_every_expression_of_the_workflow() -> None:
    """tests/workflow_runner.py runs the jobs here (docs/guides/github-actions.md); every
    condition and value it will meet must parse, and mean what GitHub means."""
    from tests import workflow_runner as runner

    context = {**runner.Run(work=Path("."), event="schedule", vars={"OOTA_REGISTRY": "r:5"},
                            secrets={}).context("cell"),
               "matrix": {"cell": "c", "fingerprint": "sha256:f", "runs-on": ["x"]},
               "steps": {}, "needs": {"plan": {"outputs": {"cells": "1", "pr": ""},
                                               "result": "success"}}}
    doc = workflow()
    for job in doc["jobs"].values():
        runner.condition(job.get("if"), context, "success")
        for item in job["steps"]:
            runner.condition(item.get("if"), context, "success")
            for text in strings(item):
                runner.substitute(text, context)
    publish = step("cell", "Publish the verified image")["if"]
    assert runner.condition(publish, context, "success")
    assert not runner.condition(publish, context, "failure")
    assert not runner.condition(publish, {**context, "github": {"event_name":
                                                                "repository_dispatch"}},
                                "success")
    assert runner.condition(doc["jobs"]["report"]["if"], context, "failure")  # always()
