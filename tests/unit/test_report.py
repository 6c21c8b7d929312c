"""Report: data built from synthetic (schema-valid) result files, and every writer on top of it.

The builders here (``make_result``, ``case``, ``model_test``, ``write_results``) are also used by
tests/unit/test_compare.py and tests/browser/test_report_page.py.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from oota.report.data import collect
from oota.report.htmlpages import to_html
from oota.report.jsondoc import to_json
from oota.report.markdown import MARKDOWN_LIMIT, to_markdown
from oota.report.text import md_text
from oota.report.write import write_report
from oota.results.assemble import first_problem, overall_status, summarize
from oota.results.model import Result
from oota.results.store import save, validation_errors
from tests.reports import build_report

HOSTILE = "<script>alert('x')</script> | **bold** [link](http://evil) & \"quoted\""
NOW = "2026-11-21T12:00:00+00:00"
DIGEST = "sha256:" + "ab" * 32


def case(test_id: str, layer: str, status: str = "passed", message: str = "",
         data: dict[str, Any] | None = None, duration: float = 0.25) -> dict[str, Any]:
    entry = {"id": test_id, "layer": layer, "status": status, "duration_s": duration}
    if message:
        entry["message"] = message
    if data is not None:
        entry["data"] = data
    return entry





def model_test(model: str, status: str = "passed", message: str = "", dtype: str = "float32",
               with_data: bool = True) -> dict[str, Any]:
    """A models-layer test as the verify suite writes it; skipped ones carry no data."""
    data = {"model": model, "dtype": dtype, "seconds": 1.5, "peak_bytes": 3 * 1024 ** 3,
            "max_abs_diff": 2.5e-4} if with_data else None
    return case(f"test_models.py::test_forward[{model}-{dtype}]", "models", status, message, data)


def packages(torch: str, **extra: tuple[str, bool]) -> dict[str, Any]:
    pkgs = {"torch": {"version": torch, "source": "https://pypi.org/simple", "sha256": None,
                      "requested": True},
            "numpy": {"version": "2.3.1", "source": "https://pypi.org/simple", "sha256": None,
                      "requested": False}}
    for name, (version, requested) in extra.items():
        pkgs[name] = {"version": version, "source": "https://pypi.org/simple",
                      "sha256": None, "requested": requested}
    return pkgs


def make_result(vendor: str = "cpu", *, torch: str = "2.13.0", python: str = "3.11",
                os_key: str = "debian12", toolkit: str | None = None,
                toolkit_version: str | None = None, tests: list[dict[str, Any]] | None = None,
                build: str = "passed", build_message: str = "",
                installed_torch: str | None = None, extra_packages: dict | None = None,
                digest: str = DIGEST, base_ref: str = "oota/base:debian12",
                skips: dict[str, Any] | None = None, host: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    """A result.json as oota writes it (validated by the ``results`` fixture)."""
    prefix = {"cann": "cann", "cuda": "cu"}.get(toolkit or "", "")
    cell_id = "-".join([vendor, f"torch{torch}", *([f"{prefix}{toolkit_version}"]
                                                   if toolkit else []), f"py{python}", os_key])
    stages = {"build": {"status": build, "duration_s": 12.5, "log": "build.log"}}
    if build_message:
        stages["build"]["message"] = build_message
    if build == "passed":
        stages["verify"] = {"status": "passed", "duration_s": 4.0, "log": "verify.log"}
    tests = list(tests or [])
    version = installed_torch or f"{torch}+cpu"
    result = {
        "schema": "oota.result/v1",
        "cell": {"id": cell_id, "vendor": vendor, "os": os_key, "python": python,
                 "torch": torch, "toolkit": toolkit, "toolkit_version": toolkit_version,
                 "fingerprint": "sha256:" + "0" * 64},
        "status": "passed", "summary": {}, "stages": stages, "tests": tests,
        "image": {"tag": f"oota/{vendor}:{cell_id}", "id": None, "digest": digest,
                  "base": {"how": "bootstrapped", "ref": base_ref}},
        "installed": {"torch": {"version": version, "cuda": None, "hip": None,
                                "source": "file:///wheelhouse/torch.whl", "sha256": None},
                      "packages": packages(version, **(extra_packages or {}))},
        "host": host or {"arch": "x86_64", "kernel": "6.1.0", "devices": []},
        "toolkit": {"name": "oota", "version": "0.1.0"}, "run_id": "abc123",
        "started_at": "2026-11-21T11:00:00+00:00", "finished_at": "2026-11-21T11:05:00+00:00"}
    if skips is not None:
        result["skips"] = skips
    return refresh(result)


ASCEND_SKIPS = {
    "entries": [
        {"id": "test_models.py::test_forward[resnet-float32]", "reason": "no torchvision for npu",
         "owner": "ascend-team", "expires": "2026-12-10", "added": "2026-09-22", "matched": 1},
        {"id": "test_compat.py::test_autocast", "reason": "autocast is WIP upstream",
         "owner": "ascend-team", "expires": "2026-11-01", "added": "2026-05-25", "matched": 0},
        {"id": "test_device.py::test_sort", "reason": "sort is slow", "owner": "ascend-team",
         "expires": "2027-06-01", "matched": 0}],
    "expired": ["test_compat.py::test_autocast"],
    "unmatched": ["test_compat.py::test_autocast", "test_device.py::test_sort"]}


def sample_results() -> list[dict[str, Any]]:
    """Four vendors: cpu (two cells, one failing gemma), reference (skip list, hostile text),
    ascend (no NPU here: n/a), cuda (build failed)."""
    return [
        make_result("cpu", tests=[
            case("test_install.py::test_imports", "install"),
            case("test_device.py::test_matmul", "device"),
            model_test("llama"), model_test("gemma"),
            model_test("resnet", "skipped", "no torchvision wheel for this cell",
                       with_data=False)]),
        make_result("cpu", python="3.13", os_key="debian13", tests=[
            case("test_install.py::test_imports", "install"),
            model_test("llama"),
            model_test("gemma", "failed", "AssertionError: max abs diff 0.5 > 0.01")]),
        make_result("reference", tests=[
            case("test_install.py::test_imports", "install"),
            case("test_compat.py::test_custom_op", "compat", "failed", HOSTILE),
            case("test_device.py::test_matmul", "device"),
            model_test("llama")],
            host={"arch": "x86_64", "note": HOSTILE},
            skips={"entries": [{"id": "test_compat.py::x", "reason": HOSTILE,
                                "owner": "ref", "expires": "2027-01-01", "matched": 0}],
                   "expired": [], "unmatched": []}),
        make_result("ascend", toolkit="cann", toolkit_version="9.2.0", os_key="ubuntu22.04",
                    base_ref="quay.io/ascend/cann:9.2.0",
                    extra_packages={"torch_npu": ("2.13.0", True)}, skips=ASCEND_SKIPS, tests=[
                        case("test_install.py::test_imports", "install"),
                        case("test_device.py::test_matmul", "device", "unsupported-here",
                             "no /dev/davinci0 on this host"),
                        model_test("llama", "unsupported-here", "no NPU on this host",
                                   with_data=False),
                        model_test("resnet", "skipped", "no torchvision for npu",
                                   with_data=False)]),
        make_result("cuda", toolkit="cuda", toolkit_version="13.0", build="failed",
                    build_message="pip: no matching distribution for torch==2.13.0+cu130")]


def refresh(result: dict[str, Any]) -> dict[str, Any]:
    """Status and summary again, after a test edited the tests or stages of a result."""
    parsed = Result.from_json(result)
    result["status"] = overall_status(parsed.tests, parsed.stages)
    result["summary"] = summarize(parsed.tests, parsed.stages)
    result.pop("message", None)
    if first_problem(parsed.stages):
        result["message"] = first_problem(parsed.stages)
    assert validation_errors(result) == []
    return result


def typed(results: list[dict[str, Any]]) -> list[Result]:
    """The result files' content as the model the report and compare read."""
    return [Result.from_json(r) for r in results]


