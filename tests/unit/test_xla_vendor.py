"""PyTorch/XLA's own data files (vendors/xla/): the PJRT clients of verify/pjrt.yaml, whose
keys are vendor.yaml's and so are checked by vendor.yaml's schema, key by key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from oota.config.vendors import schema

REPO = Path(__file__).resolve().parents[2]
PJRT = yaml.safe_load((REPO / "vendors" / "xla" / "verify" / "pjrt.yaml").read_text())
# A client's own keys; the others are vendor.yaml's, with vendor.yaml's schema.
OWN = {"source", "unavailable"}
VENDOR_KEYS = ("requirements", "env", "host", "run")


def _part(key: str) -> dict[str, Any]:
    whole = schema()
    return {**whole["properties"][key], "$defs": whole.get("$defs", {})}


@pytest.mark.parametrize("client", sorted(PJRT))
def test_each_pjrt_client_is_vendor_yaml_data_with_its_source(client: str) -> None:
    entry = PJRT[client]
    assert set(entry) <= OWN | set(VENDOR_KEYS), sorted(set(entry) - OWN - set(VENDOR_KEYS))
    assert entry["source"].strip()
    for key in VENDOR_KEYS:
        if key in entry:
            jsonschema.validate(entry[key], _part(key))
    if "unavailable" not in entry:
        assert entry["env"] == {"PJRT_DEVICE": client}


def test_the_cells_run_the_cpu_client_the_matrix_needs_no_hardware_for() -> None:
    vendor = yaml.safe_load((REPO / "vendors" / "xla" / "vendor.yaml").read_text())
    assert vendor["env"]["PJRT_DEVICE"] == "CPU"
    assert PJRT["CPU"]["requirements"] == vendor["requirements"]
    assert "host" not in PJRT["CPU"]


def test_every_operator_skipped_failed_in_the_recorded_run() -> None:
    """skips.yaml skips an operator only where the XLA run failed it (pairs.json of the
    recordings) and names its source; an operator it passes is never skipped."""
    from oota.config.skips import load_skips

    run = REPO / "tests" / "data" / "recordings" / "xla-cpu-2026-11-26" / "pairs.json"
    failed = {pair.rsplit("-", 1)[0] for pair, verdict in
              yaml.safe_load(run.read_text())["pairs"].items() if verdict["status"] == "failed"}
    skips = load_skips(REPO / "vendors" / "xla" / "skips.yaml").entries
    operators = [e for e in skips if "::" not in e.id]
    assert len(operators) == 50
    assert [e.id for e in operators if e.id not in failed] == []
    listed = [e for e in operators if "PyTorch/XLA's own OpInfo test leaves" in e.reason]
    assert len(listed) == 48 and all("test/test_ops.py at v2.9.0, line " in e.reason
                                     for e in listed)
