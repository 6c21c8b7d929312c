"""The quality-levels scorecard (oota/report/scorecard.py): every item of PyTorch's rubric scored
from constructed results with the evidence it rests on, or "not measured here" with the reason;
the coverage arithmetic a reader can redo by hand; the levels; the page and its JSON."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from oota.report import rubric
from oota.report.data import Report
from oota.report.scorecard import ScoreInput, releases, scorecards
from oota.report.scoremodel import ItemScore, Scorecard, VendorScores
from oota.report.scorepages import ScorecardSchemaError, to_html, to_json
from oota.report.write import write_report
from oota.vocab import STATUSES
from tests.reports import build_report
from tests.unit.test_report import NOW, case, make_result, model_test, typed, write_results

OPS = "test_ops.py::test_op_matches_cpu"


def pair(op: str, dtype: str, status: str = "passed", *, ran_on: str = "device",
         message: str = "") -> dict[str, Any]:
    """An ops-layer pair as the suite writes it: tried pairs carry data, skipped ones do not."""
    if status == "skipped":
        return case(f"{OPS}[{op}-{dtype}]", "ops", "skipped", message)
    data = {"op": op, "dtype": dtype, "tried": True, "ran_on": ran_on, "compared": True,
            "served": "kernel" if ran_on == "device" else "fallback"}
    return case(f"{OPS}[{op}-{dtype}]", "ops", status, message, data)


def smoke(name: str, environment: str, status: str = "passed") -> dict[str, Any]:
    return case(f"test_smoke.py::{name}", "smoke", status, "" if status == "passed" else "boom",
                {"environment": environment})


DEVICE = case("test_device.py::test_matmul", "device")
# Six pairs pass on the device; one fell back to the CPU, one failed, one is on the vendor's
# skip list; two are cases PyTorch has none of (left out); two more pairs the time budget left
# unrun (folded into one test). Coverage: 6 of 6 + 3 + 2 = 6 of 11.
OPS_PAIRS = [
    *(pair(op, "float32") for op in ("abs", "add", "mul", "sin", "cos")),
    pair("abs", "float16"),
    pair("tanh", "float16", "cpu-fallback", ran_on="cpu", message="ran on the CPU: fallback"),
    pair("exp", "bfloat16", "failed", message="element 3 is 2.5 where float64 gives 2.0"),
    pair("erf", "float32", "skipped", message="skip list: erf is slow (owner, 2027-01-01)"),
    pair("sort", "float16", "skipped",
         message="PyTorch's test_compare_cpu skips sort (float16): flaky"),
    pair("svd", "float16", "skipped",
         message="the OpInfo of svd does not declare float16 for the device"),
    case("test_ops.py::test_op_runs[unrun-by-budget]", "ops", "skipped",
         "time budget of 30 s spent: 2 pairs not run", {"unrun_pairs": 2}),
]


def accel(torch: str = "2.13.0", tests: list[dict[str, Any]] | None = None,
          python: str = "3.11") -> dict[str, Any]:
    return make_result("reference", torch=torch, python=python,
                       tests=[DEVICE, *(tests if tests is not None else OPS_PAIRS)])


def cards(results: list[dict[str, Any]], given: ScoreInput | None = None) -> list[VendorScores]:
    return list(scorecards(build_report(typed(results), (), generated_at=NOW),
                           given or ScoreInput()))


def item(card: Scorecard, key: str) -> ItemScore:
    return next(s for s in card.items if s.item.key == key)


def test_the_rubric_is_the_documents() -> None:
    """124 points, the levels at 99 and 86; each section's items add up to its table's total,
    but for User Experience, whose items give 16 where the document's table says 14."""
    totals = Counter[str]()
    for entry in rubric.ITEMS:
        totals[entry.section] += entry.points
        assert not entry.parts or sum(p.points for p in entry.parts) == entry.points, entry.key
    assert dict(totals) == {rubric.PREREQ: 16, rubric.HARDWARE: 10, rubric.SOFTWARE: 12,
                            rubric.FEATURES: 18, rubric.TESTING: 26, rubric.UX: 16,
                            rubric.CICD: 18, rubric.FEEDBACK: 6, rubric.MAINTENANCE: 4}
    assert rubric.ITEM_POINTS == 126 and rubric.TOTAL == 124
    assert [i.key for i in rubric.ITEMS if i.priority == "P0"] == [
        "prereq.stability", "prereq.security", "hardware.stability", "software.stability",
        "software.maintainability", "ci.public"]
    assert rubric.level_of(99, True) == "Stable" and rubric.level_of(99, False) == "Unstable"
    assert rubric.level_of(86, True) == "Unstable" and rubric.level_of(85, True) == "Engineering"


