"""The public site of the nightly run (.github/workflows/oota.yml: the report job's "Build the
public site" step, then the pages job): the docs at its root and the run's report under
report/, one static site. The workflow's own steps are run here as a runner runs them (the
report merged by the real oota, the site built by the real mkdocs), the Pages artifact made
as upload-pages-artifact makes it (tests/workflow_runner.py), and its tree read back: every
page it should hold, nothing the artifact would drop, and no secret of the job in it."""

from __future__ import annotations

import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import workflow_runner as runner
from tests.conftest import REPO
from tests.unit.test_github_workflow import run_step, shim, workflow
from tests.unit.test_report import sample_results, write_results

MKDOCS = Path(sys.executable).parent / "mkdocs"
CANARY = "canary-Pw-5e0d2a"
pytestmark = pytest.mark.skipif(
    not MKDOCS.exists(), reason="mkdocs is not installed (the docs extra, which the test extra "
                                "includes, installs it)")


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout's files the report job reads, the cells' results as their artifacts, and
    shims: the real oota; `python -m pip` a no-op (the docs extra is installed here)."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("matrix.yaml", "history-policy.yaml", "mkdocs.yml"):
        shutil.copy(REPO / name, work / name)
    for name in ("vendors", "docs"):
        shutil.copytree(REPO / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
    for result in sample_results():
        write_results(work / "artifacts" / f"results-{result['cell']['id']}", [result])
    bin_dir = tmp_path / "bin"
    shim(bin_dir, "oota", f'PYTHONPATH="{REPO}" exec "{sys.executable}" -m oota "$@"')
    shim(bin_dir, "python", f'[ "$1 $2" = "-m pip" ] && exit 0; exec "{sys.executable}" "$@"')
    shim(bin_dir, "mkdocs", f'exec "{MKDOCS}" "$@"')
    return work, bin_dir


def _site(tmp_path: Path, env: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """The report job's steps up to the site, in order; the site step's outputs."""
    work, bin_dir = _workspace(tmp_path)
    merged = run_step("report", "Merge them into one report", work, env, bin_dir)
    assert (work / "reports" / "index.html").is_file(), merged.stderr
    digest = run_step("report", "Write the digest", work, env, bin_dir)
    assert digest.returncode == 0, digest.stderr
    output = tmp_path / "output"
    built = run_step("report", "site", work, {**env, "GITHUB_OUTPUT": str(output)}, bin_dir)
    assert built.returncode == 0, built.stdout + built.stderr
    assert CANARY not in merged.stdout + merged.stderr + built.stdout + built.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return work, outputs


def _artifact(work: Path, tmp_path: Path) -> dict[str, bytes]:
    """The Pages artifact as upload-pages-artifact makes it: member name -> content."""
    assert runner.pages_artifact(work / "_site", tmp_path / "artifact")
    with tarfile.open(tmp_path / "artifact" / "artifact.tar") as tar:
        return {m.name.removeprefix("./"): tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile()}


def test_the_site_holds_the_docs_and_the_report_under_its_own_path(tmp_path: Path) -> None:
    work, outputs = _site(tmp_path, {})   # the history: history.db beside the matrix
    assert outputs == {"built": "true"}
    files = _artifact(work, tmp_path)
    docs = {"index.html", "reference/tasks/index.html", "reference/result-v1/index.html",
            "reference/vendor-v1/index.html", "performance/index.html", "404.html"}
    assert docs <= set(files)
    cells = {f"report/cells/{r['cell']['id']}.html" for r in sample_results()}
    vendors = {f"report/start/{r['cell']['vendor']}.html" for r in sample_results()}
    report = {"report/index.html", "report/hud.html", "report/hud.md", "report/digest.md",
              "report/matrix.md", "report/results.json", "report/crcr.json"}
    assert report | cells | vendors <= set(files)
    # The report is the run's, byte for byte, and nothing of it is left out of the artifact.
    written = {f"report/{p.relative_to(work / 'reports')}": p.read_bytes()
               for p in (work / "reports").rglob("*") if p.is_file()}
    assert {name: files.get(name) for name in written} == written
    assert [p for p in (work / "_site").rglob(".*")] == []


def test_no_secret_of_the_job_reaches_the_site(tmp_path: Path) -> None:
    """The report job holds the shared history's URL, password included: with a history that
    does not answer the report is still written (without its HUD), and the password is in no
    file of the site."""
    history = f"postgresql://oota:{CANARY}@127.0.0.1:9/oota"
    work, outputs = _site(tmp_path, {"OOTA_HISTORY": history})
    files = _artifact(work, tmp_path)
    assert outputs == {"built": "true"} and "report/index.html" in files
    assert [name for name, data in files.items() if CANARY.encode() in data] == []
    assert [name for name in files if CANARY in name] == []


def test_without_a_report_nothing_is_published(tmp_path: Path) -> None:
    output = tmp_path / "output"
    output.touch()
    proc = run_step("report", "site", tmp_path, {"GITHUB_OUTPUT": str(output)})
    assert proc.returncode == 0
    assert "::warning::no report was written" in proc.stdout
    assert output.read_text() == "" and not (tmp_path / "_site").exists()


def _context(event: str, pages: str) -> dict[str, Any]:
    return {**runner.Run(work=Path("."), event=event, vars={"OOTA_PAGES": pages},
                         secrets={}).context("report"), "steps": {}}


@pytest.mark.parametrize(("event", "pages", "published"), [
    ("schedule", "", True), ("schedule", "false", False),
    ("workflow_dispatch", "", False), ("repository_dispatch", "", False),
], ids=["nightly", "nightly-private", "by-hand", "relayed"])
def test_only_the_nightly_run_publishes(event: str, pages: str, published: bool) -> None:
    condition = next(s for s in workflow()["jobs"]["report"]["steps"]
                     if s.get("id") == "site")["if"]
    # Also after failed cells: the report of a failing run is what the public is to see.
    assert runner.condition(condition, _context(event, pages), "failure") is published


def test_the_pages_job_deploys_what_the_report_job_uploaded(tmp_path: Path) -> None:
    """The deploy job, through the local runner: it runs when the report job built a site,
    and deploys the artifact (here: unpacked into WORK/pages)."""
    site = tmp_path / "site"
    (site / "report").mkdir(parents=True)
    (site / "index.html").write_text("docs")
    (site / "report" / "index.html").write_text("report")
    run = runner.Run(work=tmp_path / "run", event="schedule", vars={}, secrets={},
                     needs={"report": {"result": "failure", "outputs": {"site": "true"}}})
    assert runner.pages_artifact(site, run.work / "store" / "artifacts" / "github-pages")
    (run.work / "logs").mkdir(parents=True)
    done = runner.run_workflow(run, only=["pages"])
    assert done["pages"]["result"] == "success"
    assert (run.work / "pages" / "report" / "index.html").read_text() == "report"
    job = yaml.safe_load((REPO / ".github" / "workflows" / "oota.yml").read_text())["jobs"]
    assert job["pages"]["environment"]["name"] == "github-pages"
    assert job["pages"]["needs"] == "report"
