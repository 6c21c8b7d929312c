"""The nightly channel: the matrix shape and its errors, the plan and ids, the rendered install,
the fingerprint that changes each day, the suite's age check, and what results and the report
show of a nightly."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import pytest

from oota.config.matrix import load_matrix
from oota.console import Console
from oota.errors import EXIT_BAD_INPUT, InputError, MatrixError
from oota.execute.lock import LockOptions, lock_cell
from oota.lockfile import CHANNEL_NOT_LOCKED, lock_status
from oota.plan import Cell, plan, select
from oota.render import context_files, fingerprint, render_cell
from oota.report.htmlpages import to_html
from oota.report.markdown import to_markdown
from oota.results.model import CellRef, Result
from oota.results.software import TorchInfo
from tests.conftest import BASE_MATRIX, Project
from tests.reports import build_report
from tests.unit.test_report import NOW, case, make_result, typed

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "verify"))
import oota_nightly  # type: ignore[import-not-found, unused-ignore]  # noqa: E402

NIGHTLY_MATRIX = BASE_MATRIX.replace('torch: ["2.13.0"]', 'torch: ["2.13.0", {channel: nightly}]')
NIGHTLY_ID = "cpu-torchnightly-py3.11-debian12"


def _cells(project: Project, text: str = NIGHTLY_MATRIX) -> dict[str, Cell]:
    project.write(text)
    return {c.id: c for c in plan(load_matrix("matrix.yaml"))}


def _problems(project: Project, text: str) -> list[str]:
    project.write(text)
    with pytest.raises(MatrixError) as info:
        plan(load_matrix("matrix.yaml"))
    assert info.value.exit_code == EXIT_BAD_INPUT
    return info.value.problems


def test_a_nightly_cell_is_never_locked(project: Project) -> None:
    cells = _cells(project)
    matrix = load_matrix("matrix.yaml")
    assert lock_status(matrix, cells[NIGHTLY_ID]) == "unlocked"
    assert lock_status(matrix, cells["cpu-torch2.13.0-py3.11-debian12"]) == "missing"
    # `invoke lock` says so without touching an engine (None would fail on any use)
    outcome = lock_cell(matrix, cells[NIGHTLY_ID], None, Console(),  # type: ignore[arg-type]
                        LockOptions())
    assert (outcome.status, outcome.message) == ("unlocked", CHANNEL_NOT_LOCKED)
    assert not outcome.path.exists()


# -- the matrix shape, the plan and the ids ------------------------------------------------------

def test_a_channel_on_the_torch_axis_makes_a_cell_beside_the_release(project: Project) -> None:
    cells = _cells(project)
    assert sorted(cells) == ["cpu-torch2.13.0-py3.11-debian12", "cpu-torch2.13.0-py3.13-debian13",
                             NIGHTLY_ID, "cpu-torchnightly-py3.13-debian13"]
    nightly = cells[NIGHTLY_ID]
    assert nightly.torch is None and nightly.torch_text == "nightly"
    assert nightly.index_url == "https://download.pytorch.org/whl/nightly/cpu"
    assert nightly.channel is not None and nightly.channel.max_age_days == 3
    assert nightly.coordinates()["torch"] == "nightly"
    assert nightly.coordinates()["channel"] == "nightly"
    assert "channel" not in cells["cpu-torch2.13.0-py3.11-debian12"].coordinates()


def test_the_index_and_the_age_are_configurable(project: Project) -> None:
    text = BASE_MATRIX.replace('torch: ["2.13.0"]', 'torch: [{channel: nightly, index: '
                               '"http://127.0.0.1:8080/simple", max_age_days: 10}]')
    nightly = _cells(project, text)[NIGHTLY_ID]
    assert nightly.index_url == "http://127.0.0.1:8080/simple"
    assert nightly.channel is not None and nightly.channel.max_age_days == 10
    matrix = load_matrix("matrix.yaml")
    dockerfile = render_cell(matrix, nightly).files["Dockerfile"]
    assert ("--index-url http://127.0.0.1:8080/simple --trusted-host 127.0.0.1 --report "
            in dockerfile)   # pip ignores a plain-HTTP index it is not told to trust


def test_rules_name_the_channel(project: Project) -> None:
    text = BASE_MATRIX + ('    include:\n      - {os: debian12, python: "3.11", torch: nightly}\n'
                          '    default:\n      - {torch: "2.13.0"}\n')
    project.write(text)
    matrix = load_matrix("matrix.yaml")
    cells = plan(matrix)
    assert [c.id for c in cells if c.channel] == [NIGHTLY_ID]
    assert NIGHTLY_ID not in [c.id for c in select(matrix, cells)]   # not a default
    assert [c.id for c in select(matrix, cells, ids=[NIGHTLY_ID])] == [NIGHTLY_ID]


def test_an_excluded_channel_makes_no_cell(project: Project) -> None:
    text = NIGHTLY_MATRIX.replace("      - {os: debian13", "      - {torch: nightly}\n"
                                  "      - {os: debian13")
    assert not [c for c in _cells(project, text).values() if c.channel]


BAD = [
    ("unknown-channel", 'torch: ["2.13.0", {channel: nightyl}]',
     "matrix.yaml:13:24: vendors.cpu.torch[1].channel: unknown channel 'nightyl'; "
     "did you mean 'nightly'?"),
    ("unknown-key", 'torch: [{channel: nightly, indx: "https://x.org/simple"}]',
     "matrix.yaml:13:32: vendors.cpu.torch[0].indx: unknown key 'indx'; did you mean 'index'?"),
    ("missing-channel", 'torch: [{index: "https://x.org/simple"}]',
     "matrix.yaml:13:13: vendors.cpu.torch[0]: missing required key 'channel'"),
    ("index-not-a-url", 'torch: [{channel: nightly, index: "download.pytorch.org"}]',
     "matrix.yaml:13:32: vendors.cpu.torch[0].index: 'download.pytorch.org' is not an index "
     "URL; write it like https://download.pytorch.org/whl/nightly/cpu"),
    ("negative-age", "torch: [{channel: nightly, max_age_days: -1}]",
     "matrix.yaml:13:32: vendors.cpu.torch[0].max_age_days: -1 is not an age in days; give 0 "
     "or more (PyTorch's smoke test uses 3)"),
    ("age-not-a-number", 'torch: [{channel: nightly, max_age_days: "3d"}]',
     "matrix.yaml:13:32: vendors.cpu.torch[0].max_age_days: expected a whole number, "
     "got a string"),
    ("twice", "torch: [{channel: nightly}, {channel: nightly}]",
     "matrix.yaml:13:33: vendors.cpu.torch[1]: channel 'nightly' is listed twice; keep one entry"),
    ("channel-word-typo-on-the-axis", 'torch: ["2.13.0", nightli]',
     "matrix.yaml:13:23: vendors.cpu.torch[1]: 'nightli' is neither a release nor a channel; "
     "did you mean 'nightly'?"),
]


@pytest.mark.parametrize(("axis", "expected"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_channel_entries_are_located(project: Project, axis: str, expected: str) -> None:
    problems = _problems(project, BASE_MATRIX.replace('torch: ["2.13.0"]', axis))
    assert expected in problems, "\n".join(problems)


def test_a_rule_naming_a_misspelt_channel_is_located(project: Project) -> None:
    text = NIGHTLY_MATRIX.replace("      - {os: debian13", "      - {torch: nighty}\n"
                                  "      - {os: debian13")
    assert ("matrix.yaml:16:10: vendors.cpu.exclude[1].torch: 'nighty' is neither a release "
            "nor a channel; did you mean 'nightly'?") in _problems(project, text)


def test_a_vendor_whose_index_is_not_pytorchs_needs_an_index(project: Project) -> None:
    vendor = (REPO / "vendors" / "cpu" / "vendor.yaml").read_text()
    vendor = vendor.replace("https://download.pytorch.org/whl/cpu", "https://wheels.lab/simple")
    (project.root / "vendors" / "cpu" / "vendor.yaml").write_text(vendor)
    problems = _problems(project, NIGHTLY_MATRIX)
    assert ("matrix.yaml:13:5: vendors.cpu.torch: cell cpu-torchnightly-py3.11-debian12: no "
            "nightly index for vendor cpu (its release index 'https://wheels.lab/simple' is not "
            "on https://download.pytorch.org/whl/); give one: {channel: nightly, index: URL}"
            ) in problems


def test_cuda_nightly_index_follows_the_toolkit() -> None:
    matrix = load_matrix(REPO / "matrix.yaml")
    vm = matrix.vendors["cuda"]
    release = next(c for c in plan(matrix, ["cuda"]) if str(c.toolkit) == "13.0")
    nightly = Cell(vendor=vm.vendor, os=release.os, python=release.python, torch=None,
                   toolkit=release.toolkit, channel=vm.channel("nightly"))
    assert nightly.index_url == "https://download.pytorch.org/whl/nightly/cu130"
    assert nightly.id == f"cuda-torchnightly-cu13.0-py{release.python}-{release.os.key}"


# -- rendering and the fingerprint ---------------------------------------------------------------

def test_the_nightly_installs_with_pre_from_its_index_alone(project: Project) -> None:
    project.write(NIGHTLY_MATRIX)
    matrix = load_matrix("matrix.yaml")
    cells = {c.id: c for c in plan(matrix)}
    rendered = render_cell(matrix, cells[NIGHTLY_ID])
    dockerfile = rendered.files["Dockerfile"]
    assert ("PIP_CONFIG_FILE=/dev/null /opt/venv/bin/pip install --no-cache-dir --pre "
            "--index-url "
            "https://download.pytorch.org/whl/nightly/cpu --report /opt/oota/install-report.json "
            "torch\n") in dockerfile
    assert "torch==" not in dockerfile and "COPY nightly-day.txt " in dockerfile
    manifest = json.loads(rendered.files["cell.json"])
    assert manifest["torch"] == "nightly"
    assert manifest["channel"] == {"name": "nightly", "max_age_days": 3,
                                   "index_url": "https://download.pytorch.org/whl/nightly/cpu"}
    release = json.loads(render_cell(matrix, cells["cpu-torch2.13.0-py3.11-debian12"])
                         .files["cell.json"])
    assert "channel" not in release


def test_a_nightly_fingerprint_changes_each_day_a_release_one_does_not(
        project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    project.write(NIGHTLY_MATRIX)
    matrix = load_matrix("matrix.yaml")
    cells = {c.id: c for c in plan(matrix)}

    def prints(day: str) -> tuple[str, str]:
        monkeypatch.setattr("oota.render.channel_day", lambda: day)
        return tuple(fingerprint(context_files(matrix, render_cell(matrix, cells[i])))
                     for i in (NIGHTLY_ID, "cpu-torch2.13.0-py3.11-debian12"))  # type: ignore

    nightly_22, release_22 = prints("2026-11-22")
    nightly_23, release_23 = prints("2026-11-23")
    assert nightly_22 != nightly_23 and release_22 == release_23
    assert prints("2026-11-23") == (nightly_23, release_23)   # the same day: the same image
    files = context_files(matrix, render_cell(matrix, cells[NIGHTLY_ID]))
    assert files["nightly-day.txt"] == b"2026-11-23\n"


def test_torchvision_follows_torch_into_the_channel() -> None:
    """A CUDA nightly takes torchvision's nightly with torch's (PyTorch's own instructions
    install them together), not the release the vendor pairs with a torch release."""
    matrix = load_matrix(REPO / "matrix.yaml")
    vm = matrix.vendors["cuda"]
    release = next(c for c in plan(matrix, ["cuda"]) if str(c.toolkit) == "13.0")
    nightly = Cell(vendor=vm.vendor, os=release.os, python=release.python, torch=None,
                   toolkit=release.toolkit, channel=vm.channel("nightly"))
    dockerfile = render_cell(matrix, nightly).files["Dockerfile"]
    assert ("--pre --index-url https://download.pytorch.org/whl/nightly/cu130 --report "
            "/opt/oota/install-report.json torch torchvision\n") in dockerfile
    assert "torchvision==" not in dockerfile and "timm==1.0.24" in dockerfile


def test_a_requirement_pinned_to_the_torch_release_refuses_the_channel(project: Project) -> None:
    vendor = (REPO / "vendors" / "cpu" / "vendor.yaml").read_text()
    vendor = vendor.replace('  - "torch=={torch}+cpu"\n',
                            '  - "torch=={torch}+cpu"\n  - "torch-npu=={torch}.*"\n')
    (project.root / "vendors" / "cpu" / "vendor.yaml").write_text(vendor)
    project.write(NIGHTLY_MATRIX)
    matrix = load_matrix("matrix.yaml")
    nightly = next(c for c in plan(matrix) if c.id == NIGHTLY_ID)
    with pytest.raises(InputError, match=r"vendors/cpu/vendor.yaml requirements "
                       r"'torch-npu==\{torch\}\.\*' pairs with a torch release; cell "
                       r"cpu-torchnightly-py3.11-debian12 takes torch from the nightly channel"):
        render_cell(matrix, nightly)


def test_the_repositorys_nightly_cell_is_not_a_default() -> None:
    matrix = load_matrix(REPO / "matrix.yaml")
    cells = plan(matrix, ["cpu"])
    assert [c.id for c in cells if c.channel] == [NIGHTLY_ID]
    assert NIGHTLY_ID not in [c.id for c in select(matrix, cells)]
    assert (REPO / "images" / "cpu" / NIGHTLY_ID / "Dockerfile").is_file()


# -- the suite's age check (verify/oota_nightly.py) ----------------------------------------------

TODAY = dt.date(2026, 11, 23)
AGES = [
    ("today", "2.13.0.dev20261123+cpu", 3, None),
    ("three-days-is-allowed", "2.16.0.dev20261120", 3, None),
    ("yesterday-in-another-zone", "2.16.0.dev20261124+cu130", 3, None),
    ("ten-days", "2.13.0.dev20261113+cpu", 3,
     "torch 2.13.0.dev20261113+cpu is the nightly of 2026-11-13, 10 days old on 2026-11-23: "
     "more than the 3 days allowed (channel.max_age_days)"),
    ("ten-days-allowed-by-the-cell", "2.13.0.dev20261113+cpu", 10, None),
    ("a-release", "2.13.0+cpu", 3, "torch 2.13.0+cpu is not a nightly (no .devYYYYMMDD"),
    ("not-a-date", "2.13.0.dev20261345", 3, "is not a nightly"),
    ("from-the-future", "2.13.0.dev20261201", 3, "after today (2026-11-23): check this machine"),
]


@pytest.mark.parametrize(("version", "max_age", "expected"), [a[1:] for a in AGES],
                         ids=[a[0] for a in AGES])
def test_nightly_age_check(version: str, max_age: int, expected: str | None) -> None:
    problem = oota_nightly.age_problem(version, TODAY, max_age)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem


def test_nightly_date_of_a_version() -> None:
    assert oota_nightly.nightly_date("2.16.0.dev20261123+cpu") == dt.date(2026, 11, 23)
    assert oota_nightly.nightly_date("2.15.0") is None


# -- results and the report ----------------------------------------------------------------------

def _nightly_result(version: str = "2.13.0.dev20261123+cpu") -> dict[str, object]:
    result = make_result("cpu", installed_torch=version, tests=[
        case("test_compat.py::test_nightly_is_recent", "compat", data={
            "version": version, "date": "2026-11-23", "commit": "0123456789abcdef0123"})])
    cell = result["cell"]
    assert isinstance(cell, dict)
    cell.update(id=NIGHTLY_ID, torch="nightly", channel="nightly")
    installed = result["installed"]
    assert isinstance(installed, dict)
    torch = installed["torch"]
    assert isinstance(torch, dict)
    torch["git_version"] = "0123456789abcdef0123"
    return result


def test_a_result_records_the_channel_and_the_nightly() -> None:
    result = Result.from_json(_nightly_result())
    assert result.cell.channel == "nightly" and result.cell.torch == "nightly"
    cell = result.to_json()["cell"]
    assert isinstance(cell, dict) and cell["channel"] == "nightly"
    torch = result.installed.torch if result.installed else TorchInfo()
    assert torch.nightly_date == "2026-11-23"
    assert torch.nightly == "nightly of 2026-11-23, commit 0123456789ab"
    release = CellRef.from_json(make_result("cpu")["cell"])
    assert release.channel is None and "channel" not in release.to_json()


def test_stable_and_nightly_sit_side_by_side_in_the_report() -> None:
    results = [make_result("cpu", torch=t) for t in ("2.13.0", "2.15.0", "2.14.1")]
    results += [make_result("cpu", python="3.13", os_key="debian13"), _nightly_result()]
    report = build_report(typed(results), [], generated_at=NOW)
    assert [r.id for r in report.rows] == [
        "cpu-torch2.13.0-py3.11-debian12", "cpu-torch2.13.0-py3.13-debian13",
        "cpu-torch2.14.1-py3.11-debian12", "cpu-torch2.15.0-py3.11-debian12", NIGHTLY_ID]
    results.append(make_result("cpu", torch="2.16.0"))
    report = build_report(typed(results), [], generated_at=NOW)
    ids = [r.id for r in report.rows]
    assert ids.index(NIGHTLY_ID) == ids.index("cpu-torch2.16.0-py3.11-debian12") + 1
    line = next(x for x in to_markdown(report).splitlines() if x.startswith(f"| `{NIGHTLY_ID}`"))
    assert line.endswith("| `2.13.0.dev20261123+cpu` (nightly of 2026-11-23, commit "
                         "0123456789ab) |")
    assert ("<code>2.13.0.dev20261123+cpu</code> nightly of 2026-11-23, commit 0123456789ab"
            in to_html(report))
