"""Install layer: the stack imports, has the versions the cell promises, and is consistent."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

LAYER = "install"


def test_python_version_matches_cell(cell):
    assert f"{sys.version_info.major}.{sys.version_info.minor}" == cell["python"]


@pytest.mark.parametrize("module", ["torch"])
def test_core_imports(module):
    imported = importlib.import_module(module)
    assert imported.__name__ == module
    assert str(imported.__version__), f"{module} has no version"


def test_vendor_smoke_imports(cell):
    failures = {}
    for name in cell["smoke_imports"]:
        try:
            importlib.import_module(name)
        except Exception as exc:  # report every failing import, not just the first
            failures[name] = f"{type(exc).__name__}: {exc}"
    assert not failures, failures


def test_torch_release_matches_cell(cell):
    if cell.get("channel"):
        pytest.skip(f"torch from the {cell['channel']['name']} channel: no release to match "
                    "(the compat layer dates it)")
    import torch

    # '2.13.0+cpu' is release 2.13.0 with a local build tag; the tag is checked per vendor.
    assert Version(torch.__version__).release == Version(cell["torch"]).release, torch.__version__


def test_model_libraries_import(spec, record_data):
    """The libraries of the models the vendor declares import here, device or not, so a broken
    model stack shows on every host, not only on one with the hardware."""
    from test_models import MODELS

    families = sorted({MODELS[m].family for m in spec.get("models") or [] if m in MODELS})
    if not families:
        pytest.skip("the vendor declares no models (verify.models in vendor.yaml)")
    failures, versions = {}, {}
    for family in families:
        try:
            versions[family] = getattr(importlib.import_module(family), "__version__", "?")
        except Exception as exc:  # report every library, not just the first
            failures[family] = f"{type(exc).__name__}: {exc}"
    record_data(libraries=versions)
    assert not failures, failures


def test_pip_check_is_clean():
    proc = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_provenance_records_torch(cell):
    provenance = Path("/opt/oota/provenance.json")
    if not provenance.exists():
        pytest.skip("no /opt/oota/provenance.json: not built by oota")
    data = json.loads(provenance.read_text())
    torch_entry = data["packages"].get("torch")
    assert torch_entry, "pip's install report does not list torch"
    import torch

    # pip's metadata says 2.15.0 where torch says 2.15.0+cu132 (PyPI's CUDA wheel): compare the
    # public versions; the local build tag is the compat layer's business.
    assert Version(torch_entry["version"]).public == Version(torch.__version__).public
