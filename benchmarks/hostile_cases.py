"""The hostile-input probe's cases (benchmarks/probe_hostile.py runs them): what each does to its
copy of the checkout, the command it runs, and what the user must see (the documented exit code,
a line of the message)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oota.results.assemble import assemble, cell_ref, now
from oota.results.model import Host, Stage, TestOutcome
from oota.results.signed import sign_folder
from oota.results.store import save
from oota.supply import signing

CANARY = "canary-Pw-91d7f3"
CELLS = ("cpu-torch2.13.0-py3.11-debian12", "cpu-torch2.13.0-py3.13-debian12")
Damage = Callable[[Path], None]


def write(path: str, text: str | bytes) -> Damage:
    def damage(root: Path) -> None:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        data = text.encode() if isinstance(text, str) else text
        (root / path).write_bytes(data)
    return damage


def append(path: str, text: str) -> Damage:
    def damage(root: Path) -> None:
        with (root / path).open("a", encoding="utf-8") as fh:
            fh.write(text)
    return damage


def edit(path: str, old: str, new: str) -> Damage:
    def damage(root: Path) -> None:
        text = (root / path).read_text(encoding="utf-8")
        if old not in text:
            raise AssertionError(f"{old!r} not in {path}")
        (root / path).write_text(text.replace(old, new, 1), encoding="utf-8")
    return damage


def link(path: str, target: str) -> Damage:
    def damage(root: Path) -> None:
        (root / path).unlink(missing_ok=True)
        (root / path).symlink_to(target.format(root=root))
    return damage


def fifo(path: str) -> Damage:
    def damage(root: Path) -> None:
        (root / path).unlink(missing_ok=True)
        os.mkfifo(root / path)
    return damage


def chain(*steps: Damage) -> Damage:
    def damage(root: Path) -> None:
        for step in steps:
            step(root)
    return damage


def template(body: str) -> Damage:
    return write("vendors/cpu/Dockerfile.j2", '{% extends "base.Dockerfile.j2" %}\n'
                 "{% block runtime_extra %}\n" + body + "\n{% endblock %}\n")


def linked_out(root: Path) -> None:
    outside = root.parent / "outside-cpu"
    (root / "vendors/cpu").rename(outside)
    (root / "vendors/cpu").symlink_to(outside, target_is_directory=True)


def nothing_at(path: str) -> Check:
    def check(root: Path, _: Any) -> str:
        return f"{path} was created through the link" if (root / path).exists() else ""
    return check


def outside_folder(name: str) -> Damage:
    """``name`` (a folder oota writes) a link to a folder outside the checkout."""
    def damage(root: Path) -> None:
        (root.parent / f"outside-{name}").mkdir()
        (root / name).symlink_to(root.parent / f"outside-{name}", target_is_directory=True)
    return damage


# Another oota run holding the results folder (its flock, as oota.results.store.writing takes
# it) for a minute: what a second run into the same folder meets.
_HOLD = ("import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "os.write(fd, str(os.getpid()).encode())\n"
         "print('holding', flush=True)\n"
         "time.sleep(60)\n")


def results_held(root: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(root / ".results.lock")],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert holder.stdout is not None and holder.stdout.readline() == "holding\n"


def unreadable_home(root: Path) -> None:
    (root / "home").mkdir()
    (root / "home").chmod(0)


def result(python: str, *, failed: int = 0, run: str = "lab-run") -> Any:
    """A result of cpu-torch2.13.0-pyPYTHON-debian12 as oota writes it: one passed test, and
    ``failed`` failed ones."""
    cell = f"cpu-torch2.13.0-py{python}-debian12"
    coords = {"vendor": "cpu", "os": "debian12", "python": python, "torch": "2.13.0",
              "toolkit": None, "toolkit_version": None}
    tests = [TestOutcome(id="test_install.py::test_imports", layer="install", status="passed",
                         duration_s=0.1)]
    tests += [TestOutcome(id=f"test_device.py::test_{n}", layer="device", status="failed",
                          duration_s=0.1, message="wrong") for n in range(failed)]
    return assemble(cell=cell_ref(coords, id=cell, fingerprint="sha256:" + "0" * 64),
                    stages={"verify": Stage(status="passed", duration_s=1.0)}, tests=tests,
                    host=Host(facts={"engine": "local", "hostname": "lab"}),
                    started_at=now(), run_id=run)


def forged(folder: str, python: str = "3.12") -> Damage:
    """A result with 5 failed tests, its status edited to 'passed'."""
    def damage(root: Path) -> None:
        cell = f"cpu-torch2.13.0-py{python}-debian12"
        save(root / folder / cell, result(python, failed=5))
        path = root / folder / cell / "result.json"
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "status": "passed"}))
    return damage


def signed_then_edited(root: Path) -> None:
    keys = signing.generate(root / "keys", None)
    save(root / "lab-a" / CELLS[0], result("3.11"))
    sign_folder(root / "lab-a" / CELLS[0], signing.load_private(keys.private, None))
    path = root / "lab-a" / CELLS[0] / "result.json"
    path.write_text(path.read_text().replace('"lab-run"', '"edited-run"'))


def signature_of_another(root: Path) -> None:
    """Two results of one lab, signed; the first one's signature copied beside the second."""
    keys = signing.generate(root / "keys", None)
    key = signing.load_private(keys.private, None)
    for python, cell in zip(("3.11", "3.13"), CELLS, strict=True):
        save(root / "lab-a" / cell, result(python))
        sign_folder(root / "lab-a" / cell, key)
    (root / "lab-a" / CELLS[1] / "result.sig").write_bytes(
        (root / "lab-a" / CELLS[0] / "result.sig").read_bytes())


