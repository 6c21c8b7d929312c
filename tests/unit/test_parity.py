"""Parity with a reference device (``report --parity PATH``): the recording's verdicts read
without torch (oota/report/recorded.py), and the operators table's per-pair parity of each
vendor with it (oota/report/parity.py)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from oota.api.reports import report
from oota.report import parity
from oota.report.recorded import RecordedCase, Recording, RecordingError, read, recordings
from tests import forkcli
from tests.reports import build_report
from tests.unit.test_report import NOW, make_result, typed, write_results
from tests.unit.test_scorecard import DEVICE, pair

REPO = Path(__file__).resolve().parents[2]
H100 = REPO / "tests/data/recordings/cuda-h100-2026-11-24"


def test_the_h100_recording_is_read_without_torch() -> None:
    """1,766 cases: 1,612 passed, 153 skipped, one failure (its README), in a Python that
    cannot import torch at all."""
    script = ("import sys; sys.modules['torch'] = None\n"
              "from collections import Counter\n"
              "from pathlib import Path\n"
              "from oota.report.recorded import read, recordings\n"
              f"found = [read(p) for p in recordings(Path({str(H100)!r}))]\n"
              "print(dict(Counter(c.status for r in found for c in r.cases)))\n"
              "print(sorted({r.device for r in found}), sorted({r.torch for r in found}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    counts, devices = done.stdout.splitlines()
    assert eval(counts) == {"passed": 1612, "skipped": 153, "failed": 1}  # noqa: S307
    assert devices == "['NVIDIA H100 80GB HBM3'] ['2.11.0+cu130']"


def saved(path: Path, data: Any, name: str = "cases") -> Path:
    """A file shaped as torch.save writes one (a zip holding ``<name>/data.pkl``)."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/data.pkl", data if isinstance(data, bytes)
                         else pickle.dumps(data, protocol=2))
        archive.writestr(f"{name}/version", "3\n")
    return path


def recording(*cases: tuple[str, str, str]) -> dict[str, Any]:
    return {"format": "oota.cases", "version": 1,
            "recorded": {"device": "GPU X", "torch": "2.13.0+cu", "at": "2026-11-20T10:00:00Z"},
            "cases": [{"op": op, "dtype": dtype, "sample": 0,
                       "verdict": {"status": status, "message": ""}}
                      for op, dtype, status in cases]}


