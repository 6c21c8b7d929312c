"""Recorded cases judged again, on any machine with torch and no accelerator:
``python oota_replay.py PATH...`` (``oota judge PATH`` runs it in a Python or image with torch).

A recording is evidence, not a verdict. For every case the replay

* checks every field against the format (``oota_schema``) before using it: a case it cannot
  judge is an **error** naming the file and the case, and the others are still judged;
* decides the rule itself, from PyTorch's OpInfo decisions in this torch for the recording's
  device type and oota's numbers (or the vendor's, ``--spec``), never from the recording: a
  recorded rule that disagrees is reported beside the verdict;
* recomputes the CPU's result and the float64 result from the recorded inputs where it can
  (and says so where it cannot: the operator's output was processed by its sample, or the CPU
  here refuses the inputs), trusting only the device's outputs from the recording, and reports
  where the recorded CPU result differs from this machine's;
* judges the case with ``oota_judge.judge`` and compares the verdict with the recorded one.

Exit codes: 0 nothing failed (with ``--check``: no verdict moved, whatever the verdicts); 1 a
case failed (with ``--check``: a verdict moved); 2 a file is not a recording, or a case could
not be judged. With ``--json`` each case is one JSON line and the last line is the summary:
output without it is incomplete.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import oota_judge
from oota_cases import RecordingError, Verdict, leaves, load, save, shape_of
from oota_rules import SKIP, Rule, RuleError
from oota_schema import MAX_FILE_BYTES, SchemaError, check_case, check_header

ERROR = "error"
_IDENTITY = object()  # an operator whose samples leave the output as it is


@dataclass(frozen=True, kw_only=True, slots=True)
class Replayed:
    """One recorded case judged again: what the recording says and what the judge says now."""

    file: str
    index: int
    op: str
    dtype: str
    sample: int
    recorded: Mapping[str, Any]
    verdict: Verdict
    notes: tuple[str, ...] = ()  # how the replay judged: rules, recomputed results
    pooled: bool = False  # a verdict on several cases of one operator × dtype
    rule_kind: str = ""  # the rule the judge applied
    truncated: bool = False  # recorded without its tensors: not judged again

    def _judged_again(self) -> bool:
        """Whether this case holds a verdict to compare with the recorded one (an error is no
        verdict: it is counted apart, and exits 2 whatever moved; a case recorded without its
        tensors is skipped, not judged again; a pooled verdict was never recorded)."""
        return not (self.pooled or self.truncated or self.verdict.status == ERROR)

    @property
    def moved(self) -> bool:
        """Whether the verdict differs from the recorded one. A verdict is its status: the
        same status reached with other numbers in its message (another CPU's float32 kernels
        round the recomputed CPU result differently) has not moved, it is :attr:`reworded`."""
        return self._judged_again() and self.recorded.get("status") != self.verdict.status

    @property
    def reworded(self) -> bool:
        """The recorded status reached again, with a message that differs from the recorded one."""
        return (self._judged_again() and not self.moved
                and self.recorded.get("message") != self.verdict.message)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "case": self.index, "op": self.op, "dtype": self.dtype,
                "sample": self.sample, "status": self.verdict.status,
                "message": self.verdict.message, "notes": [*self.verdict.notes, *self.notes],
                "ratio": self.verdict.ratio, "recorded": dict(self.recorded),
                "moved": self.moved, "reworded": self.reworded, "pooled": self.pooled}

    def label(self) -> str:
        return f"{Path(self.file).name} case {self.index} ({self.op}, {self.dtype})"


@dataclass(kw_only=True)
class Replayer:
    """Judges recordings again; op_db is imported at the first case that needs it."""

    spec: Mapping[str, Any] = field(default_factory=dict)  # cell.json's verify (the vendor's)
    device_type: str = ""  # the device type whose PyTorch decisions apply ('': the recording's)
    vendors: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # name -> verify
    _ops: dict[str, Any] | None = None
    _processes: dict[tuple[str, str, str, int], Any] = field(default_factory=dict)

    def ops(self) -> dict[str, Any]:
        if self._ops is None:
            import oota_opinfo

            self._ops = oota_opinfo.by_name()
        return self._ops

    def _process(self, op: Any, case: Mapping[str, Any], rule: Rule) -> Any | None:
        """The sample's output processing, made again from op_db (cached per pair)."""
        import oota_opinfo
        import torch

        key = (case["op"], case["dtype"], rule.kind, case["sample"])
        first = (case["op"], case["dtype"], rule.kind, -1)
        if first in self._processes and self._processes[first] is _IDENTITY:
            return _same
        if key not in self._processes:
            try:
                found = oota_opinfo.output_process(op, getattr(torch, case["dtype"]),
                                                   case["sample"],
                                                   reference=rule.kind == "pytorch")
            except Exception:  # noqa: BLE001 - samples that cannot be made here
                found = None
            if found is not None and oota_opinfo._identity(found):
                self._processes[first] = _IDENTITY
                return _same
            self._processes[key] = found
        return self._processes[key]

    def files(self, paths: Sequence[Path]) -> Iterator[Replayed]:
        for path in paths:
            yield from self.file(path)

    def file(self, path: Path) -> Iterator[Replayed]:
        try:
            data = _read(path)
            header = check_header(data)
        except (RecordingError, SchemaError) as exc:
            yield _error(path, -1, {}, f"{exc}".removeprefix(f"{path}: "))
            return
        device_type = self.device_type or str(header.get("device_type") or "")
        settings = header.get("settings") or {}
        spec = self.spec or vendor_spec(self.vendors, str(header.get("cell") or ""))
        for index, case in enumerate(data["cases"]):
            yield self.case(path, index, case, device_type, settings, spec)

    def case(self, path: Path, index: int, case: Any, device_type: str,
             settings: Mapping[str, Any], spec: Mapping[str, Any] | None = None) -> Replayed:
        try:
            check_case(case)
        except SchemaError as exc:
            return _error(path, index, case if isinstance(case, dict) else {},
                          f"not a case this judge reads: {exc}")
        try:
            return self._judged(path, index, case, device_type, settings,
                                self.spec if spec is None else spec)
        except (RuleError, SchemaError) as exc:
            return _error(path, index, case, f"cannot judge it: {exc}")
        except Exception as exc:  # noqa: BLE001 - no crash may hide the cases after this one
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            return _error(path, index, case, f"cannot judge it: {type(exc).__name__}: {first}")

    def _judged(self, path: Path, index: int, case: dict[str, Any], device_type: str,
                settings: Mapping[str, Any], spec: Mapping[str, Any]) -> Replayed:
        import oota_opinfo

        op = self.ops().get(case["op"])
        if op is None:
            raise SchemaError(f"{case['op']} is not an operator of this torch's op_db")
        if not device_type:
            raise SchemaError("the recording names no device type (give --device-type)")
        rule = oota_opinfo.rule_for(op, case["dtype"], device_type, spec, declared=False)
        notes = _rule_note(case.get("rule"), rule)
        judged = {**case, "rule": rule.to_json()}
        process = self._process(op, case, rule)
        rerun = oota_judge.Rerun(call=lambda i, a, k: (process or _same)(op(i, *a, **k)))
        if rule.kind != SKIP and not case.get("truncated"):
            if process is None:
                notes.append("judged against the recorded CPU result: the sample's output "
                             "processing cannot be made again here")
            else:
                judged, more = _recomputed(judged, rerun)
                notes += more
        verdict = oota_judge.judge(judged, device_type, settings, rerun=rerun,
                                   subnormals=str(spec.get("subnormals") or "note"))
        return Replayed(file=str(path), index=index, op=case["op"], dtype=case["dtype"],
                        sample=case["sample"], recorded=case.get("verdict") or {},
                        verdict=verdict, notes=tuple(notes), rule_kind=rule.kind,
                        truncated=bool(case.get("truncated")))