def talking_helper(root: Path) -> None:
    """A credential helper that prints the credentials (the canary) and fails."""
    helper = root / "bin/docker-credential-probe-talks"
    helper.parent.mkdir()
    helper.write_text(f'#!/bin/sh\necho \'{{"Username": "lab", "Secret": "{CANARY}"}}\'\n'
                      f"echo 'cannot unlock: {CANARY}' >&2\nexit 1\n")
    helper.chmod(0o755)
    (root / "docker").mkdir()
    (root / "docker/config.json").write_text('{"credsStore": "probe-talks"}')


def climbing_vendor(root: Path) -> None:
    """A result whose vendor (the name of its get-started page) climbs out of the report."""
    save(root / "results/cpu-extra", result("3.12"))
    path = root / "results/cpu-extra/result.json"
    data = json.loads(path.read_text())
    data["cell"]["vendor"] = "../../../PWNED"
    path.write_text(json.dumps(data))


def corrupt(folder: str) -> Damage:
    return write(f"{folder}/{CELLS[0]}/result.json", "{corrupt")


def big_result(root: Path) -> None:
    path = root / "results/cpu-extra/result.json"
    path.parent.mkdir(parents=True)
    with path.open("wb") as fh:
        fh.write(b" " * (70 << 20) + b"{}")


def canary_vendor(root: Path) -> None:
    edit("vendors/cpu/vendor.yaml", "index_url: https://download.pytorch.org/whl/cpu",
         f'index_url: "https://lab:{CANARY}@pypi.lab.example/simple"')(root)
    edit("matrix.yaml", '      - "2.14.1"\n',
         f'      - {{channel: nightly, index: '
         f'"https://lab:{CANARY}@mirror.lab.example/nightly/cpu"}}\n')(root)


def hanging_helper(root: Path) -> None:
    helper = root / "bin/docker-credential-probe-hangs"
    helper.parent.mkdir()
    helper.write_text("#!/bin/sh\nsleep 600\n")
    helper.chmod(0o755)
    (root / "docker").mkdir()
    (root / "docker/config.json").write_text('{"credsStore": "probe-hangs"}')


