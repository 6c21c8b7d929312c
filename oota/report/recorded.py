"""The verdicts a recording of the judge holds, read without torch.

A recording (``cases.pt``, format ``oota.cases`` version 1: ``verify/oota_cases.py``) is what an
accelerator's ops layer judged: each case's operator, dtype and verdict, beside its tensors.
Judging the cases again needs torch (``oota judge``); the report reads the verdicts as
recorded, which ``oota judge PATH --check`` holds to today's judge (it exits 1 when one moved;
the repository's recordings are checked so on every change of the judge).

The file is a zip holding a pickle, as ``torch.save`` writes it. It is read here by a pickle
reader that knows no class: every global the pickle names (torch's tensor rebuilders, dtypes,
storage types) becomes an inert placeholder of this module, and a global outside torch's
serialization and ``collections.OrderedDict`` is refused. No code of the file, nor of torch,
runs; tensors are never built, their bytes never read.
"""

from __future__ import annotations

import io
import pickle
import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from oota.errors import InputError

FORMAT: Final = "oota.cases"
VERSION: Final = 1
SUFFIX: Final = ".pt"
MAX_FILE_BYTES: Final = 512 << 20  # as the replay's own limit (verify/oota_schema.py)
MAX_PICKLE_BYTES: Final = 64 << 20  # the pickle alone: cases, no tensor bytes
VERDICTS: Final = ("passed", "failed", "skipped")
_MODULES = frozenset({"torch", "torch._utils", "torch.serialization", "torch.storage"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class RecordingError(InputError):
    """A file that is not a recording this reader takes; the message names it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordedCase:
    op: str
    dtype: str
    status: str  # passed, failed or skipped, as recorded
    message: str
    file: str
    index: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Recording:
    path: str
    device: str
    torch: str
    at: str
    cases: tuple[RecordedCase, ...]


class _Inert:
    """A global of the pickle (a dtype, a storage type, a tensor rebuilder), called or not:
    it stays a name and builds nothing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *_args: object, **_kwargs: object) -> _Inert:
        return self


class _Reader(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):
            return dict
        if module == "torch" and name == "Size":
            return tuple
        if module in _MODULES and _NAME.match(name):
            return _Inert(f"{module}.{name}")
        raise pickle.UnpicklingError(f"names {module}.{name}, which a recording never holds")

    def persistent_load(self, pid: object) -> _Inert:
        return _Inert("storage")  # a tensor's bytes: never read


def recordings(path: Path) -> list[Path]:
    """``path`` itself, or every ``*.pt`` under the folder ``path``."""
    if path.is_dir():
        found = sorted(p for p in path.rglob(f"*{SUFFIX}") if p.is_file())
        if not found:
            raise RecordingError(f"--parity {path}: no recording (*{SUFFIX}) in this folder")
        return found
    if not path.is_file():
        raise RecordingError(f"--parity {path}: no such file or folder (a recording is the "
                             "cases.pt beside an accelerator's result, or a folder of them)")
    return [path]


def read(path: Path) -> Recording:
    """The recording at ``path``: its header and each case's verdict."""
    data = _load(path)
    found = data.get("recorded")
    header: dict[str, Any] = found if isinstance(found, dict) else {}
    cases = tuple(_case(path, i, c) for i, c in enumerate(data["cases"]))
    return Recording(path=str(path), device=_text(header, "device"),
                     torch=_text(header, "torch"), at=_text(header, "at"), cases=cases)


def read_all(paths: Sequence[Path]) -> list[Recording]:
    return [read(p) for p in paths]


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def _load(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise RecordingError(f"{path}: larger than a recording is read ({MAX_FILE_BYTES} "
                                 "bytes)")
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith("/data.pkl")]
            if len(names) != 1:
                raise RecordingError(f"{path}: not a torch.save file (no single data.pkl)")
            info = archive.getinfo(names[0])
            if info.file_size > MAX_PICKLE_BYTES:
                raise RecordingError(f"{path}: its pickle is {info.file_size} bytes, more than "
                                     f"a recording's cases take ({MAX_PICKLE_BYTES})")
            data = _Reader(io.BytesIO(archive.read(info))).load()
    except (OSError, zipfile.BadZipFile, pickle.UnpicklingError, EOFError, ValueError,
            TypeError, IndexError, KeyError, AttributeError, RecursionError) as exc:
        raise RecordingError(f"{path}: not a recording this report reads ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordingError(f"{path}: not an oota recording (no format '{FORMAT}')")
    if data.get("version") != VERSION or not isinstance(data.get("cases"), list):
        raise RecordingError(f"{path}: recording version {data.get('version')!r}, or no list "
                             f"of cases; this report reads version {VERSION}")
    return data


def _case(path: Path, index: int, case: object) -> RecordedCase:
    where = f"{path}: case {index}"
    if not isinstance(case, dict):
        raise RecordingError(f"{where}: not a case (a mapping)")
    verdict = case.get("verdict")
    op, dtype = case.get("op"), case.get("dtype")
    status = verdict.get("status") if isinstance(verdict, dict) else None
    if not isinstance(op, str) or not isinstance(dtype, str) or status not in VERDICTS:
        raise RecordingError(f"{where}: needs op and dtype (text) and a verdict whose status "
                             f"is one of {', '.join(VERDICTS)}")
    message = verdict.get("message") if isinstance(verdict, dict) else ""
    return RecordedCase(op=op, dtype=dtype, status=str(status), file=str(path), index=index,
                        message=message if isinstance(message, str) else "")
