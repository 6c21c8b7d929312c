"""Result files: one ``result.json`` per cell (schema ``schema/result-v1.json``) and its JUnit XML.

Every write is atomic (temporary file + rename in the same folder), so a crash or Ctrl-C
never leaves a half-written result for ``report`` to trip over.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import jsonschema

from oota.files import write_atomic, write_json

SCHEMA_ID = "oota.result/v1"
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema" / "result-v1.json"
STATUSES = ("passed", "failed", "skipped", "unsupported-here", "error")
RESULT_FILE = "result.json"


def now() -> str:
    """The time results are stamped with: UTC, to the second, ISO 8601."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def validation_errors(result: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema())
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in sorted(validator.iter_errors(result), key=lambda e: list(e.absolute_path))]


def summarize(tests: list[dict[str, Any]], stages: dict[str, dict[str, Any]]) -> dict[str, int]:
    counts = {status: 0 for status in STATUSES}
    for test in tests:
        counts[test["status"]] += 1
    for stage in stages.values():
        if stage["status"] in ("failed", "error"):
            counts[stage["status"]] += 1
    return {k: v for k, v in counts.items() if v}


def overall_status(tests: list[dict[str, Any]], stages: dict[str, dict[str, Any]]) -> str:
    states = [s["status"] for s in stages.values()] + [t["status"] for t in tests]
    for status in ("interrupted", "error", "failed"):
        if status in states:
            return status
    if "unsupported-here" in states:
        # Not fully verified on this host (no hardware): never reported as a pass.
        return "unsupported-here"
    if "passed" in states:
        return "passed"
    return "skipped" if states else "error"


def junit_xml(result: dict[str, Any]) -> str:
    """JUnit XML for CI systems: one testsuite per cell, stages and tests as testcases."""
    cell = result["cell"]["id"]
    cases = [{"id": f"stage::{name}", "layer": "stage", **stage}
             for name, stage in result["stages"].items()] + result["tests"]
    suite = ET.Element("testsuite", name=cell, tests=str(len(cases)),
                       failures=str(sum(c["status"] == "failed" for c in cases)),
                       errors=str(sum(c["status"] == "error" for c in cases)),
                       skipped=str(sum(c["status"] in ("skipped", "unsupported-here")
                                       for c in cases)),
                       time=f"{sum(c.get('duration_s', 0) for c in cases):.3f}")
    for case in cases:
        node = ET.SubElement(suite, "testcase", classname=f"{cell}.{case['layer']}",
                             name=case["id"], time=f"{case.get('duration_s', 0):.3f}")
        message = case.get("message", "")
        if case["status"] == "failed":
            ET.SubElement(node, "failure", message=message[:500]).text = message
        elif case["status"] == "error":
            ET.SubElement(node, "error", message=message[:500]).text = message
        elif case["status"] in ("skipped", "unsupported-here"):
            ET.SubElement(node, "skipped", message=f"{case['status']}: {message}"[:500])
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def save(folder: Path, result: dict[str, Any]) -> None:
    """Validate and write result.json and junit.xml into ``folder``."""
    problems = validation_errors(result)
    if problems:
        raise ValueError("result does not match schema/result-v1.json:\n  " + "\n  ".join(problems))
    write_json(folder / RESULT_FILE, result)
    write_atomic(folder / "junit.xml", junit_xml(result))


def load_all(results_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every readable, valid result under ``results_dir``; problems with the others as text."""
    found, problems = [], []
    for path in sorted(results_dir.glob(f"*/{RESULT_FILE}")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            problems.append(f"{path}: unreadable ({exc})")
            continue
        errors = validation_errors(data)
        if errors:
            problems.append(f"{path}: does not match the schema: {errors[0]}")
            continue
        found.append(data)
    return found, problems
