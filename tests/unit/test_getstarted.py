"""The get-started pages (reports/start/<vendor>.html): verified cells only, each with the
commands that get exactly what was verified."""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from oota.api.reports import current_fingerprints, report
from oota.config.matrix import load_matrix
from oota.console import Console
from oota.engine.base import BuildRequest
from oota.execute.bases import Base
from oota.execute.build import BuildOptions, CellRun
from oota.lockfile import header, lock_path
from oota.plan import plan
from oota.report.getstarted import UNSUPPORTED_HERE, start_page
from oota.report.markdown import md_text
from oota.report.write import write_report
from oota.results.model import Host, Image, Result
from oota.results.store import load
from oota.supply.runflags import LABEL, docker_run_args
from tests.conftest import REPO
from tests.reports import build_report
from tests.unit.test_fleet import FakeEngine
from tests.unit.test_report import DIGEST, case, make_result, refresh, typed, write_results

NOW = "2026-11-21T12:00:00+00:00"
PUSHED = "sha256:" + "cd" * 32
REF = "registry.lab:5000/oota/cpu:cpu-torch2.14.1-py3.11-debian12"
ROCM_FLAGS = {"devices": ["/dev/kfd", "/dev/dri"], "group_add": ["video"], "ipc": "host",
              "env": {"HSA_NOTE": "two words"},
              "mounts": [{"source": "/opt/rocm data", "target": "/data", "read_only": True}]}
TESTS = [case("test_install.py::test_imports", "install"),
         case("test_device.py::test_matmul", "device")]


CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_HASH = "ab" * 32
DEP_HASHES = ("01" * 32, "02" * 32)


def requirements(vendor: list[str], *, index: str = CPU_INDEX, channel: bool = False,
                 locked: bool = False) -> dict[str, Any]:
    """A result's ``requirements``: the vendor's and the suite's apart, as builds record them."""
    data: dict[str, Any] = {"vendor": vendor, "test": ["pytest>=8,<10", "transformers==5.23.0"]}
    data["index_url" if channel else "extra_index_url"] = index
    if locked:
        data["locked"] = [{"name": "filelock", "version": "4.2.11", "hashes": list(DEP_HASHES)},
                          {"name": "torch", "version": "2.14.1+cpu", "hashes": [TORCH_HASH]}]
    return data


def _cpu(torch: str, **kw: Any) -> dict[str, Any]:
    result = make_result("cpu", torch=torch, tests=TESTS, **kw)
    result["requirements"] = requirements([f"torch=={torch}+cpu"])
    return result


def results() -> list[dict[str, Any]]:
    """cpu: 2.14.1 (published), 2.13.0 (unpublished), a nightly of 2.14.1's coordinates, a
    failed cell; rocm with device flags; ascend unsupported here; cuda whose build failed."""
    stable = _cpu("2.14.1")
    stable["image"]["published"] = [{"ref": REF, "digest": PUSHED, "at": NOW}]
    stable["requirements"] = requirements(["torch==2.14.1+cpu"], locked=True)
    nightly = _cpu("nightly", installed_torch="2.16.0.dev20261120+cpu")
    nightly["cell"]["channel"] = "nightly"
    nightly["requirements"] = requirements([], index=CPU_INDEX.replace("/whl/", "/whl/nightly/"),
                                           channel=True)
    failed = make_result("cpu", torch="2.14.1", python="3.13", os_key="debian13", tests=[
        case("test_device.py::test_matmul", "device", "failed", "wrong result")])
    rocm = make_result("rocm", toolkit="rocm", toolkit_version="7.1", tests=TESTS,
                       installed_torch="2.13.0+rocm7.1")
    rocm["image"]["run_flags"] = ROCM_FLAGS
    rocm["requirements"] = requirements(["torch==2.13.0+rocm7.1"],
                                        index="https://download.pytorch.org/whl/rocm7.1")
    ascend = make_result("ascend", toolkit="cann", toolkit_version="9.2.0", os_key="ubuntu22.04",
                         extra_packages={"torch_npu": ("2.13.0", True)}, tests=[
                             case("test_install.py::test_imports", "install"),
                             case("test_device.py::test_matmul", "device", "unsupported-here",
                                  "no /dev/davinci0 on this host")])
    ascend["requirements"] = requirements(["torch==2.13.0+cpu", "torch-npu==2.13.0.*", "pyyaml"])
    ascend["sources"] = {"index_url": "https://download.pytorch.org/whl/cpu",
                         "extra_index_urls": [], "find_links": [],
                         "notes": ["vendor index https://npu.example is unreachable from this "
                                   "host (timeout); left out"]}
    cuda = make_result("cuda", toolkit="cuda", toolkit_version="13.0", build="failed",
                       build_message="pip: no matching distribution")
    return [refresh(r) for r in (_cpu("2.13.0"), failed, nightly, stable, rocm, ascend, cuda)]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("start")
    out = root / "reports"
    write_report(write_results(root / "results", results()), out)
    return out


