"""Compare: two synthetic runs differing in one axis, and the sentence a release manager reads."""

from __future__ import annotations

import json

import pytest

from oota.errors import InputError
from oota.report import compare as comparing
from oota.report.compare import load_previous, model_of
from oota.report.write import write_report
from oota.results.model import TestOutcome
from oota.results.store import validation_errors
from tests.unit.test_report import case, make_result, model_test, refresh, typed, write_results

FAIL = "RuntimeError: NPU kernel aclnnMatmul failed"


def ascend(*, torch: str = "2.13.0", npu: str = "2.13.0", cann: str = "9.2.0",
           gemma: str = "passed", installed_torch: str | None = None, **kw):
    tests = [case("test_install.py::test_imports", "install"), model_test("llama"),
             model_test("gemma", gemma, FAIL if gemma == "failed" else "")]
    result = make_result("ascend", torch=torch, toolkit="cann", toolkit_version=cann,
                         os_key="ubuntu22.04", extra_packages={"torch_npu": (npu, True)},
                         tests=tests, installed_torch=installed_torch, **kw)
    assert validation_errors(result) == []
    return result


def compare(previous, current, **names):
    """compare() on result files' content (dicts, easy to edit in a test)."""
    return comparing.compare(typed(previous), typed(current), **names)


def match_cells(previous, current):
    return comparing.match_cells(typed(previous), typed(current))


def only(comparison):
    assert len(comparison.cells) == 1
    return comparison.cells[0]


def test_extension_upgrade_breaks_a_model():
    diff = only(compare([ascend()], [ascend(npu="2.14.0", gemma="failed")]))
    assert diff.sentences() == [
        f"gemma on ascend broke when torch-npu went from 2.13.0 to 2.14.0 ({FAIL})"]
    assert [(a.axis, a.name) for a in diff.axes] == [("extension", "torch-npu")]
    assert [t.id for t in diff.newly_failing] == ["test_models.py::test_forward[gemma-float32]"]
    assert (diff.status_before, diff.status_after) == ("passed", "failed")


# (id, previous kwargs, current kwargs, expected cause clause)
AXES = [
    ("torch-in-the-id", {}, {"torch": "2.14.0"}, "torch went from 2.13.0+cpu to 2.14.0+cpu"),
    ("torch-installed-only", {}, {"installed_torch": "2.13.1+cpu"},
     "torch went from 2.13.0+cpu to 2.13.1+cpu"),
    ("toolkit", {}, {"torch": "2.14.0", "cann": "9.3.0"},
     "torch went from 2.13.0+cpu to 2.14.0+cpu and cann went from 9.2.0 to 9.3.0"),
    ("base-image", {}, {"base_ref": "oota/base:ubuntu22.04-v2"},
     "the base image went from oota/base:debian12 to oota/base:ubuntu22.04-v2"),
    ("dependency-only", {}, {"extra_packages": {"torch_npu": ("2.13.0", True),
                                                "numpy": ("2.4.0", False)}},
     "numpy went from 2.3.1 to 2.4.0"),
    ("image-digest-only", {}, {"digest": "sha256:" + "cd" * 32},
     "the image digest went from sha256:abababababab to sha256:cdcdcdcdcdcd"),
]


@pytest.mark.parametrize(("before", "after", "cause"), [a[1:] for a in AXES],
                         ids=[a[0] for a in AXES])
def test_the_axis_that_changed_is_named(before, after, cause):
    npu = after.pop("extra_packages", None)
    current = ascend(gemma="failed", **after)
    if npu:
        current["installed"]["packages"].update(
            {k: {"version": v, "requested": r} for k, (v, r) in npu.items()})
    diff = only(compare([ascend(**before)], [current]))
    assert diff.cause() == cause
    assert diff.sentences()[0] == f"gemma on ascend broke when {cause} ({FAIL})"


def test_nothing_changed_but_the_result():
    diff = only(compare([ascend()], [ascend(gemma="failed")]))
    assert diff.axes == ()
    assert diff.sentences() == [
        "gemma on ascend broke with no change in torch, extensions, toolkit, OS, Python or "
        f"image ({FAIL})"]


def test_image_digest_is_left_out_of_the_sentence_when_a_version_moved():
    diff = only(compare([ascend()], [ascend(npu="2.14.0", digest="sha256:" + "ef" * 32)]))
    assert diff.cause() == "torch-npu went from 2.13.0 to 2.14.0"
    assert "image" in [a.axis for a in diff.axes]


def test_newly_passing_and_new_skips():
    before = ascend(gemma="failed")
    after = ascend(npu="2.14.0")
    after["tests"][1] = model_test("llama", "skipped", "llama needs 2.15", with_data=False)
    diff = only(compare([before], [refresh(after)]))
    assert diff.sentences() == [
        "gemma on ascend was fixed when torch-npu went from 2.13.0 to 2.14.0",
        "llama on ascend is now skipped: llama needs 2.15"]


