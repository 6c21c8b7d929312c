"""A vendor's rule for its extension's torch (``facts.extension.requires_torch``) as
release-check applies it: taken where the metadata declares nothing, held to where it declares
something, and a release with neither never pairs; and what ``--update`` then writes, shown
as a unified diff (a real HTTP index served by the test, PEP 691 with PEP 658 metadata)."""

from __future__ import annotations

import json
from pathlib import Path

from oota.releases.command import run
from tests.conftest import write_vendor_project
from tests.unit.test_companions import PROJECTS, project, serve

# torch 2.14.1 and 2.15.0; demo-ext 2.14.0 declares torch>=2.12 (too loose: built against
# 2.14), 2.13.0 declares nothing, like PyPI's torch-xla.
INDEX = [p for p in PROJECTS if p[0] == "torch"] + [
    ("demo-ext", "2.13.0", "2026-07-08", []),
    ("demo-ext", "2.14.0", "2026-09-02", ["torch>=2.12"]),
]
MATRIX = """\
version: 1
os:
  debian12:
    image: debian:bookworm-slim
    python: ["3.11"]
vendors:
  demo:
    os: [debian12]
    python: ["3.11"]
    # demo-ext follows torch's release series
    torch: ["2.13.0"]
"""
VENDOR = """\
    name: demo
    device: cpu
    requirements: ["torch=={torch}", "demo-ext"]
    facts:
      sources: {notes: {url: "https://example.org/demo-ext/install"}}
      python: ">=3.10"
      torch_index: pypi
      extension:
        distribution: demo-ext
        import: demo_ext
        index: pypi
        RULE
    """
RULE = 'requires_torch: {requires: "=={major}.{minor}.*", source: notes, verified: "2026-11-28"}'


def demo(tmp_path: Path, rule: str = RULE) -> Path:
    return write_vendor_project(tmp_path, MATRIX, {"demo": VENDOR.replace("RULE", rule)})


def rows(text: str, torch: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"demo    {torch}")]


def test_a_declared_requirement_is_held_to_the_rule(tmp_path: Path) -> None:
    with serve(INDEX) as url:
        text = run(demo(tmp_path), index_url=url, torch="2.15.0").text
    [n] = rows(text, "2.15.0")
    assert " GAP " in n
    assert ("no demo-ext for torch 2.15.0 (newest 2.14.0 requires torch>=2.12) (index); "
            "demo-ext 2.14.0 requires torch==2.14.* (vendor data: vendors/demo/vendor.yaml "
            "facts.extension.requires_torch)") in n
    [previous] = rows(text, "2.14.1")
    assert " yes " in previous and "index + vendor data" in previous
    assert ("demo-ext 2.14.0 (requires torch>=2.12) (index); demo-ext 2.14.0 requires "
            "torch==2.14.* (vendor data: vendors/demo/vendor.yaml "
            "facts.extension.requires_torch)") in previous


def test_update_writes_only_what_the_rule_allows_and_shows_the_diff(tmp_path: Path) -> None:
    matrix = demo(tmp_path)
    with serve(INDEX) as url:
        text = run(matrix, index_url=url, torch="2.15.0", update=True).text
    assert 'torch: ["2.14.1"]' in matrix.read_text()
    assert "# demo-ext follows torch's release series" in matrix.read_text()
    assert "updated " in text and ": demo torch [2.14.1]" in text
    diff = text[text.index("--- a/matrix.yaml"):].splitlines()
    assert diff[:2] == ["--- a/matrix.yaml", "+++ b/matrix.yaml"]
    assert '-    torch: ["2.13.0"]' in diff and '+    torch: ["2.14.1"]' in diff
    assert not any("2.15.0" in line for line in diff if line.startswith("+"))


