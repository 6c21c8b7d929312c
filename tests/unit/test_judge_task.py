"""``oota judge PATH``: which Python judges (``--python``, this one with torch, else a local
image with torch), what it is given, and how its answer becomes the lines and exit code a user
sees. The judge itself is a stand-in here (an executable that answers as oota_judge.py does);
the real judge runs in the docker tests, on the H100 recordings."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from oota.api import runs
from oota.engine.base import RunOutcome, RunRequest
from oota.errors import EnvironmentProblem, InputError
from oota.execute import judge

REPO = Path(__file__).resolve().parents[2]
TASKS = [sys.executable, "-m", "oota"]

CASES = [
    {"file": "a.pt", "op": "add", "dtype": "float16", "sample": 0, "status": "passed",
     "message": "add (float16): sample 0 (Tensor[] float16): within the rule", "moved": False,
     "recorded": {"status": "passed", "message": "add (float16): sample 0 ..."}},
    {"file": "a.pt", "op": "tanh", "dtype": "float32", "sample": 1, "status": "failed",
     "message": "tanh (float32): sample 1 (Tensor[5] float32): output on refdev differs",
     "moved": True, "recorded": {"status": "passed", "message": "..."}},
]


def stand_in(folder: Path, answer: list[dict[str, object]], code: int = 1,
             stderr: str = "2 cases") -> Path:
    """An executable that answers like ``python oota_judge.py --json ...`` (and like a Python
    that imports torch, for ``has_torch``); it keeps its argv for the test to read."""
    script = folder / "python-with-torch"
    lines = "\n".join(json.dumps(a) for a in answer)
    script.write_text(f"#!/bin/sh\necho \"$@\" > {folder}/argv\n"
                      f"[ \"$1\" = -c ] && exit 0\ncat <<'EOF'\n{lines}\nEOF\n"
                      f"echo '{stderr}' >&2\nexit {code}\n")
    script.chmod(0o755)
    return script


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "cases.pt").write_bytes(b"not read by the stand-in")
    return folder


def test_a_python_with_torch_judges_the_files_of_a_folder(tmp_path: Path,
                                                          recording: Path) -> None:
    python = stand_in(tmp_path, CASES)
    replay = runs.judge([str(recording)], python=str(python), image=None,
                       matrix_path="matrix.yaml", check=True)
    argv = (tmp_path / "argv").read_text().split()
    assert argv == [str(judge.JUDGE), "--json", "--check", str(recording / "cases.pt")]
    assert [c.status for c in replay.cases] == ["passed", "failed"]
    assert replay.cases[1].line() == ("FAILED   tanh (float32): sample 1 (Tensor[5] float32): "
                                      "output on refdev differs  [recorded: passed]")
    assert replay.summary() == (f"2 cases judged again by {python}: 1 passed, 1 failed, "
                                "0 skipped; 1 verdict(s) differ from the recording")


def test_a_file_that_is_not_a_recording_is_bad_input(tmp_path: Path, recording: Path) -> None:
    python = stand_in(tmp_path, [], code=2,
                      stderr="oota_judge: x.pt: not an oota recording (no format 'oota.cases')")
    with pytest.raises(InputError, match=r"^x.pt: not an oota recording"):
        runs.judge([str(recording)], python=str(python), image=None, matrix_path="m",
                  check=False)


@pytest.mark.parametrize(("paths", "message"), [
    (["/no/such/recording.pt"], "/no/such/recording.pt: no such file or folder"),
    ([], "name at least one recording"),
])
def test_a_missing_recording_is_bad_input(paths: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        judge.recordings(paths)


def test_an_empty_folder_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no recording \(\*\.pt\) in this folder"):
        judge.recordings([str(tmp_path)])


def test_python_and_image_together_are_refused(recording: Path) -> None:
    with pytest.raises(InputError, match="--python and --image name two places"):
        runs.judge([str(recording)], python="python3", image="oota/cpu:x", matrix_path="m",
                  check=False)


def test_a_python_without_torch_is_named(recording: Path) -> None:
    with pytest.raises(InputError, match="--python /bin/false: it cannot import torch"):
        runs.judge([str(recording)], python="/bin/false", image=None, matrix_path="m",
                  check=False)


@dataclass
class FakeEngine:
    """The engine door as ``in_image`` uses it: an image that exists, a run that writes the
    judge's answer into the run's log."""

    images: set[str]
    answer: str
    exit_code: int = 0
    runs: list[RunRequest] = field(default_factory=list)

    def image_labels(self, ref: str) -> dict[str, str] | None:
        return {} if ref in self.images else None

    def run(self, request: RunRequest) -> RunOutcome:
        self.runs.append(request)
        assert request.log_path is not None
        request.log_path.write_text(self.answer)
        return RunOutcome(exit_code=self.exit_code, timed_out=False, output_tail="")


def test_in_an_image_the_checkout_judge_and_the_recordings_are_mounted(recording: Path) -> None:
    answer = "\n".join(json.dumps(c) for c in CASES) + "\n2 cases: 1 passed, 1 failed\n"
    engine = FakeEngine(images={"oota/cpu:cell"}, answer=answer, exit_code=1)
    replay = judge.in_image(engine, "oota/cpu:cell",  # type: ignore[arg-type]
                            judge.recordings([str(recording)]), check=False)
    (run,) = engine.runs
    assert run.command == [judge.IMAGE_PYTHON, "/opt/oota/judge/oota_judge.py", "--json",
                           "/cases/0/cases.pt"]
    assert {(str(m.source), m.target, m.read_only) for m in run.mounts} == {
        (str(judge.VERIFY.resolve()), "/opt/oota/judge", True),
        (str((recording / "cases.pt").resolve()), "/cases/0/cases.pt", True)}
    assert replay.where == "image oota/cpu:cell" and replay.count("failed") == 1


def test_without_torch_and_without_the_image_it_says_what_to_do(recording: Path) -> None:
    engine = FakeEngine(images=set(), answer="")
    with pytest.raises(EnvironmentProblem, match=r"build it \(oota build --vendor=cpu\)"):
        judge.in_image(engine, "oota/cpu:cell",  # type: ignore[arg-type]
                       judge.recordings([str(recording)]), check=False)


def test_the_default_image_is_the_cpu_vendors_default_cell() -> None:
    assert runs.default_torch_image(str(REPO / "matrix.yaml")) == \
        "oota/cpu:cpu-torch2.13.0-py3.11-debian12"


def test_the_task_prints_one_line_per_case_and_exits_1_on_a_failure(
        tmp_path: Path, recording: Path) -> None:
    python = stand_in(tmp_path, CASES)
    proc = subprocess.run([*TASKS, "judge", str(recording), "--python", str(python)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == [judge.Judged.from_json(c).line() for c in CASES]
    assert "1 verdict(s) differ from the recording" in proc.stderr
    quiet = subprocess.run([*TASKS, "judge", str(recording), "--python", str(python),
                            "--quiet"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert quiet.stdout.splitlines() == [judge.Judged.from_json(CASES[1]).line()]


def test_a_runs_recording_is_kept_beside_its_result(tmp_path: Path) -> None:
    from oota.results.store import CASES_FILE, keep_recording

    suite_out = tmp_path / "cell" / "verify"
    suite_out.mkdir(parents=True)
    (suite_out / CASES_FILE).write_bytes(b"this run's cases")
    assert keep_recording(suite_out, tmp_path / "cell") == tmp_path / "cell" / CASES_FILE
    assert (tmp_path / "cell" / CASES_FILE).read_bytes() == b"this run's cases"
    assert not (suite_out / CASES_FILE).exists()
    # A later run that recorded nothing (the CPU vendor compares nothing) leaves no stale file.
    assert keep_recording(suite_out, tmp_path / "cell") is None
    assert not (tmp_path / "cell" / CASES_FILE).exists()
