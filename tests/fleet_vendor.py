"""A small vendor for fleet tests and benchmarks: many cells, each cheap to build and verify.

``fleet`` is made of data, a template and one verify test, like any vendor folder. Its cells
differ only in a ``sdk`` axis whose value reaches one late layer, so every cell after the first
on an engine reuses that engine's cached layers (Debian 12, Python 3.11, the host's
torch 2.13.0+cpu wheel, pytest and numpy) and builds one small layer. Its suite is oota's real
one on the CPU, every layer of it, plus the vendor's test: no model is declared, so the models
layer runs none, and compile and distributed are not claimed; in the Docker tests the other
layers run their must-run sets (budgets of 0 s), about 45 s of a loaded CI host per cell.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import yaml

NAME = "fleet"
REPO = Path(__file__).resolve().parents[1]

VENDOR_YAML = """\
    # A vendor for fleet tests: cells that are cheap to build and verify on any CPU host.
    name: fleet
    display: Fleet test vendor (CPU)
    source: https://github.com/pytorch/pytorch/blob/main/RELEASE.md
    device: cpu
    toolkit: {axis: sdk, id_prefix: sdk, name: Fleet SDK}
    index_url: ""
    requirements: ["torch=={torch}+cpu"]
    test_requirements: ["pytest>=8,<10", "numpy>=1.26,<3"]
    run: {}
    verify:
      dtypes: [float32]
      tolerances:
        float32: {rtol: 1.3e-6, atol: 1.0e-5}
      models: []
    smoke_imports: [torch]
    """

TEMPLATE = """\
    {% extends "base.Dockerfile.j2" %}
    {% block runtime_extra %}
    RUN echo {{ ("sdk " ~ coords.sdk) | shell_word }} > /opt/oota/fleet-sdk.txt
    {% endblock %}
    """

VERIFY_TEST = """\
    from pathlib import Path


    def test_the_cell_layer_is_this_cells(cell):
        written = Path("/opt/oota/fleet-sdk.txt").read_text().strip()
        assert written == "sdk " + cell["toolkit_version"]
    """


def cell_id(sdk: str) -> str:
    return f"fleet-torch2.13.0-sdk{sdk}-py3.11-debian12"


def make_project(root: Path, sdks: list[str]) -> Path:
    """A copy of the project at ``root`` whose matrix has only the fleet vendor, one cell per
    ``sdks`` value; returns the matrix file."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("verify", "templates/dockerfile"):
        shutil.copytree(REPO / name, root / name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "matrix.yaml", root / "matrix.yaml")
    folder = root / "vendors" / NAME
    (folder / "verify").mkdir(parents=True, exist_ok=True)
    (folder / "vendor.yaml").write_text(textwrap.dedent(VENDOR_YAML))
    (folder / "Dockerfile.j2").write_text(textwrap.dedent(TEMPLATE))
    (folder / "verify" / f"test_{NAME}.py").write_text(textwrap.dedent(VERIFY_TEST))
    return set_sdks(root / "matrix.yaml", sdks)


def set_sdks(matrix_file: Path, sdks: list[str]) -> Path:
    """Make the matrix's fleet cells the ones of ``sdks`` (every one a default cell)."""
    data = yaml.safe_load(matrix_file.read_text())
    data["vendors"] = {NAME: {"os": ["debian12"], "python": ["3.11"], "torch": ["2.13.0"],
                              "sdk": list(sdks)}}
    matrix_file.write_text(yaml.safe_dump(data, sort_keys=False))
    return matrix_file


def hosts_file(folder: Path, engines: dict[str, str], jobs: int = 1) -> Path:
    """hosts.yaml with one host per ``name -> url``, each taking the fleet vendor's cells."""
    data = {"hosts": {name: {"endpoint": url, "vendors": [NAME], "jobs": jobs}
                      for name, url in engines.items()}}
    path = folder / "hosts.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
