"""Planning: GitHub Actions matrix expansion, readable stable cell ids, and cell selection."""

from __future__ import annotations

import pytest

from oota.config.matrix import load_matrix
from oota.errors import InputError, MatrixError
from oota.plan import expand_combos, plan, select

OS_PY = [("os", ("a", "b")), ("python", ("3.11", "3.13"))]

# (id, axes, include, exclude, expected combos in order)
EXPANSION = [
    ("cartesian-product", OS_PY, [], [],
     [{"os": "a", "python": "3.11"}, {"os": "a", "python": "3.13"},
      {"os": "b", "python": "3.11"}, {"os": "b", "python": "3.13"}]),
    ("three-axes-order", [("x", ("1", "2")), ("y", ("p",)), ("z", ("q", "r"))], [], [],
     [{"x": "1", "y": "p", "z": "q"}, {"x": "1", "y": "p", "z": "r"},
      {"x": "2", "y": "p", "z": "q"}, {"x": "2", "y": "p", "z": "r"}]),
    ("exclude-full-match", OS_PY, [], [{"os": "a", "python": "3.13"}],
     [{"os": "a", "python": "3.11"}, {"os": "b", "python": "3.11"},
      {"os": "b", "python": "3.13"}]),
    ("exclude-partial-keys", OS_PY, [], [{"python": "3.13"}],
     [{"os": "a", "python": "3.11"}, {"os": "b", "python": "3.11"}]),
    ("exclude-matching-nothing", OS_PY, [], [{"os": "c"}],
     [{"os": "a", "python": "3.11"}, {"os": "a", "python": "3.13"},
      {"os": "b", "python": "3.11"}, {"os": "b", "python": "3.13"}]),
    ("exclude-everything", OS_PY, [], [{"os": "a"}, {"os": "b"}], []),
    ("include-extends-matching-with-new-key", OS_PY, [{"os": "b", "torch": "2.13.0"}], [],
     [{"os": "a", "python": "3.11"}, {"os": "a", "python": "3.13"},
      {"os": "b", "python": "3.11", "torch": "2.13.0"},
      {"os": "b", "python": "3.13", "torch": "2.13.0"}]),
    ("include-new-key-only-extends-all", OS_PY[:1], [{"torch": "2.13.0"}], [],
     [{"os": "a", "torch": "2.13.0"}, {"os": "b", "torch": "2.13.0"}]),
    ("include-matching-nothing-is-appended", OS_PY, [{"os": "c", "python": "3.12"}], [],
     [{"os": "a", "python": "3.11"}, {"os": "a", "python": "3.13"},
      {"os": "b", "python": "3.11"}, {"os": "b", "python": "3.13"},
      {"os": "c", "python": "3.12"}]),
    ("include-never-overwrites-an-original-value", [("os", ("a",)), ("python", ("3.11",))],
     [{"python": "3.12"}], [],
     [{"os": "a", "python": "3.11"}, {"python": "3.12"}]),
    ("include-may-overwrite-an-added-value", [("os", ("a", "b"))],
     [{"torch": "2.12.0"}, {"os": "b", "torch": "2.13.0"}], [],
     [{"os": "a", "torch": "2.12.0"}, {"os": "b", "torch": "2.13.0"}]),
    ("exclude-before-include", OS_PY, [{"os": "a", "python": "3.13"}], [{"os": "a"}],
     [{"os": "b", "python": "3.11"}, {"os": "b", "python": "3.13"},
      {"os": "a", "python": "3.13"}]),
    ("appended-include-is-not-extended-by-later-ones", [("os", ("a",))],
     [{"os": "c"}, {"os": "c", "python": "3.12"}], [],
     [{"os": "a"}, {"os": "c"}, {"os": "c", "python": "3.12"}]),
    ("no-axes-include-only", [], [{"os": "a", "python": "3.11"}, {"os": "b"}], [],
     [{"os": "a", "python": "3.11"}, {"os": "b"}]),
    ("nothing", [], [], [], []),
    # The worked example from GitHub's documentation ("Expanding or adding matrix configurations").
    ("github-docs-example",
     [("fruit", ("apple", "pear")), ("animal", ("cat", "dog"))],
     [{"color": "green"}, {"color": "pink", "animal": "cat"},
      {"fruit": "apple", "shape": "circle"}, {"fruit": "banana"},
      {"fruit": "banana", "animal": "cat"}], [],
     [{"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
      {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
      {"fruit": "pear", "animal": "cat", "color": "pink"},
      {"fruit": "pear", "animal": "dog", "color": "green"},
      {"fruit": "banana"},
      {"fruit": "banana", "animal": "cat"}]),
]


@pytest.mark.parametrize(("axes", "include", "exclude", "expected"),
                         [c[1:] for c in EXPANSION], ids=[c[0] for c in EXPANSION])
def test_expand_combos(axes, include, exclude, expected):
    include_before = [dict(r) for r in include]
    assert expand_combos(list(axes), include, exclude) == expected
    assert include == include_before  # the rules are not mutated


GPU_VENDOR = """\
name: gpu
display: Test GPU
device: cuda
toolkit: {axis: cuda, id_prefix: cu, name: CUDA}
requirements: ["torch=={torch}+cu{cuda}"]
"""


def vendor_block(body: str) -> str:
    return "".join(f"    {line}\n" for line in body.strip().splitlines())


MATRIX_HEAD = """\
version: 1
os:
  debian12: {image: "debian:bookworm-slim", python: ["3.11"]}
  debian13: {image: "debian:trixie-slim", python: ["3.13"]}
vendors:
"""


def write(project, **vendors: str):
    project.write(MATRIX_HEAD + "".join(f"  {name}:\n{vendor_block(body)}"
                                        for name, body in vendors.items()))
    return load_matrix("matrix.yaml")


CPU_BOTH = """
os: [debian12, debian13]
python: ["3.11", "3.13"]
torch: ["2.12.0", "2.13.0"]
exclude: [{os: debian12, python: "3.13"}, {os: debian13, python: "3.11"}]
"""

# (id, vendors {name: body}, expected cell ids in order)
CELL_IDS = [
    ("cpu-one-cell", {"cpu": 'os: [debian12]\npython: ["3.11"]\ntorch: ["2.13.0"]'},
     ["cpu-torch2.13.0-py3.11-debian12"]),
    ("cpu-matrix-order", {"cpu": CPU_BOTH},
     ["cpu-torch2.12.0-py3.11-debian12", "cpu-torch2.13.0-py3.11-debian12",
      "cpu-torch2.12.0-py3.13-debian13", "cpu-torch2.13.0-py3.13-debian13"]),
    ("toolkit-between-torch-and-python",
     {"gpu": 'os: [debian12]\npython: ["3.11"]\ntorch: ["2.13.0"]\ncuda: ["12.6", "13.0"]'},
     ["gpu-torch2.13.0-cu12.6-py3.11-debian12", "gpu-torch2.13.0-cu13.0-py3.11-debian12"]),
    ("toolkit-only-in-include",
     {"gpu": 'os: [debian12]\npython: ["3.11"]\ntorch: ["2.13.0"]\n'
             'include: [{torch: "2.13.0", cuda: "13.0"}]'},
     ["gpu-torch2.13.0-cu13.0-py3.11-debian12"]),
    ("include-adds-a-whole-cell",
     {"cpu": 'os: [debian12]\npython: ["3.11"]\ntorch: ["2.13.0"]\n'
             'include: [{os: debian13, python: "3.13", torch: "2.12.0"}]'},
     ["cpu-torch2.13.0-py3.11-debian12", "cpu-torch2.12.0-py3.13-debian13"]),
    ("duplicates-collapse",
     {"cpu": 'os: [debian12]\npython: ["3.11"]\ntorch: ["2.13.0"]\n'
             'include: [{os: debian12, python: "3.11", torch: "2.13.0"}]'},
     ["cpu-torch2.13.0-py3.11-debian12"]),
    ("two-vendors-in-matrix-order",
     {"gpu": 'os: [debian13]\npython: ["3.13"]\ntorch: ["2.13.0"]\ncuda: ["13.0"]',
      "cpu": 'os: [debian12]\npython: ["3.11"]\ntorch: ["2.13.0"]'},
     ["gpu-torch2.13.0-cu13.0-py3.13-debian13", "cpu-torch2.13.0-py3.11-debian12"]),
]


@pytest.mark.parametrize(("vendors", "ids"), [c[1:] for c in CELL_IDS],
                         ids=[c[0] for c in CELL_IDS])
def test_cell_ids(project, vendors, ids):
    project.add_vendor("gpu", GPU_VENDOR)
    matrix = write(project, **vendors)
    cells = plan(matrix)
    assert [c.id for c in cells] == ids
    assert [c.id for c in plan(load_matrix("matrix.yaml"))] == ids  # stable across loads
    assert all(c.tag == f"oota/{c.vendor.name}:{c.id}" for c in cells)


def test_cell_coordinates_with_toolkit(project):
    project.add_vendor("gpu", GPU_VENDOR)
    matrix = write(project, gpu='os: [debian12]\npython: ["3.11"]\ntorch: ["2.13.0"]\n'
                                'cuda: ["13.0"]')
    (cell,) = plan(matrix)
    assert cell.coordinates() == {"vendor": "gpu", "os": "debian12", "python": "3.11",
                                  "torch": "2.13.0", "toolkit": "cuda",
                                  "toolkit_version": "13.0"}


def test_toolkit_axis_missing_is_located(project):
    project.add_vendor("gpu", GPU_VENDOR)
    matrix = write(project, gpu='os: [debian12]\npython: ["3.11"]\ntorch: ["2.13.0"]')
    with pytest.raises(MatrixError) as info:
        plan(matrix)
    assert info.value.problems == [
        "matrix.yaml:6:3: vendors.gpu: combination {'os': 'debian12', 'python': '3.11', "
        "'torch': '2.13.0'} has no value for cuda; give the axis at the vendor level or in "
        "the include entry"]


def test_plan_one_vendor(project):
    project.add_vendor("gpu", GPU_VENDOR)
    matrix = write(project, cpu='os: [debian12]\npython: ["3.11"]\ntorch: ["2.13.0"]',
                   gpu='os: [debian12]\npython: ["3.11"]\ntorch: ["2.13.0"]\ncuda: ["13.0"]')
    assert [c.id for c in plan(matrix, ["gpu"])] == ["gpu-torch2.13.0-cu13.0-py3.11-debian12"]


@pytest.fixture
def cpu_matrix(project):
    matrix = write(project, cpu=CPU_BOTH + 'default: [{os: debian12, torch: "2.13.0"}]')
    return matrix, plan(matrix)


# (id, select() keyword arguments, expected ids)
SELECTIONS = [
    ("by-id", {"ids": ["cpu-torch2.12.0-py3.13-debian13"]}, ["cpu-torch2.12.0-py3.13-debian13"]),
    ("by-ids-in-given-order-without-duplicates",
     {"ids": ["cpu-torch2.13.0-py3.13-debian13", "cpu-torch2.12.0-py3.11-debian12",
              "cpu-torch2.13.0-py3.13-debian13"]},
     ["cpu-torch2.13.0-py3.13-debian13", "cpu-torch2.12.0-py3.11-debian12"]),
    ("ids-win-over-everything", {"ids": ["cpu-torch2.12.0-py3.11-debian12"], "everything": True},
     ["cpu-torch2.12.0-py3.11-debian12"]),
    ("everything", {"everything": True},
     ["cpu-torch2.12.0-py3.11-debian12", "cpu-torch2.13.0-py3.11-debian12",
      "cpu-torch2.12.0-py3.13-debian13", "cpu-torch2.13.0-py3.13-debian13"]),
    ("vendor-default", {}, ["cpu-torch2.13.0-py3.11-debian12"]),
    ("empty-ids-mean-default", {"ids": []}, ["cpu-torch2.13.0-py3.11-debian12"]),
]


@pytest.mark.parametrize("kwargs, ids", [c[1:] for c in SELECTIONS],
                         ids=[c[0] for c in SELECTIONS])
def test_select(cpu_matrix, kwargs, ids):
    matrix, cells = cpu_matrix
    assert [c.id for c in select(matrix, cells, **kwargs)] == ids


def test_select_unknown_id_suggests_the_closest(cpu_matrix):
    matrix, cells = cpu_matrix
    with pytest.raises(InputError) as info:
        select(matrix, cells, ids=["cpu-torch2.13.0-py3.11-debian12",
                                   "cpu-torch2.13.0-py3.11-debain12", "cuda"])
    assert info.value.exit_code == 2
    assert str(info.value).splitlines() == [
        "unknown cell 'cpu-torch2.13.0-py3.11-debain12'; "
        "did you mean 'cpu-torch2.13.0-py3.11-debian12'?",
        "unknown cell 'cuda'; expected one of: cpu-torch2.12.0-py3.11-debian12, "
        "cpu-torch2.12.0-py3.13-debian13, cpu-torch2.13.0-py3.11-debian12, "
        "cpu-torch2.13.0-py3.13-debian13"]


def test_vendor_without_default_selects_all_its_cells(project):
    matrix = write(project, cpu=CPU_BOTH)
    cells = plan(matrix)
    assert select(matrix, cells) == cells


def test_default_matches_versions_not_text(project):
    matrix = write(project, cpu=CPU_BOTH + 'default: [{python: "3.11", torch: "2.13"}]')
    assert [c.id for c in select(matrix, plan(matrix))] == ["cpu-torch2.13.0-py3.11-debian12"]


def test_default_entry_matching_no_cell_is_an_error(project):
    matrix = write(project, cpu=CPU_BOTH + 'default: [{torch: "2.11.0"}]')
    with pytest.raises(MatrixError) as info:
        select(matrix, plan(matrix))
    (problem,) = info.value.problems
    assert "vendors.cpu.default[0]: default entry {'torch': '2.11.0'} matches no cell" in problem
    assert problem.startswith("matrix.yaml:")
