"""The JSON writer: ``reports/results.json``, the report as data for other tools."""

from __future__ import annotations

from oota import __version__
from oota.report.data import COLUMNS, Report
from oota.results.model import JSONObject

REPORT_SCHEMA = "oota.report/v2"


def to_json(report: Report, results_href: str = "../results") -> JSONObject:
    """``results_href``: the results folder relative to the report folder."""
    return {
        "schema": REPORT_SCHEMA, "generated_at": report.generated_at,
        "toolkit": {"name": "oota", "version": __version__}, "problems": list(report.problems),
        "vendors": list(report.vendors), "counts": dict(report.counts), "layers": list(COLUMNS),
        "models": [{"model": m.model, "vendors": {v: k.to_json() for v, k in m.marks.items()}}
                   for m in report.models],
        "cells": [{"id": row.id, "vendor": row.vendor, "status": row.status,
                   "message": row.message, "cell": result.cell.to_json(),
                   "summary": dict(result.summary),
                   "layers": {k: v.to_json() for k, v in row.layers.items() if v.status},
                   "torch_installed": row.torch.to_json(), "image": row.image.to_json(),
                   "page": f"cells/{row.id}.html",
                   "result": f"{results_href}/{row.id}/result.json"}
                  for row, result in zip(report.rows, report.results, strict=True)],
        "skip_debt": [d.to_json() for d in report.skip_debt],
        "comparison": report.comparison.to_json() if report.comparison else None}
