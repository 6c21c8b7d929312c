"""Report: the compatibility matrix, built as data from result files, then written by separate
writers (Markdown, JSON, static HTML). Reads nothing but ``results/*/result.json``."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oota import __version__
from oota.build import now
from oota.results import load_all, write_atomic, write_json

SYMBOL = {"passed": "✓", "failed": "✗", "error": "✗", "skipped": "skip",
          "unsupported-here": "n/a here"}
LAYERS = ("build", "install", "compat", "device", "models", "vendor")


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    generated_at: str
    results: list[dict[str, Any]]
    problems: list[str]

    @property
    def vendors(self) -> list[str]:
        return list(dict.fromkeys(r["cell"]["vendor"] for r in self.results))

    def cells(self, vendor: str) -> list[dict[str, Any]]:
        return [r for r in self.results if r["cell"]["vendor"] == vendor]


def layer_status(result: dict[str, Any], layer: str) -> tuple[str, str]:
    """(status, reason) of one layer of a cell: worst test status, reasons of skips."""
    if layer == "build":
        stage = result["stages"].get("build")
        if not stage:
            return ("", "")
        return stage["status"], stage.get("message", "")
    tests = [t for t in result["tests"] if t["layer"] == layer]
    if not tests:
        return ("", "")
    for status in ("error", "failed", "passed", "unsupported-here", "skipped"):
        hits = [t for t in tests if t["status"] == status]
        if hits:
            reason = "; ".join(sorted({t.get("message", "") for t in hits if t.get("message")}))
            return status, reason
    return ("", "")


def collect(results_dir: Path) -> Report:
    results, problems = load_all(results_dir)
    results.sort(key=lambda r: (r["cell"]["vendor"], r["cell"]["id"]))
    return Report(generated_at=now(), results=results, problems=problems)


def to_json(report: Report) -> dict[str, Any]:
    return {"schema": "oota.report/v1", "generated_at": report.generated_at,
            "toolkit": {"name": "oota", "version": __version__},
            "problems": report.problems,
            "cells": [{"id": r["cell"]["id"], "status": r["status"], "cell": r["cell"],
                       "summary": r["summary"],
                       "layers": {layer: layer_status(r, layer)[0] for layer in LAYERS
                                  if layer_status(r, layer)[0]},
                       "torch_installed": r.get("installed", {}).get("torch", {}),
                       "result": f"../results/{r['cell']['id']}/result.json"}
                      for r in report.results]}


def _coords(result: dict[str, Any]) -> str:
    cell = result["cell"]
    toolkit = f" {cell['toolkit']} {cell['toolkit_version']}" if cell.get("toolkit") else ""
    return f"torch {cell['torch']}{toolkit}, py{cell['python']}, {cell['os']}"


def to_markdown(report: Report) -> str:
    lines = ["# oota compatibility matrix", "",
             f"Generated {report.generated_at} by oota {__version__} from "
             f"{len(report.results)} result files. ✓ passed, ✗ failed, "
             "skip: skipped (reason in the notes), n/a here: the host lacks the hardware.", ""]
    notes: list[str] = []
    for vendor in report.vendors:
        lines += [f"## {vendor}", "",
                  "| cell | " + " | ".join(LAYERS) + " | overall | torch installed |",
                  "|---|" + "---|" * (len(LAYERS) + 2)]
        for result in report.cells(vendor):
            row = [f"`{result['cell']['id']}`"]
            for layer in LAYERS:
                status, reason = layer_status(result, layer)
                mark = SYMBOL.get(status, "–")
                if reason and status not in ("passed",):
                    notes.append(f"{result['cell']['id']} {layer}: {reason.splitlines()[0]}")
                    mark += f" [{len(notes)}]"
                row.append(mark)
            row.append(f"**{SYMBOL.get(result['status'], result['status'])}**")
            torch = result.get("installed", {}).get("torch", {})
            row.append(f"`{torch.get('version', '?')}`" if torch else "–")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    if notes:
        lines += ["### Notes", ""] + [f"{i}. {n}" for i, n in enumerate(notes, 1)] + [""]
    if report.problems:
        lines += ["### Result files that could not be read", ""] + \
                 [f"- {p}" for p in report.problems] + [""]
    return "\n".join(lines)


_CSS = """body{font-family:system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;margin-bottom:2rem}td,th{border:1px solid #ccc;padding:.3rem .6rem}
th{background:#f4f4f4}.passed{background:#e6f6e6}.failed,.error{background:#fbe3e3}
.skipped,.unsupported-here{background:#f7f3dc}code{font-size:.9em}"""


def to_html(report: Report, out_dir: Path, results_dir: Path) -> str:
    esc = html.escape
    rel = os.path.relpath(results_dir, out_dir)
    parts = ["<!doctype html><html lang=en><head><meta charset=utf-8>",
             "<title>oota compatibility matrix</title>", f"<style>{_CSS}</style></head><body>",
             "<h1>oota compatibility matrix</h1>",
             f"<p>Generated {esc(report.generated_at)} by oota {esc(__version__)} from "
             f"{len(report.results)} result files. Hover a cell for the reason of a skip or "
             "failure.</p>"]
    for vendor in report.vendors:
        parts.append(f"<h2>{esc(vendor)}</h2><table><tr><th>cell</th>"
                     + "".join(f"<th>{esc(layer)}</th>" for layer in LAYERS)
                     + "<th>overall</th><th>torch installed</th><th>files</th></tr>")
        for result in report.cells(vendor):
            cid = result["cell"]["id"]
            parts.append(f"<tr><td><code>{esc(cid)}</code><br><small>{esc(_coords(result))}"
                         "</small></td>")
            for layer in LAYERS:
                status, reason = layer_status(result, layer)
                parts.append(f"<td class='{esc(status)}' title='{esc(reason)}'>"
                             f"{esc(SYMBOL.get(status, '–'))}</td>")
            status = result["status"]
            torch = result.get("installed", {}).get("torch", {})
            links = [f"<a href='{esc(rel)}/{esc(cid)}/{name}'>{name}</a>"
                     for name in ("result.json", "junit.xml", "build.log", "verify.log")
                     if (results_dir / cid / name).exists()]
            parts.append(f"<td class='{esc(status)}' title='{esc(result.get('message', ''))}'>"
                         f"<b>{esc(SYMBOL.get(status, status))}</b></td>"
                         f"<td><code>{esc(torch.get('version', '–'))}</code><br><small>"
                         f"{esc(str(torch.get('source', '')))}</small></td>"
                         f"<td>{' '.join(links)}</td></tr>")
        parts.append("</table>")
    if report.problems:
        parts.append("<h2>Unreadable result files</h2><ul>"
                     + "".join(f"<li>{esc(p)}</li>" for p in report.problems) + "</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(results_dir: Path, out_dir: Path) -> Report:
    report = collect(results_dir)
    write_atomic(out_dir / "matrix.md", to_markdown(report))
    write_json(out_dir / "results.json", to_json(report))
    write_atomic(out_dir / "index.html", to_html(report, out_dir, results_dir))
    return report
