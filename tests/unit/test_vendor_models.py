"""Models on every accelerator: each vendor of the repository's matrix declares the suite's tiny
models, installs the libraries they need, and the report's models x vendors table has a row for
every model and a column for every vendor."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement

from oota.config.matrix import load_matrix
from oota.config.vendors import Vendor
from oota.report.markdown import to_markdown
from tests.reports import build_report
from tests.unit.test_report import NOW, case, make_result, model_test, typed

REPO = Path(__file__).resolve().parents[2]
LANGUAGE_MODELS = ("llama", "mistral", "qwen2", "gemma")
# The library each model's real class comes from (verify/test_models.py MODELS).
NEEDS = {"timm_resnet18": ("timm", "torchvision", "transformers")}


def _vendors() -> dict[str, Vendor]:
    return {name: vm.vendor for name, vm in load_matrix(REPO / "matrix.yaml").vendors.items()}


VENDORS = _vendors()


@pytest.mark.parametrize("name", sorted(VENDORS))
def test_every_vendor_runs_the_tiny_models(name: str) -> None:
    models = VENDORS[name].verify.models
    assert set(LANGUAGE_MODELS) | {"resnet"} <= set(models), models


@pytest.mark.parametrize("name", sorted(VENDORS))
def test_the_model_libraries_are_installed(name: str) -> None:
    """A declared model whose library the image lacks would fail the install layer."""
    vendor = VENDORS[name]
    installed = {Requirement(text.split("{")[0].rstrip("=")).name
                 for text in vendor.test_requirements}
    for model in vendor.verify.models:
        missing = set(NEEDS.get(model, ("transformers",))) - installed
        assert not missing, f"{name}: {model} needs {sorted(missing)} in test_requirements"


@pytest.mark.parametrize("name", ["rocm", "xpu"])
def test_timm_runs_where_the_index_has_torchvision(name: str) -> None:
    assert "timm_resnet18" in VENDORS[name].verify.models
    assert "torchvision" in VENDORS[name].companions


def _results_of_every_vendor() -> list[dict[str, object]]:
    results = []
    for name, vendor in sorted(VENDORS.items()):
        tests = [case("test_install.py::test_core_imports[torch]", "install")]
        tests += [model_test(m, "unsupported-here", f"no {vendor.device} device here",
                             with_data=False) if name not in ("cpu", "reference")
                  else model_test(m) for m in vendor.verify.models]
        results.append(make_result(name, tests=tests))
    return results


def test_models_table_has_a_row_per_model_and_a_column_per_vendor() -> None:
    report = build_report(typed(_results_of_every_vendor()), [], generated_at=NOW)
    declared = {m for v in VENDORS.values() for m in v.verify.models}
    assert {row.model for row in report.models} == declared
    for row in report.models:
        users = {name for name, v in VENDORS.items() if row.model in v.verify.models}
        assert set(row.marks) == users, row.model
    lines = to_markdown(report).splitlines()
    assert f"| model | {' | '.join(sorted(VENDORS))} |" in lines
    llama = next(line for line in lines if line.startswith("| llama |"))
    assert llama.count("n/a here") == len(VENDORS) - 2 and llama.count("✓") == 2
