"""What a benchmark measured, kept as data: ``benchmarks/results/<benchmark>-<date>.json``, with
the machine and the date, which the docs' performance page renders (``scripts/gen_docs.py``).

A benchmark given ``--record`` calls :func:`write` with its table; a figure measured another way
(a run of ``.ci/run``, read from its ``--durations``) is written in the same shape. Each file:

    {"benchmark": "benchmarks/bench_hud.py", "title": "...", "what": "what is measured",
     "date": "2026-11-27", "machine": {"summary": "2 CPUs (...), 24 GiB, Debian ...", ...},
     "command": "python benchmarks/bench_hud.py --runs 5 --record",
     "columns": [{"name": "median", "unit": "s"}, ...], "rows": [["hud", 0.9], ...],
     "notes": ["..."]}

A cell is a string, a number (shown with its column's unit) or null (not measured).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
Cell = str | int | float | None


def _first(path: str, key: str) -> str:
    """The value of the first ``key: value`` (or ``key=value``) line of ``path``, or ''."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    for line in lines:
        name, sep, value = line.replace("=", ":", 1).partition(":")
        if sep and name.strip() == key:
            return value.strip().strip('"')
    return ""


def machine() -> dict[str, object]:
    """This machine, as a result file names it: CPUs, their model, memory, OS, Python, and
    the load average before the run (a shared machine's figures move with its load)."""
    cpus = os.cpu_count() or 0
    model = _first("/proc/cpuinfo", "model name")
    memory_kib = _first("/proc/meminfo", "MemTotal").split(" ")[0]
    memory = round(int(memory_kib) / 2**20) if memory_kib.isdigit() else None
    system = _first("/etc/os-release", "PRETTY_NAME") or platform.platform()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    summary = f"{cpus} CPUs{f' ({model})' if model else ''}" \
              f"{f', {memory} GiB' if memory else ''}, {system}"
    return {"summary": summary, "cpus": cpus, "cpu_model": model, "memory_gib": memory,
            "os": system, "python": platform.python_version(), "load_before": load}


def command() -> str:
    """The command line that ran this benchmark, as a user would type it."""
    return shlex.join(["python", os.path.relpath(sys.argv[0], RESULTS.parent.parent),
                       *sys.argv[1:]])


def write(benchmark: str, *, title: str, what: str, columns: Sequence[tuple[str, str]],
          rows: Sequence[Sequence[Cell]], notes: Sequence[str] = (),
          folder: Path = RESULTS) -> Path:
    """``folder/<benchmark>-<today>.json`` (a second run on one day replaces the first);
    ``columns`` are (name, unit) pairs, '' for no unit."""
    if any(len(row) != len(columns) for row in rows):
        raise ValueError(f"{benchmark}: every row needs {len(columns)} cells")
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    stem = benchmark.removesuffix(".py")
    doc = {"benchmark": f"benchmarks/{benchmark}", "title": title, "what": what, "date": today,
           "machine": machine(), "command": command(),
           "columns": [{"name": name, "unit": unit} for name, unit in columns],
           "rows": [list(row) for row in rows], "notes": list(notes)}
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{stem}-{today}.json"
    partial = target.with_suffix(".json.new")
    partial.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    partial.replace(target)
    print(f"recorded: {target}")
    return target
