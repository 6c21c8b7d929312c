"""The JSON of a result file, read with typed getters: each names the key whose value has the
wrong type (ResultFormatError) instead of letting it into the report."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from oota.vocab import STATUS_ORDER, Status

JSON: TypeAlias = "str | int | float | bool | None | list[JSON] | dict[str, JSON]"
JSONObject: TypeAlias = "dict[str, JSON]"


class ResultFormatError(ValueError):
    """A result file's content has a value of the wrong type; the message names its path."""


def as_object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise ResultFormatError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def get_str(data: Mapping[str, object], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ResultFormatError(f"{where}.{key}: expected a string, got {type(value).__name__}")
    return value










def json_value(value: object, where: str) -> JSON:
    """``value`` checked to be plain JSON (what json.loads gives), lists and objects copied."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [json_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return json_object(value, where)
    raise ResultFormatError(f"{where}: {type(value).__name__} is not a JSON value")


def json_object(value: object, where: str) -> JSONObject:
    return {str(k): json_value(v, f"{where}.{k}") for k, v in as_object(value, where).items()}


def status_of(value: object, where: str) -> Status:
    for status in STATUS_ORDER:  # the Literal itself, not just an equal string
        if value == status:
            return status
    raise ResultFormatError(f"{where}: {value!r} is not a status ({', '.join(STATUS_ORDER)})")
