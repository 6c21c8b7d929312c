"""The bad-input corpus: a careless or hostile input ends in exit 2 (bad input) or 3 (the
environment) with one clear line on stderr (or a located list for a data file), never a
traceback, and writes nothing.

Each case copies the checkout's inputs into a temporary folder, damages one of them or passes a
bad flag, and runs the real command there (``python -m oota TASK ...``, what ``./oota.sh`` and
the ``oota`` script run) as a user would. DOCKER_HOST points at nothing: a task that contacted
Docker before checking its input would end with exit 3 (no Docker Engine), not the expected 2.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import forkcli

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CELL = "cpu-torch2.13.0-py3.11-debian12"
LOCK = Path("locks/cpu") / f"{DEFAULT_CELL}.txt"
# What a checkout needs for every task short of Docker.
INPUTS = ("matrix.yaml", "tasks.py", "vendors", "verify", "schema", "templates", "locks")
# A located problem of a data file: `  matrix.yaml:3:5: ...` or `  matrix.yaml: ...`.
LOCATED = re.compile(r"^  \S+?(:\d+:\d+)?: \S")


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


# Billion laughs: 9 levels of 9 aliases, about 3.5 billion nodes once expanded.
BOMB = ("a0: &a0 [" + ", ".join(['"lol"'] * 9) + "]\n"
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)))


def append(path: str, text: str) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        with (root / path).open("a", encoding="utf-8") as fh:
            fh.write(text)
    return damage


def replace(path: str, text: str) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        (root / path).write_text(text, encoding="utf-8")
    return damage


def substitute(path: str, old: str, new: str) -> Callable[[Path], None]:
    """One edit of a file, as a hand would make it."""
    def damage(root: Path) -> None:
        text = (root / path).read_text(encoding="utf-8")
        assert text.count(old) == 1, f"{old!r} is not once in {path}"
        (root / path).write_text(text.replace(old, new), encoding="utf-8")
    return damage


def latin1(path: str) -> Callable[[Path], None]:
    """The file saved in Latin-1 by an editor: one byte that is not UTF-8."""
    def damage(root: Path) -> None:
        with (root / path).open("ab") as fh:
            fh.write(b"# caf\xe9\n")
    return damage


def fifo(path: str) -> Callable[[Path], None]:
    """A FIFO where a data file should be: reading it would wait for a writer forever."""
    def damage(root: Path) -> None:
        os.mkfifo(root / path)
    return damage


def first(path: str, old: str, new: str) -> Callable[[Path], None]:
    """The first ``old`` of a file made ``new``."""
    def damage(root: Path) -> None:
        text = (root / path).read_text(encoding="utf-8")
        assert old in text, f"{old!r} is not in {path}"
        (root / path).write_text(text.replace(old, new, 1), encoding="utf-8")
    return damage


def links(*pairs: tuple[str, str]) -> Callable[[Path], None]:
    """Symbolic links (path, target) made in the checkout."""
    def damage(root: Path) -> None:
        for path, target in pairs:
            (root / path).symlink_to(target.format(root=root))
    return damage


def vendor_template(body: str) -> Callable[[Path], None]:
    """The cpu vendor's Dockerfile.j2 with ``body`` in its runtime stage, line 3."""
    return replace("vendors/cpu/Dockerfile.j2", '{% extends "base.Dockerfile.j2" %}\n'
                   "{% block runtime_extra %}\n" + body + "\n{% endblock %}\n")


def linked_out(name: str) -> Callable[[Path], None]:
    """vendors/NAME moved out of the checkout and linked back in."""
    def damage(root: Path) -> None:
        outside = root.parent / f"outside-{name}"
        (root / "vendors" / name).rename(outside)
        (root / "vendors" / name).symlink_to(outside, target_is_directory=True)
    return damage


def unreadable_home(root: Path) -> None:
    (root / "home").mkdir()
    (root / "home").chmod(0)


