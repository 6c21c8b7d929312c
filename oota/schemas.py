"""The published JSON schemas (``schema/*.json``): loaded once each, and one way to list how a
document breaks one. Loaders (vendor.yaml, hosts.yaml) locate problems themselves
(:mod:`oota.config.schemacheck`); writers (results, the CRCR payload) check what they write."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import jsonschema

from oota import times
from oota.resources import shipped

SCHEMA_DIR = shipped("schema")


@functools.cache
def load(name: str) -> Mapping[str, Any]:
    """``schema/<name>``, read-only."""
    loaded: dict[str, Any] = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    return MappingProxyType(loaded)


@functools.cache
def _formats() -> jsonschema.FormatChecker:
    """The ``format`` keywords enforced, not only annotated (jsonschema's default): a
    ``date-time`` must be a time :mod:`oota.times` accepts."""
    checker = jsonschema.FormatChecker(formats=())
    checker.checks("date-time", raises=times.BadTime)(times.valid_or_raise)
    return checker


def errors(name: str, data: Mapping[str, object]) -> list[str]:
    """Every way ``data`` breaks ``schema/<name>``, as 'path: message', in path order; its
    formats are checked (:func:`_formats`)."""
    validator = jsonschema.Draft202012Validator(load(name), format_checker=_formats())
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: "
            f"{e.cause if e.validator == 'format' and e.cause else e.message}"
            for e in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))]
