"""The docs site: its generated pages (scripts/gen_docs.py) say what the code and the schemas
say and are committed current, the benchmarks' results render with their machine and date,
and the site builds with `mkdocs build --strict`, which fails on a link or anchor that does not
exist."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from invoke import Collection

import tasks
from tests.conftest import REPO

MKDOCS = Path(sys.executable).parent / "mkdocs"
needs_mkdocs = pytest.mark.skipif(
    not MKDOCS.exists(), reason="mkdocs is not installed (the docs extra, which the test extra "
                                "includes, installs it)")


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


gen = _load(REPO / "scripts" / "gen_docs.py", "gen_docs")
record = _load(REPO / "benchmarks" / "record.py", "bench_record")


def test_the_committed_pages_are_what_the_generator_writes() -> None:
    assert gen.stale(gen.pages()) == "", "run `python scripts/gen_docs.py` and commit"


def test_check_shows_the_diff_of_a_stale_page(capsys: pytest.CaptureFixture[str]) -> None:
    generated = gen.pages()
    page = gen.DOCS / "reference" / "tasks.md"
    changed = {**generated, page: generated[page].replace("## build", "## built")}
    diff = gen.stale(changed)
    assert "docs/reference/tasks.md" in diff and "+## built" in diff and "-## build" in diff


def test_every_task_and_every_flag_invoke_parses_is_on_the_tasks_page() -> None:
    page = (gen.DOCS / "reference" / "tasks.md").read_text(encoding="utf-8")
    collection = Collection.from_module(tasks)
    assert collection.task_names
    for name in collection.task_names:
        assert f"\n## {name}\n" in page, name
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for argument in collection[name].get_arguments():
            flag = "--" + argument.name.replace("_", "-")
            assert f"`{flag}`" in section, f"{name}: {flag} is not on the page"


def test_a_flag_on_by_default_shows_its_off_switch() -> None:
    test = next(t for t in gen.task_docs() if t.name == "test")
    docker = next(f for f in test.flags if "--docker" in f.names)
    assert docker.names == ("--docker", "--no-docker") and docker.default == "on"
    publish = next(t for t in gen.task_docs() if t.name == "publish")
    assert next(f for f in publish.flags if f.names == ("--registry",)).required


def _property_paths(node: dict[str, Any], path: str = "") -> Iterator[str]:
    for key, child in node.get("properties", {}).items():
        here = f"{path}.{key}" if path else key
        yield here
        yield from _property_paths(child, here)


@pytest.mark.parametrize("name", ["result-v1", "vendor-v1"])
def test_every_top_level_property_and_named_type_of_the_schema_is_documented(name: str) -> None:
    schema = json.loads((REPO / "schema" / f"{name}.json").read_text(encoding="utf-8"))
    doc = gen.schema_doc(name)
    paths = {row.path for row in doc.rows}
    assert set(_property_paths(schema)) <= paths
    assert [t.name for t in doc.types] == list(schema["$defs"])
    page = (gen.DOCS / "reference" / f"{name}.md").read_text(encoding="utf-8")
    assert all(f"\n### {t.name}\n" in page for t in doc.types)


def test_a_type_names_its_constraints_and_links_named_types() -> None:
    assert gen.type_of({"$ref": "#/$defs/status"}) == "[status](#status)"
    assert gen.type_of({"type": "array", "items": {"type": "string", "pattern": "^a|b$"},
                        "uniqueItems": True}) \
        == "list of string (matching `^a|b$`) (no duplicates)"
    assert gen.type_of({"oneOf": [{"type": "string"}, {"type": "null"}]}) == "string or null"


def test_table_cells_escape_pipes_and_tags_outside_code_only() -> None:
    assert gen.cell("a | b `x|y` <v>\n`<k>`") == "a \\| b `x|y` &lt;v&gt; `<k>`"


def test_a_recorded_run_renders_with_its_machine_and_date(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [str(REPO / "benchmarks" / "bench_x.py"), "--runs", "3"])
    written = record.write("bench_x.py", title="X", what="x measured",
                           columns=[("step", ""), ("median", "s")],
                           rows=[["a", 1.25], ["b", None]], notes=["a note"], folder=tmp_path)
    doc = json.loads(written.read_text(encoding="utf-8"))
    assert doc["command"] == "python benchmarks/bench_x.py --runs 3"
    assert doc["machine"]["cpus"] == os.cpu_count() and doc["machine"]["summary"]
    monkeypatch.setattr(gen, "REPO", tmp_path.parent)
    [bench] = gen.bench_docs(tmp_path)
    [run] = bench.runs
    assert (bench.benchmark, bench.title, run.date) == ("benchmarks/bench_x.py", "X", doc["date"])
    assert run.columns == ("step", "median (s)") and run.rows == (("a", "1.25"), ("b", "–"))
    page = gen.environment().get_template("performance.md.j2").render(benchmarks=[bench])
    assert f"Measured {doc['date']} on {doc['machine']['summary']}: `{doc['command']}`" in page
    assert "| a | 1.25 |" in page
    assert doc["notes"] == ["a note"] and "a note" not in page   # the file keeps the diary


def test_the_performance_page_shows_no_commit_diary() -> None:
    """A row's label loses the commit it names; the page shows each benchmark's runs of its
    newest day (one table per machine) and lists the earlier ones by file (their notes stay
    in the files)."""
    assert gen._undated("one ops worker per verification (6fd44b8)") == \
        "one ops worker per verification"
    assert gen._undated("from README.md (commit dd2b124 and later)") == "from README.md"
    page = (gen.DOCS / "performance.md").read_text(encoding="utf-8")
    labels = [line.split("|")[1] for line in page.splitlines() if line.startswith("| ")]
    assert not [label for label in labels if re.search(r"\([0-9a-f]{7,40}\)", label)]
    benches = gen.bench_docs()
    newest = sum(len([r for r in b.runs if r.date == b.runs[0].date]) for b in benches)
    assert page.count("\nMeasured ") == newest
    assert newest >= len(benches)  # every benchmark has at least its newest run


@pytest.mark.parametrize(("content", "message"), [
    ("[]", "not a JSON object"),
    ('{"columns": [{"name": "a"}]}', "'unit' must be a str"),
    ('{"columns": [], "rows": [["x"]]}', "rows[0] must be a list of 0 cells"),
    ("{", "Expecting"),
], ids=["not-an-object", "column-without-unit", "row-too-long", "not-json"])
def test_a_bad_result_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    content: str, message: str) -> None:
    (tmp_path / "bench_x-2026-01-01.json").write_text(content, encoding="utf-8")
    monkeypatch.setattr(gen, "REPO", tmp_path.parent)
    with pytest.raises(gen.DocsError, match="bench_x-2026-01-01.json") as caught:
        gen.bench_docs(tmp_path)
    assert message in str(caught.value)


def test_every_committed_benchmark_result_names_its_machine_and_date() -> None:
    benchmarks = gen.bench_docs()
    assert {b.benchmark for b in benchmarks} >= {"benchmarks/bench_hud.py",
                                                 "benchmarks/bench_fleet.py", ".ci/run"}
    for bench in benchmarks:
        for run in bench.runs:
            assert run.machine and len(run.date) == 10, run.file


def _mkdocs(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(site)], cwd=root,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@needs_mkdocs
def test_the_site_builds_strict_with_every_page_of_the_nav(tmp_path: Path) -> None:
    proc = _mkdocs(REPO, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    for page in ("index.html", "reference/tasks/index.html", "reference/result-v1/index.html",
                 "reference/vendor-v1/index.html", "performance/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


@needs_mkdocs
def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(REPO / "mkdocs.yml", root)
    shutil.copytree(gen.DOCS, root / "docs")
    with (root / "docs" / "index.md").open("a", encoding="utf-8") as page:
        page.write("\n[a](reference/missing.md) [b](reference/tasks.md#no-such-task)\n")
    proc = _mkdocs(root, tmp_path / "site")
    assert proc.returncode == 1
    assert "'reference/missing.md'" in proc.stderr and "'#no-such-task'" in proc.stderr


def test_the_exit_codes_page_lists_every_code_oota_exits_with() -> None:
    """docs/reference/exit-codes.md is written by hand: it must list exactly the codes of
    oota/errors.py, where each is defined once (141 included: SIGPIPE, oota stops quietly
    when its reader goes away)."""
    from oota import errors

    page = (gen.DOCS / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    listed = {int(code) for code in re.findall(r"^- \*\*(\d+)\*\*:", page, re.MULTILINE)}
    codes = {value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    assert listed == codes and 141 in codes
