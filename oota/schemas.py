"""The published JSON schemas (``schema/*.json``): loaded once each, and one way to list how a
document breaks one. Loaders (vendor.yaml, hosts.yaml) locate problems themselves
(:mod:`oota.config.schemacheck`); writers (results, the CRCR payload) check what they write."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonschema

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schema"


@functools.cache
def load(name: str) -> Mapping[str, Any]:
    """``schema/<name>``, read-only."""
    loaded: dict[str, Any] = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    return MappingProxyType(loaded)


def errors(name: str, data: Mapping[str, object]) -> list[str]:
    """Every way ``data`` breaks ``schema/<name>``, as 'path: message', in path order."""
    validator = jsonschema.Draft202012Validator(load(name))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))]
