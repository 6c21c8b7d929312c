"""How each device served the ops layer's operators, as PyTorch's dispatcher and the vendor's
fallback counters told the suite (verify/oota_dispatch.py, verify/oota_hooks.py): with the
device's own kernels, by falling back (the backend's boxed fallback, or its counters: the CPU
computed it), missing (its dispatch key has nothing for an operator a sample called), or
through PyTorch's composites on a key with a boxed fallback that no counter watched (where
their calls ran is not known). Per cell (its page) and per vendor (the operators table of
index.html and matrix.md). The CPU vendor's device is the CPU: it runs everything on its own
kernels, and nothing it runs is a fallback.

Results from before the suite recorded the dispatcher's view have no such data: their
operators are counted as not known, never as the device's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from oota.report.rows import TestRow
from oota.results.jsonfields import JSONObject
from oota.vocab import FALLBACK as FALLBACK_STATUS

OPS = "ops"
KERNEL, FALLBACK, MISSING, COMPOSITE = "kernel", "fallback", "missing", "composite"
# An operator's view is the first of these any of its pairs (dtypes, cells) has.
ORDER = (FALLBACK, MISSING, COMPOSITE, KERNEL)
SHOWN = (KERNEL, COMPOSITE, FALLBACK, MISSING)  # the order a sentence counts them in
WORDS = {KERNEL: "on its own kernels", FALLBACK: "fell back to the CPU",
         MISSING: "missing (no kernel for an operator a sample called)",
         COMPOSITE: "through composites, where they ran not known"}
CPU_KEY = "CPU"


def pair_view(test: TestRow) -> str:
    """How one operator × dtype was served; "" where the result says nothing of it. Where no
    sample ran on the device the suite asked the dispatcher by the operator's name: that says
    only what is missing, not where anything ran."""
    if test.status == FALLBACK_STATUS:
        return FALLBACK
    served = test.data.get("served")
    if not isinstance(served, str) or served not in ORDER:
        return ""
    return served if test.data.get("dispatch_from") != "name" or served == MISSING else ""


def _aten(test: TestRow, how: str) -> list[str]:
    """The aten operators the pair's samples called that the device served ``how``."""
    dispatch = test.data.get("dispatch")
    names = dispatch.get(how) if isinstance(dispatch, dict) else None
    found = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    if how == FALLBACK:
        counted = test.data.get("fallback_ops")
        found += [n for n in counted if isinstance(n, str)] if isinstance(counted, list) else []
    return found


@dataclass(frozen=True, kw_only=True, slots=True)
class ServedView:
    """One cell's or vendor's operators by how its device served them."""

    label: str
    key: str  # the device's dispatch key ('PrivateUse1'); '' where no result says
    boxed_fallback: bool  # the key has a boxed fallback
    operators: tuple[tuple[str, int], ...]  # (view, operators) in ORDER, none zero
    unknown: int  # operators none of whose pairs says (none ran there, or older results)
    fell_back: tuple[tuple[str, tuple[str, ...]], ...]  # aten operator -> operators calling it
    missing: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def own_device(self) -> bool:
        """The CPU vendor: its dispatch key is the CPU's."""
        return self.key == CPU_KEY

    def count(self, view: str) -> int:
        return dict(self.operators).get(view, 0)

    @property
    def text(self) -> str:
        """'PrivateUse1, with a boxed fallback: 3 operators on its own kernels, 35 fell back to
        the CPU'."""
        shown = [(v, dict(self.operators)[v]) for v in SHOWN if self.count(v)]
        counts = ", ".join(f"{_operators(n) if i == 0 else n} {WORDS[v]}"
                           for i, (v, n) in enumerate(shown))
        unknown = (f"{_operators(self.unknown)} not placed (no sample ran on the device, or "
                   "no dispatcher data)") if self.unknown else ""
        said = "; ".join(part for part in (counts, unknown) if part) or "no operator ran"
        if self.own_device:
            return (f"the CPU is its own device (dispatch key CPU): {said}; nothing it runs is "
                    "a fallback, and nothing is compared")
        boxed = "with a boxed fallback" if self.boxed_fallback else "no boxed fallback"
        return f"{self.key}, {boxed}: {said}" if self.key else said

    def to_json(self) -> JSONObject:
        return {"label": self.label, "dispatch_key": self.key,
                "boxed_fallback": self.boxed_fallback, "operators": dict(self.operators),
                "unknown": self.unknown,
                "fell_back": {name: list(ops) for name, ops in self.fell_back},
                "missing": {name: list(ops) for name, ops in self.missing}}


def _operators(count: int) -> str:
    return f"{count} operator{'' if count == 1 else 's'}"


def _by_aten(pairs: Iterable[TestRow], how: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    found: dict[str, set[str]] = {}
    for test in pairs:
        if pair_view(test) == how:
            for name in _aten(test, how):
                found.setdefault(name, set()).add(str(test.data["op"]))
    return tuple((name, tuple(sorted(found[name]))) for name in sorted(found))


def ops_pairs(tests: Iterable[TestRow]) -> list[TestRow]:
    """The ops layer's operator × dtype pairs among ``tests``."""
    return [t for t in tests if t.layer == OPS and isinstance(t.data.get("op"), str)]


def served_view(label: str, tests: Sequence[TestRow]) -> ServedView | None:
    """The view over ``tests`` (None where none is an ops-layer pair that ran)."""
    pairs = [t for t in ops_pairs(tests) if t.data.get("tried")]
    if not pairs:
        return None
    views: dict[str, set[str]] = {}
    for test in pairs:
        views.setdefault(str(test.data["op"]), set()).add(pair_view(test))
    counts: dict[str, int] = {}
    for seen in views.values():
        view = next((v for v in ORDER if v in seen), "")
        counts[view] = counts.get(view, 0) + 1
    keyed = next((t for t in pairs if isinstance(t.data.get("dispatch_key"), str)), None)
    return ServedView(
        label=label, key=str(keyed.data["dispatch_key"]) if keyed else "",
        boxed_fallback=bool(keyed and keyed.data.get("boxed_fallback")),
        operators=tuple((v, counts[v]) for v in ORDER if counts.get(v)),
        unknown=counts.get("", 0), fell_back=_by_aten(pairs, FALLBACK),
        missing=_by_aten(pairs, MISSING))
