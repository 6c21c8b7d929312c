"""``oota judge PATH``: which Python judges (``--python``, this one with torch, else a local
image with torch), what it is given, and how its answer becomes the lines and exit code a user
sees. The judge itself is a stand-in here (an executable that answers as oota_replay.py does);
the real judge runs in the docker tests, on the H100 recordings."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from oota.api import runs
from oota.engine.base import RunOutcome, RunRequest
from oota.errors import EnvironmentProblem, InputError
from oota.execute import judge
from tests import forkcli

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
MOVED = "1 verdict(s) moved: 1 passed -> failed: tanh (float32) s1"


def summary(cases: list[dict[str, object]], moved: str = MOVED) -> dict[str, object]:
    """The replay's last line: without it the output is incomplete."""
    counts = {s: sum(c["status"] == s for c in cases)
              for s in ("passed", "failed", "skipped", "error")}
    return {"summary": {"cases": len(cases), **counts,
                        "moved": sum(bool(c["moved"]) for c in cases), "moved_line": moved}}


def stand_in(folder: Path, answer: list[dict[str, object]], code: int = 1,
             stderr: str = "2 cases", finished: bool = True) -> Path:
    """An executable that answers like ``python oota_replay.py --json ...`` (and like a Python
    that imports torch, for ``has_torch``); it keeps its argv for the test to read. Without
    ``finished`` it stops before the summary line, as a judge that crashed half way."""
    script = folder / "python-with-torch"
    lines = "\n".join(json.dumps(a) for a in [*answer, *([summary(answer)] if finished else [])])
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
    assert argv[:4] == [str(judge.JUDGE), "--json", "--check", "--specs"]
    assert argv[4].endswith("/vendors.json") and argv[5:] == [str(recording / "cases.pt")]
    assert [c.status for c in replay.cases] == ["passed", "failed"]
    assert replay.cases[1].line() == ("FAILED   tanh (float32): sample 1 (Tensor[5] float32): "
                                      "output on refdev differs  [recorded: passed]")
    assert replay.summary() == (f"2 cases judged again by {python}: 1 passed, 1 failed, "
                                f"0 skipped, 0 could not be judged; {MOVED}")


def test_a_judge_that_stops_half_way_is_not_a_shorter_result(tmp_path: Path,
                                                              recording: Path) -> None:
    """Cases printed before a crash are not taken as the whole answer (a crashing a.pt would
    otherwise hide a failing b.pt behind 'exit 0')."""
    python = stand_in(tmp_path, CASES[:1], code=1, finished=False,
                      stderr="Traceback ...\nRecursionError: maximum recursion depth exceeded")
    with pytest.raises(EnvironmentProblem, match=r"stopped before it finished \(exit 1, 1 "
                       r"case\(s\) judged so far\): RecursionError"):
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
    answer = "\n".join(json.dumps(c) for c in [*CASES, summary(CASES)]) + "\n2 cases\n"
    engine = FakeEngine(images={"oota/cpu:cell"}, answer=answer, exit_code=1)
    replay = judge.in_image(engine, "oota/cpu:cell",  # type: ignore[arg-type]
                            judge.recordings([str(recording)]), check=False)
    (run,) = engine.runs
    assert run.command == [judge.IMAGE_PYTHON, "/opt/oota/judge/oota_replay.py", "--json",
                           "/cases/0/cases.pt"]
    assert {(str(m.source), m.target, m.read_only) for m in run.mounts} == {
        (str(judge.VERIFY.resolve()), "/opt/oota/judge", True),
        (str((recording / "cases.pt").resolve()), "/cases/0/cases.pt", True)}
    assert replay.where == "image oota/cpu:cell" and replay.count("failed") == 1