def text(site: Path, vendor: str) -> str:
    """The page's text as a user reads it (tags dropped, entities decoded)."""
    page = (site / "start" / f"{vendor}.html").read_text(encoding="utf-8")
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def block(site: Path, vendor: str, cell_id: str) -> str:
    page = (site / "start" / f"{vendor}.html").read_text(encoding="utf-8")
    found = re.search(rf'<section class="start-cell" id="{re.escape(cell_id)}">(.*?)</section>',
                      page, re.S)
    assert found, f"no block for {cell_id}"
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))


def test_a_page_per_vendor_linked_from_the_index(site: Path) -> None:
    assert sorted(p.name for p in (site / "start").glob("*.html")) == [
        "ascend.html", "cpu.html", "cuda.html", "rocm.html"]
    index = (site / "index.html").read_text(encoding="utf-8")
    line = re.search(r'<p class="start">(.*?)</p>', index, re.S)
    assert line and re.sub(r"<[^>]+>", "", line.group(1)) == \
        "Get started: ascend · cpu · cuda · rocm"
    assert 'href="start/rocm.html"' in line.group(1)


def test_only_verified_cells_newest_torch_first_nightly_beside_stable(site: Path) -> None:
    page = (site / "start" / "cpu.html").read_text(encoding="utf-8")
    shown = re.findall(r'<section class="start-cell" id="([^"]+)">', page)
    assert shown == ["cpu-torch2.14.1-py3.11-debian12", "cpu-torchnightly-py3.11-debian12",
                     "cpu-torch2.13.0-py3.11-debian12"]
    assert "cpu-torch2.14.1-py3.13-debian13: failed" in text(site, "cpu")


def test_published_cell_pull_and_run_by_digest(site: Path) -> None:
    shown = block(site, "cpu", "cpu-torch2.14.1-py3.11-debian12")
    assert f"docker pull {REF}@{PUSHED}" in shown
    assert f"docker run --rm -it --init {REF}@{PUSHED}" in shown
    assert "not published" not in shown
    assert "torch2.14.1+cpu" in shown.replace(" ", "").replace("\n", "")


def test_unpublished_cell_says_how_to_publish_and_runs_the_local_tag(site: Path) -> None:
    shown = block(site, "cpu", "cpu-torch2.13.0-py3.11-debian12")
    assert ("not published: ./oota.sh publish --vendor cpu --cell "
            "cpu-torch2.13.0-py3.11-debian12 --registry REGISTRY") in shown
    assert "docker run --rm -it --init oota/cpu:cpu-torch2.13.0-py3.11-debian12" in shown
    assert "docker pull" not in shown


def test_run_flags_become_quoted_docker_run_options(site: Path) -> None:
    shown = block(site, "rocm", "rocm-torch2.13.0-7.1-py3.11-debian12")
    assert ("docker run --rm -it --init --ipc host --device /dev/kfd --device /dev/dri "
            "--group-add video -e 'HSA_NOTE=two words' -v '/opt/rocm data:/data:ro' "
            "oota/rocm:rocm-torch2.13.0-7.1-py3.11-debian12") in shown


def test_docker_run_args_each_option_and_a_bad_label() -> None:
    flags = {"gpus": "all", "runtime": "habana", "shm_size": "16g", "cap_add": ["SYS_PTRACE"],
             "security_opt": ["seccomp=unconfined"],
             "mounts": [{"source": "/a", "target": "/b", "read_only": False}]}
    assert docker_run_args(flags) == (
        "--gpus all", "--runtime habana", "--shm-size 16g", "--cap-add SYS_PTRACE",
        "--security-opt seccomp=unconfined", "-v /a:/b")
    assert docker_run_args({}) == ()