def home_file(name: str, text: str) -> Callable[[Path], None]:
    """A file in a HOME of the test's own."""
    def damage(root: Path) -> None:
        (root / "home").mkdir(exist_ok=True)
        (root / "home" / name).write_text(text, encoding="utf-8")
    return damage


def unreadable(path: str) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        (root / path).chmod(0)
    return damage


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    code: int
    says: str                                     # a part of what stderr says
    damage: Callable[[Path], None] | None = None  # what the careless user did to the checkout
    denied: bool = False                          # needs a file the user cannot read
    env: tuple[tuple[str, str], ...] = ()         # variables set ("{root}": the checkout)


CASES = [
    # --- data files: exit 2, located
    Case("deep-nesting-matrix", ("matrix",), 2,
         "nests more than 100 levels deep", append("matrix.yaml", f"x: {deep(500)}\n")),
    Case("deep-nesting-vendor-yaml", ("matrix", "--vendor", "cpu"), 2,
         "vendors/cpu/vendor.yaml:", append("vendors/cpu/vendor.yaml", f"x: {deep(5000)}\n")),
    Case("deep-nesting-skips", ("matrix", "--vendor", "cpu"), 2,
         "nests more than 100 levels deep", replace("vendors/cpu/skips.yaml", f"- {deep(500)}\n")),
    Case("alias-bomb", ("matrix",), 2, "alias bomb", append("matrix.yaml", BOMB)),
    Case("nul-byte-matrix", ("matrix",), 2, "a control character YAML does not allow (U+0000)",
         append("matrix.yaml", 'x: "a\0b"\n')),
    Case("non-utf8-matrix", ("matrix",), 2,
         "not UTF-8 text", latin1("matrix.yaml")),
    Case("non-utf8-vendor-yaml", ("generate", "--check"), 2,
         "vendors/cpu/vendor.yaml", latin1("vendors/cpu/vendor.yaml")),
    Case("non-utf8-skips", ("matrix", "--vendor", "cpu"), 2,
         "skips.yaml", latin1("vendors/cpu/skips.yaml")),
    Case("non-utf8-lock", ("lock", "--check", "--vendor", "cpu"), 2,
         f"{LOCK}: not UTF-8 text", latin1(str(LOCK))),
    Case("vendor-ci-label", ("matrix", "--format", "github", "--vendor", "gaudi"), 2,
         "vendors/gaudi/vendor.yaml:", substitute(
             "vendors/gaudi/vendor.yaml", "runs-on: [self-hosted, linux, x64, gaudi]",
             "runs-on: [self-hosted, 'gaudi; curl x | sh']")),
    Case("vendor-ci-empty", ("matrix", "--format", "github"), 2, "ci.runs-on: must not be empty",
         substitute("vendors/cpu/vendor.yaml", "runs-on: [ubuntu-latest]", "runs-on: []")),
    Case("matrix-is-a-folder", ("matrix", "--matrix", "vendors"), 2, "is a folder, not a file"),
    Case("matrix-missing", ("matrix", "--matrix", "matrx.yaml"), 2, "matrx.yaml: file not found"),
    # --- bounded reads: nothing waits forever or fills memory
    Case("matrix-is-dev-zero", ("matrix", "--matrix", "/dev/zero"), 2,
         "/dev/zero: not a regular file (a character device); oota reads regular files only"),
    Case("matrix-is-dev-urandom", ("generate", "--matrix", "/dev/urandom"), 2,
         "/dev/urandom: not a regular file (a character device)"),
    Case("matrix-is-a-fifo", ("matrix", "--matrix", "pipe.yaml"), 2,
         "pipe.yaml: not a regular file (a FIFO)", fifo("pipe.yaml")),
    Case("matrix-too-large", ("matrix",), 2,
         "matrix.yaml: larger than 4 MiB, the most oota reads of such a file",
         append("matrix.yaml", "#" * (4 << 20))),
    Case("skips-is-a-fifo", ("matrix", "--vendor", "cpu"), 2, "skips.yaml: not a regular file",
         lambda root: ((root / "vendors/cpu/skips.yaml").unlink(),
                       os.mkfifo(root / "vendors/cpu/skips.yaml")) and None),
    Case("hosts-is-dev-zero", ("build", "--vendor", "cpu", "--hosts", "/dev/zero"), 2,
         "/dev/zero: not a regular file"),
    Case("registry-with-a-password", ("publish", "--registry", "lab:s3cret@registry.lab"), 2,
         "--registry 'lab:***@registry.lab': give a registry host"),
    Case("lock-is-dev-zero", ("lock", "--check", "--vendor", "cpu"), 2,
         f"{LOCK}: cannot read the lock file (not a regular file (a character device)",
         lambda root: ((root / LOCK).unlink(), (root / LOCK).symlink_to("/dev/zero")) and None),
    Case("registry-auth-is-dev-zero",
         ("publish", "--registry", "registry.lab:5000", "--registry-auth", "/dev/zero"), 2,
         "--registry-auth /dev/zero: not a readable JSON file (not a regular file (a character "
         "device); oota reads regular files only)"),
    Case("unreadable-matrix", ("matrix",), 2, "matrix.yaml: cannot read the file",
         unreadable("matrix.yaml"), denied=True),
    Case("unreadable-vendor-yaml", ("matrix",), 2, "vendor.yaml: cannot read the file",
         unreadable("vendors/rocm/vendor.yaml"), denied=True),
    Case("unreadable-skips", ("matrix", "--vendor", "cpu"), 2, "skips.yaml: cannot read the file",
         unreadable("vendors/cpu/skips.yaml"), denied=True),
    Case("unreadable-lock", ("lock", "--check", "--vendor", "cpu"), 2,
         f"{LOCK}: cannot read the lock file", unreadable(str(LOCK)), denied=True),
    # --- the command line: exit 2
    Case("unknown-flag", ("matrix", "--bogus"), 2, "unknown flag '--bogus'"),
    Case("misspelled-flag", ("build", "--vendr", "cpu"), 2, "did you mean '--vendor'?"),
    Case("unknown-task", ("bogus",), 2, "unknown task 'bogus'"),
    Case("flag-without-value", ("matrix", "--matrix"), 2, "--matrix needs a value"),
    # A repeatable flag left empty: invoke's parser keeps it an empty list, which meant every
    # vendor (a build of everything), the default cells, or no --merge at all.
    Case("vendor-without-value", ("build", "--vendor"), 2, "--vendor needs a value"),
    Case("vendor-before-a-flag", ("build", "--vendor", "--all"), 2, "--vendor needs a value"),
    Case("vendor-empty-after-equals", ("generate", "--vendor="), 2, "--vendor needs a value"),
    Case("cell-without-value", ("build", "--vendor", "cpu", "--cell"), 2,
         "--cell needs a value"),
    Case("merge-without-value", ("report", "--merge"), 2, "--merge needs a value"),
    Case("second-merge-without-value", ("report", "--merge", "results", "--merge"), 2,
         "--merge needs a value"),
    Case("dir-without-value", ("history", "import", "--dir"), 2, "--dir needs a value"),
    Case("switch-given-a-value", ("generate", "--check=yes"), 2, "'yes' is neither a task"),
    Case("matrix-format-xml", ("matrix", "--format", "xml"), 2,
         "--format 'xml' is not one of table, json"),
    Case("hosts-format-xml", ("hosts", "--format", "xml"), 2,
         "--format 'xml' is not one of table, json"),
    Case("build-layer-bogus", ("build", "--vendor", "cpu", "--layer", "bogus"), 2,
         "--layer 'bogus' is not a layer of the verify suite (install, compat, smoke, device"),
    Case("verify-layer-misspelled", ("verify", "--vendor", "cpu", "--layer", "devic"), 2,
         "did you mean 'device'?"),
    Case("build-missing-ca-bundle", ("build", "--vendor", "cpu", "--ca-bundle", "/nope"), 2,
         "--ca-bundle /nope: no such file"),
    Case("lock-missing-ca-bundle", ("lock", "--vendor", "cpu", "--ca-bundle", "/nope"), 2,
         "--ca-bundle /nope: no such file"),
    Case("registry-mirror-bogus", ("build", "--vendor", "cpu", "--registry-mirror", "bogus"), 2,
         "--registry-mirror 'bogus': write it as REGISTRY=MIRROR"),
    Case("registry-mirror-with-scheme",
         ("lock", "--vendor", "cpu", "--registry-mirror", "docker.io=https://mirror.lab"), 2,
         "(no https://)"),
    Case("index-url-not-a-url", ("build", "--vendor", "cpu", "--index-url", "pypi.org"), 2,
         "--index-url 'pypi.org' is not an http(s) URL"),
    Case("index-url-password-not-echoed",
         ("lock", "--vendor", "cpu", "--index-url", "ftp://me:s3cret@host/simple"), 2,
         "'ftp://me:***@host/simple' is not an http(s) URL"),
    Case("keygen-out-a-device", ("keygen", "--out", "/dev/null"), 2,
         "--out /dev/null: is a file; name a folder"),
    Case("results-is-a-file", ("build", "--vendor", "cpu", "--results", "matrix.yaml"), 2,
         "--results matrix.yaml: is a file; name a folder"),
    Case("results-inside-a-file", ("verify", "--vendor", "cpu", "--results", "tasks.py/out"), 2,
         "--results tasks.py/out: is inside tasks.py, which is a file"),
    Case("matrix-format-misspelled", ("matrix", "--format", "gihub"), 2,
         "did you mean 'github'?"),
    Case("matrix-all-without-github", ("matrix", "--all"), 2,
         "--all applies only with --format github"),
    Case("unknown-vendor-github", ("matrix", "--format", "github", "--vendor", "gaud"), 2,
         "did you mean 'gaudi'?"),
    Case("unknown-vendor", ("build", "--vendor", "nope"), 2, "vendor 'nope' is not in the matrix"),
    Case("unknown-vendor-hosts", ("hosts", "--vendor", "cpux"), 2, "did you mean 'cpu'?"),
    Case("empty-vendor", ("matrix", "--vendor", ","), 2, "--vendor needs a name"),
    Case("unknown-cell", ("build", "--vendor", "cpu", "--cell", "nope"), 2, "unknown cell 'nope'"),
    Case("here-without-vendor", ("verify", "--here"), 2, "--here needs exactly one --vendor"),
    Case("here-with-cell", ("verify", "--here", "--vendor", "cpu", "--cell", DEFAULT_CELL), 2,
         "--cell and --all do not apply with --here"),
    Case("python-without-here", ("verify", "--vendor", "cpu", "--python", sys.executable), 2,
         "--python applies only with --here"),
    # --- numbers past int()'s digit limit, and windows past a datetime's: exit 2
    Case("python-of-5000-digits", ("matrix",), 2, "characters) is not a version",
         first("matrix.yaml", '"3.11"', '"3.' + "1" * 5000 + '"')),
    Case("since-of-20-digits", ("history", "digest", "--since", "9" * 20 + "d"), 2,
         "is not a window; give hours, days or weeks up to 36500 days"),
    Case("jobs-of-40-digits", ("build", "--vendor", "cpu", "--jobs", "9" * 40), 2,
         "give a whole number from 1 to 64"),
    # --- skip lists, vendor folders and their templates: exit 2, nothing run or written
    Case("skips-nul-in-id", ("matrix", "--vendor", "cpu"), 2,
         "holds the control character U+0000; remove it (an id is one line)",
         replace("vendors/cpu/skips.yaml", '- {id: "a\\0b", reason: r, owner: o, '
                 "expires: 2099-01-01}\n")),
    Case("skips-newline-in-id", ("matrix", "--vendor", "cpu"), 2,
         "holds the control character U+000A",
         replace("vendors/cpu/skips.yaml", '- {id: "test_x\\nRUN evil", reason: r, owner: o, '
                 "expires: 2099-01-01}\n")),
    Case("vendor-symlink-loop", ("matrix", "--vendor", "cpu"), 2,
         "vendors/cpu/a: the symbolic link loops",
         links(("vendors/cpu/a", "b"), ("vendors/cpu/b", "a"))),
    Case("vendor-folder-linked-from-outside", ("matrix", "--vendor", "cpu"), 2,
         "resolves to", linked_out("cpu")),
    Case("template-reaches-python", ("generate", "--vendor", "cpu"), 2,
         "Dockerfile.j2:3: template error: access to attribute '__init__' of 'type' object "
         "is unsafe", vendor_template(
             "# {{ cycler.__init__.__globals__.os.system('touch MARKER') | comment }}")),
    Case("template-writes-unquoted", ("generate", "--vendor", "cpu"), 2,
         "`RUN echo {{ vendor.display }}`: a value is written without a quoting filter",
         vendor_template("RUN echo {{ vendor.display }}")),
    Case("template-includes-from-outside", ("generate", "--vendor", "cpu"), 2,
         "evil.j2 is a symbolic link to /etc/hostname, outside the vendor's folder",
         lambda root: (vendor_template('{% include "evil.j2" %}')(root),
                       links(("vendors/cpu/evil.j2", "/etc/hostname"))(root)) and None),
    Case("template-writes-without-end", ("generate", "--vendor", "cpu"), 2,
         "the template writes more than 1048576 characters", vendor_template(
             "{% for i in range(100000) %}{% for j in range(1000) %}x{% endfor %}{% endfor %}")),
    Case("channel-index-with-a-token", ("generate", "--vendor", "cpu"), 2,
         "channel's index carries a secret in its query (token=...)", first(
             "matrix.yaml", '      - "2.14.1"\n',
             '      - {channel: nightly, index: "https://m.lab/n/cpu?token=x"}\n')),
    # --- the environment: exit 3
    Case("here-python-missing", ("verify", "--here", "--vendor", "cpu", "--python", "/nope"), 3,
         "cannot run /nope: No such file or directory"),
    Case("here-python-a-folder", ("verify", "--here", "--vendor", "cpu", "--python", "./vendors"),
         3, "cannot run ./vendors: Permission denied"),
    Case("here-python-not-python", ("verify", "--here", "--vendor", "cpu", "--python", "/bin/echo"),
         3, "/bin/echo does not answer like a Python interpreter"),
    Case("docker-host-garbage", ("pull", "registry.lab:5000/oota/cpu:x"), 3,
         "DOCKER_HOST '::garbage::' is not a Docker endpoint",
         env=(("DOCKER_HOST", "::garbage::"),)),
    Case("home-unreadable", ("matrix",), 3, "home/.invoke.yaml: Permission denied",
         unreadable_home, denied=True, env=(("HOME", "{root}/home"),)),
    # The user's invoke configuration (a project's invoke.yaml is not read: oota runs its own
    # tasks, never a folder's tasks.py, whose configuration that file is).
    Case("invoke-yaml-not-yaml", ("matrix",), 2, "invoke's configuration file is not YAML",
         home_file(".invoke.yaml", "run: [\n"), env=(("HOME", "{root}/home"),)),
]


