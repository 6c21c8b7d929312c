"""The JSON writer: ``reports/results.json``, the report as data for other tools.

A merged report (``--merge``) adds ``merged_from`` (the folders), and to each cell its
``copies`` (one entry per host's result, with its origin) and ``agreement``/``differences``;
a report from one folder is unchanged.
"""

from __future__ import annotations

from oota import __version__
from oota.report.counts import flaky_shares
from oota.report.data import Report
from oota.report.rows import COLUMNS, CellGroup, CellRow, Links, Origin
from oota.results.jsonfields import JSON, JSONObject
from oota.results.model import Result

REPORT_SCHEMA = "oota.report/v2"


def _links(where: str | Links) -> Links:
    return where if isinstance(where, Links) else Links(results_rel=where)


def _copy(row: CellRow, result: Result, links: Links) -> JSONObject:
    return {"id": row.id, "vendor": row.vendor, "status": row.status,
            "message": row.message, "cell": result.cell.to_json(),
            "summary": dict(result.summary),
            "layers": {k: v.to_json() for k, v in row.layers.items() if v.status},
            "torch_installed": row.torch.to_json(), "image": row.image.to_json(),
            "workload": [w.to_json() for w in row.workload()],
            "compile": [c.to_json() for c in row.compiled()],
            "page": f"cells/{row.id}.html", "result": f"{links.cell(row)}/result.json"}


def _cell(group: CellGroup, results: dict[int, Result], links: Links,
          merged: bool) -> JSONObject:
    first = _copy(group.first, results[id(group.first)], links)
    if not merged:
        return first
    copies: list[JSON] = [
        _copy(row, results[id(row)], links) | {
            "page": f"cells/{row.id}.html#copy-{n}",
            "origin": {"label": row.origin, **Origin.of(results[id(row)]).to_json()}}
        for n, row in enumerate(group.copies, start=1)]
    return first | {
        "status": group.status, "message": group.worst_copy.message,
        "layers": {k: v.to_json() for k, v in group.layers.items() if v.status},
        "agreement": group.agreement, "differences": list(group.differences),
        "copies": copies}


def to_json(report: Report, results_href: str | Links = "../results") -> JSONObject:
    """``results_href``: the results folder relative to the report folder (or each cell
    folder's place, for a merged report)."""
    links = _links(results_href)
    results = {id(row): result for row, result in zip(report.rows, report.results, strict=True)}
    data: JSONObject = {
        "schema": REPORT_SCHEMA, "generated_at": report.generated_at,
        "toolkit": {"name": "oota", "version": __version__}, "problems": list(report.problems),
        "vendors": list(report.vendors), "counts": dict(report.counts), "layers": list(COLUMNS),
        "models": [{"model": m.model, "vendors": {v: k.to_json() for v, k in m.marks.items()}}
                   for m in report.models],
        "cells": [_cell(g, results, links, report.merged) for g in report.groups],
        "skip_debt": [d.to_json() for d in report.skip_debt],
        "flaky": [share.to_json() for share in flaky_shares(report)],
        "ops": [summary.to_json() for summary in report.ops],
        "autograd": [summary.to_json() for summary in report.autograd],
        "databases": [summary.to_json() for summary in report.databases],
        "coverage": report.coverage.to_json() if report.coverage else None,
        "parity": report.parity.to_json() if report.parity else None,
        "comparison": report.comparison.to_json() if report.comparison else None}
    if report.merged:
        data["merged_from"] = list(report.sources)
    return data