def test_every_item_is_scored_with_evidence_or_not_measured_with_a_reason() -> None:
    card = cards([accel()])[0].cards[0]
    assert [s.item.key for s in card.items] == [i.key for i in rubric.ITEMS]
    for score in card.items:
        for part in score.parts:
            assert part.how.strip(), (score.item.key, part.key)
            if part.points:
                assert part.evidence, (score.item.key, part.key)
            if not part.measured:
                assert part.points is None
    assert card.points == sum(s.points for s in card.items)
    assert card.points + card.unmeasured + sum(s.gain for s in card.items) == rubric.ITEM_POINTS


def test_operator_coverage_is_recomputed_by_hand() -> None:
    """6 of 11: the skip list, the fallback, the failure and the budget's 2 unrun pairs count
    against; PyTorch's own skip and a dtype the OpInfo lacks on the device are left out."""
    ops = item(cards([accel()])[0].cards[0], "testing.ops")
    (part,) = ops.parts
    assert part.share == pytest.approx(6 / 11) and part.points == 2 and ops.gain == 4
    assert "54.5%" in part.how and "80% (4 points) needs 3 more" in part.how
    (line,) = part.evidence
    assert "6 of 11 (54.5%) operator × dtype pairs passed on the device" in line.text
    assert "2 pairs PyTorch has no test case for left out" in line.text
    assert "2 the time budget left unrun" in line.text
    # What to fix first: the failure, then the fallback, then the skip.
    assert line.tests == (f"{OPS}[exp-bfloat16]", f"{OPS}[tanh-float16]", f"{OPS}[erf-float32]")


def test_the_lowest_cell_sets_the_share() -> None:
    full = [DEVICE, pair("abs", "float32")]
    card = cards([accel(), accel(tests=full, python="3.13")])[0].cards[0]
    assert card.cells == ("reference-torch2.13.0-py3.11-debian12",
                          "reference-torch2.13.0-py3.13-debian12")
    part = item(card, "testing.ops").parts[0]
    assert part.share == pytest.approx(6 / 11) and len(part.evidence) == 2


def test_dtypes_count_only_passes_on_the_devices_own_kernels() -> None:
    parts = {p.key: p for p in item(cards([accel()])[0].cards[0], "features.dtypes").parts}
    assert parts["float32"].points == 1 and parts["float16"].points == 1
    assert parts["bfloat16"].points == 0  # compared there, and nothing passed
    assert "0 of 1" in parts["bfloat16"].evidence[0].text
    assert parts["int8"].points is None and "compared no operator" in parts["int8"].how


def test_a_cell_that_never_ran_on_the_device_measures_nothing_of_it() -> None:
    no_hardware = make_result("reference", tests=[
        case("test_device.py::test_matmul", "device", "unsupported-here", "no device here")])
    card = cards([no_hardware])[0].cards[0]
    for key in ("testing.ops", "features.dtypes"):
        for part in item(card, key).parts:
            assert part.points is None, key
    assert "no copy of these cells ran on the device" in item(card, "testing.ops").parts[0].how
    assert item(card, "testing.modes").parts[0].points is None


@pytest.mark.parametrize(("envs", "points", "said"), [
    pytest.param({"hardware": "passed", "no-hardware": "passed", "minimal-os": "passed"}, 8,
                 "passed in all three", id="all-three"),
    pytest.param({"hardware": "passed", "no-hardware": "failed", "minimal-os": "passed"}, 0,
                 "failed in an environment", id="one-failed"),
    pytest.param({"hardware": "passed", "no-hardware": "passed"}, None,
                 "passed in: hardware, no-hardware", id="minimal-os-missing"),
])
def test_the_smoke_test_in_three_environments(envs: dict[str, str], points: int | None,
                                              said: str) -> None:
    """Each environment is one run (a copy from another host); the cell covers what its
    copies cover."""
    copies = []
    for i, (where, status) in enumerate(envs.items()):
        result = accel(tests=[DEVICE, smoke("test_release_smoke_checks[1]", where, status)])
        result["host"] = {"arch": "x86_64", "engine": f"lab-{i}"}
        result["run_id"] = f"run{i}"
        copies.append(result)
    (part,) = item(cards(copies)[0].cards[0], "prereq.stability").parts
    assert part.points == points and said in part.how
    assert [e.text.split(":")[0] for e in part.evidence] == [
        "full stack, with the hardware", "full stack, without the hardware",
        "minimal OS, without the compute stack"]