def write_results(folder: Path, results: list[dict[str, Any]], logs: bool = True) -> Path:
    for result in results:
        cell_dir = folder / result["cell"]["id"]
        save(cell_dir, Result.from_json(result))
        if logs:
            (cell_dir / "build.log").write_text("#1 building\n", encoding="utf-8")
            (cell_dir / "verify.log").write_text("10 passed\n", encoding="utf-8")
    return folder


@pytest.fixture
def results() -> list[dict[str, Any]]:
    data = sample_results()
    for result in data:
        assert validation_errors(result) == [], result["cell"]["id"]
    return data


@pytest.fixture
def report(results):
    return build_report(typed(results), [], generated_at=NOW)


def _row(report, model):
    return next(r for r in report.models if r.model == model)


# -- data ---------------------------------------------------------------------------------------

def test_models_by_vendors_table(report):
    assert [r.model for r in report.models] == ["gemma", "llama", "resnet"]
    gemma, llama, resnet = _row(report, "gemma"), _row(report, "llama"), _row(report, "resnet")
    assert gemma.marks["cpu"].status == "failed"
    assert gemma.marks["cpu"].note == "1/2 cells"
    assert "cpu-torch2.13.0-py3.13-debian13: failed (AssertionError: max abs diff" \
        in gemma.marks["cpu"].reason
    assert llama.marks["cpu"].status == "passed" and llama.marks["cpu"].note == ""
    assert llama.marks["ascend"].status == "unsupported-here"
    assert resnet.marks["cpu"].status == "skipped"
    assert resnet.marks["cpu"].reason == "no torchvision wheel for this cell"
    assert "reference" not in resnet.marks and "cuda" not in llama.marks


