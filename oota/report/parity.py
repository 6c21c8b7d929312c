"""Parity with a reference device: per operator × dtype, whether it passes on the reference
(a recording of PyTorch's own stack on known-good hardware: ``report --parity PATH``) and on
each vendor's device, as ROCm's parity report sets ROCm beside CUDA.

The reference's verdict of a pair is the worst of its recorded cases' (a failure wins over a
pass, a pass over a skip), as recorded: judging again needs torch (:mod:`oota.report.recorded`).
A vendor's pair passes only on its device's own kernels (the operators table's ✓) in every
cell of the vendor that compared it; a fallback to the CPU, a missing kernel, a failure, a
skip or a pair not run is no pass. As in ROCm's report since ROCm/pytorch#3371, a pair the
vendor does not pass counts against it only where the reference passed it ("only on the
reference"); a pair the reference did not pass and the vendor did is "only on the vendor's
device"; pairs the recording does not hold are counted apart. Pure, but for :func:`load`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oota.report.coverage import DEVICE, NOT_COMPARED, WORDS, category, pair_of
from oota.report.recorded import Recording, read_all, recordings
from oota.report.rows import CellGroup
from oota.results.jsonfields import JSONObject
from oota.vocab import MaybeStatus, worst

BOTH, REFERENCE, VENDOR, NEITHER = "both", "reference only", "vendor only", "neither"
CLASSES: Final = (BOTH, REFERENCE, VENDOR, NEITHER)
SYMBOL: Final = {BOTH: "=", REFERENCE: "ref", VENDOR: "dev", NEITHER: "–"}
WORDS_OF: Final = {BOTH: "passes on both", REFERENCE: "passes only on the reference",
                   VENDOR: "passes only on the vendor's device", NEITHER: "passes on neither"}
NOT_IN_REFERENCE: Final = "not in the reference"
ROWS_SHOWN: Final = 200  # "only on the reference" rows in matrix.md; index.html has all


@dataclass(frozen=True, kw_only=True, slots=True)
class Reference:
    """The recordings named by ``--parity``: each pair's verdict, and what they are."""

    label: str
    files: tuple[str, ...]
    verdicts: tuple[tuple[tuple[str, str], str], ...]  # ((op, dtype), status), sorted

    @property
    def cases(self) -> dict[tuple[str, str], str]:
        return dict(self.verdicts)


def load(path: Path) -> Reference:
    """The reference at ``path`` (a recording, or a folder of them)."""
    return reference(read_all(recordings(path)), str(path))


def reference(found: Sequence[Recording], name: str) -> Reference:
    per: dict[tuple[str, str], list[MaybeStatus]] = {}
    for recording in found:
        for case in recording.cases:
            status: MaybeStatus = "failed" if case.status == "failed" else \
                "passed" if case.status == "passed" else "skipped"
            per.setdefault((case.op, case.dtype), []).append(status)
    devices = sorted({f"{r.device}, torch {r.torch}" for r in found if r.device})
    days = sorted({r.at[:10] for r in found if r.at})
    cases = sum(len(r.cases) for r in found)
    label = (f"{'; '.join(devices) or name} (recorded {', '.join(days) or 'on an unknown day'}: "
             f"{cases} cases in {len(found)} files, verdicts as recorded)")
    return Reference(label=label, files=tuple(r.path for r in found),
                     verdicts=tuple(sorted((k, worst(v)) for k, v in per.items())))


@dataclass(frozen=True, kw_only=True, slots=True)
class VendorParity:
    vendor: str
    counts: tuple[tuple[str, int], ...]  # (class, pairs) in CLASSES order, then not in reference
    gaps: tuple[tuple[str, int], ...] = ()  # "only on the reference": how the vendor's ended

    def get(self, what: str) -> int:
        return dict(self.counts).get(what, 0)

    @property
    def text(self) -> str:
        shown = [f"{self.get(c)} {WORDS_OF[c]}" for c in CLASSES]
        if self.gaps:
            shown[1] += " (" + ", ".join(f"{n} {how}" for how, n in self.gaps) + ")"
        return f"{self.vendor}: " + ", ".join(shown) + (
            f"; {self.get(NOT_IN_REFERENCE)} pairs it compared are {NOT_IN_REFERENCE}")


