"""A case of the judge as plain data, and the recording that holds cases (``cases.pt``).

A case is made here (:func:`make_case`), judged by
:func:`oota_judge.judge`, and recorded with its verdict (:func:`finish`, :func:`recording`,
:func:`save`); :func:`load` reads a recording back as data only. Standard library only at import
time (torch is imported where a function needs it), like the rest of the suite.

The file format (``cases.pt``, version 1), loadable with ``torch.load(path, weights_only=True)``
(data only: no code runs when it is read)::

    {"format": "oota.cases", "version": 1,
     "recorded": {"device": str, "device_type": str, "torch": str, "by": str, "at": str,
                  "cell": str, "settings": {...}, "note": str},
     "cases": [{"op": str, "dtype": str, "sample": int, "description": str,
                "input": T, "args": [T...], "kwargs": {str: T},
                "cpu": T, "device": T, "reference": T | None,
                "rule": {"kind": "pytorch"|"float64"|"tolerance"|"skip", "atol", "rtol",
                         "multiplier", "floor_ulps", "source"},
                "verdict": {"status": "passed"|"failed"|"skipped", "message": str}}]}

where T is a tensor (on the CPU), None, a bool, int, float, complex or str, a torch.dtype, a
list or tuple of T (named tuples become plain tuples), or a dict; anything else is kept as
``{"repr": text}`` (shown, never run).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oota_rules import Rule

FORMAT = "oota.cases"
VERSION = 1
CASES_FILE = "cases.pt"

# A recorded case keeps at most this many tensor elements in all (inputs and the three
# results); a larger one keeps its verdict but no tensors, and the replay says so.
RECORD_ELEMENTS = 1 << 20
DESCRIPTION_LIMIT = 160


def plain(value: Any, copy: bool = True) -> Any:
    """``value`` as data a ``weights_only`` load accepts (see the module docstring): tensors
    detached and on the CPU; with ``copy``, each in storage of its own (views of one storage as
    several dtypes cannot be saved) with conjugate and negative bits resolved, as recorded."""
    import torch

    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu()
        if copy and tensor.layout == torch.strided:
            tensor = tensor.resolve_conj().resolve_neg().clone()
        return tensor
    if value is None or isinstance(value, torch.dtype):
        return value
    for kind in (bool, int, float, complex, str):  # subclasses (numpy's, TorchVersion) as plain
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, torch.Size):
        return tuple(int(x) for x in value)
    if isinstance(value, tuple):
        return tuple(plain(v, copy) for v in value)
    if isinstance(value, list):
        return [plain(v, copy) for v in value]
    if isinstance(value, Mapping):
        return {str(k): plain(v, copy) for k, v in value.items()}
    return {"repr": repr(value)[:DESCRIPTION_LIMIT]}


def leaves(tree: Any) -> list[Any]:
    """The leaves of a plain result, in order (tuples, lists and dict values flattened)."""
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in leaves(item)]
    if isinstance(tree, dict) and "repr" not in tree:
        return [leaf for key in sorted(tree) for leaf in leaves(tree[key])]
    return [tree]


def shape_of(tree: Any) -> Any:
    """The nesting of a plain result without its leaves, to compare two results' structure."""
    if isinstance(tree, (tuple, list)):
        return [shape_of(item) for item in tree]
    if isinstance(tree, dict) and "repr" not in tree:
        return {key: shape_of(tree[key]) for key in sorted(tree)}
    return None


def elements(tree: Any) -> int:
    import torch

    return sum(leaf.numel() for leaf in leaves(tree) if isinstance(leaf, torch.Tensor))


def describe(value: Any) -> str:
    """A sample's inputs in short: ``Tensor[3, 4] float32, dim=1``."""
    import torch

    def short(item: Any) -> str:
        if isinstance(item, torch.Tensor):
            return f"Tensor{list(item.shape)} {str(item.dtype).removeprefix('torch.')}"
        if isinstance(item, (list, tuple)):
            return "(" + ", ".join(short(v) for v in item) + ")"
        if isinstance(item, dict) and "repr" in item:
            return str(item["repr"])
        return repr(item)

    text = ", ".join(short(v) for v in value)
    return text if len(text) <= DESCRIPTION_LIMIT else text[:DESCRIPTION_LIMIT - 1] + "…"