def test_model_name_of_a_skipped_test_comes_from_its_id(report):
    ascend = next(r for r in report.rows if r.vendor == "ascend")
    assert {t.id: t.model for t in ascend.tests if t.layer == "models"} == {
        "test_models.py::test_forward[llama-float32]": "llama",
        "test_models.py::test_forward[resnet-float32]": "resnet"}


def test_cells_by_layers(report, results):
    rows = {r.id: r for r in report.rows}
    assert [r.vendor for r in report.rows] == ["ascend", "cpu", "cpu", "cuda", "reference"]
    ascend = rows["ascend-torch2.13.0-cann9.2.0-py3.11-ubuntu22.04"]
    assert ascend.layers["device"].status == "unsupported-here"
    assert ascend.layers["device"].reason == "no /dev/davinci0 on this host"
    assert ascend.layers["models"].status == "unsupported-here"  # not run here is no pass
    assert ascend.layers["models"].reason == "no NPU on this host"
    assert ascend.layers["compat"].status == ""
    cuda = rows["cuda-torch2.13.0-cu13.0-py3.11-debian12"]
    assert (cuda.status, cuda.layers["build"].status) == ("failed", "failed")
    assert "no matching distribution" in cuda.layers["build"].reason
    assert report.counts == Counter(r["status"] for r in results)
    assert report.counts["failed"] == 3


def test_skip_debt(report):
    debt = {d.vendor: d for d in report.skip_debt}
    ascend = debt["ascend"]
    assert len(ascend.entries) == 3
    assert (ascend.oldest_days, ascend.median_days, ascend.undated) == (180, 120, 1)
    assert ascend.expiring_soon == 1  # resnet: 2026-12-10 is 19 days after 2026-11-21
    assert ascend.expired == 1
    assert ascend.unmatched == ("test_compat.py::test_autocast", "test_device.py::test_sort")
    assert len(debt["cpu"].entries) == 0 and debt["cpu"].oldest_days is None


def test_skip_past_its_date_counts_as_expired_even_if_not_flagged(results):
    skips = results[3]["skips"]
    skips["expired"] = []
    report = build_report(typed(results), [], generated_at=NOW)
    assert next(d for d in report.skip_debt if d.vendor == "ascend").expired == 1


# -- JSON -------------------------------------------------------------------------------------

def test_json_is_the_report_as_data(report):
    data = json.loads(json.dumps(to_json(report)))
    assert data["schema"] == "oota.report/v2"
    assert data["vendors"] == ["ascend", "cpu", "cuda", "reference"]
    gemma = next(m for m in data["models"] if m["model"] == "gemma")
    assert gemma["vendors"]["cpu"]["status"] == "failed"
    cell = next(c for c in data["cells"] if c["vendor"] == "cuda")
    assert cell["layers"]["build"]["status"] == "failed"
    assert cell["page"] == f"cells/{cell['id']}.html"
    assert cell["result"] == f"../results/{cell['id']}/result.json"
    ascend = next(d for d in data["skip_debt"] if d["vendor"] == "ascend")
    assert (ascend["entries"], ascend["expired"], ascend["expiring_within_30_days"]) == (3, 1, 1)
    assert data["comparison"] is None


