"""README.md and the command line tell the same story: `oota --list` shows each task's whole
first sentence, and (below) every path, task and flag README names exists."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys

import pytest
from invoke import Collection
from invoke.tasks import Task

import tasks
from tests.conftest import REPO

COLLECTION = Collection.from_module(tasks)
TASKS: dict[str, Task[object]] = {name: COLLECTION[name] for name in COLLECTION.task_names}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_list_shows_a_whole_first_sentence(name: str) -> None:
    """invoke's --list shows a docstring's first line only: that line must be the whole first
    paragraph, one sentence, so the list never stops mid-sentence."""
    doc = inspect.getdoc(TASKS[name].body) or ""
    first_paragraph = doc.split("\n\n", 1)[0]
    assert "\n" not in first_paragraph, f"{name}: the first paragraph spans lines:\n{doc}"
    assert first_paragraph.endswith("."), f"{name}: {first_paragraph!r} is not a sentence"
    assert len(first_paragraph) <= 100, f"{name}: keep the first sentence short"


# -- README.md: every path, task, flag and list it names is real ----------------------------------
README = REPO / "README.md"
TEXT = README.read_text(encoding="utf-8")
# What a fresh clone holds: a path starting with one of these is a path of the repository.
TREE = {p.name for p in REPO.iterdir()} - {".git", ".venv", "results", "reports", "history.db",
                                           ".oota-cache", ".pytest_cache", ".mypy_cache",
                                           ".ruff_cache", "oota.egg-info"}
CORE_FLAGS = {"--list", "--help", "--version", "-h", "-l", "-V"}
_CODE = re.compile(r"```[^\n]*\n(.*?)```|`([^`\n]+)`", re.S)
# ./oota.sh anywhere; a bare `oota` or `invoke` where a command starts (a line, after &&).
_COMMAND = re.compile(r"(?:\./oota\.sh|(?:^|&& )(?:[A-Z_]+=\S+ )*(?:oota|invoke)(?= ))"
                      r"((?: +[^ \n|]+)*)")
_PATH = re.compile(r"^\.?[A-Za-z0-9_<>*-][A-Za-z0-9_.<>*-]*(/[A-Za-z0-9_.<>*-]+)*/?$")


def _code() -> list[str]:
    """Every code block and inline code span, with shell line continuations joined."""
    spans = [m.group(1) or m.group(2) for m in _CODE.finditer(TEXT)]
    return [span.replace("\\\n", " ") for span in spans]


def _commands() -> list[tuple[str, list[str]]]:
    """(program, words) of each oota command in README's code: `./oota.sh TASK --flag ...`."""
    found = []
    for span in _code():
        for line in span.splitlines():
            for match in _COMMAND.finditer(line):
                program = next(w for w in match.group(0).split()
                               if w in ("./oota.sh", "oota", "invoke"))
                words = [w.strip("()[],.;:`") for w in match.group(1).replace("\\|", " ").split()]
                if words and not words[0].startswith(("#", "TASK")):
                    found.append((program, words))
    return found


def _flags(task: Task[object]) -> set[str]:
    """A task's flags as invoke parses them (a flag that defaults to true also has --no-X)."""
    flags = set()
    for arg in task.get_arguments():
        flags |= {("--" if len(n) > 1 else "-") + n.replace("_", "-") for n in arg.names}
        if arg.kind is bool and arg.default is True:
            flags.add("--no-" + arg.name.replace("_", "-"))
    return flags


def test_every_command_names_a_task_and_its_flags() -> None:
    commands = _commands()
    assert len(commands) > 40, "README's commands were not found"
    for program, words in commands:
        task, rest = (words[0], words[1:]) if not words[0].startswith("-") else (None, words)
        if task is not None:
            assert task in TASKS, f"{program} {' '.join(words)}: no task {task!r}"
        allowed = CORE_FLAGS | (_flags(TASKS[task]) if task else set())
        for word in rest:
            flag = word.split("=")[0].strip("[](),.;:`")
            if flag.startswith("-") and flag not in ("-", "--"):
                assert flag in allowed, f"{program} {' '.join(words)}: {task} has no {flag}"


def test_one_way_to_run_tasks() -> None:
    """README writes every task as `./oota.sh TASK`, which works in a new shell after the
    setup; `oota` and `invoke` appear only where README says what ./oota.sh runs."""
    others = [f"{program} {' '.join(words)}" for program, words in _commands()
              if program != "./oota.sh" and program != "oota"]
    assert others == [], others
    bare = [" ".join(words) for program, words in _commands() if program == "oota"]
    assert set(bare) <= {"TASK"}, bare


def _paths() -> set[str]:
    """Code spans that name a path in the repository (their first part is in the tree), and
    the Layout section's entries."""
    found = {span.strip() for span in _code() if _PATH.match(span.strip())}
    layout = TEXT.split("## Layout", 1)[1].split("```")[1]
    parent = ""
    for line in layout.splitlines():
        indent = len(line) - len(line.lstrip())
        entry = re.split(r" {2,}", line.strip())[0]
        names = [n.strip() for part in entry.split(",") for n in part.split(" + ")]
        if indent > 2 or not all(_PATH.match(n) for n in names):
            continue  # a description's next line
        if indent == 0:
            parent = names[0] if names[0].endswith("/") else ""
            found |= set(names)
        else:
            found |= {parent + name for name in names}
    return {p for p in found if p.split("/")[0] in TREE}


def test_every_path_it_names_exists() -> None:
    paths = _paths()
    assert {"oota/config/matrix.py", "scripts/ensure-env.sh", "vendors/<name>/vendor.yaml",
            "oota/vocab.py"} <= paths
    missing = [p for p in sorted(paths)
               if not list(REPO.glob(re.sub(r"<[^>]+>", "*", p).rstrip("/")))]
    assert missing == [], f"README names paths that do not exist: {missing}"


def test_the_setup_it_describes_is_what_ensure_env_installs() -> None:
    script = (REPO / "scripts" / "ensure-env.sh").read_text(encoding="utf-8")
    installed = set(re.findall(r"apt_install ([a-z0-9.-]+)", script))
    assert {"docker.io", "debootstrap", "chromium", "postgresql"} <= installed
    setup = TEXT.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    assert [p for p in sorted(installed) if f"`{p}`" not in setup] == []


def test_no_table_cell_is_a_section() -> None:
    """A table cell longer than a few lines of prose belongs in a section or a list."""
    long = []
    for number, line in enumerate(TEXT.splitlines(), 1):
        if line.startswith("|") and not set(line) <= set("|-: "):
            cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
            long += [f"README.md:{number}: {len(c.strip())} characters"
                     for c in cells if len(c.strip()) > MAX_CELL]
    assert long == []


MAX_CELL = 250


@pytest.mark.parametrize("task", ["publish", "pull", "history", "build"])
def test_task_help_prints_help_and_runs_nothing(task: str) -> None:
    """README says `./oota.sh TASK --help` shows a task's flags; invoke read it as the value
    of publish's, pull's and history's first argument and ran the task."""
    run = subprocess.run([sys.executable, "-m", "oota", task, "--help"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"Usage: oota [--core-opts] {task} ")
    assert "Options:" in run.stdout and run.stderr == ""
    # publish's own lines are '{status:>8}  {cell}': the task did not run.
    assert not re.search(r"^ *(refused|pushed) {2}\S", run.stdout, re.M)
