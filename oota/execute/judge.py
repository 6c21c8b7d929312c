"""Judge recorded cases again: ``oota judge PATH...``.

An accelerator's verification records the cases its ops layer judged (``cases.pt`` beside its
result: every failing case and a sample of the passing ones; the format is documented in
``verify/oota_cases.py``). Judging them again needs torch and no accelerator. This runs the
checkout's own ``verify/oota_replay.py`` (so a change to the judge is what is checked) with a
Python that has torch: the one ``--python`` names, else this interpreter when it has torch,
else inside a local image that has it (``--image``, by default the CPU vendor's default cell
as ``oota build --vendor=cpu`` tags it) with the recordings mounted read-only. The replay
answers one JSON object per case, each a :class:`Judged`, and ends with a summary line: output
without it is incomplete and taken as the judge's failure, never as a shorter result.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oota.engine.base import Engine, Mount, RunRequest
from oota.errors import EnvironmentProblem, InputError
from oota.resources import shipped

VERIFY = shipped("verify")
JUDGE = VERIFY / "oota_replay.py"
IN_IMAGE = "/opt/oota/judge"
SPECS_IN_IMAGE = "/opt/oota/judge-vendors.json"
IMAGE_PYTHON = "/opt/venv/bin/python"  # every oota image's venv (templates/dockerfile)
SUFFIX = ".pt"
TIMEOUT_S = 1800
# The switches that choose which of the CPU's kernels torch runs (ATen's vectorised kernels,
# oneDNN's instruction set): a judge in an image takes them from oota's environment as a judge
# with --python does, so a replay can be tried with another CPU's kernels on this one.
CPU_KERNEL_SWITCHES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")
BAD_RECORDING = 2  # the replay's exit code when a file or a case could not be judged


@dataclass(frozen=True, kw_only=True, slots=True)
class Judged:
    """One recorded case judged again: the verdict now, and the one the recording holds."""

    file: str
    status: str  # passed, failed, skipped, or error (the case could not be judged)
    message: str
    recorded: str  # the recorded status ('' when the case holds none)
    moved: bool  # the verdict (its status) differs from the recorded one
    notes: tuple[str, ...] = ()  # how it was judged: the rule, the CPU results recomputed

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Judged:
        recorded = data.get("recorded") if isinstance(data.get("recorded"), dict) else {}
        notes: list[Any] = data["notes"] if isinstance(data.get("notes"), list) else []
        return cls(file=str(data.get("file", "")), status=str(data.get("status", "")),
                   message=str(data.get("message", "")),
                   recorded=str((recorded or {}).get("status") or ""),
                   moved=bool(data.get("moved")), notes=tuple(str(n) for n in notes))

    def line(self) -> str:
        """The case as the judge prints it, with the recorded status where it moved."""
        moved = f"  [recorded: {self.recorded or 'nothing'}]" if self.moved else ""
        return f"{self.status.upper():8} {self.message}{moved}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Replay:
    cases: tuple[Judged, ...]
    where: str  # which Python judged them, in words
    moved_line: str = ""  # what moved from the recordings, in one line (the judge's)
    signatures: tuple[str, ...] = ()  # with --key: which recordings are signed, which not

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.cases)

    @property
    def moved(self) -> int:
        return sum(c.moved for c in self.cases)

    def summary(self) -> str:
        return (f"{len(self.cases)} cases judged again by {self.where}: "
                f"{self.count('passed')} passed, {self.count('failed')} failed, "
                f"{self.count('skipped')} skipped, {self.count('error')} could not be judged; "
                f"{self.moved_line or f'{self.moved} verdict(s) differ from the recording'}")


def recordings(paths: Sequence[str]) -> list[Path]:
    """The recordings named: files, and every ``*.pt`` under the folders named."""
    found: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            inside = sorted(p for p in path.rglob(f"*{SUFFIX}") if p.is_file())
            if not inside:
                raise InputError(f"{text}: no recording (*{SUFFIX}) in this folder")
            found += inside
        elif path.is_file():
            found.append(path)
        else:
            raise InputError(f"{text}: no such file or folder (a recording is the cases.pt "
                             "beside an accelerator's result)")
    if not found:
        raise InputError("name at least one recording (cases.pt) or folder of them")
    return found


def has_torch(python: str) -> bool:
    """Whether ``python`` imports torch (this interpreter is asked without a process)."""
    if python == sys.executable:
        return importlib.util.find_spec("torch") is not None
    try:
        proc = subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _parse(output: str, exit_code: int | None, where: str, stderr: str) -> Replay:
    cases, summary = [], None
    for line in output.splitlines():
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict) and isinstance(data.get("summary"), dict):
                summary = data["summary"]
            elif isinstance(data, dict):
                cases.append(Judged.from_json(data))
    last = (stderr.strip().splitlines() or [""])[-1]
    if summary is None:
        raise EnvironmentProblem(f"the judge with {where} stopped before it finished (exit "
                                 f"{exit_code}, {len(cases)} case(s) judged so far): "
                                 f"{last[:300] or 'no output'}")
    return Replay(cases=tuple(cases), where=where, moved_line=str(summary.get("moved_line", "")))


def _specs_file(folder: Path, vendors: Mapping[str, Any]) -> Path:
    path = folder / "vendors.json"
    path.write_text(json.dumps({"vendors": vendors}), encoding="utf-8")
    path.chmod(0o644)
    return path


def with_python(python: str, files: Sequence[Path], check: bool,
                vendors: Mapping[str, Any] | None = None) -> Replay:
    """Judge ``files`` with the interpreter ``python`` (it must have torch); ``vendors``: the
    checkout's verify section per vendor, for the recordings whose cell names one."""
    with tempfile.TemporaryDirectory(prefix="oota-judge-") as tmp:
        specs = ["--specs", str(_specs_file(Path(tmp), vendors))] if vendors else []
        argv = [python, str(JUDGE), "--json", *(["--check"] if check else []), *specs,
                *(str(f) for f in files)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EnvironmentProblem(f"cannot run {python}: {exc}") from None
    return _parse(proc.stdout, proc.returncode, python, proc.stderr)


def cpu_kernel_switches() -> dict[str, str]:
    """The CPU_KERNEL_SWITCHES set in oota's environment."""
    return {name: os.environ[name] for name in CPU_KERNEL_SWITCHES if os.environ.get(name)}


def in_image(engine: Engine, image: str, files: Sequence[Path], check: bool,
             vendors: Mapping[str, Any] | None = None) -> Replay:
    """Judge ``files`` inside ``image`` (its own torch; the checkout's judge mounted)."""
    if engine.image_labels(image) is None:
        raise EnvironmentProblem(f"no torch here and no image {image} on this Docker Engine: "
                                 "build it (oota build --vendor=cpu), pass --image with an "
                                 "image that has torch, or --python with an interpreter that "
                                 "has it")
    mounts = [Mount(source=VERIFY.resolve(), target=IN_IMAGE)]
    inside = []
    for index, path in enumerate(files):
        target = f"/cases/{index}/{path.name}"
        mounts.append(Mount(source=path.resolve(), target=target))
        inside.append(target)
    with tempfile.TemporaryDirectory(prefix="oota-judge-") as tmp:
        specs: list[str] = []
        if vendors:
            mounts.append(Mount(source=_specs_file(Path(tmp), vendors), target=SPECS_IN_IMAGE))
            specs = ["--specs", SPECS_IN_IMAGE]
        command = [IMAGE_PYTHON, f"{IN_IMAGE}/{JUDGE.name}", "--json",
                   *(["--check"] if check else []), *specs, *inside]
        log = Path(tmp) / "judge.log"
        # torch's OpenMP threads sleep rather than spin between kernels, as in oota-verify
        # (docs/reference/verify-suite.md): a judge often runs beside builds and verifications.
        env = {"PYTHONDONTWRITEBYTECODE": "1",
               "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY") or "PASSIVE",
               **cpu_kernel_switches()}
        outcome = engine.run(RunRequest(image=image, command=command, mounts=tuple(mounts),
                                        env=env, log_path=log, timeout_s=TIMEOUT_S))
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    if outcome.timed_out:
        raise EnvironmentProblem(f"the judge ran past {TIMEOUT_S} s in {image}")
    replay = _parse(text, outcome.exit_code, f"image {image}", text)
    # Each case names the file it came from as given here, not where it was mounted.
    named = dict(zip(inside, (str(path) for path in files), strict=True))
    return dataclasses.replace(replay, cases=tuple(
        dataclasses.replace(case, file=named.get(case.file, case.file)) for case in replay.cases))