def describe_sample(input_: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    parts = [describe([input_])] + [describe([a]) for a in args]
    parts += [f"{k}={describe([v])}" for k, v in kwargs.items()]
    return describe_join(parts)


def describe_join(parts: Sequence[str]) -> str:
    text = ", ".join(parts)
    return text if len(text) <= DESCRIPTION_LIMIT else text[:DESCRIPTION_LIMIT - 1] + "…"


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """One case's verdict: ``status`` passed / failed / skipped, the message a reader sees, the
    notes (differences that are not failures) and ``ratio``, the worst output's figure over
    what its rule allows (<= 1 passes; None where nothing was measured)."""

    status: str
    message: str
    notes: tuple[str, ...] = ()
    ratio: float | None = None
    bias: Any = None  # (the device's, the CPU's) oota_rules.Bias, to pool over samples

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message}


class RecordingError(ValueError):
    """A file is not a recording this judge reads; the message says which file and why."""


TENSOR_PARTS = ("input", "args", "kwargs", "cpu", "device", "reference")


def make_case(*, op: str, dtype: str, sample: int, input_: Any, args: Sequence[Any],
              kwargs: Mapping[str, Any], cpu: Any, device: Any, reference: Any,
              rule: Rule, device_type: str, copy: bool = True) -> dict[str, Any]:
    """A case of plain data (see the module docstring), its verdict still to be given.
    Without ``copy`` its tensors may share storage with the run's: judge it, then
    :func:`finish` it to record it."""
    case: dict[str, Any] = {
        "op": op, "dtype": dtype, "sample": sample, "device_type": device_type,
        "description": describe_sample(input_, args, kwargs),
        "input": plain(input_, copy), "args": list(plain(tuple(args), copy)),
        "kwargs": plain(dict(kwargs), copy), "cpu": plain(cpu, copy),
        "device": plain(device, copy),
        "reference": None if reference is None else plain(reference, copy),
        "rule": rule.to_json()}
    return case


def case_elements(case: Mapping[str, Any]) -> int:
    return sum(elements(case[p]) for p in TENSOR_PARTS)


def shrink(case: dict[str, Any]) -> dict[str, Any]:
    """The case as it is recorded: without its tensors when they are too many to keep."""
    if case_elements(case) <= RECORD_ELEMENTS:
        return case
    return {**{k: v for k, v in case.items() if k not in TENSOR_PARTS}, "truncated": True,
            **{p: None for p in TENSOR_PARTS}}


def finish(case: Mapping[str, Any], verdict: Verdict) -> dict[str, Any]:
    """The case as a run records it: its tensors copied, shrunk if too large, its verdict."""
    copied = {k: (plain(v) if k in TENSOR_PARTS else v) for k, v in case.items()}
    return {**shrink(copied), "verdict": verdict.to_json()}


def recording(cases: Iterable[Mapping[str, Any]], **recorded: Any) -> dict[str, Any]:
    header = {"at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              **plain(recorded)}
    return {"format": FORMAT, "version": VERSION, "recorded": header, "cases": list(cases)}


def save(path: Path, data: Mapping[str, Any]) -> None:
    """Write a recording atomically (a reader never sees half a file), once it is known to
    load back as data only: a RecordingError otherwise, and nothing is written."""
    import torch

    tmp = path.with_name(path.name + ".tmp")
    torch.save(dict(data), tmp)
    try:
        load(tmp)
    except RecordingError as exc:
        tmp.unlink(missing_ok=True)
        raise RecordingError(f"{path}: not written, it would not load back: {exc}") from None
    tmp.replace(path)


def load(path: Path) -> dict[str, Any]:
    """A recording, read as data only (``weights_only=True``); RecordingError if it is not
    one this judge reads."""
    import pickle

    import torch

    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RecordingError(f"{path}: not a recording that loads as data only "
                             f"(torch.load with weights_only=True: {first[:120]})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordingError(f"{path}: not an oota recording (no format '{FORMAT}')")
    if data.get("version") != VERSION:
        raise RecordingError(f"{path}: recording version {data.get('version')!r}; this judge "
                             f"reads version {VERSION}")
    if not isinstance(data.get("cases"), list):
        raise RecordingError(f"{path}: 'cases' is not a list")
    return data


def keep_passing(op: str, dtype: str, every: int) -> bool:
    """Whether a run records the passing case of ``op`` × ``dtype``: one pair in ``every``,
    the same pairs on every run and machine (a stable hash of the names, not Python's
    randomised one)."""
    import zlib

    return every > 0 and zlib.crc32(f"{op}-{dtype}".encode()) % every == 0
