"""Skip lists (oota/skips.py): the valid shape, every class of bad input, expiry, cell.json."""

from __future__ import annotations

import datetime as dt
import json
import textwrap
from pathlib import Path

import pytest

from oota.config.skips import SkipEntry, SkipList, load_skips, parse_skips
from oota.errors import InputError, MatrixError

REPO = Path(__file__).resolve().parents[2]
VALID = """\
# two entries
- id: "test_models.py::test_forward_and_train_step[gemma]"
  reason: bf16 matmul accumulates in fp16 (vendor bug 1234)
  owner: jane@example.com
  expires: 2027-03-31
  added: 2026-11-21
- id: "test_device.py::*[bfloat16]"
  reason: no bfloat16 kernels yet
  owner: team-npu
  expires: 2026-12-01
"""


def problems(text: str) -> list[str]:
    with pytest.raises(MatrixError) as info:
        parse_skips(textwrap.dedent(text), "vendors/x/skips.yaml")
    return info.value.problems


def test_valid_file_parses_into_frozen_entries():
    skips = parse_skips(VALID, "skips.yaml")
    first, second = skips.entries
    assert first == SkipEntry(id="test_models.py::test_forward_and_train_step[gemma]",
                              reason="bf16 matmul accumulates in fp16 (vendor bug 1234)",
                              owner="jane@example.com", expires=dt.date(2027, 3, 31),
                              added=dt.date(2026, 11, 21), where="skips.yaml:2:3")
    assert second.added is None and second.id == "test_device.py::*[bfloat16]"
    with pytest.raises(AttributeError):
        first.reason = "changed"  # type: ignore[misc]


def test_to_json_is_what_cell_json_carries():
    skips = parse_skips(VALID, "skips.yaml")
    assert skips.to_json() == [
        {"id": "test_models.py::test_forward_and_train_step[gemma]",
         "reason": "bf16 matmul accumulates in fp16 (vendor bug 1234)",
         "owner": "jane@example.com", "expires": "2027-03-31", "added": "2026-11-21"},
        {"id": "test_device.py::*[bfloat16]", "reason": "no bfloat16 kernels yet",
         "owner": "team-npu", "expires": "2026-12-01"}]


def test_empty_list_is_valid():
    assert parse_skips("# nothing skipped\n[]\n", "skips.yaml").entries == ()


def test_missing_file_skips_nothing(tmp_path):
    assert load_skips(tmp_path / "skips.yaml") == SkipList(file=str(tmp_path / "skips.yaml"))


@pytest.mark.parametrize(("today", "expired"), [
    (dt.date(2026, 11, 30), []),                                   # both still valid
    (dt.date(2026, 12, 1), []),                                    # honoured through the day
    (dt.date(2026, 12, 2), ["test_device.py::*[bfloat16]"]),       # the day after
    (dt.date(2027, 4, 1), ["test_models.py::test_forward_and_train_step[gemma]",
                           "test_device.py::*[bfloat16]"]),
], ids=["before", "on-the-day", "day-after", "both"])
def test_expiry_with_injected_today(today, expired):
    skips = parse_skips(VALID, "skips.yaml")
    assert [e.id for e in skips.expired(today)] == expired


@pytest.mark.parametrize(("text", "expected"), [
    ("", ["vendors/x/skips.yaml:1:1: the file is empty; write [] for an empty skip list"]),
    ("# only a comment\n", ["vendors/x/skips.yaml:1:1: the file is empty; write [] for an "
                            "empty skip list"]),
    ("skips: []\n", ["vendors/x/skips.yaml:1:1: the document is a mapping; expected a list of "
                     "skip entries (- id: ..., reason: ..., owner: ..., expires: YYYY-MM-DD)"]),
    ("[]\n---\n[]\n", ["vendors/x/skips.yaml:2:1: a second YAML document starts here (the file "
                       "holds 2); expected exactly one, remove the '---' separator"]),
    ("- id: [unclosed\n", None),  # malformed YAML: located by parse_yaml
], ids=["empty", "comment-only", "mapping", "two-documents", "malformed"])
def test_document_shape_errors(text, expected):
    found = problems(text)
    if expected is None:
        assert len(found) == 1 and found[0].startswith("vendors/x/skips.yaml:")
        assert "malformed YAML" in found[0]
    else:
        assert found == expected