def test_pip_command_pins_the_vendors_stack_from_its_index_and_nothing_of_the_suite(
        site: Path) -> None:
    """An unlocked cell: each vendor requirement pinned to what the image holds, from the
    vendor's index beside PyPI; the suite's packages (pytest, transformers, numpy) are not
    offered, nor the building host's own sources."""
    shown = block(site, "ascend", "ascend-torch2.13.0-cann9.2.0-py3.11-ubuntu22.04")
    assert ('pip install "torch==2.13.0+cpu" "torch-npu==2.13.0" "pyyaml" --extra-index-url '
            f"{CPU_INDEX}\n") in shown
    assert "The versions the verified image holds (the cell has no lock, so no hashes)." in shown
    for suite in ("pytest", "transformers", "numpy"):
        assert suite not in shown.split("Install with pip")[1], suite
    assert "The verified build installed torch from file:///wheelhouse/torch.whl" in shown
    assert ("That build's own package sources: vendor index https://npu.example is "
            "unreachable") in shown
    rocm = block(site, "rocm", "rocm-torch2.13.0-7.1-py3.11-debian12")
    assert ('pip install "torch==2.13.0+rocm7.1" --extra-index-url '
            "https://download.pytorch.org/whl/rocm7.1") in rocm


def test_a_locked_cell_installs_the_locks_pins_with_hashes(site: Path) -> None:
    cell = "cpu-torch2.14.1-py3.11-debian12"
    shown = block(site, "cpu", cell)
    name = f"{cell}-requirements.txt"
    assert (f"pip install --require-hashes --extra-index-url {CPU_INDEX} -r {name}\n"
            in shown)
    page = (site / "start" / "cpu.html").read_text(encoding="utf-8")
    assert f'href="cpu/{name}"' in page
    text = (site / "start" / "cpu" / name).read_text(encoding="utf-8")
    pins = [line for line in text.splitlines() if not line.startswith("#")]
    assert pins == ["filelock==4.2.11 \\", f"    --hash=sha256:{DEP_HASHES[0]} \\",
                    f"    --hash=sha256:{DEP_HASHES[1]}",
                    "torch==2.14.1+cpu \\", f"    --hash=sha256:{TORCH_HASH}"]
    assert f"#   pip install --require-hashes --extra-index-url {CPU_INDEX} -r {name}" in text
    assert "pytest" not in text and "transformers" not in text
    assert sorted(p.name for p in (site / "start" / "cpu").iterdir()) == [name]  # locked only


def test_a_channel_cell_installs_its_nightly_from_the_channels_index_alone(site: Path) -> None:
    shown = block(site, "cpu", "cpu-torchnightly-py3.11-debian12")
    assert ('pip install --pre "torch==2.16.0.dev20261120+cpu" --index-url '
            "https://download.pytorch.org/whl/nightly/cpu") in shown


def test_an_older_result_says_it_cannot_tell_the_vendors_packages_apart() -> None:
    old = make_result("cpu", tests=TESTS)
    assert "requirements" not in old
    [cell] = start_page(build_report(typed([old]), [], generated_at=NOW), "cpu").cells
    assert cell.pip.command == ""
    assert "build the cell again for its pip command" in cell.pip.how


def test_unsupported_here_is_said(site: Path) -> None:
    shown = block(site, "ascend", "ascend-torch2.13.0-cann9.2.0-py3.11-ubuntu22.04")
    assert UNSUPPORTED_HERE in shown
    assert UNSUPPORTED_HERE not in block(site, "cpu", "cpu-torch2.13.0-py3.11-debian12")


def test_vendor_with_no_verified_cell(site: Path) -> None:
    shown = text(site, "cuda")
    assert "No cell of cuda is verified yet." in shown
    assert "./oota.sh build --vendor cuda" in shown
    assert "./oota.sh publish --vendor cuda --registry REGISTRY" in shown
    assert "cuda-torch2.13.0-cu13.0-py3.11-debian12: failed" in shown
    assert 'class="start-cell"' not in (site / "start" / "cuda.html").read_text()


