"""Results are checked, not trusted. A result.json that says ``passed`` over failed tests is
refused as inconsistent, naming the file, by every reader: the report and its crcr.json, a merge
of other hosts' folders, the history, publish. Results signed by the host that made them
(``--key``) are checked on merge; the unsigned are listed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from oota.api import flags
from oota.api.runs import Ran, sign_results
from oota.console import Console
from oota.execute.publish import publish_cells
from oota.results.jsonfields import ResultFormatError
from oota.results.model import Result
from oota.results.signed import Checker, sign_folder
from oota.results.store import RESULT_FILE, SIGNATURE_FILE, load, save
from oota.supply import signing
from tests import forkcli
from tests.unit.test_publish import FakeEngine, _cell, _labels
from tests.unit.test_report import case, make_result, refresh, write_results

REPO = Path(__file__).resolve().parents[2]
INCONSISTENT = ("inconsistent: it says 'passed', but its stages and tests make it 'failed' "
                "(5 failed, 1 passed); refused: a status is derived, never taken as written")


def forged(python: str = "3.11") -> dict[str, Any]:
    """A cell with 5 failed tests whose result.json was edited to say passed."""
    tests = [case(f"test_device.py::test_{n}", "device", "failed", "wrong") for n in range(5)]
    tests += [case("test_install.py::test_imports", "install")]
    result = refresh(make_result("cpu", python=python, tests=tests))
    result["status"] = "passed"
    return result


def honest(python: str = "3.13") -> dict[str, Any]:
    return refresh(make_result("cpu", python=python, tests=[
        case("test_install.py::test_imports", "install")]))


def write_raw(folder: Path, result: dict[str, Any]) -> Path:
    """A result.json written as a hand (or another host) would: not through oota's writer."""
    cell = folder / result["cell"]["id"]
    cell.mkdir(parents=True, exist_ok=True)
    (cell / "result.json").write_text(json.dumps(result), encoding="utf-8")
    return cell / "result.json"


