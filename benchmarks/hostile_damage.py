"""What the hostile-input probe's cases (benchmarks/hostile_cases.py) do to their copy of the
checkout before the command runs (damages: files written, edited, linked, held, signed then
edited), the results they plant, and the checks of what the user must find after it."""

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
