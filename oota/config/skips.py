"""Skip lists as data: ``vendors/<name>/skips.yaml`` names the tests a vendor knowingly skips.

The file is a YAML list; each entry is a mapping::

    - id: "test_models.py::test_forward_and_train_step[gemma]"  # a test id, model name or pattern
      reason: bf16 matmul accumulates in fp16 on this chip (vendor bug 1234)
      owner: jane@example.com
      expires: 2027-03-31          # the entry is honoured through this day, then it fails the run
      added: 2026-11-21            # optional
      issue: https://github.com/vendor/torch-vendor/issues/1234   # optional: where it is tracked
      kind: xfail                  # optional: 'skip' (the default) or 'xfail'
      strict: true                 # optional, xfail only: an unexpected pass fails the run

An entry of kind ``xfail`` is an expected failure: the test runs; failing, it is reported
skipped as an expected failure (never a pass, never a failure of the cell); passing, the run
says "unexpected pass: remove the entry", and with ``strict: true`` that pass fails the run
(OpenReg's advice: an expected failure notices the day it starts to pass, a skip never does).

The host validates the file here (every problem named ``file:line:col: path``) and
:func:`oota.render.cell_manifest` copies the entries into ``cell.json``; the suite inside the
image applies them (``verify/oota_suite.py``): a matching test is reported skipped with the reason,
an expired entry fails the run until it is renewed or removed, and an entry that matches no test
is reported as unmatched. Expiry is judged where the suite runs, so a rebuilt image is not needed
for an entry to expire.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oota.config.fields import Fields
from oota.config.yamlsrc import Doc, Path_, did_you_mean, parse_yaml, read_text

SKIPS_FILE = "skips.yaml"
_KEYS = ("id", "reason", "owner", "expires", "added", "issue", "kind", "strict")
_REQUIRED = ("id", "reason", "owner", "expires")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
KINDS = ("skip", "xfail")
# An issue is a web address (a GitHub issue, a vendor's tracker): what a reader can open.
_URL = re.compile(r"https?://[^\s/]+\.[^\s/]+/\S*")


@dataclass(frozen=True, kw_only=True, slots=True)
class SkipEntry:
    id: str                    # a test id, a model name, or an fnmatch pattern over either
    reason: str
    owner: str
    expires: dt.date           # last day the entry is honoured
    added: dt.date | None = None
    issue: str = ""            # the address of the issue that tracks it, or ''
    kind: str = "skip"         # one of KINDS
    strict: bool = False       # xfail: an unexpected pass fails the run
    where: str = ""            # file:line:col of the entry, for messages

    def expired(self, today: dt.date) -> bool:
        return today > self.expires

    def to_json(self) -> dict[str, str | bool]:
        out: dict[str, str | bool] = {"id": self.id, "reason": self.reason, "owner": self.owner,
                                      "expires": self.expires.isoformat()}
        if self.added:
            out["added"] = self.added.isoformat()
        if self.issue:
            out["issue"] = self.issue
        if self.kind != "skip":
            out["kind"] = self.kind
        if self.strict:
            out["strict"] = True
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class SkipList:
    file: str
    entries: tuple[SkipEntry, ...] = ()

    def expired(self, today: dt.date) -> tuple[SkipEntry, ...]:
        return tuple(e for e in self.entries if e.expired(today))

    def to_json(self) -> list[dict[str, str | bool]]:
        return [e.to_json() for e in self.entries]


def load_skips(path: Path, display_name: str | None = None) -> SkipList:
    """Load a vendor's skip list; a vendor without ``skips.yaml`` skips nothing."""
    name = display_name or str(path)
    if not path.exists() and not path.is_symlink():  # a dangling link is an error, not "none"
        return SkipList(file=name)
    return parse_skips(read_text(path, name), name)


