"""The table of flags (oota/api/options.py) and the tasks agree: every parameter of a task is a
flag of the table, received with the type its check returns; every entry is some task's flag;
and a bound task checks each flag and fills the table's defaults before its body runs."""

from __future__ import annotations

import inspect
import os
import signal
import subprocess
import sys
import typing
from typing import Any

import pytest

import tasks
from oota.api import options
from oota.api.options import REQUIRED, Flag, bind, flag_of
from oota.engine.base import RegistryAuth
from oota.errors import InputError
from oota.supply.signing import PrivateKey
from tests.conftest import REPO

TASKS = {name: getattr(tasks, name) for name in dir(tasks)
         if type(getattr(tasks, name)).__name__ == "FlagTask"}
NAMES = {"PrivateKey": PrivateKey, "RegistryAuth": RegistryAuth}


def _body(task: Any) -> Any:
    return inspect.unwrap(task.body)


def _received(flag: Flag) -> Any:
    """The type a task receives for ``flag``: its check's return type, else what invoke
    parses for its default."""
    if flag.check is not None:
        if isinstance(flag.check, type):
            return flag.check
        # NAMES: what a check's module imports for its annotations only (TYPE_CHECKING).
        return typing.get_type_hints(flag.check, localns=NAMES)["return"]
    if flag.repeatable:
        return list[str] | None
    if flag.default is None:
        return str | None
    return str if flag.default is REQUIRED else type(flag.default)


def test_the_tasks_are_found() -> None:
    assert {"build", "verify", "publish", "pull", "report", "history", "test"} <= set(TASKS)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_each_parameter_is_received_as_its_check_returns(name: str) -> None:
    body = _body(TASKS[name])
    hints = typing.get_type_hints(body, localns=NAMES)
    for param in list(inspect.signature(body).parameters)[1:]:
        flag = flag_of(name, param)
        assert hints[param] == _received(flag), \
            f"{name}'s {param}: the body says {hints[param]}, its flag gives {_received(flag)}"


def test_every_entry_of_the_table_is_some_tasks_flag() -> None:
    used = set()
    for name, task in TASKS.items():
        for param in list(inspect.signature(_body(task)).parameters)[1:]:
            used.add(f"{name}.{param}" if f"{name}.{param}" in options.FLAGS else param)
    assert set(options.FLAGS) - used == set()


def test_a_flag_missing_from_the_table_is_named_when_tasks_py_loads() -> None:
    def deploy(c: object, colour: str) -> None:
        raise AssertionError("not called")
    with pytest.raises(TypeError, match=r"task 'deploy' takes 'colour'.*add 'colour'"):
        bind(deploy, {})

    def tidy(c: object, quiet: bool, colour: str) -> None:
        raise AssertionError("not called")
    with pytest.raises(TypeError, match=r"task 'tidy': its required flag 'colour' comes "):
        bind(tidy, {"quiet": Flag("less", False), "colour": Flag("which", REQUIRED)})


def test_a_bound_body_gets_checked_values_and_the_table_defaults() -> None:
    seen: dict[str, object] = {}

    def run(c: object, name: str, size: int, loud: bool) -> None:
        seen.update(c=c, size=size, name=name, loud=loud)

    def size_of(text: str) -> int:
        if not text.isdigit():
            raise InputError(f"--size {text!r} is not a number")
        return int(text)

    table = {"size": Flag("how many", "3", check=size_of), "run.name": Flag("who", REQUIRED),
             "loud": Flag("shout", False)}
    bound = bind(run, table)
    assert [p.default for p in inspect.signature(bound.body).parameters.values()] == \
        [inspect.Parameter.empty, REQUIRED, "3", False]
    assert bound.help == {"name": "who", "size": "how many", "loud": "shout"}
    bound.body("ctx", name="ada")
    assert seen == {"c": "ctx", "size": 3, "name": "ada", "loud": False}
    with pytest.raises(InputError, match="--size 'x'"):
        bound.body("ctx", size="x", name="ada")


def test_help_lists_every_flag_with_its_text() -> None:
    """`oota TASK --help` shows the table's help for each flag: oota builds a parser of its
    own before invoke's, which used to use the help up (the flags were listed bare)."""
    run = subprocess.run([sys.executable, "-m", "oota", "build", "--help"], cwd=REPO,
                         capture_output=True, text=True, check=True)
    text = " ".join(run.stdout.split())
    for name in ("ca_bundle", "registry_mirror", "vendor", "jobs"):
        assert " ".join(options.FLAGS[name].help.split()) in text, name
    assert "--=" not in run.stdout


def test_dash_h_is_help_for_every_task() -> None:
    """invoke gives a flag the first free letter of its name as its short form, so `--host`,
    `--hosts`, `--here` and `--history` each took `-h`: `oota pull -h` pulled from a host
    named by the next word instead of showing the help."""
    for name, task in TASKS.items():
        names = {n for argument in task.get_arguments() for n in argument.names}
        assert "h" not in names, name
    run = subprocess.run([sys.executable, "-m", "oota", "pull", "-h"], cwd=REPO,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "--host=STRING" in run.stdout and "Usage: oota" in run.stdout


def test_a_bad_flag_is_refused_before_the_task_runs() -> None:
    run = subprocess.run([sys.executable, "-m", "oota", "matrix", "--format", "yaml"],
                         cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.startswith("error: --format 'yaml' is not one of table, json, github")


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
    run = subprocess.run([sys.executable, "-m", "invoke", "-r", str(REPO), task, "--help"],
                         cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith(f"error: a help flag where {task} takes a value"), run.stderr
    assert "refused" not in run.stdout + run.stderr