def vendor_spec(vendors: Mapping[str, Mapping[str, Any]], cell: str) -> Mapping[str, Any]:
    """The verify section of the vendor the recording's cell id names (the longest vendor name
    it starts with, then '-'), from the judging checkout's data, never the recording's: the
    vendor's tolerances, overrides and compare_as. {} (oota's numbers) when none matches."""
    found = [name for name in vendors if cell.startswith(f"{name}-")]
    return vendors[max(found, key=len)] if found else {}


def _same(value: Any) -> Any:
    return value


def _read(path: Path) -> dict[str, Any]:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise RecordingError(f"{path}: cannot be read: {exc.strerror}") from None
    if not path.is_file():
        raise RecordingError(f"{path}: not a regular file")
    if size > MAX_FILE_BYTES:
        raise RecordingError(f"{path}: {size} bytes, larger than a recording this judge reads "
                             f"({MAX_FILE_BYTES} bytes)")
    return load(path)


def _error(path: Path, index: int, case: Mapping[str, Any], why: str) -> Replayed:
    def field_text(key: str) -> str:
        value = case.get(key)
        return value[:200] if isinstance(value, str) else "?"

    sample = case.get("sample")
    where = f"{path}" if index < 0 else f"{path}: case {index}"
    return Replayed(file=str(path), index=index, op=field_text("op"), dtype=field_text("dtype"),
                    sample=sample if isinstance(sample, int) and not isinstance(sample, bool)
                    else -1,
                    recorded=case.get("verdict") if isinstance(case.get("verdict"), dict)
                    else {}, verdict=Verdict(status=ERROR, message=f"{where}: {why}"))