def test_cpp_extension_and_unit_tests_from_their_layers() -> None:
    tests = [DEVICE, case("test_smoke.py::test_cpp_extension_runs_on_the_device", "smoke"),
             *(case(f"test_modules.py::test_forward[m{i}]", "modules") for i in range(8)),
             case("test_optim.py::test_step[adam]", "optimizers", "failed", "diverged"),
             case("test_optim.py::test_step[lbfgs]", "optimizers", "skipped", "skip list: slow")]
    card = cards([accel(tests=tests)])[0].cards[0]
    assert item(card, "features.cpp_extension").points == 1
    unit = item(card, "testing.unit").parts[0]
    assert unit.share == pytest.approx(0.8) and unit.points == 4
    assert "8 of 10 (80.0%) unit tests" in unit.evidence[0].text
    assert unit.evidence[0].tests == ("test_optim.py::test_step[adam]",
                                      "test_optim.py::test_step[lbfgs]")


def test_models_are_shown_not_scored() -> None:
    card = cards([accel(tests=[DEVICE, model_test("llama"), model_test("gemma", "failed")])])
    part = item(card[0].cards[0], "testing.benchmarks").parts[0]
    assert part.points is None and "not the suites" in part.how
    assert "1 of 2 (50.0%) models" in part.evidence[0].text


def test_flaky_share_is_scored_from_the_flaky_status() -> None:
    report = build_report(typed([accel(tests=[DEVICE, pair("abs", "float32")])]), (),
                          generated_at=NOW)
    part = item(scorecards(report, ScoreInput())[0].cards[0], "ci.flaky").parts[0]
    assert part.points == 4 and part.share == 0.0 and "0 of 3" in part.how
    older = ScoreInput(statuses=STATUSES - {"flaky"})  # an oota that could not mark one
    part = item(scorecards(report, older)[0].cards[0], "ci.flaky").parts[0]
    assert part.points is None and "marks no test flaky" in part.how
    # A run where one of its tests was retried into a pass: above the 5% the item allows.
    group = report.groups[0]
    row = group.first
    marked = dataclasses.replace(row, tests=(dataclasses.replace(row.tests[0], status="flaky"),
                                             *row.tests[1:]))
    flaky = dataclasses.replace(report, groups=(dataclasses.replace(group, copies=(marked,)),))
    part = item(scorecards(flaky, ScoreInput())[0].cards[0], "ci.flaky").parts[0]
    assert part.points == 0 and part.share == pytest.approx(1 / len(row.tests))
    assert f"1 of {len(row.tests)}" in part.how


def test_public_results_need_the_address_they_are_published_at() -> None:
    assert item(cards([accel()])[0].cards[0], "ci.public").parts[0].points is None
    given = ScoreInput(public_url="https://lab.example/oota/report/")
    part = item(cards([accel()], given)[0].cards[0], "ci.public").parts[0]
    assert part.points == 2 and part.evidence[0].source == "https://lab.example/oota/report/"


def test_releases_newest_first_and_the_level_held_over_two() -> None:
    scores = cards([accel("2.14.1"), accel("2.13.0"), accel("2.15.0")])[0]
    assert [c.torch for c in scores.cards] == ["2.15.0", "2.14.1", "2.13.0"]
    assert scores.held == ("Engineering", ("2.15.0", "2.14.1")) and scores.held_note == ""
    one = cards([accel()])[0]
    assert one.held is None and one.held_note.startswith("one torch release in these results")


def test_a_newer_release_of_the_matrix_without_results_holds_no_level() -> None:
    given = ScoreInput(releases={"reference": ("2.15.0", "2.14.1", "2.13.0")})
    scores = cards([accel("2.14.1"), accel("2.13.0")], given)[0]
    assert scores.unscored == ("2.15.0",) and scores.held is None
    assert scores.held_note.startswith("torch 2.15.0, among the two newest releases of the "
                                       "matrix, has no result in this report")
    data = to_json(scores, {})
    assert data["unscored_releases"] == ["2.15.0"] and data["held"] is None


def test_nightly_and_candidate_cells_are_no_release() -> None:
    nightly = accel()
    nightly["cell"]["channel"] = "nightly"
    report = build_report(typed([nightly, accel("2.14.1")]), (), generated_at=NOW)
    assert [r.torch for r in releases(report, "reference")] == ["2.14.1"]


