"""Credentials never leave the host's secret channel: a canary password in every place a URL
with credentials can be written (a vendor's index_url, a nightly channel's index) appears in
no generated file, while the build still gets it, as a BuildKit secret. The image side of the
same canary (every layer, results, reports, history) is tests/docker/test_nightly.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from oota.config.matrix import load_matrix
from oota.errors import InputError
from oota.execute.context import stage_context
from oota.execute.sources import resolve_sources
from oota.net import netrc_for
from oota.plan import plan, select
from oota.render import context_files, render_all
from tests import forkcli

REPO = Path(__file__).resolve().parents[2]
CANARY = "canary-Pw-4f9e1c"
NIGHTLY = f"https://lab:{CANARY}@mirror.lab.example/whl/nightly/cpu"
VENDOR_INDEX = f"https://lab:{CANARY}@pypi.lab.example/simple"
CELL = "cpu-torchnightly-py3.11-debian12"


@pytest.fixture
def secret_project(project):
    """The test project with the canary in the cpu vendor's index and a nightly channel's."""
    vendor = project.root / "vendors/cpu/vendor.yaml"
    text = vendor.read_text()
    start = text.index("index_url:")
    end = text.index("\n", start)
    vendor.write_text(text[:start] + f'index_url: "{VENDOR_INDEX}"' + text[end:])
    matrix = project.matrix.read_text().replace(
        'torch: ["2.13.0"]', f'torch: ["2.13.0", {{channel: nightly, index: "{NIGHTLY}"}}]')
    project.matrix.write_text(matrix)
    (project.root / "tasks.py").write_bytes((REPO / "tasks.py").read_bytes())
    return project


def test_no_generated_file_holds_the_canary(secret_project):
    proc = forkcli.run([sys.executable, "-m", "oota", "generate"], cwd=secret_project.root,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                       text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    written = [p for p in (secret_project.root / "images").rglob("*") if p.is_file()]
    assert len(written) >= 4  # two cells at least, a Dockerfile and a cell.json each
    assert [p for p in written if CANARY.encode() in p.read_bytes()] == []
    assert CANARY not in proc.stdout + proc.stderr
    nightly = secret_project.root / "images/cpu" / CELL
    # The index is named, without its credentials, where pip and the suite need it.
    assert "--index-url https://mirror.lab.example/whl/nightly/cpu " in \
        (nightly / "Dockerfile").read_text()
    assert '"index_url": "https://mirror.lab.example/whl/nightly/cpu"' in \
        (nightly / "cell.json").read_text()


def test_the_build_context_holds_no_canary_and_the_secrets_do(secret_project, tmp_path):
    matrix = load_matrix("matrix.yaml")
    cells = select(matrix, plan(matrix), ids=[CELL])
    [rendered] = render_all(matrix, cells)
    sources = resolve_sources(vendor_index=cells[0].index_url, use_host_config=False,
                              probe=False)
    context, secrets = stage_context(tmp_path, context_files(matrix, rendered), sources, None,
                                     netrc_urls=[cells[0].index_url])
    leaked = [p for p in context.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert leaked == []
    assert secrets["netrc"].read_text() == f"machine mirror.lab.example login lab password " \
                                           f"{CANARY}\n"
    assert CANARY in secrets["pipconf"].read_text()   # the vendor's index, for pip
    assert oct(secrets["netrc"].stat().st_mode & 0o777) == "0o600"


def test_a_token_in_a_channel_query_is_refused(secret_project):
    matrix = secret_project.matrix.read_text().replace(NIGHTLY, f"{NIGHTLY}?token={CANARY}")
    secret_project.matrix.write_text(matrix)
    loaded = load_matrix("matrix.yaml")
    with pytest.raises(InputError) as info:
        render_all(loaded, plan(loaded))
    assert "carries a secret in its query (token=...)" in str(info.value)
    assert CANARY not in str(info.value)


def test_netrc_holds_only_urls_with_credentials():
    assert netrc_for(["https://mirror.example/simple", "https://u:p%40ss@a.example/x",
                      "https://TOKEN@b.example/"]) == (
        "machine a.example login u password p@ss\nmachine b.example login TOKEN password \"\"\n")
