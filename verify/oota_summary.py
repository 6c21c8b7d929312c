"""What ``oota-verify`` prints after the suite: this cell's report, and how the run compares
with the verification the image was published with.

The report has the same content as the cell's part of oota's compatibility report: one line
per layer, the models with their time, peak device memory and largest difference from the CPU,
the workload figures (loss curve, latency, throughput, peak memory) where the vendor runs that
layer, and every test that did not pass with its reason. An image that oota verified carries that
verification in ``/opt/oota/expected.json`` (format ``oota.expected/v1``); the comparison says
which tests now end differently, so a user sees at once whether their host behaves like the
one the image was verified on. Standard library only: it must work in any image.

The statuses, their order and the layers are oota's own (``oota/vocab.py``), shipped into the
image as ``oota_vocab.py`` beside this file. In a checkout (``invoke verify --here``) there is
no copy here: the checkout's ``oota/vocab.py`` is loaded under the same name instead, so the
suite's other files simply ``import oota_vocab`` after this one.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

EXPECTED_FILE = Path("/opt/oota/expected.json")


def _load_vocab() -> None:
    """Make ``import oota_vocab`` work: beside this file in an image, oota/vocab.py in a
    checkout (registered under the image's name, so both layouts import it alike)."""
    if importlib.util.find_spec("oota_vocab") is not None:
        return
    source = Path(__file__).resolve().parent.parent / "oota" / "vocab.py"
    spec = importlib.util.spec_from_file_location("oota_vocab", source)
    if spec is None or spec.loader is None or not source.is_file():
        raise ImportError(f"oota_vocab.py is missing beside {__file__} (and {source} too)")
    module = importlib.util.module_from_spec(spec)
    sys.modules["oota_vocab"] = module
    spec.loader.exec_module(module)


_load_vocab()
import oota_vocab  # noqa: E402 - found by _load_vocab
from oota_vocab import (  # noqa: E402
    COUNT_COLUMNS,
    DATABASE_UNITS,
    FALLBACK,
    FLAKY,
    NOT_CLAIMED,
    UNRUN_KEY,
    budget_blind,
    layer_counts,
    not_compared_reason,
    run_status,
    unrun_by_id,
    worst,
)

COLUMN_TITLE = {"unsupported-here": "n/a here", "cpu-fallback": "ran on CPU",
                "not-claimed": "not claimed", "flaky": "flaky"}
MARK = {"passed": "✓", "failed": "✗", "error": "✗", "interrupted": "stopped", "skipped": "skip",
        "unsupported-here": "n/a here", "cpu-fallback": "on CPU", "not-claimed": "not claimed",
        "flaky": "≈ flaky", "": "–"}


def normalized(test: dict[str, Any]) -> tuple[str, str]:
    """(status, message) with the suite's unsupported-here skips given their own status."""
    return oota_vocab.normalized(str(test.get("status", "error")), str(test.get("message") or ""))


def report(cell: dict[str, Any], tests: list[dict[str, Any]]) -> str:
    by_layer: dict[str, list[str]] = {}
    for test in tests:
        by_layer.setdefault(test.get("layer", "vendor"), []).append(normalized(test)[0])
    toolkit = f", {cell['toolkit']} {cell['toolkit_version']}" if cell.get("toolkit") else ""
    lines = [f"oota-verify report: {cell.get('id', '?')} (torch {cell.get('torch')}, Python "
             f"{cell.get('python')}{toolkit}, device {cell.get('device')}): "
             f"{MARK.get(run_status((k, s) for k, v in by_layer.items() for s in v), '?')}", ""]
    counts = layer_counts((layer, s) for layer, states in by_layer.items() for s in states)
    # 'ran on CPU' (operators the backend's CPU fallback computed) and 'not claimed' (capabilities
    # the vendor does not claim) and 'flaky' (passed on a retry) only where a layer has any.
    columns = [c for c in COUNT_COLUMNS
               if c not in (FALLBACK, NOT_CLAIMED, FLAKY) or any(n[c] for n in counts.values())]
    lines += ["| layer | result | " + " | ".join(COLUMN_TITLE.get(c, c) for c in columns) + " |",
              "|---|---|" + "---|" * len(columns)]
    for layer, n in counts.items():  # the counts the report shows too (oota_vocab)
        lines.append(f"| {layer} | {MARK.get(worst(by_layer[layer]), '?')} | "
                     + " | ".join(str(n[c]) for c in columns) + " |")
    lines += _models(tests) + _workload(tests) + _not_passed(tests)
    return "\n".join(lines)


def _models(tests: list[dict[str, Any]]) -> list[str]:
    rows = [t for t in tests if t.get("layer") == "models" and (t.get("data") or {}).get("model")]
    if not rows:
        return []
    out = ["", "| model | result | seconds | peak device bytes | max abs diff vs CPU |",
           "|---|---|---|---|---|"]
    for test in rows:
        data = test["data"]
        out.append(f"| {data['model']} | {MARK.get(normalized(test)[0], '?')} | "
                   f"{data.get('seconds', '–')} | {data.get('peak_bytes') or '–'} | "
                   f"{data.get('max_abs_diff', '–')} |")
    return out


def _figure(value: Any, fmt: str) -> str:
    """A recorded number, or '–' where the test recorded none (absent is not zero)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return format(value, fmt) if ok else "–"


def _workload(tests: list[dict[str, Any]]) -> list[str]:
    rows = [t for t in tests
            if t.get("layer") == "workload" and (t.get("data") or {}).get("model")]
    if not rows:
        return []
    out = ["", "| workload | result | loss first → final | max loss diff vs CPU | "
           "latency median s | latency p90 s | train steps/s | peak device bytes |",
           "|---|---|---|---|---|---|---|---|"]
    for test in rows:
        data = test["data"]
        # No CPU curve on the CPU vendor: the test says why (vs_cpu), shown instead of '–'.
        versus = _figure(data.get("loss_max_dev_vs_cpu"), ".3g")
        if versus == "–" and str(data.get("vs_cpu", "")).startswith("n/a"):
            versus = str(data["vs_cpu"])
        out.append(f"| {data['model']} | {MARK.get(normalized(test)[0], '?')} | "
                   f"{_figure(data.get('loss_first'), '.4g')} → "
                   f"{_figure(data.get('loss_final'), '.4g')} | {versus} | "
                   f"{_figure(data.get('latency_median_s'), '.3g')} | "
                   f"{_figure(data.get('latency_p90_s'), '.3g')} | "
                   f"{_figure(data.get('train_steps_per_s'), '.3g')} | "
                   f"{_figure(data.get('peak_device_bytes'), '.0f')} |")
    return out


# The layers that walk one of PyTorch's test databases skip hundreds of entries: counted by
# why, not listed; each with what one of its tests is (oota_vocab.DATABASE_UNITS, in ASCII; the
# distributed layer's are its collectives).
COUNTED = {**{layer: unit.replace("×", " x ") for layer, unit in DATABASE_UNITS.items()},
           "distributed": "collectives"}


def _not_passed(tests: list[dict[str, Any]]) -> list[str]:
    out = []
    skipped: dict[str, dict[str, int]] = {}  # layer -> reason -> entries
    fell_back: dict[str, dict[str, int]] = {}  # layer -> aten operator -> pairs that called it
    for test in tests:
        status, message = normalized(test)
        layer = str(test.get("layer") or "vendor")
        if status == FALLBACK:
            names = fell_back.setdefault(layer, {})
            for name in (test.get("data") or {}).get("fallback_ops") or ["?"]:
                names[name] = names.get(name, 0) + 1
            continue
        # The entries the time budget left unrun are one entry already, listed with its count.
        if status == "skipped" and layer in COUNTED and UNRUN_KEY not in (
                test.get("data") or {}):
            reasons = skipped.setdefault(layer, {})
            reason = not_compared_reason(message)
            reasons[reason] = reasons.get(reason, 0) + 1
        elif status != "passed":
            out.append(f"- {test['id']}: {status}" + (f": {message.splitlines()[0]}"
                                                      if message else ""))
    out += _counted(tests, skipped, fell_back)
    return ["", "Not passed:"] + out if out else []


def _counted(tests: list[dict[str, Any]], skipped: dict[str, dict[str, int]],
             fell_back: dict[str, dict[str, int]]) -> list[str]:
    """The lines of the entries counted by why (per layer) and of the pairs that ran on the
    backend's CPU fallback (per layer, by aten operator)."""
    out = []
    for layer, reasons in skipped.items():
        counts = ", ".join(f"{n} {why}" for why, n in _most_first(reasons))
        out.append(f"- {layer} layer: {sum(reasons.values())} {COUNTED[layer]} not compared: "
                   f"{counts} (each reason is in tests.json)")
    for layer, names in fell_back.items():
        pairs = sum(1 for t in tests if normalized(t)[0] == FALLBACK and t.get("layer") == layer)
        shown = ", ".join(f"aten::{name} ({n})" for name, n in _most_first(names))
        out.append(f"- {layer} layer: {pairs} operator x dtype pairs ran on the CPU (the "
                   f"backend's fallback), not on the device: {shown}")
    return out


def _most_first(counts: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _outcome(status: str) -> str:
    """What a comparison cares about: a skip here and an n/a there both mean 'did not run'."""
    return {"skipped": "not run", "unsupported-here": "not run", "error": "failed"}.get(status,
                                                                                     status)


def compare(expected: dict[str, Any], tests: list[dict[str, Any]]) -> str:
    """How this run's outcomes differ from the verification the image carries. Which operators
    the ops layer's time budget reaches depends on the host's speed: pairs it left unrun in
    either run are not compared (nor, in a run that folded them into one entry, the pairs the
    other run holds alone), and the note says how many it left unrun in each."""
    then = {t["id"]: t for t in expected.get("tests", [])}
    now = {t["id"]: t for t in tests}
    unrun_then, unrun_now = unrun_by_id(then.values()), unrun_by_id(now.values())
    blind = budget_blind(unrun_then, unrun_now)
    host = expected.get("host") or {}
    where = "a host with the hardware" if host.get("hardware") else "a host without the hardware"
    head = (f"Compared with its verification by {expected.get('verified_by', 'oota')} on "
            f"{expected.get('verified_at', '?')} ({where}; status {expected.get('status')}):")
    changes = []
    for test_id, test in now.items():
        if test_id in blind:
            continue
        before = normalized(then[test_id])[0] if test_id in then else "absent"
        status, message = normalized(test)
        if _outcome(before) != _outcome(status):
            why = f" ({message.splitlines()[0]})" if message else ""
            changes.append(f"- {test_id}: {before} then, {status} now{why}")
    left_out = len(then.keys() - now.keys() - blind)
    notes = [f"{left_out} of its tests did not run this time"] if left_out else []
    pairs_now, pairs_then = sum(unrun_now.values()), sum(unrun_then.values())
    if pairs_now or pairs_then:
        notes.append(f"the layers' time budgets left {pairs_now} entries (operator x dtype "
                     f"pairs, module x dtype pairs, ...) unrun this time and {pairs_then} then: "
                     "those are not compared")
    tail = f" ({'; '.join(notes)})" if notes else ""
    if not changes:
        return (f"{head} every one of the {len(now.keys() - blind)} tests ended the same "
                f"way{tail}.")
    return "\n".join([f"{head} {len(changes)} test(s) ended differently{tail}:", *changes])


def summary(cell_file: Path, tests_file: Path, expected_file: Path = EXPECTED_FILE) -> str:
    """The text oota-verify prints: the report, then the comparison when the image has one."""
    cell = json.loads(cell_file.read_text()) if cell_file.exists() else {}
    tests = json.loads(tests_file.read_text()).get("tests", [])
    parts = [report(cell, tests)]
    if expected_file.exists():
        try:
            expected = json.loads(expected_file.read_text())
        except (OSError, ValueError) as exc:
            parts.append(f"Cannot compare with the image's verification: {expected_file} is "
                         f"unreadable ({exc})")
        else:
            if isinstance(expected, dict) and expected.get("cell") == cell.get("id"):
                parts.append(compare(expected, tests))
    return "\n\n".join(parts)
