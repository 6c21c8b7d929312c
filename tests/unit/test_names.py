"""The one name pattern (oota/config/names.py): what passes, and why the rest does not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from oota.config.names import (
    CELL_ID_MAX,
    CELL_ID_PATTERN,
    NAME_MAX,
    cell_id_problem,
    is_name,
    name_problem,
)

REPO = Path(__file__).resolve().parents[2]

VALID = ["cpu", "cuda", "debian12", "ubuntu22.04", "3.11", "2.13.0", "2.13.0rc1",
         "2.13.0.post1", "2.13.0.dev20250101", "13.0", "my_vendor", "a--b", "a__b", "0",
         "x" * NAME_MAX]

# (id, text, the reason given)
INVALID = [
    ("empty", "", "it is empty"),
    ("path-escape", "x/../../tmp/ESCAPED", "'/' is not allowed"),
    ("dot-dot", "..", "it must start and end with a letter or digit"),
    ("inner-dot-dot", "a..b", "separators ('.', '_', '-') must stand between letters or digits"),
    ("dot-underscore", "a._b", "separators ('.', '_', '-') must stand between letters or digits"),
    ("triple-underscore", "a___b", "separators"),
    ("leading-dot", ".hidden", "it must start and end with a letter or digit"),
    ("leading-dash", "-rf", "it must start and end with a letter or digit"),
    ("trailing-dash", "cpu-", "it must start and end with a letter or digit"),
    ("plus", "2.13.0+cpu", "'+' is not allowed (a local version such as '+cpu' belongs in "
                           "vendor.yaml)"),
    ("bang", "1!2.0", "'!' is not allowed"),
    ("space", "3.11 ", "a space is not allowed"),
    ("upper-case", "Debian12", "the upper-case letter 'D' is not allowed"),
    ("non-ascii-letter", "débian", "the character U+00E9 (latin small letter e with acute) is "
                                   "not allowed"),
    ("non-ascii-digit", "\uff13.11", "the character U+FF13 (fullwidth digit three)"),
    ("newline", "cpu\nRUN x", "the character U+000A is not allowed"),
    ("nul", "cpu\0", "the character U+0000 is not allowed"),
    ("quote", 'cpu"', "'\"' is not allowed"),
    ("dollar", "$HOME", "'$' is not allowed"),
    ("colon", "cpu:latest", "':' is not allowed"),
    ("backslash", "a\\b", "'\\' is not allowed"),
    ("too-long", "x" * (NAME_MAX + 1), f"it is {NAME_MAX + 1} characters long, at most "
                                       f"{NAME_MAX} are allowed"),
]


@pytest.mark.parametrize("text", VALID)
def test_valid_names(text):
    assert name_problem(text) is None and is_name(text)


@pytest.mark.parametrize(("text", "reason"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_names_say_why(text, reason):
    problem = name_problem(text)
    assert problem is not None and problem.startswith(reason), problem
    assert not is_name(text)


def test_cell_ids_follow_the_same_grammar_up_to_a_docker_tag_length():
    assert cell_id_problem("cuda-torch2.14.1-cu12.6-py3.12-ubuntu24.04") is None
    assert cell_id_problem("x" * CELL_ID_MAX) is None
    assert cell_id_problem("x" * (CELL_ID_MAX + 1)) == (
        f"it is {CELL_ID_MAX + 1} characters long, at most {CELL_ID_MAX} are allowed")
    assert cell_id_problem("cpu-torch2.13.0-py3.11-x/../y") == "'/' is not allowed"


def test_every_valid_cell_id_is_a_valid_docker_tag_and_passes_the_result_schema():
    """The names grammar is stricter than both places a cell id must be accepted."""
    schema = json.loads((REPO / "schema/result-v1.json").read_text())
    pattern = schema["properties"]["cell"]["properties"]["id"]["pattern"]
    docker_tag = re.compile(r"[\w][\w.-]{0,127}")
    for text in VALID + ["cuda-torch2.14.1-cu12.6-py3.12-ubuntu24.04", "x" * CELL_ID_MAX]:
        assert CELL_ID_PATTERN.fullmatch(text)
        assert re.fullmatch(pattern, text), text
        assert docker_tag.fullmatch(text), text


def test_every_committed_cell_folder_is_a_valid_cell_id():
    folders = [p.parent.name for p in REPO.glob("images/*/*/Dockerfile")]
    assert folders and [f for f in folders if cell_id_problem(f)] == []