# -- Markdown ---------------------------------------------------------------------------------

def test_markdown_models_table_with_footnotes(report):
    md = to_markdown(report)
    lines = md.splitlines()
    assert "| model | ascend | cpu | cuda | reference |" in lines
    resnet = next(line for line in lines if line.startswith("| resnet |")).split(" | ")
    number = re.fullmatch(r"skip \[(\d+)\]", resnet[1]).group(1)  # the ascend column
    assert f"{number}. no torchvision for npu" in lines
    gemma = next(line for line in lines if line.startswith("| gemma |"))
    assert "✗ 1/2 cells [" in gemma
    assert "n/a here [" in next(line for line in lines if line.startswith("| llama |"))


def test_markdown_layers_and_skip_debt(report):
    md = to_markdown(report)
    assert "## ascend: cells × layers" in md
    assert ("| `cuda-torch2.13.0-cu13.0-py3.11-debian12` | ✗ [" in md)
    assert "| ascend | 3 | 180 | 120 | 1 | 1 | 2 |" in md


def test_same_reason_shares_one_footnote(results):
    for result in results[:4]:
        result["tests"].append(model_test("vit", "skipped", "same reason", with_data=False))
    md = to_markdown(build_report(typed(results), [], generated_at=NOW))
    vit = next(line for line in md.splitlines() if line.startswith("| vit |"))
    number = re.search(r"skip \[(\d+)\]", vit).group(1)
    assert vit == f"| vit | skip [{number}] | skip [{number}] | – | skip [{number}] |"
    assert md.count("same reason") == 1


def test_markdown_escapes_result_text(report):
    md = to_markdown(report)
    assert "<script>" not in md
    assert "&lt;script&gt;" in md
    assert "\\| \\*\\*bold\\*\\* \\[link\\](http\\://evil)" in md
    assert md_text("a\nb|c") == "a b\\|c"


def test_markdown_under_the_cap_is_not_truncated(report):
    md = to_markdown(report)
    assert "Truncated" not in md
    assert md.endswith("\n")


def test_markdown_cut_at_a_small_limit(report):
    md = to_markdown(report, limit=1500)
    assert len(md.encode()) <= 1500
    assert md.rstrip().splitlines()[-1].startswith("**Truncated:**")
    assert "lines shown to keep this file under 1500 bytes" in md


def test_huge_matrix_stays_under_one_mib(results):
    """300 vendors × 60 failing models, each failure with its own message: megabytes of notes."""
    template = results[1]
    assert validation_errors(template) == []
    template["tests"] += [model_test(f"model{i:03d}", "failed") for i in range(60)]
    many = []
    for i in range(300):
        result = copy.deepcopy(template)
        result["cell"].update(id=f"v{i:03d}-torch2.13.0-py3.11-debian12", vendor=f"v{i:03d}")
        for test in result["tests"]:
            test["message"] = f"{'x' * 300} {test['id']} on vendor {i}"
        many.append(result)
    md = to_markdown(build_report(typed(many), [], generated_at=NOW))
    assert len(md.encode()) <= MARKDOWN_LIMIT
    assert len(md.encode()) > MARKDOWN_LIMIT - 4096  # it used the room it had
    assert "**Truncated:**" in md and "under 1048576 bytes" in md


# -- HTML -------------------------------------------------------------------------------------

class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.titles: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])
        if attrs.get("title"):
            self.titles.append(attrs["title"])


def parse(text: str) -> _Links:
    parser = _Links()
    parser.feed(text)
    return parser


def test_html_marks_carry_their_reason_on_hover(report):
    page = to_html(report)
    titles = parse(page).titles
    assert "no torchvision wheel for this cell" in titles
    assert any(t.startswith("cpu-torch2.13.0-py3.13-debian13: failed") for t in titles)
    assert "<script" not in page.lower() and "http://" not in page.replace("http://evil", "")


def test_html_escapes_everything_from_result_files(tmp_path, results):
    out = tmp_path / "reports"
    write_report(write_results(tmp_path / "results", results), out)
    for page in [out / "index.html", *sorted((out / "cells").glob("*.html"))]:
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text.lower(), page
    cell = (out / "cells" / "reference-torch2.13.0-py3.11-debian12.html").read_text()
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in cell
    assert HOSTILE in parse(to_html(collect(tmp_path / "results"))).titles