def oota(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``oota ARGS`` as a user runs it, in ``cwd`` (with this checkout's tasks.py)."""
    if not (cwd / "tasks.py").exists():
        shutil.copy(REPO / "tasks.py", cwd / "tasks.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "OOTA_"))}
    return forkcli.run([sys.executable, "-m", "oota", *args], cwd=cwd, capture_output=True,
                       text=True, timeout=120, env=env | {"PYTHONPATH": str(REPO)})


def test_a_forged_pass_is_refused_on_load(tmp_path):
    path = write_raw(tmp_path, forged())
    with pytest.raises(ResultFormatError) as info:
        load(path)
    assert str(info.value) == INCONSISTENT


def test_a_forged_summary_is_refused_on_load(tmp_path):
    result = honest()
    result["summary"] = {"passed": 40}
    with pytest.raises(ResultFormatError, match=r"inconsistent: its summary says \{'passed': "
                                                r"40\}, but its stages and tests count 1 passed"):
        load(write_raw(tmp_path, result))


def test_the_report_and_crcr_refuse_a_forged_pass_naming_the_file(tmp_path):
    path = write_raw(tmp_path / "results", forged())
    write_raw(tmp_path / "results", honest())
    proc = oota("report", "--results", "results", "--out", "reports", "--format", "crcr",
                "--no-history", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"warning: {path.relative_to(tmp_path)}: {INCONSISTENT}" in proc.stderr
    report = json.loads((tmp_path / "reports/results.json").read_text())
    assert [c["id"] for c in report["cells"]] == ["cpu-torch2.13.0-py3.13-debian12"]
    crcr = json.loads((tmp_path / "reports/crcr.json").read_text())
    assert crcr["workflow"]["conclusion"] == "failure"  # an unreadable result is an error


def test_a_merge_refuses_another_hosts_forged_pass(tmp_path):
    write_raw(tmp_path / "lab-a", honest())
    path = write_raw(tmp_path / "lab-b", forged())
    proc = oota("report", "--merge", "lab-a", "--merge", "lab-b", "--no-history",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"warning: {path.relative_to(tmp_path)}: {INCONSISTENT}" in proc.stderr
    assert "merged 1 results from 2 folders" in proc.stdout


def test_the_history_refuses_a_forged_pass(tmp_path):
    path = write_raw(tmp_path / "results", forged())
    proc = oota("history", "import", "--dir", "results", "--history",
                f"sqlite:///{tmp_path / 'h.db'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"warning: {path.relative_to(tmp_path)}: {INCONSISTENT}" in proc.stderr
    assert "cell(s) added" not in proc.stdout


def test_publish_refuses_a_forged_pass_naming_the_file(project):
    matrix, cell, current = _cell(project)
    result = forged()
    result["cell"] = {**result["cell"], "id": cell.id, "fingerprint": current}
    path = write_raw(project.root / "results", result)
    [outcome] = publish_cells(matrix, [cell], FakeEngine(_labels(current)), Console(),
                              results_dir=project.root / "results", registry="r.lab:5000",
                              namespace="oota", local_namespace="oota", auth=None)
    assert outcome.status == "refused"
    assert outcome.reason == f"{path}: {INCONSISTENT}"


# -- signatures --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> signing.KeyFiles:
    return signing.generate(tmp_path_factory.mktemp("lab"), None)


def signed_folder(root: Path, result: dict[str, Any], key_files: signing.KeyFiles) -> Path:
    folder = root / result["cell"]["id"]
    save(folder, Result.from_json(result))
    sign_folder(folder, signing.load_private(key_files.private, None))
    return folder


def test_merge_checks_signatures_and_lists_the_unsigned(tmp_path, lab):
    signed_folder(tmp_path / "lab-a", honest("3.11"), lab)
    write_results(tmp_path / "lab-b", [honest("3.13")])
    proc = oota("report", "--merge", "lab-a", "--merge", "lab-b", "--key", str(lab.public),
                "--no-history", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "signatures: 1 result(s) signed by --key, 1 unsigned" in proc.stdout
    assert "  unsigned: lab-b/cpu-torch2.13.0-py3.13-debian12/result.json" in proc.stdout


def test_merge_without_a_key_says_signatures_are_not_checked(tmp_path, lab):
    signed_folder(tmp_path / "lab-a", honest("3.11"), lab)
    write_results(tmp_path / "lab-b", [honest("3.13")])
    proc = oota("report", "--merge", "lab-a", "--merge", "lab-b", "--no-history", cwd=tmp_path)
    assert "signatures: 1 result(s) carry one, not checked (give --key oota.pub" in proc.stdout
    assert "  unsigned: lab-b/cpu-torch2.13.0-py3.13-debian12/result.json" in proc.stdout


@pytest.mark.parametrize("tamper", ["edited-after-signing", "another-key", "garbage",
                                    "valid-for-another-result"])
def test_a_signature_that_does_not_check_is_refused(tmp_path, lab, tamper):
    folder = signed_folder(tmp_path / "lab-a", honest("3.11"), lab)
    if tamper == "valid-for-another-result":  # the lab's own signature, of its other result
        other = signed_folder(tmp_path / "lab-a", honest("3.13"), lab)
        (folder / SIGNATURE_FILE).write_bytes((other / SIGNATURE_FILE).read_bytes())
    elif tamper == "edited-after-signing":   # still consistent: only the time moved
        data = json.loads((folder / "result.json").read_text())
        data["finished_at"] = "2026-11-21T12:00:00+00:00"
        (folder / "result.json").write_text(json.dumps(data))
    elif tamper == "another-key":
        other = signing.generate(tmp_path / "other", None)
        sign_folder(folder, signing.load_private(other.private, None))
    else:
        (folder / SIGNATURE_FILE).write_text("{not json")
    checker = Checker(keys=(signing.load_public(lab.public),))
    why = checker(folder / "result.json")
    assert why.endswith("refused") or "refused (" in why
    assert not checker.signed


def test_a_rewritten_result_drops_its_old_signature(tmp_path, lab):
    folder = signed_folder(tmp_path, honest("3.11"), lab)
    save(folder, Result.from_json(honest("3.11")))
    assert not (folder / SIGNATURE_FILE).exists()


def test_build_signs_only_this_runs_results_from_memory(tmp_path, lab):
    """The run's results are signed as it holds them, not read back: the signature checks
    against the file the run wrote, and a folder that kept an earlier result is left alone."""
    results = tmp_path / "results"
    mine = Result.from_json(honest("3.11"))
    save(results / mine.cell.id, mine)
    older = Result.from_json(honest("3.13"))
    save(results / older.cell.id, older)
    newer = Result.from_json({**older.to_json(), "started_at": "2026-11-22T00:00:00+00:00"})
    ran = Ran(results=[mine, newer], kept={older.cell.id: older})
    lines = sign_results(ran, results, flags.signing_key(str(lab.private)))
    assert lines[0].startswith("signed 1 result(s) with key ")
    assert not (results / older.cell.id / SIGNATURE_FILE).exists()
    checker = Checker(keys=(signing.load_public(lab.public),))
    assert checker(results / mine.cell.id / RESULT_FILE) == ""
    assert checker.signed == [str(results / mine.cell.id / RESULT_FILE)]
    shutil.rmtree(results)


def test_a_vendor_that_climbs_out_of_the_report_is_refused(tmp_path):
    """A vendor's name becomes start/<vendor>.html: a result from elsewhere naming
    '../../../x' would have written outside the report."""
    result = honest()
    result["cell"]["vendor"] = "../../../PWNED"
    path = write_raw(tmp_path / "results", result)
    proc = oota("report", "--no-history", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"warning: {path.relative_to(tmp_path)}: does not match the schema: cell/vendor: " \
           "'../../../PWNED' does not match" in proc.stderr
    assert not list(tmp_path.parent.rglob("PWNED*"))