def test_nightly_coordinates_name_the_nightly(site: Path) -> None:
    shown = block(site, "cpu", "cpu-torchnightly-py3.11-debian12")
    assert "2.16.0.dev20261120+cpu (nightly of 2026-11-20)" in shown
    assert shown.startswith("cpu-torchnightly-py3.11-debian12 nightly")  # the channel


def test_stale_verification_is_said() -> None:
    report = build_report(typed(results()), [], generated_at=NOW)
    cell = "cpu-torch2.13.0-py3.11-debian12"
    page = start_page(report, "cpu", {cell: "sha256:" + "1" * 64})
    assert [c.stale for c in page.cells if c.id == cell] == [True]
    assert not any(c.stale for c in page.cells if c.id != cell)
    assert not any(c.stale for c in start_page(report, "cpu").cells)


def test_old_results_without_run_flags_still_read() -> None:
    old = make_result("rocm", tests=TESTS)
    assert "run_flags" not in old["image"]
    assert Result.from_json(old).image == Image.from_json(old["image"])
    assert Image.from_json(old["image"]).run_flags == {}
    written = Image(tag="t", run_flags={"ipc": "host"}).to_json()
    assert written["run_flags"] == {"ipc": "host"}
    assert "run_flags" not in Image(tag="t").to_json()
    assert json.loads(json.dumps(written)) == Image.from_json(written).to_json()


def test_image_digest_is_not_offered_as_a_pull() -> None:
    # The local image digest (DIGEST) is no registry reference: only `published` is pulled.
    report = build_report(typed(results()), [], generated_at=NOW)
    for cell in start_page(report, "cpu").cells:
        assert all(DIGEST not in line for line in cell.pulls)