Check = Callable[[Path, "subprocess.CompletedProcess[str]"], str]


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    code: int                           # the documented exit code
    says: str = ""                      # a part of stderr (or stdout) the user must see
    damage: Damage | None = None
    env: tuple[tuple[str, str], ...] = ()   # "{root}" and servers' "{name}" are filled in
    lab: bool = False                   # starts from a lab's results/ and reports/
    check: Check | None = None          # anything more the user must find ('' or why not)
    docker: bool = False                # needs the real Engine to start the command
    denied: bool = False                # as a user without root's reading rights


def no_marker(root: Path, _: Any) -> str:
    return "the template ran a command" if (root / "MARKER").exists() else ""


def report_cells(count: int, *, failure: bool = False) -> Check:
    def check(root: Path, _: Any) -> str:
        data = json.loads((root / "reports/results.json").read_text())
        if len(data["cells"]) != count:
            return f"the report shows {len(data['cells'])} cells, not {count}"
        crcr = root / "reports/crcr.json"
        if failure and json.loads(crcr.read_text())["workflow"]["conclusion"] != "failure":
            return "crcr.json does not count the refused result as a failure"
        return ""
    return check


def no_canary_in_images(root: Path, _: Any) -> str:
    files = [p for p in (root / "images").rglob("*") if p.is_file()]
    return "" if files else "generate wrote nothing"