def test_the_items_that_raise_the_score_most() -> None:
    card = cards([accel()])[0].cards[0]
    assert [(s.item.key, s.gain) for s in card.raise_most()] == [
        ("testing.ops", 4), ("features.dtypes", 1)]
    assert [(s.item.key, [p.key for p in card.open_parts(s)]) for s in card.to_measure()] == [
        ("prereq.stability", [""]),
        ("features.dtypes", ["float64", "float8", "float4", "int64", "int32", "int16", "int8",
                             "int4"]),
        ("features.distributed", [""]), ("features.cpp_extension", [""]),
        ("testing.unit", [""]), ("testing.modes", ["graph"]), ("testing.distributed", [""]),
        ("ux.binaries", ["same_day"]), ("ci.public", [""]), ("ci.recovery", [""])]
    assert card.level == "Engineering" and card.p0 is None and card.best == "Stable"


def test_json_matches_its_schema_and_names_the_result_files(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", [accel()])
    report = write_report(results, tmp_path / "reports")
    data = json.loads((tmp_path / "reports/scorecard/reference.json").read_text("utf-8"))
    assert data["schema"] == "oota.scorecard/1" and data["rubric"]["total"] == 124
    (release,) = data["releases"]
    ops = next(i for i in release["items"] if i["key"] == "testing.ops")
    assert ops["points"] == 2 and ops["parts"][0]["share"] == pytest.approx(6 / 11)
    evidence = ops["parts"][0]["evidence"][0]
    assert evidence["result_files"] == ["files/reference-torch2.13.0-py3.11-debian12/result.json"]
    assert (tmp_path / "reports" / evidence["result_files"][0]).is_file()
    assert release["raise"][0]["key"] == "testing.ops"
    assert len(report.groups) == 1


def test_a_scorecard_breaking_its_schema_is_refused() -> None:
    scores = cards([accel()])[0]
    broken = dataclasses.replace(scores, generated_at="yesterday")
    with pytest.raises(ScorecardSchemaError, match="generated_at"):
        to_json(broken, {})


def test_the_page_escapes_and_links_the_evidence() -> None:
    hostile = '<script>alert("x")</script>'
    tests = [DEVICE, pair("abs", "float32"), pair("tanh", "float32", "failed", message=hostile)]
    report: Report = build_report(typed([accel(tests=tests)]), (), generated_at=NOW)
    (scores,) = scorecards(report, ScoreInput())
    page = to_html(scores, {"reference-torch2.13.0-py3.11-debian12": [
        "files/reference-torch2.13.0-py3.11-debian12/result.json"]})
    assert hostile not in page
    assert 'href="../cells/reference-torch2.13.0-py3.11-debian12.html"' in page
    assert 'href="../files/reference-torch2.13.0-py3.11-debian12/result.json"' in page
    assert "not measured here:" in page and rubric.DOC_URL in page
    assert "torch 2.13.0: Engineering" in page


def test_index_links_each_vendors_scorecard(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", [accel(), make_result("cpu")])
    write_report(results, tmp_path / "reports")
    index = (tmp_path / "reports/index.html").read_text("utf-8")
    assert 'href="scorecard/reference.html"' in index and 'href="scorecard/cpu.html"' in index
    assert sorted(p.name for p in (tmp_path / "reports/scorecard").iterdir()) == [
        "cpu.html", "cpu.json", "reference.html", "reference.json"]


@pytest.mark.parametrize(("statuses", "points", "how"), [
    (("passed", "passed"), 2, "every cell that compiled on the device passed the compile layer"),
    (("passed", "failed"), 0, "a cell's compile layer failed on the device"),
], ids=["passed", "failed"])
def test_graph_mode_reads_the_compile_layer(statuses: tuple[str, str], points: int,
                                            how: str) -> None:
    compiled = [case(f"test_compile.py::test_compiled_op[refdev-mul-float{n}]", "compile",
                     status) for n, status in zip((32, 16), statuses, strict=True)]
    card = cards([accel(tests=[*OPS_PAIRS, *compiled])])[0].cards[0]
    graph = next(p for p in item(card, "testing.modes").parts if p.key == "graph")
    assert (graph.points, graph.how) == (points, how)
    assert graph.evidence[0].text.startswith(
        f"reference-torch2.13.0-py3.11-debian12: {statuses.count('passed')} of 2")


def test_graph_mode_is_not_measured_without_the_compile_layer() -> None:
    card = cards([accel()])[0].cards[0]
    graph = next(p for p in item(card, "testing.modes").parts if p.key == "graph")
    assert graph.points is None and "no cell ran the compile layer" in graph.how