def _rule_note(recorded: Any, rule: Rule) -> list[str]:
    """Where the recording's rule (information only) is not the one the judge chose."""
    if not isinstance(recorded, dict):
        return []
    try:
        theirs = Rule.from_json(recorded)
    except RuleError as exc:
        return [f"the recording's rule is not one oota knows ({exc}): the judge's own applies"]
    fields = ["kind", "multiplier", "floor_ulps"] if rule.kind != "tolerance" else [
        "kind", "atol", "rtol"]
    if rule.kind == "pytorch":
        fields += ["atol", "rtol"]
    if any(getattr(theirs, f) != getattr(rule, f) for f in fields):
        return [f"the recording says it was judged by {theirs.describe()}; this judge applies "
                f"{rule.describe()}"]
    return []


def _same_shape(here: Any, there: Any) -> bool:
    import torch

    if shape_of(here) != shape_of(there):
        return False
    for mine, theirs in zip(leaves(here), leaves(there), strict=True):
        if isinstance(theirs, torch.Tensor) != isinstance(mine, torch.Tensor):
            return False
        if isinstance(theirs, torch.Tensor) and (mine.shape != theirs.shape or
                                                 mine.dtype != theirs.dtype):
            return False
    return True


def _largest_difference(here: Any, there: Any) -> str:
    import torch

    worst = 0.0
    for mine, theirs in zip(leaves(here), leaves(there), strict=True):
        if isinstance(mine, torch.Tensor) and (mine.is_floating_point() or mine.is_complex()):
            diff = (oota_judge.wide(mine) - oota_judge.wide(theirs)).abs()
            finite = diff[torch.isfinite(diff)]
            worst = max(worst, float(finite.max()) if finite.numel() else 0.0)
    return f"{worst:.3g}"


def _recomputed(case: dict[str, Any], rerun: oota_judge.Rerun
                ) -> tuple[dict[str, Any], list[str]]:
    """The case with the CPU's and the float64 results of this machine, where the recorded
    inputs allow, and notes saying what was recomputed and what was not."""
    import torch

    notes: list[str] = []
    cpu = rerun.run(case, lambda t: t)
    if cpu is None or not _same_shape(cpu, case["cpu"]):
        why = "the CPU here refuses the recorded inputs" if cpu is None else \
            "the operator's output was processed by its sample"
        notes.append(f"judged against the recorded CPU result: it cannot be recomputed ({why})")
        return case, notes
    if not oota_judge.identical(cpu, case["cpu"]):
        notes.append("the recorded CPU result differs from this machine's (largest difference "
                     f"{_largest_difference(cpu, case['cpu'])}): judged against this machine's")
    reference = rerun.run(case, lambda t: t.to(torch.complex128 if t.is_complex()
                                               else torch.float64), wide=True)
    if reference is not None and shape_of(reference) == shape_of(cpu):
        return {**case, "cpu": cpu, "reference": reference}, notes
    if case.get("reference") is not None:
        notes.append("the float64 result is the recorded one: the operator refuses float64 "
                     "inputs here")
        return {**case, "cpu": cpu}, notes
    notes.append("no float64 result (none recorded, none computable here): judged by the "
                 "rule's comparison with the CPU alone")
    return {**case, "cpu": cpu, "reference": None}, notes


def pooled(results: Sequence[Replayed], device_type: str) -> list[Replayed]:
    """For each operator × dtype with several passing cases: a failed entry where their
    rounding errors, pooled, lean one way (each case may be too small to show it)."""
    groups: dict[tuple[str, str], list[Replayed]] = {}
    for result in results:
        if result.verdict.status == "passed" and result.verdict.bias is not None:
            groups.setdefault((result.op, result.dtype), []).append(result)
    found = []
    for (op, dtype), members in sorted(groups.items()):
        text = oota_judge.pooled_bias([m.verdict for m in members],
                                      Rule(kind=members[0].rule_kind),
                                      device_type or "the device")
        if text:
            found.append(Replayed(file=members[0].file, index=-1, op=op, dtype=dtype, sample=-1,
                                  recorded={}, pooled=True, verdict=Verdict(
                                      status="failed", message=f"{op} ({dtype}): {text}")))
    return found


def _named(names: Sequence[str]) -> str:
    return ", ".join(names[:5]) + (f", +{len(names) - 5} more" if len(names) > 5 else "")


