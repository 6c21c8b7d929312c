"""Adding a vendor is data plus a template plus a test: no engine change.

A throw-away copy of the project gets a new vendor folder (vendor.yaml, Dockerfile.j2 and one
verify test, nothing else) and a matrix entry; the real engine then generates, builds and
verifies its cell. The cell reuses the bootstrapped Debian 12 base and the host's
torch 2.13.0+cpu wheel, so it is fast and mostly cached.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import yaml

from oota.api.cells import generate
from oota.config.matrix import load_matrix
from oota.console import Console
from oota.execute.build import BuildOptions
from oota.plan import plan, select
from tests.runs import build_cells

from .conftest import copy_project, made_by

NAME = "demo"
CELL = "demo-torch2.13.0-sdk1.0-py3.11-debian12"
MARKER = "set-by-the-demo-vendor"

VENDOR_YAML = """\
    # A vendor made only of data, a template and a test, to prove the engine needs no change.
    name: demo
    display: Demo accelerator
    source: https://github.com/pytorch/pytorch/blob/main/RELEASE.md
    device: cpu
    toolkit: {axis: sdk, id_prefix: sdk, name: Demo SDK}
    index_url: ""
    requirements: ["torch=={torch}+cpu"]
    test_requirements: ["pytest>=8,<10", "numpy>=1.26,<3"]
    run: {}
    verify:
      dtypes: [float32]
      tolerances:
        float32: {rtol: 1.3e-6, atol: 1.0e-5}
    smoke_imports: [torch]
    env: {OOTA_DEMO_MARKER: @MARKER@}
    """.replace("@MARKER@", MARKER)

TEMPLATE = """\
    {% extends "base.Dockerfile.j2" %}
    {% block runtime_extra %}
    RUN echo {{ ("sdk " ~ coords.sdk) | shell_word }} > /opt/oota/demo-sdk.txt
    {% endblock %}
    """

VERIFY_TEST = """\
    import os
    from pathlib import Path


    def test_cell_is_the_demo_cell(cell):
        assert cell["vendor"] == "demo" and cell["toolkit"] == "sdk"
        assert cell["toolkit_version"] == "1.0"


    def test_template_block_and_env_reach_the_image(cell):
        sdk = Path("/opt/oota/demo-sdk.txt").read_text().strip()
        assert sdk == "sdk " + cell["toolkit_version"]
        assert os.environ["OOTA_DEMO_MARKER"] == "@MARKER@"
    """.replace("@MARKER@", MARKER)


def add_vendor(root: Path) -> Path:
    """Write vendors/demo/ and its matrix entry into the project copy at ``root``."""
    matrix_file = copy_project(root)
    folder = root / "vendors" / NAME
    (folder / "verify").mkdir(parents=True)
    (folder / "vendor.yaml").write_text(textwrap.dedent(VENDOR_YAML))
    (folder / "Dockerfile.j2").write_text(textwrap.dedent(TEMPLATE))
    (folder / "verify" / f"test_{NAME}.py").write_text(textwrap.dedent(VERIFY_TEST))
    data = yaml.safe_load(matrix_file.read_text())
    data["vendors"] = {NAME: {"os": ["debian12"], "python": ["3.11"], "torch": ["2.13.0"],
                              "sdk": ["1.0"]}}
    matrix_file.write_text(yaml.safe_dump(data, sort_keys=False))
    return matrix_file


def test_a_vendor_folder_builds_and_verifies_without_engine_changes(engine, run_id,
                                                                   tmp_path):
    matrix_file = add_vendor(tmp_path / "project")
    written, _ = generate(str(matrix_file), [NAME], check_only=False)
    generated = tmp_path / "project" / "images" / NAME / CELL
    assert {p.name for p in written} == {"Dockerfile", "cell.json"}
    assert json.loads((generated / "cell.json").read_text())["toolkit_version"] == "1.0"

    matrix = load_matrix(matrix_file)
    cells = select(matrix, plan(matrix, [NAME]), everything=True)
    assert [c.id for c in cells] == [CELL]
    # The layers that show the vendor's data at work: its install, its versions, its device
    # and its own test (the whole suite on a CPU cell is the session's ``built``; the whole
    # suite of a vendor made of data is test_fleet.py's): about 40 s less of a loaded CI run.
    options = BuildOptions(results_dir=tmp_path / "results", run_id=run_id,
                           namespace="oota-test-vendors",
                           layers=("install", "compat", "device", "vendor"),
                           extra_labels=made_by(run_id))
    [result] = [r.to_json() for r in build_cells(matrix, cells, engine, Console(), options)]

    assert result["status"] == "passed", result.get("message")
    assert result["stages"]["build"]["status"] == "passed"
    assert result["stages"]["verify"]["status"] == "passed"
    vendor_tests = {t["id"].rsplit("::", 1)[-1]: t["status"] for t in result["tests"]
                    if f"test_{NAME}.py" in t["id"]}
    assert vendor_tests == {"test_cell_is_the_demo_cell": "passed",
                            "test_template_block_and_env_reach_the_image": "passed"}
    labels = engine.image_labels(options.tag_for(cells[0]))
    assert labels["oota.vendor"] == NAME and labels["oota.toolkit_version"] == "1.0"
    assert json.loads((tmp_path / "results" / CELL / "result.json").read_text())["status"] \
        == "passed"
