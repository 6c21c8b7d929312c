"""tests/forkcli.py: a command line forked from the server gives what a fresh interpreter gives
(exit code, stdout, stderr, files), and anything it cannot run the same way runs fresh."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forkcli
from tests.conftest import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO), "DOCKER_HOST": "unix:///nonexistent"}
COMMANDS = {
    "version": ["--version"],
    "unknown-task": ["no-such-task"],
    "bad-flag": ["matrix", "--format", "yaml"],
    "matrix": ["matrix", "--vendor", "cpu"],
    "no-engine": ["build", "--vendor", "cpu", "--no-history"],
    "help": ["report", "--help"],
}


def both(args: list[str], cwd: Path, **kwargs: object) -> tuple[subprocess.CompletedProcess[str],
                                                                 subprocess.CompletedProcess[str]]:
    argv = [sys.executable, "-m", *args]
    fresh = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, **kwargs)
    forked = forkcli.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, **kwargs)
    return fresh, forked


@pytest.mark.parametrize("args", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_forked_command_line_gives_what_a_fresh_one_gives(args: list[str],
                                                            tmp_path: Path) -> None:
    fresh, forked = both(["oota", "-r", str(REPO), *args], tmp_path, env=ENV)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        fresh.returncode, fresh.stdout, fresh.stderr)


def test_plain_invoke_its_folder_stdin_and_an_uncaught_error(tmp_path: Path) -> None:
    """`python -m invoke` reads tasks.py from the working folder (the fork's own, not the
    server's), a task reads the given stdin, and an error no one catches is the interpreter's:
    a traceback on stderr and exit 1."""
    (tmp_path / "tasks.py").write_text(
        "import sys\nfrom invoke import task\n\n\n@task\ndef echo(c):\n"
        "    print(sys.stdin.read().upper(), end='')\n\n\n@task\ndef boom(c):\n"
        "    raise ValueError('a bug')\n", encoding="utf-8")
    fresh, forked = both(["invoke", "echo"], tmp_path, env=ENV, input="words\n")
    assert (forked.returncode, forked.stdout) == (fresh.returncode, fresh.stdout) == (0, "WORDS\n")
    fresh, forked = both(["invoke", "boom"], tmp_path, env=ENV)
    assert forked.returncode == fresh.returncode == 1
    assert forked.stderr.startswith("Traceback (most recent call last):")
    assert forked.stderr.splitlines()[-1] == fresh.stderr.splitlines()[-1] == "ValueError: a bug"


def test_the_environment_and_the_folder_are_the_requests(tmp_path: Path) -> None:
    """Each command gets exactly the environment it was given (a variable of an earlier one or
    of the server is gone) and its own working folder; its files land there."""
    forkcli.run([sys.executable, "-m", "oota", "init", "--vendor", "acme"], cwd=tmp_path,
                env={**ENV, "OOTA_SOMETHING": "1"}, capture_output=True, text=True, check=True)
    assert (tmp_path / "vendors" / "acme" / "vendor.yaml").is_file()
    script = tmp_path / "tasks.py"
    script.write_text("import os\nfrom invoke import task\n\n\n@task\ndef show(c):\n"
                      "    print(os.environ.get('OOTA_SOMETHING'), os.getcwd())\n",
                      encoding="utf-8")
    shown = forkcli.run([sys.executable, "-m", "invoke", "show"], cwd=tmp_path, env=ENV,
                        capture_output=True, text=True, check=True)
    assert shown.stdout.split() == ["None", str(tmp_path)]


def test_a_command_past_its_timeout_is_killed() -> None:
    argv = [sys.executable, "-m", "oota", "build", "--vendor", "cpu", "--no-history"]
    with socket.create_server(("127.0.0.1", 0)) as silent:  # takes the call, never answers
        env = {**ENV, "DOCKER_HOST": f"tcp://127.0.0.1:{silent.getsockname()[1]}"}
        with pytest.raises(subprocess.TimeoutExpired):
            forkcli.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=1)
    again = forkcli.run([sys.executable, "-m", "oota", "--version"], cwd=REPO, env=ENV,
                        capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and again.stdout.startswith("oota ")


@pytest.mark.parametrize(("argv", "kwargs"), [
    ([sys.executable, "-c", "print(1)"], {}),                          # not a module of ours
    ([sys.executable, "-X", "utf8", "-m", "oota", "--version"], {}),   # interpreter flags
    ([sys.executable, "-m", "oota", "--version"], {"stdout": subprocess.PIPE}),
    ([sys.executable, "-m", "oota", "--version"],
     {"capture_output": True, "env": {**ENV, "PYTHONPATH": "/elsewhere"}}),
], ids=["other-program", "interpreter-flags", "own-pipes", "another-checkout"])
def test_what_a_fork_would_run_differently_runs_fresh(argv: list[str],
                                                      kwargs: dict[str, object]) -> None:
    assert forkcli._server_for(argv, kwargs, dict(kwargs.get("env") or os.environ)) is None


def test_interpreter_settings_get_a_server_of_their_own() -> None:
    argv = [sys.executable, "-m", "oota", "--version"]
    kwargs = {"capture_output": True}
    plain = forkcli._server_for(argv, kwargs, {**ENV, "PYTHONHASHSEED": "0"})
    other = forkcli._server_for(argv, kwargs, {**ENV, "PYTHONHASHSEED": "1"})
    assert plain is not None and other is not None and plain is not other
    done = other.run(argv, {**ENV, "PYTHONHASHSEED": "1"}, {**kwargs, "text": True})
    assert done.returncode == 0
