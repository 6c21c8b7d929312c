"""Bad matrix/vendor input: every problem is a MatrixError (exit code 2) located as
``file:line:column: yaml.path: message[; hint]``, and all problems of a file come at once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from oota.config import yamlsrc
from oota.config.matrix import load_matrix
from oota.config.names import NAME_RULE
from oota.errors import EXIT_BAD_INPUT, InputError, MatrixError
from oota.plan import plan

# Line numbers below refer to this text (1-based); the cases edit or extend it.
BASE = """\
version: 1
os:
  debian12:
    image: debian:bookworm-slim
    python: ["3.11"]
  debian13:
    image: debian:trixie-slim
    python: ["3.13"]
vendors:
  cpu:
    os: [debian12]
    python: ["3.11"]
    torch: ["2.13.0"]
"""


def edit(old: str, new: str) -> str:
    assert BASE.count(old) == 1, old
    return BASE.replace(old, new)


def load_error(project, text: str) -> MatrixError:
    project.write(text)
    with pytest.raises(MatrixError) as info:
        plan(load_matrix("matrix.yaml"))
    exc = info.value
    assert exc.exit_code == EXIT_BAD_INPUT == 2
    if len(exc.problems) == 1:  # one problem is one line
        assert str(exc) == exc.problems[0]
    else:
        assert str(exc).startswith(f"{len(exc.problems)} problems:\n")
    for problem in exc.problems:  # everything the user sees is in the message, one per line
        assert problem in [line.strip() for line in str(exc).splitlines()]
    return exc


# Billion laughs: 9 levels of 9 aliases, about 3.5 billion nodes once expanded.
BOMB = ("version: 1\nos: {}\nvendors: {}\n"
        + "a0: &a0 [" + ", ".join(['"lol"'] * 9) + "]\n"
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)))

# (id, matrix text, exact problem lines that must all be reported)
CASES = [
    # --- unknown keys, with a suggestion
    ("unknown-key-nested",
     edit('    python: ["3.11"]\n    torch', '    pyhton: ["3.11"]\n    torch'),
     ["matrix.yaml:12:5: vendors.cpu.pyhton: unknown key 'pyhton'; did you mean 'python'?"]),
    ("unknown-key-top-level",
     edit("vendors:", "vendros:"),
     ["matrix.yaml:9:1: vendros: unknown key 'vendros'; did you mean 'vendors'?",
      "matrix.yaml:1:1: <document>: missing required key 'vendors'"]),
    ("unknown-key-in-os",
     edit("    image: debian:trixie-slim", "    imgae: debian:trixie-slim"),
     ["matrix.yaml:7:5: os.debian13.imgae: unknown key 'imgae'; did you mean 'image'?",
      "matrix.yaml:6:3: os.debian13: missing required key 'image'"]),
    ("unknown-key-in-exclude",
     BASE + '    exclude: [{pyton: "3.11"}]\n',
     ["matrix.yaml:14:16: vendors.cpu.exclude[0].pyton: unknown key 'pyton'; "
      "did you mean 'python'?"]),
    ("toolkit-axis-on-vendor-without-toolkit",
     BASE + '    cuda: ["13.0"]\n',
     ["matrix.yaml:14:5: vendors.cpu.cuda: unknown key 'cuda'; expected one of: default, "
      "exclude, include, os, platform, python, torch"]),
    # --- versions
    ("version-typo-O-for-zero-python",
     edit('    python: ["3.11"]\n    torch', '    python: ["3.1O"]\n    torch'),
     ["matrix.yaml:12:14: vendors.cpu.python[0]: '3.1O' is not a version; did you mean '3.10'?"]),
    ("version-typo-l-for-one-torch",
     edit('torch: ["2.13.0"]', 'torch: ["2.13.0", "2.l3.1"]'),
     ["matrix.yaml:13:23: vendors.cpu.torch[1]: '2.l3.1' is not a version; "
      "did you mean '2.13.1'?"]),
    ("version-typo-in-os-python",
     edit('    python: ["3.13"]', '    python: ["3,13"]'),
     ["matrix.yaml:8:14: os.debian13.python[0]: '3,13' is not a version; "
      "did you mean '3.13'?"]),
    ("version-word-python-lists-known",
     edit('    python: ["3.11"]\n    torch', '    python: [latest]\n    torch'),
     ["matrix.yaml:12:14: vendors.cpu.python[0]: 'latest' is not a version; "
      "expected one of: 3.11, 3.13"]),
    ("version-word-torch-shows-format",
     edit('torch: ["2.13.0"]', "torch: [latest]"),
     ["matrix.yaml:13:13: vendors.cpu.torch[0]: 'latest' is neither a release nor a channel; "
      "write it like '2.13.0', or name a channel: nightly, test"]),
    ("version-in-exclude",
     BASE + '    exclude: [{python: "3.l1"}]\n',
     ["matrix.yaml:14:16: vendors.cpu.exclude[0].python: '3.l1' is not a version; "
      "did you mean '3.11'?"]),
    # --- unknown os / vendor names
    ("unknown-os-in-axis",
     edit("os: [debian12]", "os: [debain12]"),
     ["matrix.yaml:11:10: vendors.cpu.os[0]: unknown os 'debain12'; did you mean 'debian12'?"]),
    ("unknown-os-in-exclude",
     BASE + "    exclude: [{os: debain13}]\n",
     ["matrix.yaml:14:16: vendors.cpu.exclude[0].os: unknown os 'debain13'; "
      "did you mean 'debian13'?"]),
    ("unknown-os-in-include",
     BASE + '    include:\n      - {os: ubuntu24, python: "3.11", torch: "2.13.0"}\n',
     ["matrix.yaml:15:10: vendors.cpu.include[0].os: unknown os 'ubuntu24'; "
      "expected one of: debian12, debian13"]),
    ("unknown-os-in-default",
     BASE + "    default: [{os: debain12}]\n",
     ["matrix.yaml:14:16: vendors.cpu.default[0].os: unknown os 'debain12'; "
      "did you mean 'debian12'?"]),
    ("unknown-vendor",
     BASE + "  cpuu:\n    os: [debian12]\n",
     ["matrix.yaml:14:3: vendors.cpuu: no vendor folder vendors/cpuu/ with a vendor.yaml; "
      "did you mean 'cpu'?"]),
    # --- duplicate keys name both lines
    ("duplicate-key-top-level",
     BASE + "version: 1\n",
     ["matrix.yaml:14:1: version: duplicate key 'version' (first defined at line 1); "
      "remove one of them"]),
    ("duplicate-key-nested",
     BASE + '    torch: ["2.12.0"]\n',
     ["matrix.yaml:14:5: vendors.cpu.torch: duplicate key 'torch' (first defined at line 13); "
      "remove one of them"]),
    ("duplicate-os",
     edit("  debian13:", "  debian12:"),
     ["matrix.yaml:6:3: os.debian12: duplicate key 'debian12' (first defined at line 3); "
      "remove one of them"]),
    # --- wrong types
    ("axis-is-a-mapping",
     edit('    python: ["3.11"]\n    torch', '    python: {"3.11": yes}\n    torch'),
     ["matrix.yaml:12:5: vendors.cpu.python: expected a list of strings, got a mapping"]),
    ("axis-item-is-a-list",
     edit('    python: ["3.11"]\n    torch', '    python: [["3.11"]]\n    torch'),
     ["matrix.yaml:12:14: vendors.cpu.python[0]: expected a string, got a list"]),
    ("axis-is-empty",
     edit('torch: ["2.13.0"]', "torch: []"),
     ["matrix.yaml:13:5: vendors.cpu.torch: the axis is empty; "
      "list at least one value or remove it"]),
    ("schema-version-2",
     edit("version: 1", "version: 2"),
     ["matrix.yaml:1:1: version: unsupported version 2; this oota reads version 1"]),
    ("os-entry-missing-image",
     edit("    image: debian:trixie-slim\n", ""),
     ["matrix.yaml:6:3: os.debian13: missing required key 'image'"]),
    ("os-is-a-list",
     "version: 1\nos: [debian12]\nvendors: {}\n",
     ["matrix.yaml:2:1: os: expected a mapping, got a list"]),
    ("vendor-entry-is-a-string",
     edit("  cpu:\n    os: [debian12]\n    python: [\"3.11\"]\n    torch: [\"2.13.0\"]\n",
          "  cpu: everything\n"),
     ["matrix.yaml:10:3: vendors.cpu: expected a mapping, got a string"]),
    ("exclude-is-a-mapping",
     BASE + "    exclude: {os: debian12}\n",
     ["matrix.yaml:14:5: vendors.cpu.exclude: expected a list of mappings; "
      "write each entry as {os: ..., python: ...}"]),
    ("exclude-value-is-a-list",
     BASE + "    exclude: [{python: [3.11]}]\n",
     ["matrix.yaml:14:16: vendors.cpu.exclude[0].python: expected a string, got a list"]),
    ("exclude-entry-is-empty",
     BASE + "    exclude: [{}]\n",
     ["matrix.yaml:14:15: vendors.cpu.exclude[0]: the entry is empty; name at least one axis"]),
    ("bootstrap-unknown-tool",
     edit('    python: ["3.13"]\n',
          '    python: ["3.13"]\n    bootstrap: {tool: debootstap, suite: trixie, mirror: x}\n'),
     ["matrix.yaml:9:17: os.debian13.bootstrap.tool: unknown bootstrap tool 'debootstap'; "
      "did you mean 'debootstrap'?"]),
    # --- not YAML, or not one mapping
    ("malformed-unclosed-bracket",
     edit("os: [debian12]", "os: [debian12"),
     ["matrix.yaml:12:11: malformed YAML: expected ',' or ']', but got ':' (while parsing a flow "
      "sequence that starts at line 11, column 9)"]),
    ("malformed-tab-indent",
     edit("    os: [debian12]", "\tos: [debian12]"),
     ["matrix.yaml:11:1: malformed YAML: found character '\\t' that cannot start any token"]),
    ("truncated-mid-string",
     BASE[:BASE.index("2.13.0")],
     ["matrix.yaml:13:14: malformed YAML: found unexpected end of stream (while scanning a quoted "
      "scalar that starts at line 13, column 13)"]),
    ("truncated-mid-file",
     BASE[:BASE.index("  debian13:")],
     ["matrix.yaml:1:1: <document>: missing required key 'vendors'"]),
    ("empty-file", "", ["matrix.yaml:1:1: the file is empty; expected a mapping at the top level"]),
    ("only-a-comment", "# nothing here yet\n",
     ["matrix.yaml:1:1: the file is empty; expected a mapping at the top level"]),
    ("only-a-document-marker", "---\n",
     ["matrix.yaml:1:1: the file is empty; expected a mapping at the top level"]),
    ("document-is-a-list", "- cpu\n- cuda\n",
     ["matrix.yaml:1:1: the document is a list; expected a mapping at the top level"]),
    ("document-is-null", "null\n",
     ["matrix.yaml:1:1: the document is a single value; expected a mapping at the top level"]),
    ("document-is-a-scalar", "cpu\n",
     ["matrix.yaml:1:1: the document is a single value; expected a mapping at the top level"]),
    ("multiple-documents", BASE + "---\n" + BASE,
     ["matrix.yaml:14:1: a second YAML document starts here (the file holds 2); expected "
      "exactly one, remove the '---' separator"]),
    ("non-string-key", BASE + "? [a, b]\n: c\n",
     ["matrix.yaml:14:3: <document>: mapping keys must be plain strings"]),
    # --- aliases
    ("alias-bomb", BOMB,
     ["matrix.yaml:8:1: a4: the document expands to more than 50000 nodes (an alias bomb?); "
      "write the values out or use fewer aliases"]),
    ("recursive-alias", "version: 1\nos: &loop\n  debian12: *loop\nvendors: {}\n",
     ["matrix.yaml:2:5: a recursive alias: this anchored value contains an alias to itself; "
      "write the values out"]),
    ("recursive-alias-in-list", "version: 1\nos: {}\nvendors: {}\nx: &l [1, *l]\n",
     ["matrix.yaml:4:4: a recursive alias: this anchored value contains an alias to itself; "
      "write the values out"]),
    # --- names that become folders and image tags (oota/config/names.py)
    ("os-key-escapes-the-checkout",
     edit("  debian13:", "  x/../../tmp/ESCAPED:"),
     ["matrix.yaml:6:3: os.x/../../tmp/ESCAPED: 'x/../../tmp/ESCAPED' is not a valid os key: "
      f"'/' is not allowed; {NAME_RULE}"]),
    ("os-key-upper-case",
     edit("  debian13:", "  Debian13:"),
     ["matrix.yaml:6:3: os.Debian13: 'Debian13' is not a valid os key: the upper-case letter "
      f"'D' is not allowed; {NAME_RULE}"]),
    ("os-key-dot-dot",
     edit("  debian13:", "  debian..13:"),
     ["matrix.yaml:6:3: os.debian..13: 'debian..13' is not a valid os key: separators ('.', "
      f"'_', '-') must stand between letters or digits ('..' and '._' are not allowed); "
      f"{NAME_RULE}"]),
    ("axis-value-plus",
     edit('torch: ["2.13.0"]', 'torch: ["2.13.0+cpu"]'),
     ["matrix.yaml:13:13: vendors.cpu.torch[0]: '2.13.0+cpu' is not a valid torch value: '+' "
      f"is not allowed (a local version such as '+cpu' belongs in vendor.yaml); {NAME_RULE}"]),
    ("axis-value-bang",
     edit('torch: ["2.13.0"]', 'torch: ["1!2.13.0"]'),
     ["matrix.yaml:13:13: vendors.cpu.torch[0]: '1!2.13.0' is not a valid torch value: '!' "
      f"is not allowed; {NAME_RULE}"]),
    ("axis-value-space",
     edit('    python: ["3.11"]\n    torch', '    python: ["3.11 "]\n    torch'),
     ["matrix.yaml:12:14: vendors.cpu.python[0]: '3.11 ' is not a valid python value: a space "
      f"is not allowed; {NAME_RULE}"]),
    ("axis-value-non-ascii",
     edit('    python: ["3.11"]\n    torch', '    python: ["\uff13.11"]\n    torch'),
     ["matrix.yaml:12:14: vendors.cpu.python[0]: '\uff13.11' is not a valid python value: the "
      f"character U+FF13 (fullwidth digit three) is not allowed; {NAME_RULE}"]),
    ("exclude-value-plus",
     BASE + '    exclude: [{torch: "2.13.0+cpu"}]\n',
     ["matrix.yaml:14:16: vendors.cpu.exclude[0].torch: '2.13.0+cpu' is not a valid torch "
      "value: '+' is not allowed (a local version such as '+cpu' belongs in vendor.yaml); "
      f"{NAME_RULE}"]),
    ("include-value-space",
     BASE + '    include: [{python: "3.11 ", torch: "2.13.0"}]\n',
     ["matrix.yaml:14:16: vendors.cpu.include[0].python: '3.11 ' is not a valid python value: "
      f"a space is not allowed; {NAME_RULE}"]),
    ("vendor-key-upper-case",
     edit("  cpu:", "  CPU:"),
     ["matrix.yaml:10:3: vendors.CPU: 'CPU' is not a valid vendor name: the upper-case letter "
      f"'C' is not allowed; {NAME_RULE}"]),
    # --- planning: a combination the OS cannot provide
    ("impossible-combination",
     edit('    python: ["3.11"]\n    torch', '    python: ["3.11", "3.13"]\n    torch'),
     ["matrix.yaml:10:3: vendors.cpu: combination os=debian12 python=3.13 is impossible: "
      'debian12 provides Python 3.11; add exclude entry {os: debian12, python: "3.13"}']),
    ("include-missing-an-axis",
     BASE + '    include: [{os: debian13, python: "3.13"}]\n',
     ["matrix.yaml:10:3: vendors.cpu: combination {'os': 'debian13', 'python': '3.13'} has no "
      "value for torch; give the axis at the vendor level or in the include entry"]),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_matrix_is_located(project, text, expected):
    exc = load_error(project, text)
    missing = [line for line in expected if line not in exc.problems]
    assert not missing, "\n".join(exc.problems)


@pytest.mark.parametrize("case", ["axis-is-a-mapping", "axis-item-is-a-list",
                                  "exclude-value-is-a-list", "vendor-entry-is-a-string"])
def test_a_type_error_is_reported_once(project, case):
    (text, expected), = [c[1:] for c in CASES if c[0] == case]
    assert load_error(project, text).problems == expected


def test_alias_bomb_stops_at_the_node_budget(project):
    # 9 levels of 9 aliases would be 9**10 (about 3.5 billion) nodes; the loader gives up early.
    exc = load_error(project, BOMB)
    assert len(exc.problems) == 1
    assert "alias bomb" in exc.problems[0] and "50000 nodes" in exc.problems[0]


def test_every_problem_in_a_file_is_reported_at_once(project):
    text = (edit('    python: ["3.11"]\n    torch', '    pyhton: ["3.11"]\n    torch')
            .replace("os: [debian12]", "os: [debain12]")
            .replace('torch: ["2.13.0"]', 'torch: ["2.1O.0"]')
            + "  cpuu:\n    os: [debian12]\n")
    exc = load_error(project, text)
    assert len(exc.problems) >= 4
    assert str(exc).startswith(f"{len(exc.problems)} problems:\n")
    for part in ("vendors.cpu.pyhton: unknown key", "unknown os 'debain12'",
                 "'2.1O.0' is not a version; did you mean '2.10.0'?", "vendors.cpuu: no vendor"):
        assert part in str(exc)


def test_vendor_file_problem_names_that_file(project):
    vendor_yaml = project.root / "vendors/cpu/vendor.yaml"
    lines = vendor_yaml.read_text().splitlines()
    vendor_yaml.write_text("\n".join(lines) + "\nrequirments: []\n")
    exc = load_error(project, BASE.replace("    image: debian:trixie-slim\n", ""))
    assert f"vendors/cpu/vendor.yaml:{len(lines) + 1}:1: requirments: unknown key " \
           "'requirments'; did you mean 'requirements'?" in exc.problems
    # the matrix's own problems are not hidden by the vendor file's
    assert "matrix.yaml:6:3: os.debian13: missing required key 'image'" in exc.problems


@pytest.mark.parametrize(("vendor_yaml", "expected"), [
    ("name: gpu\ndevice: cuda\nrequirements: [torch]\ntoolkit: {axis: cuda}\n",
     "vendors/gpu/vendor.yaml:4:1: toolkit: missing required key 'id_prefix'"),
    ("name: gpux\ndevice: cuda\nrequirements: [torch]\n",
     "vendors/gpu/vendor.yaml:1:1: name: 'gpux' differs from the folder name 'gpu'; "
     "rename one of them so both read 'gpu'"),
    ("name: gpu\ndevice: cuda\n",
     "vendors/gpu/vendor.yaml:1:1: <document>: missing required key 'requirements'"),
    ("name: gpu\ndevice: cuda\nrequirements: [torch]\nsmoke_imports: {torch: 1}\n",
     "vendors/gpu/vendor.yaml:4:1: smoke_imports: expected a list of strings, got a mapping"),
], ids=["toolkit-without-prefix", "name-differs-from-folder", "missing-requirements",
        "wrong-type"])
def test_vendor_file_errors(project, vendor_yaml, expected):
    project.add_vendor("gpu", vendor_yaml)
    exc = load_error(project, BASE + "  gpu:\n    os: [debian12]\n")
    assert expected in exc.problems, "\n".join(exc.problems)


def test_vendor_without_template(project):
    project.add_vendor("gpu", "name: gpu\ndevice: cuda\nrequirements: [torch]\n")
    (project.root / "vendors/gpu/Dockerfile.j2").unlink()
    exc = load_error(project, BASE + "  gpu:\n    os: [debian12]\n")
    assert "vendors/gpu/vendor.yaml:1:1: <document>: gpu/Dockerfile.j2 is missing; add one " \
           'that starts with {% extends "base.Dockerfile.j2" %}' in exc.problems


def test_not_utf8(project):
    project.matrix.write_bytes(BASE.encode().replace(b"bookworm", b"bookw\xf6rm"))
    with pytest.raises(MatrixError) as info:
        load_matrix("matrix.yaml")
    assert info.value.exit_code == 2
    assert info.value.problems == [
        "matrix.yaml:4:24: not UTF-8 text (invalid start byte at byte 50); save the file as UTF-8"]


def test_missing_file(project):
    with pytest.raises(MatrixError) as info:
        load_matrix("matrx.yaml")
    assert info.value.exit_code == 2
    assert info.value.problems == ["matrx.yaml: file not found"]


def test_unknown_vendor_on_the_command_line(project):
    with pytest.raises(InputError) as info:
        plan(load_matrix("matrix.yaml"), ["cpux"])
    assert info.value.exit_code == 2
    assert str(info.value) == "matrix.yaml: vendor 'cpux' is not in the matrix; did you mean 'cpu'?"


@pytest.mark.parametrize(("spelling", "ids"), [
    ("[3.10]", ["cpu-torch2.13.0-py3.10-debian12"]),
    ('["3.10"]', ["cpu-torch2.13.0-py3.10-debian12"]),
    ("['3.10']", ["cpu-torch2.13.0-py3.10-debian12"]),
    ("[3.10, 3.1]", ["cpu-torch2.13.0-py3.10-debian12", "cpu-torch2.13.0-py3.1-debian12"]),
], ids=["unquoted", "double-quoted", "single-quoted", "both-3.10-and-3.1"])
def test_unquoted_version_keeps_its_text(project, spelling, ids):
    """YAML 1.1 reads 3.10 as the float 3.1; oota keeps the text, so it stays Python 3.10."""
    project.write(BASE.replace('python: ["3.11"]', f"python: {spelling}"))  # os and vendor
    matrix = load_matrix("matrix.yaml")
    assert str(matrix.os["debian12"].python[0]) == "3.10"
    cells = plan(matrix)
    assert [c.id for c in cells] == ids
    assert cells[0].python == Version("3.10")


def test_a_duplicate_key_does_not_hide_the_other_problems(project):
    text = (BASE + '    torch: ["2.12.0"]\n').replace("os: [debian12]", "os: [debain12]")
    exc = load_error(project, text + "  cpuu:\n    python: ['3.1O']\n")
    assert "matrix.yaml:14:5: vendors.cpu.torch: duplicate key 'torch' (first defined at line " \
           "13); remove one of them" in exc.problems
    assert "matrix.yaml:11:10: vendors.cpu.os[0]: unknown os 'debain12'; did you mean " \
           "'debian12'?" in exc.problems
    # A vendor without a folder still has its axis values checked.
    assert "matrix.yaml:16:14: vendors.cpuu.python[0]: '3.1O' is not a version; did you mean " \
           "'3.10'?" in exc.problems
    assert len(exc.problems) == 4, exc.problems


def test_a_matrix_kept_elsewhere_uses_the_current_checkout(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "copy.yaml"
    elsewhere.write_text(BASE.replace('torch: ["2.13.0"]', 'torch: ["2.13.0", "2.l4.1"]'))
    with pytest.raises(MatrixError) as info:
        load_matrix(elsewhere)
    # The vendor folder is found in the project (the current folder), so the problem reported
    # is the real one, not "no vendor folder".
    assert info.value.problems == [f"{elsewhere}:13:23: vendors.cpu.torch[1]: '2.l4.1' is not a "
                                   "version; did you mean '2.14.1'?"]
    elsewhere.write_text(BASE)
    matrix = load_matrix(elsewhere)
    assert matrix.root == project.root and matrix.images_dir == project.root / "images"


def test_no_vendor_folders_anywhere_is_one_clear_problem(tmp_path, monkeypatch):
    import oota.config.matrix

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(oota.config.matrix, "CHECKOUT", tmp_path / "no-checkout")
    (tmp_path / "matrix.yaml").write_text(BASE)
    with pytest.raises(MatrixError) as info:
        load_matrix("matrix.yaml")
    assert info.value.problems == [
        f"matrix.yaml:9:1: vendors: no vendor folders (vendors/<name>/vendor.yaml) beside "
        f"matrix.yaml, in the current folder or in {tmp_path / 'no-checkout'}; run oota from its "
        "checkout, or keep the matrix file beside vendors/"]


def test_a_cell_id_holds_only_valid_names(project):
    """The toolkit's id prefix (vendor.yaml) is part of the id too: a '/' in it is caught while
    planning, before anything is written."""
    project.add_vendor("gpu", "name: gpu\ndevice: cuda\nrequirements: [torch]\n"
                              "toolkit: {axis: cuda, id_prefix: 'cu/../x'}\n")
    exc = load_error(project, BASE + '  gpu: {os: [debian12], python: ["3.11"], '
                                     'torch: ["2.13.0"], cuda: ["13.0"]}\n')
    (problem,) = exc.problems
    if problem.startswith("vendors/gpu/vendor.yaml:"):  # vendor.yaml's own check came first
        assert "cu/../x" in problem
    else:
        assert problem == ("matrix.yaml:14:3: vendors.gpu: cell id "
                           "'gpu-torch2.13.0-cu/../x13.0-py3.11-debian12' is not valid: '/' is "
                           f"not allowed; {NAME_RULE}")


DEEP = "the document nests more than 100 levels deep here; oota's files need a few levels: " \
       "flatten it"


# 101 levels is past the limit; 400 and 5000 are past what PyYAML's composer can recurse through.
@pytest.mark.parametrize("depth", [101, 400, 5000])
def test_nesting_past_the_limit_is_located_not_a_recursion_error(project, depth):
    # 'extra' is level 2 (the root mapping is 1): its 100th '[' is level 101.
    exc = load_error(project, BASE + "extra: " + "[" * depth + "]" * depth + "\n")
    assert exc.problems == [f"matrix.yaml:{BASE.count(chr(10)) + 1}:107: {DEEP}"]


def test_nesting_through_aliases_counts_what_they_expand_to(project):
    text = BASE + "a: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 60 + "*a" + "]" * 60 + "\n"
    exc = load_error(project, text)
    assert len(exc.problems) == 1 and exc.problems[0].endswith(DEEP)


def test_an_unreadable_file_is_one_problem(project, monkeypatch):
    """chmod 000 does not stop root, who runs these tests; the read itself is refused here."""
    def refused(path: Path, limit: int) -> bytes:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(yamlsrc, "read_bytes", refused)
    with pytest.raises(MatrixError) as info:
        load_matrix("matrix.yaml")
    assert info.value.problems == ["matrix.yaml: cannot read the file (Permission denied); check "
                                   "that it is a readable regular file"]


def test_a_control_character_is_located(project):
    exc = load_error(project, BASE + 'extra: "a\0b"\n')
    assert exc.problems == [f"matrix.yaml:{BASE.count(chr(10)) + 1}:10: a control character "
                            "YAML does not allow (U+0000); remove it"]


def _shape(node) -> object:
    """A composed node as plain data: kind, tag, value or children, and where it starts."""
    where = (node.start_mark.line, node.start_mark.column, node.end_mark.line,
             node.end_mark.column)
    if isinstance(node, yamlsrc.yaml.ScalarNode):
        return ("scalar", node.tag, node.value, node.style or None, where)  # plain: None or ""
    if isinstance(node, yamlsrc.yaml.SequenceNode):
        return ("seq", node.tag, [_shape(n) for n in node.value], where)
    return ("map", node.tag, [(_shape(k), _shape(v)) for k, v in node.value], where)


AWKWARD = [
    BASE,
    BASE + "anchors:\n  a: &x {k: [1, 2.50, '3.10']}\n  b: *x\n  c: {<<: *x, k: 4}\n",
    "# only a comment\n",
    "---\na: 1\n---\nb: 2\n",
    "\ufeffa: é\nb: |\n  two\n  lines\nc: >-\n  folded\n",
    "a: !!str 1\nb: ~\nc: yes\nd: 0x1F\ne: 1_000\nf: .inf\n",
    "a: [1, 2\n",                 # malformed: the pure composer's message
    'extra: "a\0b"\n',             # a control character
    "[" * 120 + "]" * 120 + "\n",  # past MAX_DEPTH
]


REPO = Path(yamlsrc.__file__).resolve().parents[2]
# The repository's YAML files (matrix, vendors, policies, workflows), as git tracks them.
TRACKED_YAML = subprocess.run(["git", "-C", str(REPO), "ls-files", "*.yaml", "*.yml"],
                              capture_output=True, text=True, check=False).stdout.split()


@pytest.mark.skipif(yamlsrc._FAST_LOADER is None, reason="PyYAML without libyaml here")
@pytest.mark.parametrize("source", [*range(len(AWKWARD)), *TRACKED_YAML])
def test_libyaml_composes_what_the_pure_composer_does_or_leaves_it_to_it(source):
    """The fast path (libyaml) gives the very nodes, tags and marks of the pure composer, or
    gives way to it (None): so every value, location and error is the same either way."""
    text = AWKWARD[source] if isinstance(source, int) else (REPO / source).read_text("utf-8")
    fast = yamlsrc._compose_fast(text)
    try:
        pure = list(yamlsrc.yaml.compose_all(text, Loader=yamlsrc.yaml.SafeLoader))
    except (yamlsrc.yaml.YAMLError, RecursionError):
        assert fast is None
        return
    if fast is not None:
        assert [_shape(n) for n in fast] == [_shape(n) for n in pure]
    elif text.count("[") < yamlsrc.MAX_DEPTH:
        pytest.fail("a well-formed document of ordinary depth did not take the fast path")