@pytest.mark.parametrize(("entry", "expected"), [
    ("- just a string\n", "vendors/x/skips.yaml:1:3: [0]: expected a mapping, got a string"),
    ("- {id: a, reason: r, owner: o}\n",
     "vendors/x/skips.yaml:1:3: [0]: missing required key 'expires'"),
    ("- {id: a, reason: r, owner: o, expires: 2027-01-01, reson: x}\n",
     "vendors/x/skips.yaml:1:53: [0].reson: unknown key 'reson'; did you mean 'reason'?"),
    ("- {id: a, reason: r, owner: o, expires: 31.12.2027}\n",
     "vendors/x/skips.yaml:1:32: [0].expires: '31.12.2027' is not a date; write it as "
     "YYYY-MM-DD, e.g. 2027-03-31"),
    ("- {id: a, reason: r, owner: o, expires: 2027-02-30}\n",
     "vendors/x/skips.yaml:1:32: [0].expires: '2027-02-30' is not a date; write it as "
     "YYYY-MM-DD, e.g. 2027-03-31"),
    ("- {id: a, reason: r, owner: o, expires: 2027-01-01, added: 2027-02-01}\n",
     "vendors/x/skips.yaml:1:53: [0].added: added 2027-02-01 is after expires 2027-01-01; "
     "an entry cannot expire before it was added"),
    ("- {id: a, reason: '  ', owner: o, expires: 2027-01-01}\n",
     "vendors/x/skips.yaml:1:11: [0].reason: 'reason' must not be empty"),
    ("- {id: 7, reason: r, owner: o, expires: 2027-01-01}\n",
     "vendors/x/skips.yaml:1:4: [0].id: expected a string, got a whole number"),
    ("- {id: a, reason: r, owner: [o], expires: 2027-01-01}\n",
     "vendors/x/skips.yaml:1:22: [0].owner: expected a string, got a list"),
    ("- {id: a, reason: r, owner: o, expires: 2027-01-01, id: b}\n",
     "vendors/x/skips.yaml:1:53: [0].id: duplicate key 'id' (first defined at line 1); "
     "remove one of them"),
    ("- {id: \"a\\0b\", reason: r, owner: o, expires: 2027-01-01}\n",
     "vendors/x/skips.yaml:1:4: [0].id: 'a\\x00b' holds the control character U+0000; remove "
     "it (an id is one line)"),
    ("- {id: \"test_x\\nRUN evil\", reason: r, owner: o, expires: 2027-01-01}\n",
     "vendors/x/skips.yaml:1:4: [0].id: 'test_x\\nRUN evil' holds the control character "
     "U+000A; remove it (an id is one line)"),
    ("- {id: a, reason: \"r\\0\", owner: o, expires: 2027-01-01}\n",
     "vendors/x/skips.yaml:1:11: [0].reason: 'r\\x00' holds the control character U+0000; "
     "remove it"),
], ids=["not-a-mapping", "missing-key", "unknown-key", "bad-date", "impossible-date",
        "added-after-expires", "empty-reason", "id-not-a-string", "owner-a-list",
        "duplicate-key", "nul-in-id", "newline-in-id", "nul-in-reason"])
def test_entry_errors_name_file_line_col_and_path(entry, expected):
    assert problems(entry) == [expected]


def test_an_entry_names_its_issue_and_may_be_an_expected_failure():
    skips = parse_skips(textwrap.dedent("""\
        - id: "test_ops.py::test_op_matches_cpu[tanh-float32]"
          reason: tanh differs in the last ulp
          owner: team-npu
          expires: 2027-03-31
          issue: https://github.com/pytorch/pytorch/issues/12345
          kind: xfail
          strict: true
        """), "skips.yaml")
    (entry,) = skips.entries
    assert (entry.issue, entry.kind, entry.strict) == (
        "https://github.com/pytorch/pytorch/issues/12345", "xfail", True)
    assert entry.to_json()["kind"] == "xfail" and entry.to_json()["strict"] is True
    assert "kind" not in parse_skips(VALID, "skips.yaml").to_json()[0]  # a skip, the default