def test_invoke_report_judges_staleness_against_todays_matrix(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    today = current_fingerprints(REPO / "matrix.yaml")
    fresh_id, stale_id = "cpu-torch2.13.0-py3.11-debian12", "cpu-torch2.13.0-py3.13-debian13"
    assert today is not None and fresh_id in today and stale_id in today
    fresh = _cpu("2.13.0")
    fresh["cell"]["fingerprint"] = today[fresh_id]
    stale = make_result("cpu", python="3.13", os_key="debian13", tests=TESTS)  # other inputs
    monkeypatch.chdir(REPO)
    report(str(write_results(tmp_path / "results", [fresh, stale])), str(tmp_path / "out"))
    assert "Stale: this verification is older than the cell's inputs" in block(
        tmp_path / "out", "cpu", stale_id)
    assert "Stale" not in block(tmp_path / "out", "cpu", fresh_id)
    assert current_fingerprints(tmp_path / "matrix.yaml") is None


class _Labelled(FakeEngine):
    """A fake engine that keeps the labels of the image it built."""

    labels: dict[str, str]

    def build(self, request: BuildRequest, on_step: Any) -> str:
        self.labels = dict(request.labels)
        return str(super().build(request, on_step))


def test_a_build_records_the_run_flags_of_its_label(project, tmp_path: Path) -> None:
    vendor = project.root / "vendors" / "cpu" / "vendor.yaml"
    vendor.write_text(vendor.read_text() + "run:\n  ipc: host\n  env: {NOTE: two words}\n")
    matrix = load_matrix(project.matrix)
    cell = plan(matrix, ["cpu"])[0]
    engine = _Labelled("local")
    options = BuildOptions(results_dir=tmp_path / "results", run_id="r-flags", verify=False,
                           use_host_pip_config=False)
    host = Host(facts=engine.facts())
    result = CellRun(matrix, cell, engine, Console(io.StringIO(), live=False), options,
                     lambda c: Base(ref="debian:bookworm-slim", how="local"), host).run(build=True)
    assert result.image is not None
    assert result.image.run_flags == {"env": {"NOTE": "two words"}, "ipc": "host"}
    assert load(tmp_path / "results" / cell.id / "result.json").image == result.image
    assert json.loads(engine.labels[LABEL]) == result.image.run_flags


def test_a_cell_verified_in_place_offers_no_image() -> None:
    here = make_result("cpu", python="3.13", os_key="debian13", tests=TESTS)
    here["cell"]["id"] += "-here"
    here["image"] = {"tag": "(none: verified in place)"}
    here["requirements"] = {"vendor": ["torch==2.13.0+cpu"], "test": []}
    report = build_report(typed([here]), [], generated_at=NOW)
    [cell] = start_page(report, "cpu").cells
    assert (cell.run, cell.publish, cell.pulls) == ("", "", ())
    assert cell.pip.command == 'pip install "torch==2.13.0+cpu"'  # PyPI: no index option


def test_a_build_records_the_vendors_requirements_apart_with_the_locks_pins(
        project, tmp_path: Path) -> None:
    """What the page needs comes from the build: the vendor's requirements apart from the
    suite's, the vendor's index for the cell, and the lock's pins of the vendor's stack."""
    matrix = load_matrix(project.matrix)
    cell = plan(matrix, ["cpu"])[0]
    body = ("filelock==4.2.11 \\\n    --hash=sha256:" + "a" * 64 + "\n    # via\n"
            "    #   pytest\n    #   torch\npytest==9.2.0 \\\n    --hash=sha256:" + "b" * 64
            + "\n    # via -r /lock/requirements.in\ntorch==2.13.0+cpu \\\n    --hash=sha256:"
            + "c" * 64 + "\n    # via -r /lock/requirements.in\n")
    lock = lock_path(matrix, cell)
    lock.parent.mkdir(parents=True)
    lock.write_text(header(cell) + body)
    engine = _Labelled("local")
    options = BuildOptions(results_dir=tmp_path / "results", run_id="r-req", verify=False,
                           use_host_pip_config=False)
    result = CellRun(matrix, cell, engine, Console(io.StringIO(), live=False), options,
                     lambda c: Base(ref="debian:bookworm-slim", how="local"),
                     Host(facts=engine.facts())).run(build=True)
    req = load(tmp_path / "results" / cell.id / "result.json").requirements
    assert req == result.requirements and req is not None
    assert req.vendor == ("torch==2.13.0+cpu",)
    assert req.test == ("pytest>=8,<10", "numpy>=1.26,<3", "transformers==5.23.0")
    assert (req.extra_index_url, req.index_url) == ("https://download.pytorch.org/whl/cpu", "")
    assert [(p.name, p.version, p.hashes) for p in req.locked] == [
        ("filelock", "4.2.11", ("a" * 64,)), ("torch", "2.13.0+cpu", ("c" * 64,))]
    assert result.requested == req.vendor + req.test  # the history's view is unchanged


def test_a_cell_resting_on_an_unverified_fact_is_marked_everywhere(tmp_path: Path) -> None:
    """The report of the shipped matrix marks the CUDA 2.15/13.0 cell (its compat row is
    unverified) in matrix.md, index.html and its get-started page, and not the 13.2 one."""
    marked = "cuda-torch2.15.0-cu13.0-py3.11-debian12"
    plain = "cuda-torch2.15.0-cu13.2-py3.11-debian12"
    cells = [make_result("cuda", torch="2.15.0", toolkit="cuda", toolkit_version=v,
                         installed_torch="2.15.0") for v in ("13.0", "13.2")]
    assert [c["cell"]["id"] for c in cells] == [marked, plain]
    results_dir = write_results(tmp_path / "results", cells)
    report(str(results_dir), str(tmp_path / "reports"), matrix=str(REPO / "matrix.yaml"))
    fact = ("vendors/cuda/vendor.yaml facts.compat[1]: torch 2.15: toolkit 13.0, python "
            ">=3.11,<3.16: UNVERIFIED: RELEASE.md's 2.15 row was not read")
    matrix_md = (tmp_path / "reports" / "matrix.md").read_text(encoding="utf-8")
    section = matrix_md.split("## Cells resting on unverified vendor facts", 1)[1]
    assert f"- `{marked}`" in section and plain not in section.split("##", 1)[0]
    assert md_text(fact) in section   # as Markdown shows it: brackets and '<' escaped
    index = html.unescape((tmp_path / "reports" / "index.html").read_text(encoding="utf-8"))
    assert "Cells resting on unverified vendor facts" in index and fact in index
    assert "Rests on vendor facts no source confirms" in block(tmp_path / "reports", "cuda",
                                                               marked)
    assert "no source confirms" not in block(tmp_path / "reports", "cuda", plain)