def moved_line(results: Sequence[Replayed]) -> str:
    """What moved from the recorded verdicts, in one line, and how many verdicts were reached
    again with other words (not a move)."""
    moved = [r for r in results if r.moved]
    reworded = [f"{r.op} ({r.dtype}) s{r.sample}" for r in results if r.reworded]
    also = (f"; {len(reworded)} reached with another message (same status, not a move): "
            f"{_named(reworded)}" if reworded else "")
    if not moved:
        return "no verdict moved from the recordings" + also
    changes: dict[str, list[str]] = {}
    for result in moved:
        key = f"{result.recorded.get('status') or 'nothing'} -> {result.verdict.status}"
        changes.setdefault(key, []).append(f"{result.op} ({result.dtype}) s{result.sample}")
    parts = [f"{len(names)} {key}: {_named(names)}" for key, names in sorted(changes.items())]
    return f"{len(moved)} verdict(s) moved: " + "; ".join(parts) + also


def _recordings(args: Sequence[str]) -> list[Path]:
    """The files named, and every ``*.pt`` under the folders named (sorted)."""
    paths: list[Path] = []
    for arg in args:
        path = Path(arg)
        paths += sorted(path.rglob("*.pt")) if path.is_dir() else [path]
    return paths


def _update(results: Sequence[Replayed]) -> None:
    """Write each case's new verdict into its recording (the maintainers' test data)."""
    by_file: dict[str, dict[int, Verdict]] = {}
    for result in results:
        if not result.pooled and result.index >= 0:
            by_file.setdefault(result.file, {})[result.index] = result.verdict
    for name, verdicts in by_file.items():
        data = load(Path(name))
        for index, verdict in verdicts.items():
            data["cases"][index]["verdict"] = verdict.to_json()
        save(Path(name), data)


def summary(results: Sequence[Replayed]) -> dict[str, Any]:
    counts = {s: sum(r.verdict.status == s for r in results)
              for s in ("passed", "failed", "skipped", ERROR)}
    return {"cases": sum(not r.pooled for r in results), **counts,
            "moved": sum(r.moved for r in results),
            "reworded": sum(r.reworded for r in results), "moved_line": moved_line(results)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="oota_replay.py", description=(
        "Judge recorded cases again and print each verdict. Exit 0: none failed (with "
        "--check: no verdict moved); 1: a case failed (with --check: a verdict moved); 2: a "
        "file is not a recording, or a case could not be judged."))
    parser.add_argument("paths", nargs="+", help="recordings (cases.pt) or folders of them")
    parser.add_argument("--json", action="store_true", help="one JSON object per case")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a verdict (its status) differs from the recorded "
                             "one; a message alone that differs is counted, not a move")
    parser.add_argument("--quiet", action="store_true", help="print failed and moved only")
    parser.add_argument("--device-type", default="",
                        help="whose PyTorch decisions apply (default: the recording's)")
    parser.add_argument("--spec", type=Path,
                        help="a JSON file holding the vendor's verify section (cell.json's)")
    parser.add_argument("--specs", type=Path,
                        help="a JSON file: {\"vendors\": {NAME: verify section}}; each "
                             "recording takes its cell's vendor's")
    parser.add_argument("--update", action="store_true",
                        help="write the new verdicts into the recordings (test data)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # operators' deprecation notes are not verdicts
    spec: dict[str, Any] = {}
    if args.spec:
        spec = json.loads(args.spec.read_text(encoding="utf-8"))
    vendors: dict[str, Any] = {}
    if args.specs:
        vendors = dict(json.loads(args.specs.read_text(encoding="utf-8")).get("vendors") or {})
    replayer = Replayer(spec=spec, device_type=args.device_type, vendors=vendors)
    show = _printer(args.json, args.quiet)
    results = []
    for result in replayer.files(_recordings(args.paths)):
        results.append(result)
        show(result)
    extra = pooled(results, args.device_type)
    for result in extra:
        show(result)
    results += extra
    counts = summary(results)
    if args.json:
        print(json.dumps({"summary": counts}), flush=True)
    print(f"{counts['cases']} cases: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped, {counts[ERROR]} could not be judged; "
          f"{counts['moved_line']}", file=sys.stderr)
    if args.update and not counts[ERROR]:
        _update(results)
    if counts[ERROR]:
        return 2
    if args.check:
        return 1 if counts["moved"] else 0
    return 1 if counts["failed"] else 0


def _printer(as_json: bool, quiet: bool) -> Callable[[Replayed], None]:
    def show(result: Replayed) -> None:
        if as_json:
            print(json.dumps(result.to_json()), flush=True)
            return
        status = result.verdict.status
        if quiet and status not in ("failed", ERROR) and not result.moved:
            return
        before = result.recorded.get("status") or "nothing"
        moved = f"  [recorded: {before}]" if result.moved else ""
        print(f"{status.upper():8} {result.verdict.message}{moved}", flush=True)
        for note in result.notes:
            print(f"{'':9}note: {note}", flush=True)
    return show


if __name__ == "__main__":
    sys.exit(main())