def parse_skips(text: str, name: str) -> SkipList:
    """Validate the text of a skip list; raise MatrixError listing every problem at once."""
    doc = _load_list(text, name)
    entries: list[SkipEntry] = []
    first_seen: dict[str, str] = {}
    for i, raw in enumerate(doc.data):
        entry = _entry(doc, (i,), raw)
        if entry is None:
            continue
        if entry.id in first_seen:
            doc.error((i, "id"), f"'{entry.id}' is listed twice (first at {first_seen[entry.id]})",
                      "merge the two entries")
            continue
        first_seen[entry.id] = doc.where((i,))
        entries.append(entry)
    doc.raise_if_problems()
    return SkipList(file=name, entries=tuple(entries))


def _entry(doc: Doc, path: Path_, raw: Any) -> SkipEntry | None:
    f = Fields(doc, path, raw, allowed=_KEYS, required=_REQUIRED)
    if not f.ok:
        return None
    before = len(doc.problems)
    texts = {key: _text(doc, f, path, key) for key in ("id", "reason", "owner")}
    expires = _date(doc, f, path, "expires")
    added = _date(doc, f, path, "added") if f.has("added") else None
    if expires and added and added > expires:
        doc.error(path + ("added",), f"added {added} is after expires {expires}",
                  "an entry cannot expire before it was added")
    issue = _issue(doc, f, path)
    kind = _kind(doc, f, path)
    strict = f.bool("strict") if f.has("strict") else False
    if strict and kind != "xfail":
        doc.error(path + ("strict",), "'strict' applies to an expected failure only",
                  "add 'kind: xfail' or remove 'strict'")
    if len(doc.problems) > before or expires is None:
        return None
    return SkipEntry(id=texts["id"], reason=texts["reason"], owner=texts["owner"],
                     expires=expires, added=added, issue=issue, kind=kind, strict=strict,
                     where=doc.where(path))


def _issue(doc: Doc, f: Fields, path: Path_) -> str:
    if not f.has("issue"):
        return ""
    value = f.str("issue").strip()
    if value and not _URL.fullmatch(value):
        doc.error(path + ("issue",), f"'{value}' is not a web address",
                  "write the issue's URL, e.g. https://github.com/pytorch/pytorch/issues/12345")
    return value


def _kind(doc: Doc, f: Fields, path: Path_) -> str:
    if not f.has("kind"):
        return "skip"
    value = f.str("kind")
    if value not in KINDS:
        doc.error(path + ("kind",), f"unknown kind '{value}'", did_you_mean(value, KINDS))
    return value


def _text(doc: Doc, f: Fields, path: Path_, key: str) -> str:
    if not f.has(key):
        return ""  # Fields already reported the missing key
    value = f.str(key)
    if isinstance(f.raw(key), str) and not value.strip():
        doc.error(path + (key,), f"'{key}' must not be empty")
    # An id names one test, on one line; a reason may be a folded YAML block, not a NUL.
    allowed = "" if key == "id" else "\n\t"
    control = next((c for c in value if c not in allowed
                    and unicodedata.category(c) in ("Cc", "Zl", "Zp")), None)
    if control is not None:
        doc.error(path + (key,), f"{value[:60]!r} holds the control character "
                  f"U+{ord(control):04X}", "remove it" + (" (an id is one line)"
                                                          if key == "id" else ""))
    return value.strip()


def _date(doc: Doc, f: Fields, path: Path_, key: str) -> dt.date | None:
    if not f.has(key):
        return None
    raw = f.raw(key)
    text = str(raw) if isinstance(raw, (str, int)) and not isinstance(raw, bool) else ""
    try:
        if not _DATE.fullmatch(text):
            raise ValueError(text)
        return dt.date.fromisoformat(text)
    except ValueError:
        doc.error(path + (key,), f"'{raw}' is not a date",
                  "write it as YYYY-MM-DD, e.g. 2027-03-31")
        return None


def _load_list(text: str, name: str) -> Doc:
    """A YAML document whose top level is a list of entries, with every value located."""
    return parse_yaml(text, name, top=list, expected="a list of skip entries (- id: ..., "
                      "reason: ..., owner: ..., expires: YYYY-MM-DD)",
                      if_empty="write [] for an empty skip list")