@pytest.mark.parametrize(("entry", "expected"), [
    ("- {id: a, reason: r, owner: o, expires: 2027-01-01, issue: '#1234'}\n",
     "vendors/x/skips.yaml:1:53: [0].issue: '#1234' is not a web address; write the issue's "
     "URL, e.g. https://github.com/pytorch/pytorch/issues/12345"),
    ("- {id: a, reason: r, owner: o, expires: 2027-01-01, kind: xfial}\n",
     "vendors/x/skips.yaml:1:53: [0].kind: unknown kind 'xfial'; did you mean 'xfail'?"),
    ("- {id: a, reason: r, owner: o, expires: 2027-01-01, strict: true}\n",
     "vendors/x/skips.yaml:1:53: [0].strict: 'strict' applies to an expected failure only; "
     "add 'kind: xfail' or remove 'strict'"),
    ("- {id: a, reason: r, owner: o, expires: 2027-01-01, kind: xfail, strict: 1}\n",
     "vendors/x/skips.yaml:1:66: [0].strict: expected true or false, got a whole number"),
], ids=["issue-not-a-url", "kind-typo", "strict-on-a-skip", "strict-not-a-bool"])
def test_issue_kind_and_strict_errors_name_the_place(entry, expected):
    assert problems(entry) == [expected]


def test_duplicate_ids_name_the_first():
    text = """\
    - {id: a, reason: r, owner: o, expires: 2027-01-01}
    - {id: a, reason: r2, owner: o, expires: 2027-01-01}
    """
    assert problems(text) == ["vendors/x/skips.yaml:2:4: [1].id: 'a' is listed twice (first at "
                              "vendors/x/skips.yaml:1:3); merge the two entries"]


def test_every_problem_is_reported_at_once():
    text = """\
    - {id: a, reason: r, owner: o, expires: never}
    - {reason: r, owner: o, expires: 2027-01-01}
    - 3
    """
    found = problems(text)
    assert len(found) == 3
    assert [p.split(": ")[1] for p in found] == ["[0].expires", "[1]", "[2]"]


def test_problems_are_input_errors_with_exit_code_2():
    with pytest.raises(InputError) as info:
        parse_skips("{}\n", "skips.yaml")
    assert info.value.exit_code == 2


def test_not_utf8_is_located(tmp_path):
    path = tmp_path / "skips.yaml"
    path.write_bytes(b"- id: caf\xe9\n")
    with pytest.raises(MatrixError) as info:
        load_skips(path, "vendors/x/skips.yaml")
    assert info.value.problems[0].startswith("vendors/x/skips.yaml:1:10: not UTF-8 text")


def test_a_folder_or_a_dangling_link_is_an_error_not_an_empty_list(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for name, expected in (("folder", "is a folder, not a file"), ("dangling", "file not found")):
        with pytest.raises(MatrixError) as info:
            load_skips(tmp_path / name, f"vendors/x/{name}")
        assert info.value.problems == [f"vendors/x/{name}: {expected}"]


def test_the_cpu_vendors_skip_list_is_valid():
    skips = load_skips(REPO / "vendors" / "cpu" / "skips.yaml")
    assert skips.file.endswith("skips.yaml")
    assert all(e.expires for e in skips.entries)


def _render_cpu(project):
    from oota.config.matrix import load_matrix
    from oota.plan import plan
    from oota.render import render_cell

    matrix = load_matrix(project.matrix)
    return [render_cell(matrix, cell) for cell in plan(matrix, ["cpu"])]


def test_cell_json_carries_the_validated_entries(project):
    (project.root / "vendors/cpu/skips.yaml").write_text(VALID, encoding="utf-8")
    manifest = json.loads(_render_cpu(project)[0].files["cell.json"])
    assert manifest["skips"] == parse_skips(VALID, "x").to_json()


def test_a_bad_skip_list_stops_rendering_with_its_location(project):
    (project.root / "vendors/cpu/skips.yaml").write_text(
        "- {id: a, reason: r, owner: o, expires: soon}\n", encoding="utf-8")
    with pytest.raises(MatrixError) as info:
        _render_cpu(project)
    assert info.value.problems == [
        "vendors/cpu/skips.yaml:1:32: [0].expires: 'soon' is not a date; write it as YYYY-MM-DD,"
        " e.g. 2027-03-31"]


def test_cell_json_formats_extension_requirements_with_the_cell(project):
    vendor = project.root / "vendors/cpu/vendor.yaml"
    vendor.write_text(vendor.read_text().replace(
        "  extensions: []", "  extensions:\n    - {import: torch_refdev, distribution: "
        "oota-refdev, torch: \"=={torch}\"}"), encoding="utf-8")
    manifest = json.loads(_render_cpu(project)[0].files["cell.json"])
    assert manifest["verify"]["extensions"] == [
        {"import": "torch_refdev", "distribution": "oota-refdev", "torch": "==2.13.0"}]
    assert manifest["verify"]["tolerances"]["float32"] == {"rtol": 1e-5, "atol": 1e-5}