class _Runs:
    """Pickled as a call of os.system: a recording must never run it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_naming_anything_else_is_refused_unrun(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = saved(tmp_path / "evil.pt", {"format": "oota.cases", "cases": [_Runs(marker)]})
    with pytest.raises(RecordingError, match=r"evil\.pt: not a recording .*(posix|os)\.system"):
        read(path)
    assert not marker.exists()


@pytest.mark.parametrize(("content", "said"), [
    pytest.param(b"not a zip", "not a recording this report reads", id="not-a-zip"),
    pytest.param({"format": "something else"}, "not an oota recording", id="other-format"),
    pytest.param({"format": "oota.cases", "version": 2, "cases": []}, "version 2",
                 id="other-version"),
    pytest.param({"format": "oota.cases", "version": 1, "cases": [{"op": "abs"}]},
                 "case 0: needs op and dtype", id="case-without-verdict"),
])
def test_what_is_not_a_recording_is_named(tmp_path: Path, content: Any, said: str) -> None:
    path = tmp_path / "x.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        saved(path, content)
    with pytest.raises(RecordingError, match=said) as caught:
        read(path)
    assert str(path) in str(caught.value)


def test_a_folder_without_recordings_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="no recording"):
        recordings(tmp_path)
    with pytest.raises(RecordingError, match="no such file or folder"):
        recordings(tmp_path / "missing")


def reference(*cases: tuple[str, str, str]) -> parity.Reference:
    found = Recording(path="ref.pt", device="GPU X", torch="2.13.0+cu", at="2026-11-20T10:00",
                      cases=tuple(RecordedCase(op=op, dtype=dtype, status=status, message="",
                                               file="ref.pt", index=i)
                                  for i, (op, dtype, status) in enumerate(cases)))
    return parity.reference([found], "ref.pt")


REF = reference(("abs", "float32", "passed"), ("add", "float32", "passed"),
                ("tanh", "float16", "passed"), ("exp", "bfloat16", "failed"),
                ("sin", "float32", "skipped"), ("cos", "float32", "passed"),
                ("abs", "float32", "skipped"))  # a second case of abs: the pass wins a skip


def vendor_results() -> list[dict[str, Any]]:
    return [make_result("reference", tests=[
        DEVICE, pair("abs", "float32"), pair("add", "float32", "failed", message="off"),
        pair("tanh", "float16", "cpu-fallback", ran_on="cpu", message="ran on the CPU: x"),
        pair("exp", "bfloat16"), pair("sin", "float32"), pair("mul", "float64")])]


def test_each_pair_beside_the_reference() -> None:
    report = build_report(typed(vendor_results()), (), generated_at=NOW)
    table = parity.parity_table(REF, report.groups, report.vendors)
    assert table is not None
    rows = {(r.op, r.dtype): (r.reference, r.entries[0]) for r in table.rows}
    assert rows == {
        ("abs", "float32"): ("passed", ("both", "ran on the device's own kernels and passed")),
        ("add", "float32"): ("passed", ("reference only", "failed")),
        ("tanh", "float16"): ("passed", ("reference only", "ran on the CPU (fell back)")),
        ("exp", "bfloat16"): ("failed", ("vendor only", "ran on the device's own kernels and "
                                                        "passed")),
        ("sin", "float32"): ("skipped", ("vendor only", "ran on the device's own kernels and "
                                                        "passed")),
        ("cos", "float32"): ("passed", ("reference only", "not compared"))}
    (counts,) = table.vendors
    assert counts.counts == (("both", 1), ("reference only", 3), ("vendor only", 2),
                             ("neither", 0), ("not in the reference", 1))
    assert counts.text.startswith(
        "reference: 1 passes on both, 3 passes only on the reference (1 failed, 1 not compared, "
        "1 ran on the CPU (fell back)), 2 passes only on the vendor's device")
    assert [(r.op, r.dtype) for r in table.only_on_reference()] == [
        ("add", "float32"), ("cos", "float32"), ("tanh", "float16")]


def test_report_parity_writes_the_table_everywhere(tmp_path: Path) -> None:
    path = saved(tmp_path / "ref.pt", recording(("abs", "float32", "passed"),
                                                 ("add", "float32", "passed")))
    results = write_results(tmp_path / "results", vendor_results())
    out = tmp_path / "reports"
    done = report(str(results), str(out), matrix=str(tmp_path / "matrix.yaml"),
                  parity=str(path))
    assert done.parity is not None
    index = (out / "index.html").read_text("utf-8")
    assert "Parity with a reference device" in index and "GPU X, torch 2.13.0+cu" in index
    matrix = (out / "matrix.md").read_text("utf-8")
    assert "- reference: 1 passes on both, 1 passes only on the reference (1 failed)" in matrix
    assert "| `add` | float32 | reference only (failed) |" in matrix
    data = json.loads((out / "results.json").read_text("utf-8"))["parity"]
    assert data["vendors"]["reference"]["both"] == 1 and len(data["pairs"]) == 2


def test_a_bad_parity_file_is_exit_2_naming_it(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", vendor_results())
    done = forkcli.run(
        [sys.executable, "-m", "oota", "report", "--results", str(results), "--out",
         str(tmp_path / "reports"), "--no-history", "--parity", str(tmp_path / "nope.pt")],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr
    assert f"--parity {tmp_path / 'nope.pt'}: no such file or folder" in done.stderr


def test_the_reference_label_names_what_was_recorded() -> None:
    assert REF.label == ("GPU X, torch 2.13.0+cu (recorded 2026-11-20: 7 cases in 1 files, "
                         "verdicts as recorded)")
    assert dict(REF.verdicts)[("abs", "float32")] == "passed"


def test_the_recording_bytes_are_never_read_as_tensors(tmp_path: Path) -> None:
    """A recording of the real format whose storage files are missing still reads: its
    tensors are never built."""
    source = H100 / "cases-float32.pt"
    stripped = tmp_path / "stripped.pt"
    with zipfile.ZipFile(source) as full, zipfile.ZipFile(stripped, "w") as out:
        for name in full.namelist():
            if name.endswith("data.pkl"):
                out.writestr(name, full.read(name))
    assert len(read(stripped).cases) == 660