@dataclass(frozen=True, kw_only=True, slots=True)
class ParityRow:
    op: str
    dtype: str
    reference: str  # the reference's verdict: passed, failed or skipped
    entries: tuple[tuple[str, str], ...]  # per vendor: (class, how the vendor's pair ended)


@dataclass(frozen=True, kw_only=True, slots=True)
class ParityTable:
    reference: Reference
    vendors: tuple[VendorParity, ...]
    rows: tuple[ParityRow, ...]

    def only_on_reference(self) -> list[ParityRow]:
        return [r for r in self.rows if any(c == REFERENCE for c, _ in r.entries)]

    def to_json(self) -> JSONObject:
        names = [v.vendor for v in self.vendors]
        return {"reference": self.reference.label, "files": list(self.reference.files),
                "vendors": {v.vendor: {**dict(v.counts), "reference only, by how the vendor's "
                                       "pair ended": dict(v.gaps)} for v in self.vendors},
                "pairs": [{"op": r.op, "dtype": r.dtype, "reference": r.reference,
                           "vendors": {n: {"parity": c, "vendor": how}
                                       for n, (c, how) in zip(names, r.entries, strict=True)}}
                          for r in self.rows]}


def _vendor_pairs(groups: Sequence[CellGroup]) -> dict[tuple[str, str], str]:
    """Each pair the vendor's cells hold -> how it ended over them: the coverage category,
    DEVICE only where every cell that compared it passed it on the device."""
    per: dict[tuple[str, str], set[str]] = {}
    for group in groups:
        for test in group.worst_copy.tests:
            pair = pair_of(test)
            if pair is not None:
                per.setdefault(pair, set()).add(category(test))
    found = {}
    for pair, kinds in per.items():
        compared = kinds - {NOT_COMPARED}
        found[pair] = DEVICE if compared == {DEVICE} else next(
            (k for k in compared if k != DEVICE), NOT_COMPARED)
    return found


def _class(reference: str, vendor: str) -> str:
    on_reference, on_device = reference == "passed", vendor == DEVICE
    return BOTH if on_reference and on_device else REFERENCE if on_reference else \
        VENDOR if on_device else NEITHER


def parity_table(ref: Reference, groups: Sequence[CellGroup],
                 vendors: Sequence[str]) -> ParityTable | None:
    """The table over the report's ``groups``; None when no vendor ran an operator."""
    pairs = {v: _vendor_pairs([g for g in groups if g.vendor == v]) for v in vendors}
    shown = [v for v in vendors if pairs[v]]
    if not shown:
        return None
    cases = ref.cases
    rows = tuple(ParityRow(op=op, dtype=dtype, reference=status, entries=tuple(
        (_class(status, pairs[v].get((op, dtype), NOT_COMPARED)),
         WORDS[pairs[v].get((op, dtype), NOT_COMPARED)]) for v in shown))
        for (op, dtype), status in ref.verdicts)
    parities = []
    for i, vendor in enumerate(shown):
        counts = {c: sum(r.entries[i][0] == c for r in rows) for c in CLASSES}
        counts[NOT_IN_REFERENCE] = sum(pair not in cases and kind != NOT_COMPARED
                                       for pair, kind in pairs[vendor].items())
        gaps = Counter(r.entries[i][1] for r in rows if r.entries[i][0] == REFERENCE)
        parities.append(VendorParity(vendor=vendor, counts=tuple(counts.items()),
                                     gaps=tuple(sorted(gaps.items(),
                                                       key=lambda kv: (-kv[1], kv[0])))))
    return ParityTable(reference=ref, vendors=tuple(parities), rows=rows)