@pytest.mark.parametrize(("set_here", "inside"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_the_judges_openmp_threads_sleep_unless_oota_was_told_otherwise(
        recording: Path, monkeypatch: pytest.MonkeyPatch, set_here: str | None,
        inside: str) -> None:
    if set_here is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", set_here)
    answer = "\n".join(json.dumps(c) for c in [*CASES, summary(CASES)]) + "\n"
    engine = FakeEngine(images={"oota/cpu:cell"}, answer=answer)
    judge.in_image(engine, "oota/cpu:cell",  # type: ignore[arg-type]
                   judge.recordings([str(recording)]), check=False)
    (run,) = engine.runs
    assert run.env["OMP_WAIT_POLICY"] == inside


def test_in_an_image_each_case_names_its_file_as_given(recording: Path) -> None:
    """A case judged in the image names the recording as the user gave it, not the path it
    was mounted at (two files in one judge run: each case says which it came from)."""
    files = judge.recordings([str(recording)])
    cases = [dict(c, file="/cases/0/cases.pt") for c in CASES]
    answer = "\n".join(json.dumps(c) for c in [*cases, summary(cases)]) + "\n"
    engine = FakeEngine(images={"oota/cpu:cell"}, answer=answer)
    replay = judge.in_image(engine, "oota/cpu:cell", files,  # type: ignore[arg-type]
                            check=False)
    assert [c.file for c in replay.cases] == [str(files[0])] * len(CASES)


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
    proc = forkcli.run([*TASKS, "judge", str(recording), "--python", str(python)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == [judge.Judged.from_json(c).line() for c in CASES]
    assert MOVED in proc.stderr
    quiet = forkcli.run([*TASKS, "judge", str(recording), "--python", str(python),
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


def test_with_check_only_a_moved_verdict_exits_1(tmp_path: Path, recording: Path) -> None:
    """--check answers "did a verdict move?", whatever the verdicts: a recording holding a
    known failure that did not move exits 0."""
    unmoved = [{**CASES[1], "moved": False, "recorded": {"status": "failed"}}]
    python = stand_in(tmp_path, unmoved, code=0)
    proc = forkcli.run([*TASKS, "judge", str(recording), "--python", str(python), "--check"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    moved = stand_in(tmp_path, CASES, code=1)
    proc = forkcli.run([*TASKS, "judge", str(recording), "--python", str(moved), "--check"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 1 and MOVED in proc.stderr


def test_a_case_that_cannot_be_judged_is_named_and_exits_2(tmp_path: Path,
                                                          recording: Path) -> None:
    error = {"file": "a.pt", "op": "?", "dtype": "?", "sample": -1, "status": "error",
             "message": "a.pt: case 3: not a case this judge reads: sample inf is not a whole "
                        "number from 0 to 10000000", "moved": True, "recorded": {}}
    python = stand_in(tmp_path, [CASES[0], error, CASES[1]], code=2)
    proc = forkcli.run([*TASKS, "judge", str(recording), "--python", str(python), "--quiet"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("ERROR    a.pt: case 3: not a case")
    assert "FAILED   tanh (float32)" in proc.stdout  # the case after it is still judged
    assert "1 could not be judged" in proc.stderr


def test_a_signed_recording_is_checked_with_the_labs_key(tmp_path: Path,
                                                         recording: Path) -> None:
    """The signature beside a recording (cases.pt.sig, made when its result is signed) must
    check with --key, or nothing is judged; an unsigned one is named."""
    from oota.results.signed import sign_recording
    from oota.supply import signing

    lab = signing.generate(tmp_path / "lab", None)
    (recording / "other.pt").write_bytes(b"another recording")
    sign_recording(recording / "cases.pt", signing.load_private(lab.private, None))
    python = stand_in(tmp_path, CASES)
    replay = runs.judge([str(recording)], python=str(python), image=None, matrix_path="m",
                        check=False, keys=[str(lab.public)])
    assert replay.signatures[0] == "signatures: 1 recording(s) signed by --key, 1 unsigned"
    assert replay.signatures[1] == f"  unsigned: {recording / 'other.pt'}"
    (recording / "cases.pt").write_bytes(b"not what was signed")
    with pytest.raises(InputError, match=r"cases.pt: its signature \(cases.pt.sig, key [0-9a-f]+"
                       r"\) does not check with --key.*; refused"):
        runs.judge([str(recording)], python=str(python), image=None, matrix_path="m",
                   check=False, keys=[str(lab.public)])


def test_a_recording_is_judged_with_its_vendors_numbers_from_the_checkout() -> None:
    """The replay takes the tolerances, overrides and compare_as of the vendor a recording's
    cell names from the checkout's vendor data (never from the recording): one verify
    section per vendor, as its cells' cell.json hold it."""
    vendors = runs.vendor_specs(str(REPO / "matrix.yaml"))
    assert {"cpu", "cuda", "reference"} <= set(vendors)
    assert vendors["cuda"]["tolerances"]["float16"] == {"rtol": 2e-3, "atol": 1e-3}
    assert runs.vendor_specs("/no/such/matrix.yaml") == {}
