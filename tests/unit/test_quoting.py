"""Quoting by context (oota/quoting.py): each helper makes a value mean exactly its text in its
place of a Dockerfile, and refuses what no quoting can make safe (a line break)."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from oota import quoting
from oota.quoting import QuotingError

TRICKY = ['foo; python_version < "3.12"', "a$HOME", "$(touch /tmp/x)", "back\\slash", "it's",
          "`id`", "a b", "", "ünïcode", "pytest>=8,<10", "x\\"]

# (helper, value, exactly what it writes)
CASES = [
    ("shell_word", "torch==2.13.0+cpu", "torch==2.13.0+cpu"),
    ("shell_word", "pytest>=8,<10", "'pytest>=8,<10'"),
    ("shell_word", 'foo; python_version < "3.12"', "'foo; python_version < \"3.12\"'"),
    ("shell_word", "$(reboot)", "'$(reboot)'"),
    ("shell_word", "it's", "'it'\"'\"'s'"),
    ("shell_word", "", "''"),
    ("env_value", "plain", '"plain"'),
    ("env_value", 'say "hi"', '"say \\"hi\\""'),
    ("env_value", "$HOME/x", '"\\$HOME/x"'),
    ("env_value", "a\\b", '"a\\\\b"'),
    ("env_value", "a\\", '"a\\\\"'),
    ("label_value", "PyTorch 2.13.0 on NVIDIA CUDA", '"PyTorch 2.13.0 on NVIDIA CUDA"'),
    ("label_value", 'x" evil="y', '"x\\" evil=\\"y"'),
    ("env_key", "PT_HPU_LAZY_MODE", "PT_HPU_LAZY_MODE"),
    ("image_ref", "debian:bookworm-slim", "debian:bookworm-slim"),
    ("image_ref", "registry.lab:5000/gaudi-docker/1.23.0/x:latest",
     "registry.lab:5000/gaudi-docker/1.23.0/x:latest"),
    ("image_ref", "nvidia/cuda@sha256:" + "a" * 64, "nvidia/cuda@sha256:" + "a" * 64),
    ("comment", "matrix.yaml and vendors/cpu/", "matrix.yaml and vendors/cpu/"),
]


@pytest.mark.parametrize(("helper", "value", "written"), CASES,
                         ids=[f"{c[0]}-{c[1][:20]}" for c in CASES])
def test_writes(helper, value, written):
    assert getattr(quoting, helper)(value) == written


def test_lists():
    assert quoting.shell_words(["python3.11", "a b"]) == "python3.11 'a b'"
    assert quoting.exec_form(["/bin/sh", "-c", 'echo "$x"']) == '["/bin/sh", "-c", "echo \\"$x\\""]'


@pytest.mark.parametrize("value", TRICKY)
def test_a_shell_word_reaches_the_program_as_written(value):
    """The real shell's view: the word arrives as one argument, byte for byte, unexpanded."""
    line = f"printf '%s\\0' {quoting.shell_word(value)} {quoting.shell_word(value)}"
    out = subprocess.run(["/bin/sh", "-c", line], capture_output=True, text=True, check=True)
    assert out.stdout.split("\0")[:2] == [value, value]
    assert shlex.split(quoting.shell_words([value, "x"])) == [value, "x"]


@pytest.mark.parametrize("value", TRICKY)
def test_exec_form_is_json_of_the_values(value):
    assert json.loads(quoting.exec_form([value, "x"])) == [value, "x"]


@pytest.mark.parametrize("value", TRICKY)
def test_double_quoted_words_read_back_as_the_value(value):
    """The Dockerfile's rules inside double quotes: \\ escapes '"', '$' and itself only."""
    text = quoting.env_value(value)
    assert text[0] == text[-1] == '"'
    out, i, body = "", 0, text[1:-1]
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body) and body[i + 1] in '"$\\':
            out, i = out + body[i + 1], i + 2
            continue
        assert body[i] not in '"$', f"unescaped {body[i]!r} in {text}"
        out, i = out + body[i], i + 1
    assert out == value


CONTROL = ["line\nRUN curl evil | sh", "cr\r", "tab\t", "nul\0", "esc\x1b[0m", "ls\u2028"]
HELPERS = ["shell_word", "env_value", "label_value", "env_key", "image_ref", "comment"]


@pytest.mark.parametrize("helper", HELPERS)
@pytest.mark.parametrize("value", CONTROL, ids=["newline", "cr", "tab", "nul", "esc", "u2028"])
def test_a_control_character_is_refused_everywhere(helper, value):
    with pytest.raises(QuotingError) as info:
        getattr(quoting, helper)(value)
    assert repr(value) in str(info.value) and "would end the Dockerfile instruction" in str(
        info.value)
    with pytest.raises(QuotingError):
        quoting.shell_words(["ok", value])
    with pytest.raises(QuotingError):
        quoting.exec_form(["ok", value])


@pytest.mark.parametrize("value", ["debian:bookworm slim", "debian:bookworm\\", "$BASE",
                                   "Upper", "a/../b", "x:", "-flag", "img:t@g", ""])
def test_an_image_reference_that_needs_quoting_is_refused(value):
    with pytest.raises(QuotingError, match="is not an image reference"):
        quoting.image_ref(value)


@pytest.mark.parametrize("value", ["1ABC", "A-B", "A B", "A=B", "$X", ""])
def test_an_env_key_is_a_name(value):
    with pytest.raises(QuotingError, match="is not an environment variable name"):
        quoting.env_key(value)