def files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``root`` with its size and modification time."""
    out = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        out[str(path.relative_to(root))] = (info.st_size, info.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checkout")
    for name in INPUTS:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, root / name)
    return root


@pytest.fixture
def checkout(pristine: Path, tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    shutil.copytree(pristine, root)
    return root


@dataclass(frozen=True)
class Outcome:
    proc: subprocess.CompletedProcess[str]
    before: dict[str, tuple[int, int]]
    after: dict[str, tuple[int, int]]


def can_deny() -> bool:
    return os.geteuid() != 0 or shutil.which("setpriv") is not None


def run_case(case: Case, pristine: Path, tmp_path: Path) -> Outcome:
    """The case's command in its own damaged copy of the checkout, and the files before and
    after. Each test runs its own case: with pytest-xdist a module's fixture runs once per
    worker, and one that ran every case made each worker run all of them (about 50 s each)."""
    root = tmp_path / "checkout"
    shutil.copytree(pristine, root)
    if case.damage:
        case.damage(root)
    before = files(root)
    env = {name: value.format(root=root) for name, value in case.env}
    proc = oota(root, *case.args, denied=case.denied, env=env)
    return Outcome(proc=proc, before=before, after=files(root))


def oota(root: Path, *args: str, denied: bool = False, module: str = "oota",
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DOCKER_HOST": "unix:///nonexistent",
           "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    env.pop("OOTA_DEBUG", None)
    argv = [sys.executable, "-m", module, *args]
    if denied and os.geteuid() == 0:
        # root reads any file whatever its mode; without these two capabilities it cannot.
        argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *argv]
    return forkcli.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=120)


def assert_one_clear_message(stderr: str) -> None:
    assert "Traceback" not in stderr
    lines = stderr.rstrip("\n").splitlines()
    assert lines and lines[0].startswith("error: "), stderr
    if len(lines) > 1:  # only a data file's problems come as a list, each one located
        assert re.fullmatch(r"error: \d+ problems:", lines[0]), stderr
        assert all(LOCATED.match(line) for line in lines[1:]), stderr


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_clear_line_and_writes_nothing(pristine: Path, tmp_path: Path,
                                                       case: Case) -> None:
    if case.denied and not can_deny():
        pytest.skip("running as root, and without setpriv a file's mode cannot stop a read")
    outcome = run_case(case, pristine, tmp_path)
    assert outcome.proc.returncode == case.code, outcome.proc.stderr
    assert_one_clear_message(outcome.proc.stderr)
    assert case.says in outcome.proc.stderr
    assert outcome.proc.stdout == ""
    assert outcome.after == outcome.before


def test_the_corpus_reaches_its_cases_not_docker(checkout: Path) -> None:
    """The premise of the cases above: with no Docker Engine, a valid build is exit 3."""
    proc = oota(checkout, "build", "--vendor", "cpu")
    assert proc.returncode == 3, proc.stderr
    assert "cannot reach a Docker Engine" in proc.stderr and "Traceback" not in proc.stderr


def test_an_unexpected_error_is_one_line_and_its_traceback_is_saved(checkout: Path) -> None:
    with (checkout / "tasks.py").open("a", encoding="utf-8") as fh:
        fh.write('\n\nfrom invoke.context import Context\nfrom oota.tasks import task\n\n\n'
                 '@task\ndef boom(c: Context) -> None:\n'
                 '    raise ValueError("a bug\\nsecond line")\n')
    proc = oota(checkout, "boom", module="invoke")  # oota runs oota's tasks only
    assert proc.returncode == 1
    assert proc.stderr == ("error: internal error: ValueError: a bug (details: "
                           ".oota-cache/last-error.log); please report it\n")
    log = (checkout / ".oota-cache" / "last-error.log").read_text()
    assert log.startswith("oota boom\nTraceback") and 'raise ValueError("a bug' in log


def test_plain_invoke_still_runs_the_tasks(checkout: Path) -> None:
    proc = oota(checkout, "matrix", "--vendor", "cpu", "--format", "json", module="invoke")
    assert proc.returncode == 0, proc.stderr
    assert f'"id": "{DEFAULT_CELL}"' in proc.stdout
