"""The typed requests (oota/api/requests.py) and the tasks agree: every task takes one
request, every field of a request is a flag whose check returns the field's type, every
request is some task's; a bound task checks each flag and fills the defaults before its body
runs; and importing the tasks loads none of the large libraries a task may need."""

from __future__ import annotations

import dataclasses
import inspect
import os
import signal
import subprocess
import sys
import typing
from typing import Any

import pytest
from invoke.collection import Collection
from invoke.context import Context

import tasks
from oota.api import requests
from oota.api.fields import Flag, flag, flags_of, parse, required
from oota.api.requests import BuildRequest
from oota.cli import command_line_problem
from oota.engine.base import RegistryAuth
from oota.errors import InputError
from oota.supply.signing import PrivateKey
from oota.tasking import bind, request_of
from tests import forkcli
from tests.conftest import REPO

TASKS = {name: getattr(tasks, name) for name in dir(tasks)
         if type(getattr(tasks, name)).__name__ == "FlagTask"}
# What requests.py imports for its annotations only (TYPE_CHECKING).
NAMES = {"PrivateKey": PrivateKey, "RegistryAuth": RegistryAuth}


def _received(spec: Flag) -> Any:
    """The type a request holds for a flag: its check's return type (or None, its default
    when not given), else what invoke parses (a text, or a switch's bool)."""
    given: Any = str
    if spec.check is not None:
        given = spec.check if isinstance(spec.check, type) else \
            typing.get_type_hints(spec.check, localns=NAMES)["return"]
    elif isinstance(spec.default, bool):
        given = bool
    return given | None if spec.default is None and not spec.required else given


def test_the_tasks_are_found() -> None:
    assert {"build", "verify", "publish", "pull", "report", "history", "test"} <= set(TASKS)


def test_every_request_is_one_tasks() -> None:
    taken = [request_of(inspect.unwrap(task.body)) for task in TASKS.values()]
    assert sorted(r.__name__ for r in taken) == sorted(r.__name__ for r in requests.REQUESTS)


@pytest.mark.parametrize("request_class", requests.REQUESTS, ids=lambda r: r.__name__)
def test_each_field_is_a_flag_of_the_type_its_check_returns(request_class: type) -> None:
    hints = typing.get_type_hints(request_class, localns=NAMES)
    named = dict(flags_of(request_class))
    for x in dataclasses.fields(request_class):
        assert x.name in named, f"{request_class.__name__}.{x.name} is not declared with flag()"
        assert hints[x.name] == _received(named[x.name]), \
            f"{request_class.__name__}.{x.name}: {hints[x.name]}, its check gives " \
            f"{_received(named[x.name])}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Run:
    name: str = required("who", check=str)
    size: int = flag("how many", 3, check=lambda text: _size(text))
    loud: bool = flag("shout", False)


def _size(text: str) -> int:
    if not text.isdigit():
        raise InputError(f"--size {text!r} is not a number")
    return int(text)


def test_a_bound_body_gets_a_checked_request_with_the_defaults() -> None:
    seen: list[object] = []

    def run(c: Context, r: _Run) -> None:
        seen.extend([c, r])

    bound = bind(run)
    assert [(p.name, p.default) for p in inspect.signature(bound).parameters.values()] == \
        [("c", inspect.Parameter.empty), ("name", inspect.Parameter.empty), ("size", None),
         ("loud", False)]
    bound("ctx", name="ada")
    assert seen == ["ctx", _Run(name="ada", size=3, loud=False)]
    with pytest.raises(InputError, match="--size 'x'"):
        bound("ctx", size="x", name="ada")


def test_a_request_checks_flags_against_each_other() -> None:
    assert parse(BuildRequest, vendor=["cpu"], jobs="2").jobs == 2
    with pytest.raises(InputError, match="--jobs is for the local engine"):
        parse(BuildRequest, vendor=["cpu"], jobs="2", hosts="hosts.yaml")
    with pytest.raises(TypeError, match="no flag 'colour'"):
        parse(BuildRequest, colour="red")