FLAGS = [
    Case("vendor-without-value", ("build", "--vendor"), 2, "--vendor needs a value"),
    Case("vendor-before-a-flag", ("build", "--vendor", "--all"), 2, "--vendor needs a value"),
    Case("vendor-empty-after-equals", ("generate", "--vendor="), 2, "--vendor needs a value"),
    Case("cell-without-value", ("build", "--vendor", "cpu", "--cell"), 2, "--cell needs a value"),
    Case("merge-without-value", ("report", "--merge"), 2, "--merge needs a value"),
    Case("second-merge-without-value", ("report", "--merge", "results", "--merge"), 2,
         "--merge needs a value"),
    Case("dir-without-value", ("history", "import", "--dir"), 2, "--dir needs a value"),
    Case("find-links-without-value", ("build", "--vendor", "cpu", "--find-links"), 2,
         "--find-links needs a value"),
    Case("mirror-without-value", ("lock", "--vendor", "cpu", "--registry-mirror"), 2,
         "--registry-mirror needs a value"),
    Case("matrix-without-value", ("matrix", "--matrix"), 2, "--matrix needs a value"),
    Case("format-xml", ("matrix", "--format", "xml"), 2, "is not one of table, json"),
    Case("layer-bogus", ("build", "--vendor", "cpu", "--layer", "bogus"), 2,
         "is not a layer of the verify suite"),
    Case("jobs-zero", ("build", "--vendor", "cpu", "--jobs", "0"), 2, "from 1 to 64"),
    Case("jobs-of-40-digits", ("build", "--vendor", "cpu", "--jobs", "9" * 40), 2, "from 1 to 64"),
    Case("hud-runs-zero", ("report", "--hud-runs", "0"), 2, "is not a number of runs"),
    Case("since-of-20-digits", ("history", "digest", "--since", "9" * 20 + "d"), 2,
         "is not a window"),
    Case("since-zero", ("history", "digest", "--since", "0h"), 2, "is not a window"),
    Case("timeout-zero", ("release-check", "--timeout", "0"), 2, "expected a number of seconds"),
    Case("timeout-inf", ("release-check", "--timeout", "inf"), 2, "expected a number of seconds"),
    Case("index-url-ftp-with-password", ("build", "--vendor", "cpu", "--index-url",
                                         f"ftp://lab:{CANARY}@h/simple"), 2,
         "'ftp://lab:***@h/simple' is not an http(s) URL"),
    Case("ca-bundle-dev-zero", ("build", "--vendor", "cpu", "--ca-bundle", "/dev/zero"), 2,
         "--ca-bundle /dev/zero: no such file"),
    Case("results-is-a-file", ("build", "--vendor", "cpu", "--results", "matrix.yaml"), 2,
         "is a file; name a folder"),
    Case("out-is-a-file", ("report", "--out", "matrix.yaml"), 2, "is a file, not a folder",
         lab=True),
    Case("registry-with-password", ("publish", "--registry", f"lab:{CANARY}@registry.lab"), 2,
         "--registry"),
    Case("pull-host-with-password", ("pull", "registry.lab:5000/oota/cpu:x", "--host",
                                     f"ssh://me:{CANARY}@gpu.lab"), 2, "--host"),
    Case("misspelled-flag", ("build", "--vendr", "cpu"), 2, "did you mean '--vendor'?"),
    Case("unknown-task", ("bogus",), 2, "unknown task 'bogus'"),
]
FILES = [
    Case("matrix-dev-zero", ("matrix", "--matrix", "/dev/zero"), 2, "not a regular file"),
    Case("matrix-dev-urandom", ("generate", "--matrix", "/dev/urandom"), 2, "not a regular file"),
    Case("matrix-fifo", ("matrix", "--matrix", "pipe.yaml"), 2, "(a FIFO)", fifo("pipe.yaml")),
    Case("matrix-dev-null", ("matrix", "--matrix", "/dev/null"), 2, "not a regular file"),
    Case("matrix-5-mib", ("matrix",), 2, "larger than 4 MiB",
         append("matrix.yaml", "#" * (5 << 20))),
    Case("matrix-a-folder", ("matrix", "--matrix", "vendors"), 2, "is a folder"),
    Case("matrix-missing", ("matrix", "--matrix", "matrx.yaml"), 2, "file not found"),
    Case("matrix-latin1", ("matrix",), 2, "not UTF-8 text",
         write("matrix.yaml", b"version: 1\n# caf\xe9\n")),
    Case("matrix-deep", ("matrix",), 2, "nests more than 100 levels",
         append("matrix.yaml", "x: " + "[" * 5000 + "]" * 5000 + "\n")),
    Case("matrix-alias-bomb", ("matrix",), 2, "alias bomb", append("matrix.yaml", "".join(
        ["a0: &a0 [" + ", ".join(['"lol"'] * 9) + "]\n"]
        + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)]))),
    Case("matrix-nul", ("matrix",), 2, "U+0000", append("matrix.yaml", 'x: "a\0b"\n')),
    Case("matrix-python-5000-digits", ("matrix",), 2, "is not a version",
         edit("matrix.yaml", '"3.11"', '"3.' + "1" * 5000 + '"')),
    Case("matrix-torch-5000-digits", ("generate",), 2, "is not a version",
         edit("matrix.yaml", '"2.15.0"', '"2.' + "9" * 5000 + '"')),
    Case("vendor-yaml-deep", ("matrix", "--vendor", "cpu"), 2, "vendor.yaml",
         append("vendors/cpu/vendor.yaml", "x: " + "[" * 5000 + "]" * 5000 + "\n")),
    Case("vendor-yaml-typo", ("matrix", "--vendor", "cpu"), 2, "did you mean",
         append("vendors/cpu/vendor.yaml", "devcies: []\n")),
    Case("vendor-yaml-dev-zero", ("matrix",), 2, "not a regular file",
         link("vendors/cpu/vendor.yaml", "/dev/zero")),
    Case("skips-nul-id", ("matrix", "--vendor", "cpu"), 2, "U+0000", write(
        "vendors/cpu/skips.yaml", '- {id: "a\\0b", reason: r, owner: o, expires: 2099-01-01}\n')),
    Case("skips-newline-id", ("matrix", "--vendor", "cpu"), 2, "U+000A", write(
        "vendors/cpu/skips.yaml", '- {id: "t\\nRUN x", reason: r, owner: o, '
        "expires: 2099-01-01}\n")),
    Case("skips-fifo", ("matrix", "--vendor", "cpu"), 2, "(a FIFO)",
         fifo("vendors/cpu/skips.yaml")),
    Case("lock-latin1", ("lock", "--check", "--vendor", "cpu"), 2, "not UTF-8 text",
         write(f"locks/cpu/{CELLS[0]}.txt", b"# caf\xe9\n")),
    Case("lock-dev-zero", ("lock", "--check", "--vendor", "cpu"), 2, "not a regular file",
         link(f"locks/cpu/{CELLS[0]}.txt", "/dev/zero")),
    Case("hosts-dev-zero", ("build", "--vendor", "cpu", "--hosts", "/dev/zero"), 2,
         "not a regular file"),
    Case("hosts-fifo", ("build", "--vendor", "cpu", "--hosts", "h.yaml"), 2, "(a FIFO)",
         fifo("h.yaml")),
    Case("hosts-password-in-endpoint", ("build", "--vendor", "cpu", "--hosts", "h.yaml"), 2,
         "is not allowed here", write("h.yaml", f"hosts:\n  a:\n    endpoint: "
                                      f"tcp://me:{CANARY}@gpu.lab:2376\n    vendors: [cpu]\n")),
    Case("hosts-not-yaml", ("build", "--vendor", "cpu", "--hosts", "h.yaml"), 2,
         "malformed YAML", write("h.yaml", "hosts: [\n")),
    Case("registry-auth-dev-zero", ("publish", "--registry", "registry.lab:5000",
                                    "--registry-auth", "/dev/zero"), 2, "not a regular file"),
    Case("registry-auth-wrong-shape", ("publish", "--registry", "registry.lab:5000",
                                       "--registry-auth", "auth.json"), 2,
         "expected {\"username\"", write("auth.json", f'{{"user": "x", "pw": "{CANARY}"}}')),
    Case("registry-auth-not-json", ("publish", "--registry", "registry.lab:5000",
                                    "--registry-auth", "auth.json"), 2,
         "not a readable JSON file", write("auth.json", f"password: {CANARY}\n")),
    Case("keygen-out-a-device", ("keygen", "--out", "/dev/null"), 2, "is a file; name a folder"),
    Case("key-dev-zero", ("publish", "--registry", "registry.lab:5000", "--key", "/dev/zero"),
         2, "--key /dev/zero: cannot read it"),
    Case("report-key-not-a-key", ("report", "--merge", "results", "--key", "matrix.yaml"), 2,
         "not a PEM public key", lab=True),
]
LINKS = [
    Case("history-db-dangling-link", ("history", "query"), 2,
         "history.db is a symbolic link to", link("history.db", "{root}/../elsewhere/h.db"),
         check=nothing_at("../elsewhere/h.db")),
    Case("history-db-linked-out", ("report", "--no-history"), 0, "",
         link("history.db", "/etc/hostname"), lab=True),  # --no-history: it is not opened
    Case("history-db-linked-out-digest", ("history", "digest"), 2, "outside the project",
         link("history.db", "/etc/hostname")),
    Case("reports-linked-out", ("report", "--no-history"), 2,
         "--out reports: ", outside_folder("reports"),
         check=lambda root, _: "written outside" if any(
             (root.parent / "outside-reports").iterdir()) else ""),
    Case("results-dangling-link", ("build", "--vendor", "cpu"), 2,
         "results is a symbolic link to", link("results", "{root}/../nowhere")),
]
VENDOR_FOLDERS = [
    Case("template-reaches-python", ("generate", "--vendor", "cpu"), 2,
         "access to attribute '__init__'", template(
             "# {{ cycler.__init__.__globals__.os.system('touch MARKER') | comment }}"),
         check=no_marker),
    Case("template-unfiltered-python", ("generate", "--vendor", "cpu"), 2, "is unsafe",
         template("{{ cycler.__init__.__globals__.os.system('touch MARKER') }}"),
         check=no_marker),
    Case("template-through-lipsum", ("generate", "--vendor", "cpu"), 2, "is undefined",
         template("# {{ lipsum.__globals__.os.system('touch MARKER') | comment }}"),
         check=no_marker),
    Case("template-format-bomb", ("generate", "--vendor", "cpu"), 2, "is unsafe",
         template("RUN {{ '{:>999999999}'.format(1) | shell_word }}")),
    Case("template-product-bomb", ("generate", "--vendor", "cpu"), 2, "larger than 100000",
         template("RUN {{ ('x' * 10**10) | shell_word }}")),
    Case("template-percent-bomb", ("generate", "--vendor", "cpu"), 2, "formatting text with %",
         template("RUN {{ ('%999999999s' % 1) | shell_word }}")),
    Case("template-filter-bomb", ("generate", "--vendor", "cpu"), 2, "No filter named",
         template("RUN {{ 'x' | center(1000000000) | shell_word }}")),
    Case("template-output-without-end", ("generate", "--vendor", "cpu"), 2,
         "writes more than 1048576 characters", template(
             "{% for i in range(100000) %}{% for j in range(1000) %}x{% endfor %}{% endfor %}")),
    Case("template-unfiltered-run", ("generate", "--vendor", "cpu"), 2,
         "without a quoting filter", template("RUN echo {{ vendor.display }}")),
    Case("template-comment-filter-in-run", ("generate", "--vendor", "cpu"), 2,
         "for # lines only", template("RUN echo {{ vendor.display | comment }}")),
    Case("template-include-linked-out", ("generate", "--vendor", "cpu"), 2,
         "outside the vendor's folder", chain(template('{% include "evil.j2" %}'),
                                              link("vendors/cpu/evil.j2", "/etc/hostname"))),
    Case("template-include-climbing", ("generate", "--vendor", "cpu"), 2,
         "may not climb out of its folder", template('{% include "../../etc/hostname" %}')),
    Case("template-extends-itself", ("generate", "--vendor", "cpu"), 2, "in a loop",
         write("vendors/cpu/Dockerfile.j2", '{% extends "Dockerfile.j2" %}\n')),
    Case("vendor-folder-linked-out", ("matrix", "--vendor", "cpu"), 2, "outside vendors/",
         linked_out),
    Case("vendor-symlink-loop", ("matrix", "--vendor", "cpu"), 2, "the symbolic link loops",
         chain(link("vendors/cpu/a", "b"), link("vendors/cpu/b", "a"))),
    Case("vendor-link-to-etc", ("matrix", "--vendor", "cpu"), 2, "outside the project",
         link("vendors/cpu/verify/etc", "/etc")),
    Case("channel-index-with-a-token", ("generate", "--vendor", "cpu"), 2,
         "carries a secret in its query", edit(
             "matrix.yaml", '      - "2.14.1"\n',
             f'      - {{channel: nightly, index: "https://m.lab/n?token={CANARY}"}}\n')),
]
ENVIRONMENT = [
    Case("docker-host-garbage", ("pull", "registry.lab:5000/oota/cpu:x"), 3,
         "DOCKER_HOST '::garbage::' is not a Docker endpoint",
         env=(("DOCKER_HOST", "::garbage::"),)),
    Case("docker-host-nothing-listens", ("build", "--vendor", "cpu"), 3,
         "cannot reach a Docker Engine", env=(("DOCKER_HOST", "tcp://127.0.0.1:9"),)),
    Case("home-unreadable", ("matrix",), 3, "Permission denied", unreadable_home,
         env=(("HOME", "{root}/home"),), denied=True),
    Case("invoke-yaml-not-yaml", ("matrix",), 2, "not YAML", write("invoke.yaml", "run: [\n")),
    Case("here-python-missing", ("verify", "--here", "--vendor", "cpu", "--python", "/nope"), 3,
         "cannot run /nope"),
    Case("here-python-not-python", ("verify", "--here", "--vendor", "cpu", "--python",
                                    "/bin/echo"), 3, "does not answer like a Python"),
    Case("hosts-no-engine", ("hosts", "--vendor", "cpu"), 3, "local: did not answer"),
    Case("hosts-only-host-dead", ("hosts", "--vendor", "cpu", "--hosts", "h.yaml"), 3,
         "dead: did not answer", write("h.yaml", "hosts:\n  dead:\n    endpoint: "
                                       "tcp://127.0.0.1:9\n    vendors: [cpu]\n")),
    Case("engine-drips-build", ("build", "--vendor", "cpu"), 3,
         "(DOCKER_HOST) gave no complete answer to GET /version within 30 s",
         env=(("DOCKER_HOST", "tcp://{drip}"),)),
    Case("engine-drips-hosts", ("hosts", "--vendor", "cpu"), 3,
         "(DOCKER_HOST) gave no complete answer to GET /version within 30 s",
         env=(("DOCKER_HOST", "tcp://{drip}"),)),
    Case("engine-floods-hosts", ("hosts", "--vendor", "cpu"), 3, "",
         env=(("DOCKER_HOST", "tcp://{flood}"),)),
    Case("publish-host-drips", ("publish", "--registry", "127.0.0.1:5999", "--host",
                                "tcp://{drip}"), 3,
         "the Docker Engine at tcp://127.0.0.1:", ),
    Case("publish-host-floods", ("publish", "--registry", "127.0.0.1:5999", "--host",
                                 "tcp://{flood}"), 3, ""),
    Case("docker-context-missing", ("hosts", "--vendor", "cpu"), 3,
         "DOCKER_CONTEXT names the docker context 'nope', which does not exist",
         env=(("DOCKER_HOST", ""), ("DOCKER_CONTEXT", "nope"))),
    Case("docker-context-missing-build", ("build", "--vendor", "cpu"), 3,
         "unset DOCKER_CONTEXT or create the context",
         env=(("DOCKER_HOST", ""), ("DOCKER_CONTEXT", "nope"))),
    # Two runs into one results folder: the second is refused, naming the first; the lab's
    # results and report are kept as they were.
    Case("results-folder-held-build", ("build", "--vendor", "cpu"), 3,
         "the results folder results is being written by another oota (pid", results_held,
         lab=True, docker=True),
    Case("results-folder-held-publish", ("publish", "--registry", "127.0.0.1:5999"), 3,
         "the results folder results is being written by another oota (pid", results_held,
         lab=True, docker=True),
]
NETWORK = [
    Case("index-drips", ("release-check", "--index-url", "http://{drip}", "--timeout", "2"), 3,
         "no complete answer within 2 s"),
    Case("index-silent", ("release-check", "--index-url", "http://{silent}", "--timeout", "2"),
         3, "no complete answer within 2 s"),
    Case("index-page-without-end", ("release-check", "--index-url", "http://{flood}"), 3,
         "larger than 64 MiB"),
    Case("index-redirects-to-file", ("release-check", "--index-url", "http://{redirect}"), 3,
         "only http(s) redirects are followed"),
    Case("index-wrong-password", ("release-check", "--index-url",
                                  f"http://lab:{CANARY}@{{password}}"), 3, "HTTP 401"),
    Case("index-right-password", ("release-check", "--vendor", "cpu", "--index-url",
                                  f"http://ci-bot:{CANARY}@{{password_ok}}"), 0, "gap(s)"),
    Case("registry-silent", ("pull", "{silent}/oota/cpu:x"), 3, "no complete answer",
         docker=True),
    Case("registry-drips", ("pull", "{drip}/oota/cpu:x"), 3, "no complete answer",
         docker=True),
    Case("registry-answers-without-end", ("pull", "{flood}/oota/cpu:x"), 3,
         "larger than 16 MiB", docker=True),
    Case("credential-helper-prints-secret", ("pull", "{challenge}/oota/cpu:x"), 3,
         "docker-credential-probe-talks (named in", talking_helper, docker=True,
         env=(("DOCKER_CONFIG", "{root}/docker"), ("PATH", "{root}/bin:" + os.environ["PATH"]))),
    Case("credential-helper-hangs", ("pull", "{challenge}/oota/cpu:x"), 3,
         "no answer within 30 s", hanging_helper, docker=True,
         env=(("DOCKER_CONFIG", "{root}/docker"), ("PATH", "{root}/bin:" + os.environ["PATH"]))),
]
RESULTS = [
    Case("report-of-an-empty-folder", ("report", "--results", "empty", "--no-history"), 2,
         "these results hold 0", write("empty/.keep", ""), lab=True),
    Case("merge-of-corrupt-folders", ("report", "--merge", "a", "--merge", "b",
                                      "--no-history"), 2, "these results hold 0",
         chain(corrupt("a"), corrupt("b")), lab=True),
    Case("report-out-is-the-results", ("report", "--out", "results", "--no-history"), 2,
         "holds files that are not part of a report", lab=True),
    Case("forged-pass-in-the-report", ("report", "--format", "crcr", "--no-history"), 0,
         "inconsistent: it says 'passed'", forged("results"), lab=True,
         check=report_cells(2, failure=True)),
    Case("forged-pass-over-a-good-result", ("report", "--no-history"), 2,
         "inconsistent: it says 'passed'", forged("results", "3.11"), lab=True),
    Case("forged-pass-merged", ("report", "--merge", "results", "--merge", "other",
                                "--no-history"), 0, "inconsistent: it says 'passed'",
         forged("other"), lab=True, check=report_cells(2)),
    Case("forged-pass-imported", ("history", "import", "--dir", "other", "--history",
                                  "sqlite:///h.db"), 0, "inconsistent: it says 'passed'",
         forged("other"), lab=True),
    Case("signature-edited-after-signing", ("report", "--merge", "results", "--merge", "lab-a",
                                            "--key", "keys/oota.pub", "--no-history"), 0,
         "does not check with --key", signed_then_edited, lab=True),
    Case("signature-of-another-result", ("report", "--merge", "results", "--merge", "lab-a",
                                         "--key", "keys/oota.pub", "--no-history"), 0,
         "does not check with --key", signature_of_another, lab=True,
         check=report_cells(2)),
    Case("result-is-a-fifo", ("report", "--no-history"), 0, "(a FIFO)",
         chain(write("results/cpu-extra/.keep", ""), fifo("results/cpu-extra/result.json")),
         lab=True, check=report_cells(2)),
    Case("result-is-dev-zero", ("report", "--no-history"), 0, "not a regular file",
         chain(write("results/cpu-extra/.keep", ""),
               link("results/cpu-extra/result.json", "/dev/zero")), lab=True),
    Case("result-of-70-mib", ("report", "--no-history"), 0, "larger than 64 MiB", big_result,
         lab=True),
    Case("result-vendor-climbs-out", ("report", "--no-history"), 0,
         "does not match the schema: cell/vendor", climbing_vendor, lab=True,
         check=lambda root, _: "a page was written outside the report" if list(
             root.parent.rglob("PWNED*")) else ""),
    Case("compare-dev-zero", ("report", "--compare", "/dev/zero", "--no-history"), 2,
         "/dev/zero", lab=True),
]
SECRETS = [
    Case("generate-with-credentialed-indexes", ("generate",), 0, "file(s) changed",
         canary_vendor, check=no_canary_in_images),
    Case("matrix-json-with-credentialed-indexes", ("matrix", "--format", "json"), 0, "",
         canary_vendor),
    Case("build-index-url-with-password", ("build", "--vendor", "cpu", "--index-url",
                                           f"https://lab:{CANARY}@pypi.lab.example/simple"), 3,
         "cannot reach a Docker Engine", canary_vendor),
]
CASES = FLAGS + FILES + LINKS + VENDOR_FOLDERS + ENVIRONMENT + NETWORK + RESULTS + SECRETS