def test_without_a_rule_or_a_declaration_the_pairing_is_unknown(tmp_path: Path) -> None:
    only_silent = [p for p in INDEX if p[1] != "2.14.0"]
    matrix = demo(tmp_path, rule="")
    before = matrix.read_text()
    with serve(only_silent) as url:
        text = run(matrix, index_url=url, torch="2.15.0", update=True).text
    for torch in ("2.15.0", "2.14.1"):
        [row] = rows(text, torch)
        assert " GAP " in row
        assert (f"demo-ext 2.13.0 declares no torch requirement (index); no rule for it: its "
                f"pairing with torch {torch} is unknown (add facts.extension.requires_torch) "
                "(vendor data: vendors/demo/vendor.yaml facts.extension)") in row
    assert matrix.read_text() == before
    assert "note: demo: no pairing for torch 2.15.0 or 2.14.1; torch axis left as it is" in text


CACHED = """\
version: 1
index: https://pypi.org
read: "2026-11-26"
companions:
  torchvision:
    requires: {"0.29.2": ">=2.14.0"}
    pairs: {"2.15.0": {version: "0.29.2", why: "released with torch 2.15.0 (2026-10-28)"}}
"""


def test_a_companion_that_declares_nothing_is_never_cached(tmp_path: Path) -> None:
    silent = [(n, v, day, []) for n, v, day, _ in PROJECTS]   # torchvision without pins
    matrix = project(tmp_path)
    with serve(silent) as url:
        text = run(matrix, index_url=url, torch="2.15.0", update=True).text
        assert not (tmp_path / "vendors" / "companions.yaml").exists()
        assert ("vendors/companions.yaml: not written (no companion pair the index declares)"
                in text)
        # A cache read earlier keeps its pairs: the silent index has none to replace them.
        with_cache = project(tmp_path / "cached")
        cache = tmp_path / "cached" / "vendors" / "companions.yaml"
        cache.write_text(CACHED)
        again = run(with_cache, index_url=url, torch="2.15.0", update=True).text
    assert "vendors/companions.yaml: already up to date" in again
    assert cache.read_text() == CACHED
    assert ("companions: torchvision: no release read from the index declares a torch "
            "requirement (0.29.2, 0.29.1, 0.27.1, 0.27.0); vendors/demo/vendor.yaml pairs "
            "none; nothing for torch 2.15.0, 2.14.1, 2.12.1 (vendor data, not written to "
            "vendors/companions.yaml)") in text


def test_an_update_that_changes_no_pair_leaves_the_cache_as_it_is(tmp_path: Path) -> None:
    matrix = project(tmp_path)
    cache = tmp_path / "vendors" / "companions.yaml"
    with serve(PROJECTS) as url:
        first = run(matrix, index_url=url, torch="2.15.0", update=True).text
        assert "updated vendors/companions.yaml" in first
        assert "+++ b/vendors/companions.yaml" in first
        assert '+      "2.15.0": {version: "0.29.2", why: "released with torch 2.15.0 ' \
               '(2026-10-28)"}' in first.splitlines()
        dated = cache.read_text().replace(cache.read_text().split('read: "')[1][:10],
                                          "2026-11-01")
        cache.write_text(dated)
        again = run(matrix, index_url=url, torch="2.15.0", update=True).text
    assert "vendors/companions.yaml: already up to date" in again
    assert cache.read_text() == dated     # its date is the reading that changed it


def test_json_update_writes_the_cache_and_carries_both_diffs(tmp_path: Path) -> None:
    matrix = project(tmp_path)
    with serve(PROJECTS) as url:
        data = json.loads(run(matrix, index_url=url, torch="2.15.0", update=True,
                              fmt="json").text)
    assert (tmp_path / "vendors" / "companions.yaml").is_file()
    assert data["companions_update"]["changed"] is True
    assert data["companions_update"]["diff"].startswith("--- a/vendors/companions.yaml\n")
    assert data["update"]["diff"].startswith("--- a/matrix.yaml\n")
    assert '+    torch: ["2.15.0", "2.14.1", {release: "2.12.1"' in data["update"]["diff"]


def test_markdown_update_fences_each_diff(tmp_path: Path) -> None:
    matrix = project(tmp_path)
    with serve(PROJECTS) as url:
        text = run(matrix, index_url=url, torch="2.15.0", update=True, fmt="markdown").text
    lines = text.splitlines()
    for shown in ("matrix.yaml", "vendors/companions.yaml"):
        start = lines.index(f"--- a/{shown}")
        assert lines[start - 1] == "```diff", shown
        assert "```" in lines[start:]