LARGE = ("sqlalchemy", "docker", "jsonschema", "cryptography", "jinja2", "requests")


def test_importing_the_tasks_loads_no_large_library() -> None:
    """Each task imports its job in its body: a command line loads its own task's modules."""
    code = (f"import sys, tasks; "
            f"print(sorted(m for m in {LARGE!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_help_lists_every_flag_with_its_text() -> None:
    """`oota TASK --help` shows the table's help for each flag: oota builds a parser of its
    own before invoke's, which used to use the help up (the flags were listed bare)."""
    run = forkcli.run([sys.executable, "-m", "oota", "build", "--help"], cwd=REPO,
                      capture_output=True, text=True, check=True)
    text = " ".join(run.stdout.split())
    helps = dict(flags_of(BuildRequest))
    for name in ("ca_bundle", "registry_mirror", "vendor", "jobs"):
        assert " ".join(helps[name].help.split()) in text, name
    assert "--=" not in run.stdout


def test_dash_h_is_help_for_every_task() -> None:
    """invoke gives a flag the first free letter of its name as its short form, so `--host`,
    `--hosts`, `--here` and `--history` each took `-h`: `oota pull -h` pulled from a host
    named by the next word instead of showing the help."""
    for name, task in TASKS.items():
        names = {n for argument in task.get_arguments() for n in argument.names}
        assert "h" not in names, name
    run = forkcli.run([sys.executable, "-m", "oota", "pull", "-h"], cwd=REPO,
                      capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "--host=STRING" in run.stdout and "Usage: oota" in run.stdout


def test_a_bad_flag_is_refused_before_the_task_runs() -> None:
    run = forkcli.run([sys.executable, "-m", "oota", "matrix", "--format", "yaml"],
                      cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.startswith("error: --format 'yaml' is not one of table, json, github")


def test_every_short_flag_is_read_as_its_long_one() -> None:
    """`oota build --vendor=xla -e DIR` ended in a KeyError: oota's own check looked short
    flags up with the flag table's .get(), which does not resolve them. Each task's short
    flags now pass that check like their long ones, and a wrong value still gets its line."""
    contexts = {str(c.name): c for c in Collection.from_module(tasks).to_contexts()}
    seen = 0
    for name, context in contexts.items():
        for argument in context.args.values():
            shorts = [n for n in argument.names if len(n) == 1]
            for short in shorts:
                words = [name, f"-{short}"] + (["x"] if argument.takes_value else [])
                assert command_line_problem(words, contexts) is None, (name, short)
                seen += 1
    assert seen > 20
    run = forkcli.run([sys.executable, "-m", "oota", "matrix", "-f", "yaml"],
                      cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("error: --format 'yaml' is not one of"), run.stderr


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly() -> None:
    """`oota --list | head -1`: the reader is gone before oota writes (a pipe whose read end
    is closed), so every write fails; no traceback, no configuration error, 128 + SIGPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        for argv in (["--list"], ["--help"], ["build", "--help"]):
            run = subprocess.run([sys.executable, "-m", "oota", *argv], cwd=REPO,
                                 stdout=write_end, stderr=subprocess.PIPE, text=True)
            assert (run.returncode, run.stderr) == (128 + signal.SIGPIPE, ""), argv
    finally:
        os.close(write_end)


@pytest.mark.parametrize("task", ["publish", "pull", "judge"])
def test_plain_invoke_never_runs_a_task_with_help_as_its_value(task: str) -> None:
    """Plain invoke reads `invoke publish --help` as publish's REGISTRY being '--help' (`oota`
    prints the help itself): the task refuses it instead of publishing to '--help'."""
    run = forkcli.run([sys.executable, "-m", "invoke", "-r", str(REPO), task, "--help"],
                      cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith(f"error: a help flag where {task} takes a value"), run.stderr
    assert "refused" not in run.stdout + run.stderr