def test_a_failing_build_is_named_as_such():
    broken = ascend(npu="2.14.0", build="failed")
    broken["tests"] = []
    diff = only(compare([ascend()], [refresh(broken)]))
    assert diff.sentences()[0] == "the build on ascend broke when torch-npu went from 2.13.0 " \
                                  "to 2.14.0"
    assert {t.id for t in diff.removed_tests} >= {"stage::verify",
                                                   "test_install.py::test_imports"}


def test_added_and_removed_tests_and_cells():
    after = ascend()
    after["tests"].append(case("test_compat.py::test_autocast", "compat", "failed", "boom"))
    del after["tests"][0]
    refresh(after)
    cpu = make_result("cpu")
    comparison = compare([ascend(), cpu], [after, make_result("cpu", python="3.13",
                                                              os_key="debian13")])
    diff = only(comparison)
    assert [t.id for t in diff.added_tests] == ["test_compat.py::test_autocast"]
    assert [t.id for t in diff.removed_tests] == ["test_install.py::test_imports"]
    assert comparison.added_cells == ("cpu-torch2.13.0-py3.13-debian13",)
    assert comparison.removed_cells == ("cpu-torch2.13.0-py3.11-debian12",)
    assert comparison.unchanged == 0


def test_unchanged_cells_are_counted_not_listed():
    comparison = compare([ascend(), make_result("cpu")], [ascend(), make_result("cpu")])
    assert (comparison.cells, comparison.unchanged) == ((), 2)


def test_fallback_match_prefers_same_toolkit_then_newest_torch():
    previous = [ascend(torch="2.12.0"), ascend(torch="2.13.0"), ascend(torch="2.13.0",
                                                                       cann="9.1.0")]
    current = [ascend(torch="2.14.0"), ascend(torch="2.14.0", cann="9.1.0")]
    pairs = {a.cell.id: b.cell.id for b, a in match_cells(previous, current)}
    assert pairs == {
        "ascend-torch2.14.0-cann9.2.0-py3.11-ubuntu22.04":
            "ascend-torch2.13.0-cann9.2.0-py3.11-ubuntu22.04",
        "ascend-torch2.14.0-cann9.1.0-py3.11-ubuntu22.04":
            "ascend-torch2.13.0-cann9.1.0-py3.11-ubuntu22.04"}
    comparison = compare(previous, current)
    assert comparison.removed_cells == ("ascend-torch2.12.0-cann9.2.0-py3.11-ubuntu22.04",)
    assert comparison.cells[0].previous_id != comparison.cells[0].id


def test_model_of_reads_data_then_known_names_then_the_id():
    def test(entry):
        return TestOutcome.from_json(entry, "test")

    assert model_of(test(model_test("gemma"))) == "gemma"
    skipped = test(case("test_models.py::test_forward[qwen2-0.5b-bfloat16]", "models",
                        "skipped"))
    assert model_of(skipped, ["qwen2", "gemma"]) == "qwen2"
    assert model_of(skipped) == "qwen2"
    assert model_of(test(case("test_models.py::test_resnet", "models"))) == "resnet"
    assert model_of(test(case("test_device.py::test_matmul", "device"))) is None


def test_json_and_text(tmp_path):
    comparison = compare([ascend()], [ascend(npu="2.14.0", gemma="failed")],
                         previous_name="old/results", current_name="results")
    data = json.loads(json.dumps(comparison.to_json()))
    assert data["schema"] == "oota.compare/v1"
    cell = data["cells"][0]
    assert cell["axes"] == [{"axis": "extension", "name": "torch-npu", "before": "2.13.0",
                             "after": "2.14.0"}]
    assert cell["newly_failing"][0]["subject"] == "gemma"
    text = comparison.text()
    assert text.splitlines()[0] == ("changes since old/results: 1 cell(s) changed, 0 unchanged, "
                                    "0 added, 0 removed; 1 newly failing test(s)")
    assert "  gemma on ascend broke when torch-npu went from 2.13.0 to 2.14.0" in text


def test_report_with_compare_writes_the_section(tmp_path):
    old = write_results(tmp_path / "old", [ascend()])
    new = write_results(tmp_path / "results", [ascend(npu="2.14.0", gemma="failed")])
    out = tmp_path / "reports"
    report = write_report(new, out, old)
    sentence = "gemma on ascend broke when torch-npu went from 2.13.0 to 2.14.0"
    assert report.comparison is not None and report.comparison.regressions == 1
    assert sentence in (out / "matrix.md").read_text(encoding="utf-8")
    assert sentence in (out / "index.html").read_text(encoding="utf-8")
    assert json.loads((out / "compare.json").read_text())["cells"][0]["sentences"][0] \
        .startswith(sentence)
    assert json.loads((out / "results.json").read_text())["comparison"]["previous"] == str(old)


def test_missing_previous_folder_is_bad_input(tmp_path):
    with pytest.raises(InputError, match="no such results folder to compare with"):
        load_previous(tmp_path / "nope")
