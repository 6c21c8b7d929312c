"""The result model: built by the one builder, written by the one writer, read back equal;
every status (interrupted too) in result.json, junit.xml and the derived status."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from oota.results.assemble import assemble, cell_ref, read_suite_output
from oota.results.jsonfields import JSON, ResultFormatError
from oota.results.model import (
    BaseImage,
    Host,
    Image,
    Result,
    Sealed,
    SkipRule,
    Skips,
    Stage,
    TestOutcome,
    VendorCheck,
)
from oota.results.software import Installed, Package, Sources, TorchInfo
from oota.results.store import load, load_all, save, validation_errors
from oota.vocab import STATUS_ORDER, Status

CELL = cell_ref({"vendor": "cuda", "os": "debian12", "python": "3.11", "torch": "2.13.0",
                 "toolkit": "cuda", "toolkit_version": "13.0"},
                id="cuda-torch2.13.0-cu13.0-py3.11-debian12", fingerprint="sha256:" + "1" * 64)


def outcome(status: Status, test_id: str = "test_device.py::test_matmul", message: str = "",
            **data: JSON) -> TestOutcome:
    return TestOutcome(id=test_id, layer="device", status=status, duration_s=0.5,
                       message=message, data=dict(data))


def full_result(*, stages: dict[str, Stage] | None = None,
                tests: tuple[TestOutcome, ...] | None = None) -> Result:
    """A result with every part the schema holds filled in."""
    return assemble(
        cell=CELL,
        stages=stages or {"build": Stage(status="passed", duration_s=12.5, log="build.log",
                                         detail={"base": "oota/base:debian12"}),
                          "verify": Stage(status="passed", duration_s=4.25, log="verify.log")},
        tests=tests if tests is not None else (
            outcome("passed", "test_models.py::test_forward[llama]", model="llama",
                    seconds=1.5, peak_bytes=3 * 1024 ** 3, shape=[1, 2]),
            outcome("unsupported-here", message="no GPU here")),
        host=Host(facts={"arch": "x86_64", "kernel": "6.1.0", "devices": ["/dev/nvidia0"]},
                  vendor_check=VendorCheck(supported=False, reasons=("no driver",),
                                           facts={"runtimes": ["runc"]})),
        started_at="2026-11-21T11:00:00+00:00", finished_at="2026-11-21T11:05:00+00:00",
        run_id="abc123",
        image=Image(tag="oota/cuda:x", digest="sha256:" + "2" * 64,
                    base=BaseImage(ref="debian:12", how="pulled", note="from the mirror"),
                    sealed=Sealed(id="sha256:" + "3" * 64, file="/opt/oota/expected.json",
                                  at="2026-11-21T11:05:00+00:00")),
        installed=Installed(torch=TorchInfo(version="2.13.0+cu130", cuda="13.0"),
                            packages={"torch": Package(version="2.13.0+cu130", requested=True,
                                                       source="https://download.pytorch.org")}),
        sources=Sources(index_url="https://user:***@index/simple", notes=("a note",)),
        skips=Skips(entries=(SkipRule(id="test_x", reason="why", owner="team",
                                      expires="2027-01-01", matched=1),),
                    unmatched=("test_y",)))


def test_a_result_round_trips_through_its_file(tmp_path: Path) -> None:
    result = full_result()
    save(tmp_path, result)
    assert load(tmp_path / "result.json") == result
    written = json.loads((tmp_path / "result.json").read_text(encoding="utf-8"))
    assert validation_errors(written) == []
    assert written["schema"] == "oota.result/v1"
    assert written["host"]["vendor_check"] == {"supported": False, "reasons": ["no driver"],
                                               "runtimes": ["runc"]}


@pytest.mark.parametrize("status", STATUS_ORDER)
def test_every_status_is_written_valid_and_read_back(tmp_path: Path, status: Status) -> None:
    result = full_result(stages={"verify": Stage(status=status, duration_s=1.0,
                                                 message=f"it was {status}")},
                         tests=(outcome(status, message="why"),))
    save(tmp_path, result)
    assert validation_errors(json.loads((tmp_path / "result.json").read_text())) == []
    back = load(tmp_path / "result.json")
    assert back == result and back.status == status


@pytest.mark.parametrize(("stages", "tests", "expected"), [
    (["passed"], ["passed", "skipped"], "passed"),
    (["skipped"], ["skipped"], "skipped"),
    (["passed"], ["passed", "unsupported-here"], "unsupported-here"),
    (["passed"], ["passed", "failed", "unsupported-here"], "failed"),
    (["failed"], ["error"], "error"),
    (["interrupted"], ["error", "failed"], "interrupted"),
    (["passed", "interrupted"], [], "interrupted"),
    ([], [], "error"),  # nothing recorded is never a pass
], ids=["passed", "only-skips", "na-here", "failed", "error", "interrupted-wins",
        "interrupted-stage", "nothing"])
def test_the_status_is_the_worst_part(stages: list[Status], tests: list[Status],
                                      expected: str) -> None:
    result = assemble(cell=CELL, host=Host(), started_at="2026-11-21T11:00:00+00:00",
                      stages={f"s{i}": Stage(status=s, duration_s=0.0)
                              for i, s in enumerate(stages)},
                      tests=[outcome(s, f"t{i}") for i, s in enumerate(tests)])
    assert result.status == expected


def test_summary_and_message_come_from_the_parts() -> None:
    result = full_result(stages={"build": Stage(status="passed", duration_s=1.0),
                                 "verify": Stage(status="interrupted", duration_s=2.0,
                                                 message="interrupted by the user\nmore")},
                         tests=(outcome("passed", "a"), outcome("passed", "b"),
                                outcome("failed", "c")))
    assert result.summary == {"passed": 2, "failed": 1, "interrupted": 1}
    assert result.message == "verify: interrupted by the user"


# -- junit ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("status", "element", "kind"), [
    ("passed", None, None), ("failed", "failure", "failed"), ("error", "error", "error"),
    ("interrupted", "error", "interrupted"), ("skipped", "skipped", None),
    ("unsupported-here", "skipped", None)])
def test_junit_for_each_status(tmp_path: Path, status: Status, element: str | None,
                               kind: str | None) -> None:
    result = full_result(stages={"verify": Stage(status="passed", duration_s=1.0)},
                         tests=(outcome(status, message="the reason"),))
    save(tmp_path, result)
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    case = suite.findall("testcase")[1]
    assert case.get("name") == "test_device.py::test_matmul"
    children = list(case)
    if element is None:
        assert children == []
        return
    assert [c.tag for c in children] == [element]
    assert children[0].get("type") == kind
    assert "the reason" in (children[0].get("message") or "")
    counted = {"failure": "failures", "error": "errors", "skipped": "skipped"}[element]
    assert suite.get(counted) == "1"


def test_junit_says_a_stage_was_interrupted(tmp_path: Path) -> None:
    result = full_result(stages={"verify": Stage(status="interrupted", duration_s=3.0,
                                                 message="interrupted by the user")}, tests=())
    save(tmp_path, result)
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("errors") == "1"
    error = suite.find("testcase/error")
    assert error is not None
    assert error.get("message") == "interrupted: interrupted by the user"


# -- reading files that are not what oota writes ---------------------------------------------

def _bad_files(folder: Path) -> dict[str, bytes]:
    good = json.dumps(full_result().to_json()).encode()
    wrong_type = full_result().to_json()
    wrong_type["installed"] = {"packages": {"numpy": "2.0"}}  # the schema leaves this open
    return {"latin1": "{\"cell\": \"caf\xe9\"}".encode("latin-1"), "truncated": good[:40],
            "deep": b"[" * 100_000 + b"]" * 100_000, "list": b"[]",
            "schema": json.dumps({"schema": "oota.result/v1"}).encode(),
            "wrong-type": json.dumps(wrong_type).encode(), "good": good}


def test_unreadable_result_files_are_problems_not_crashes(tmp_path: Path) -> None:
    for name, content in _bad_files(tmp_path).items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_bytes(content)
    (tmp_path / "folder" / "result.json").mkdir(parents=True)
    results, problems = load_all(tmp_path)
    assert [r.cell.id for r in results] == [CELL.id]
    by_folder = {Path(p.split(":")[0]).parent.name: p for p in problems}
    assert sorted(by_folder) == ["deep", "folder", "latin1", "list", "schema", "truncated",
                                 "wrong-type"]
    assert "unreadable" in by_folder["latin1"] and "utf-8" in by_folder["latin1"]
    assert "does not match the schema" in by_folder["schema"]
    assert "installed.packages.numpy: expected an object" in by_folder["wrong-type"]
    assert all("\n" not in p for p in problems)


def test_a_result_that_breaks_the_schema_is_not_written(tmp_path: Path) -> None:
    bad = cell_ref({"vendor": "x", "os": "y", "python": "3", "torch": "2"}, id="Bad Id!",
                   fingerprint="sha256:" + "1" * 64)
    result = assemble(cell=bad, host=Host(), started_at="2026-11-21T11:00:00+00:00",
                      stages={"verify": Stage(status="passed", duration_s=0.0)}, tests=())
    with pytest.raises(ValueError, match="cell/id"):
        save(tmp_path, result)
    assert not (tmp_path / "result.json").exists()


# -- what the suite wrote -------------------------------------------------------------------

def test_suite_output_is_read_into_the_model(tmp_path: Path) -> None:
    (tmp_path / "tests.json").write_text(json.dumps({"duration_s": 3.5, "tests": [
        {"id": "a", "layer": "device", "status": "skipped", "duration_s": 0.1,
         "message": "unsupported-here: no GPU; no cuda device visible here"},
        {"id": "b", "status": "exploded", "duration_s": 0.2},
        {"id": "c", "layer": "models", "status": "passed", "duration_s": 1,
         "data": {"model": "llama"}}],
        "skips": {"entries": [], "expired": [], "unmatched": []}}))
    (tmp_path / "installed.json").write_text(json.dumps(
        {"torch": {"version": "2.13.0", "cuda": None}, "packages": {}}))
    suite = read_suite_output(tmp_path)
    assert suite.found and suite.duration_s == 3.5
    assert [(t.id, t.layer, t.status) for t in suite.tests] == [
        ("a", "device", "unsupported-here"), ("b", "vendor", "error"), ("c", "models", "passed")]
    assert suite.tests[0].message == "no GPU; no cuda device visible here"
    assert "unknown status 'exploded'" in suite.tests[1].message
    assert suite.tests[2].data == {"model": "llama"}
    assert suite.installed is not None and suite.installed.torch.version == "2.13.0"


def test_suite_output_that_is_not_json_says_which_file(tmp_path: Path) -> None:
    assert not read_suite_output(tmp_path).found
    (tmp_path / "tests.json").write_bytes(b"\xff\xfe garbage")
    with pytest.raises(ResultFormatError, match="tests.json is unreadable"):
        read_suite_output(tmp_path)


@pytest.mark.parametrize("value", ["false", "true", 0, 1, None])
def test_a_boolean_field_takes_true_or_false_only(value: object) -> None:
    """The string "false" is not true (bool("false") is): anything but a JSON boolean is
    refused, naming the field."""
    package = {"version": "2.3.1", "source": "https://pypi.org/simple", "sha256": None,
               "requested": value}
    if value is None:  # absent: the field's default
        assert Package.from_json(package, "packages.numpy").requested is False
        return
    with pytest.raises(ResultFormatError, match=r"packages\.numpy\.requested: expected true or "
                                                r"false"):
        Package.from_json(package, "packages.numpy")