def test_every_relative_link_resolves(tmp_path, results):
    out = tmp_path / "reports"
    write_report(write_results(tmp_path / "results", results), out)
    pages = [out / "index.html", *sorted((out / "cells").glob("*.html"))]
    checked = 0
    for page in pages:
        for link in parse(page.read_text(encoding="utf-8")).hrefs:
            parts = urlsplit(link)
            assert not parts.scheme and not parts.netloc, f"{page}: absolute link {link}"
            if parts.path:
                assert (page.parent / unquote(parts.path)).is_file(), f"{page}: {link}"
                checked += 1
    assert checked > 4 * len(results)


def test_cell_page_content(tmp_path, results):
    out = tmp_path / "reports"
    write_report(write_results(tmp_path / "results", results), out)
    page = (out / "cells" / "cpu-torch2.13.0-py3.11-debian12.html").read_text(encoding="utf-8")
    for expected in ("debian12", "oota/cpu:cpu-torch2.13.0-py3.11-debian12", DIGEST,
                     "2.13.0+cpu", "file:///wheelhouse/torch.whl", "x86_64",
                     "test_device.py::test_matmul", "0.250 s", "3.0 GiB", "1.500 s",
                     "no torchvision wheel for this cell"):
        assert expected in page, expected
    links = parse(page).hrefs
    for name in ("build.log", "verify.log", "result.json", "junit.xml"):  # copied in
        assert f"../files/cpu-torch2.13.0-py3.11-debian12/{name}" in links
        assert (out / "files" / "cpu-torch2.13.0-py3.11-debian12" / name).is_file()
    assert "../index.html" in links


def test_cell_page_lists_only_files_that_exist(tmp_path, results):
    out = tmp_path / "reports"
    write_report(write_results(tmp_path / "results", results, logs=False), out)
    links = parse((out / "cells" / "cuda-torch2.13.0-cu13.0-py3.11-debian12.html")
                  .read_text(encoding="utf-8")).hrefs
    assert not [link for link in links if link.endswith(".log")]


# -- files ------------------------------------------------------------------------------------

def test_write_report_writes_every_file(tmp_path, results):
    results_dir = write_results(tmp_path / "results", results)
    (results_dir / "broken").mkdir()
    (results_dir / "broken" / "result.json").write_text("{not json", encoding="utf-8")
    out = tmp_path / "reports"
    (out / "cells").mkdir(parents=True)
    (out / "cells" / "gone-cell.html").write_text("old", encoding="utf-8")
    (out / "compare.json").write_text("{}", encoding="utf-8")
    report = write_report(results_dir, out)
    assert len(report.results) == 5
    assert len(report.problems) == 1 and "broken/result.json: unreadable" in report.problems[0]
    assert sorted(p.name for p in out.iterdir()) == ["cells", "files", "index.html",
                                                     "matrix.md", "results.json", "scorecard",
                                                     "start"]
    assert sorted(p.stem for p in (out / "cells").iterdir()) == sorted(
        r["cell"]["id"] for r in results)
    assert "broken/result.json" in (out / "matrix.md").read_text(encoding="utf-8")
    assert json.loads((out / "results.json").read_text())["problems"] == list(report.problems)


def test_empty_results_folder(tmp_path):
    (tmp_path / "results").mkdir()
    report = write_report(tmp_path / "results", tmp_path / "reports")
    assert report.results == () and report.problems == ()
    assert "No model tests" in (tmp_path / "reports" / "matrix.md").read_text(encoding="utf-8")


def test_a_published_cell_page_shows_the_pull_command_with_its_digest(tmp_path, results):
    published = "sha256:" + "5e" * 32
    first = results[0]
    first["image"]["published"] = [{"ref": f"registry.lab:5000/oota/cpu:{first['cell']['id']}",
                                    "digest": published, "at": "2026-11-23T12:00:00+00:00"}]
    assert validation_errors(first) == []
    out = tmp_path / "reports"
    write_report(write_results(tmp_path / "results", results), out)
    page = (out / "cells" / f"{first['cell']['id']}.html").read_text(encoding="utf-8")
    assert f"docker pull registry.lab:5000/oota/cpu:{first['cell']['id']}@{published}" in page
