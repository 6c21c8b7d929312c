"""A recording checked against its format (``oota_cases``, version 1) before the judge uses
any of it: every field's type, every tree's depth and size, and every tensor's place, layout
and element count, counted from its shape before anything is allocated.

A recording is handed from a vendor to anyone, so nothing in it is trusted: a field of the
wrong type, a sample index of infinity, a tensor declaring 2^40 elements through stride 0,
results nested thousands deep or a meta tensor make that case (or, in the header, that file)
an error the replay names, never a crash that hides the cases after it. The checks walk trees
with an explicit stack (no recursion): a nesting past MAX_DEPTH is reported, not followed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MAX_FILE_BYTES = 512 << 20  # a recording larger than this is refused before it is read
MAX_DEPTH = 16  # nesting of lists, tuples and dicts in one part of a case
MAX_LEAVES = 100_000  # leaves in one part of a case
MAX_TENSOR_ELEMENTS = 1 << 24  # elements one tensor may declare (its shape's product)
MAX_SAMPLE = 10_000_000
MAX_TEXT = 10_000  # characters of a string field
CASE_KEYS = frozenset({"op", "dtype", "sample", "description", "device_type", "input", "args",
                       "kwargs", "cpu", "device", "reference", "rule", "verdict", "truncated"})
TREES = ("input", "args", "kwargs", "cpu", "device", "reference")
HEADER_TEXT = ("device", "device_type", "torch", "by", "at", "cell", "note")
STATUSES = ("passed", "failed", "skipped")


class SchemaError(ValueError):
    """A field that is not what the format says; the message names it."""


def _text(value: Any, where: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise SchemaError(f"{where} is a {type(value).__name__}, not text")
    if len(value) > limit:
        raise SchemaError(f"{where} is {len(value)} characters long (at most {limit})")
    return value


def check_header(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``recorded`` header: text fields, and ``settings`` of plain values."""
    recorded = data.get("recorded", {})
    if not isinstance(recorded, dict):
        raise SchemaError(f"'recorded' is a {type(recorded).__name__}, not a mapping")
    for key in HEADER_TEXT:
        if key in recorded:
            _text(recorded[key], f"recorded.{key}", 1000)
    settings = recorded.get("settings", {})
    if not isinstance(settings, dict):
        raise SchemaError(f"recorded.settings is a {type(settings).__name__}, not a mapping")
    for key, value in settings.items():
        if not isinstance(key, str) or not isinstance(value, (bool, str, int, float)):
            raise SchemaError(f"recorded.settings.{key!s:.40} is a {type(value).__name__}, "
                              "not a plain value")
    return recorded


def _tensor(value: Any, where: str) -> int:
    import torch

    if value.is_meta or value.device.type != "cpu":
        raise SchemaError(f"{where} is a tensor on '{value.device}', not on the CPU")
    if value.layout not in (torch.strided, torch.sparse_coo, torch.sparse_csr):
        raise SchemaError(f"{where} has layout {value.layout}, which the judge does not read")
    if value.is_quantized:
        raise SchemaError(f"{where} is a quantized tensor, which the judge does not read")
    elements = math.prod(int(size) for size in value.shape)
    if elements > MAX_TENSOR_ELEMENTS:
        raise SchemaError(f"{where} declares {elements} elements (at most "
                          f"{MAX_TENSOR_ELEMENTS})")
    if value.layout == torch.strided and elements:
        span = 1 + sum((int(size) - 1) * abs(int(stride))
                       for size, stride in zip(value.shape, value.stride(), strict=True))
        held = value.untyped_storage().nbytes() // max(value.element_size(), 1)
        if value.storage_offset() + span > held:
            raise SchemaError(f"{where} reaches past its storage ({span} elements from "
                              f"offset {value.storage_offset()}, {held} held)")
    return elements


def check_tree(tree: Any, where: str) -> int:
    """A part of a case (inputs or a result): its leaves, depth and tensors. Returns the
    tensor elements it declares."""
    import torch

    stack: list[tuple[Any, str, int]] = [(tree, where, 0)]
    leaves = elements = 0
    while stack:
        value, place, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SchemaError(f"{where} is nested more than {MAX_DEPTH} deep")
        if isinstance(value, (list, tuple)):
            stack += [(item, f"{place}[{i}]", depth + 1) for i, item in enumerate(value)]
            continue
        if isinstance(value, dict):
            if set(value) == {"repr"}:
                _text(value["repr"], f"{place}.repr")
                leaves += 1
                continue
            for key, item in value.items():
                if not isinstance(key, str):
                    raise SchemaError(f"{place} has a key of type {type(key).__name__}")
                stack.append((item, f"{place}.{key[:40]}", depth + 1))
            continue
        leaves += 1
        if leaves > MAX_LEAVES:
            raise SchemaError(f"{where} has more than {MAX_LEAVES} values")
        if isinstance(value, torch.Tensor):
            elements += _tensor(value, place)
        elif isinstance(value, str):
            _text(value, place)
        elif not (value is None or isinstance(value, (bool, int, float, complex, torch.dtype))):
            raise SchemaError(f"{place} is a {type(value).__name__}, which a recording "
                              "does not hold")
    return elements


def check_case(case: Any) -> dict[str, Any]:
    """One case, checked field by field; a SchemaError names the first field that is not as
    the format says."""
    if not isinstance(case, dict):
        raise SchemaError(f"the case is a {type(case).__name__}, not a mapping")
    unknown = sorted(str(k)[:40] for k in case if k not in CASE_KEYS)
    if unknown:
        raise SchemaError(f"unknown field(s) {', '.join(unknown)}")
    for key in ("op", "dtype", "sample"):
        if key not in case:
            raise SchemaError(f"no '{key}'")
    _text(case["op"], "op", 200)
    _text(case["dtype"], "dtype", 40)
    sample = case["sample"]
    if isinstance(sample, bool) or not isinstance(sample, int) or not 0 <= sample < MAX_SAMPLE:
        raise SchemaError(f"sample {sample!r:.40} is not a whole number from 0 to {MAX_SAMPLE}")
    for key in ("description", "device_type"):
        if key in case:
            _text(case[key], key, 1000)
    if "truncated" in case and not isinstance(case["truncated"], bool):
        raise SchemaError("truncated is not true or false")
    for key in ("rule", "verdict"):
        if key in case and not isinstance(case[key], dict):
            raise SchemaError(f"{key} is a {type(case[key]).__name__}, not a mapping")
    verdict = case.get("verdict") or {}
    if verdict:
        if verdict.get("status") not in STATUSES:
            raise SchemaError(f"verdict.status {verdict.get('status')!r:.40} is not one of "
                              f"{', '.join(STATUSES)}")
        _text(verdict.get("message", ""), "verdict.message")
    if not case.get("truncated"):
        for key in ("input", "cpu", "device"):
            if key not in case:
                raise SchemaError(f"no '{key}'")
    for key in TREES:
        if key in case:
            check_tree(case[key], key)
    # A case recorded without its tensors (truncated) has none of them: null, not a list.
    dropped = bool(case.get("truncated"))
    for key in ("args",):
        if key in case and not (dropped and case[key] is None) \
                and not isinstance(case[key], (list, tuple)):
            raise SchemaError(f"{key} is a {type(case[key]).__name__}, not a list")
    if "kwargs" in case and not (dropped and case["kwargs"] is None) \
            and not isinstance(case["kwargs"], dict):
        raise SchemaError(f"kwargs is a {type(case['kwargs']).__name__}, not a mapping")
    return case
