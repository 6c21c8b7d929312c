"""The one JSON mechanism of the result's types: each frozen dataclass of
:mod:`oota.results.model` and :mod:`oota.results.software` is written and read from its field
types, with a :class:`Shape` saying what its JSON object leaves out.

Reading checks every value against its field's type and names the path of one that does not
fit (:class:`~oota.results.jsonfields.ResultFormatError`), so a hand-edited or foreign file
that the schema lets through still cannot put a wrong type into the report. The types a field
may have: str, int, float, bool, a Literal of strings (a status), None in a union, a nested
record, ``tuple[T, ...]``, ``Mapping[str, T]`` and JSONObject (free-form JSON, kept as it is).

A hand-written library (cattrs, msgspec, pydantic) would need a hook for nearly each of
these rules (strict strings where cattrs converts, the free-form facts a host object carries
beside its own keys, what each record leaves out): the rules are this module, and the types
stay plain dataclasses.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from oota.results.jsonfields import (
    JSON,
    JSONObject,
    ResultFormatError,
    as_object,
    json_object,
    json_value,
)

ALL: Literal["all"] = "all"


@dataclass(frozen=True, slots=True)
class Shape:
    """What a record's JSON object leaves out: ``omit`` names the fields written only when
    not empty (None, '', {} or an empty list; 0 and False are kept), ``ALL`` for every field
    but those in ``keep``; ``rest`` names a JSONObject field whose keys stand beside the
    record's own (a host's facts)."""

    omit: tuple[str, ...] | Literal["all"] = ()
    keep: tuple[str, ...] = ()
    rest: str | None = None

    def omitted(self, name: str) -> bool:
        return name not in self.keep and (self.omit == ALL or name in self.omit)


class Record:
    """A dataclass written and read by this module: ``to_json`` and ``from_json``."""

    __slots__ = ()
    json_shape: ClassVar[Shape] = Shape()

    def to_json(self) -> JSONObject:
        return encode(self)

    @classmethod
    def from_json(cls: type[R], value: object, where: str = "") -> R:
        return decode(cls, value, where)


R = TypeVar("R", bound=Record)


class _AnyJSON:
    """What a field annotated JSON reads as (the alias is a string at run time)."""


class _JSONObject:
    """What a field annotated JSONObject reads as."""


_JSON_NAMES = {"JSON": _AnyJSON, "JSONObject": _JSONObject}


def at(where: str, name: str) -> str:
    """The path of ``name`` inside ``where`` ('' at the top of a file)."""
    return f"{where}.{name}" if where else name


def _empty(value: object) -> bool:
    return value is None or value == "" or (isinstance(value, (dict, tuple, list)) and not value)


def _write(value: object) -> JSON:
    if isinstance(value, Record):
        return encode(value)
    if isinstance(value, (tuple, list)):
        return [_write(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _write(v) for k, v in value.items()}
    return value  # type: ignore[return-value]  # str, int, float, bool, None


def encode(record: Record) -> JSONObject:
    """``record`` as its JSON object."""
    shape = type(record).json_shape
    data: JSONObject = {}
    for name in _field_names(type(record)):
        value = getattr(record, name)
        if name == shape.rest:
            data = {**_write(value), **data}  # type: ignore[dict-item]
        elif not (shape.omitted(name) and _empty(value)):
            data[name] = _write(value)
    return data


def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(x.name for x in dataclasses.fields(cls))


Reader = Callable[[object, str], Any]


_READERS: dict[type, tuple[tuple[str, Reader, Any], ...]] = {}


def _readers(cls: type) -> tuple[tuple[str, Reader, Any], ...]:
    """Each field of ``cls``: its name, the reader of its type, and its default (MISSING: it
    must be given); worked out once per type."""
    if cls not in _READERS:
        _READERS[cls] = _readers_of(cls)
    return _READERS[cls]


def _readers_of(cls: type) -> tuple[tuple[str, Reader, Any], ...]:
    hints = typing.get_type_hints(cls, localns=_JSON_NAMES)
    found = []
    for x in dataclasses.fields(cls):
        default = x.default if x.default is not dataclasses.MISSING else (
            x.default_factory() if x.default_factory is not dataclasses.MISSING
            else dataclasses.MISSING)
        found.append((x.name, _reader(hints[x.name]), default))
    return tuple(found)


def decode(cls: type[R], value: object, where: str) -> R:
    """A ``cls`` from its JSON object; ResultFormatError names the path of a value that does
    not fit its field, or of one missing."""
    data = as_object(value, where or cls.__name__)
    shape = cls.json_shape
    values: dict[str, Any] = {}
    for name, read, default in _readers(cls):
        if name == shape.rest:
            own = set(_field_names(cls))
            values[name] = json_object({k: v for k, v in data.items() if k not in own},
                                       where or cls.__name__)
            continue
        item = data.get(name)
        if item is None and default is not dataclasses.MISSING:
            values[name] = default
        elif item is None and name not in data:
            values[name] = read(None, at(where, name))   # an optional field, or the error
        else:
            values[name] = read(item, at(where, name))
    return cls(**values)


def _reader(kind: Any) -> Reader:
    """The reader of one field type."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is _JSONObject:
        return json_object
    if kind is _AnyJSON:
        return json_value
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        read = _reader(inner[0]) if len(inner) == 1 else _fail(kind)
        return lambda v, where: None if v is None else read(v, where)
    if origin is Literal:
        return _literal(args)
    if origin is tuple:
        return _sequence(_reader(args[0]))
    if origin in (Mapping, dict, typing.Mapping):
        return _mapping(_reader(args[1]))
    if isinstance(kind, type) and issubclass(kind, Record):
        return lambda v, where: decode(kind, v, where)
    if kind in _SCALARS:
        return _SCALARS[kind]
    return _fail(kind)


def _fail(kind: Any) -> Reader:
    raise TypeError(f"oota.results.codec cannot read a field of type {kind}")


def _literal(choices: tuple[Any, ...]) -> Reader:
    def read(value: object, where: str) -> Any:
        for choice in choices:  # the Literal itself, not just an equal string
            if value == choice:
                return choice
        raise ResultFormatError(f"{where}: {value!r} is not one of {', '.join(choices)}")
    return read


def _sequence(item: Reader) -> Reader:
    def read(value: object, where: str) -> tuple[Any, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise ResultFormatError(f"{where}: expected a list")
        return tuple(item(v, f"{where}[{i}]") for i, v in enumerate(value))
    return read


def _mapping(item: Reader) -> Reader:
    def read(value: object, where: str) -> dict[str, Any]:
        if value is None:
            return {}
        return {str(k): item(v, at(where, str(k))) for k, v in as_object(value, where).items()}
    return read


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ResultFormatError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ResultFormatError(f"{where}: expected an integer, got {type(value).__name__}")
    return value


def _float(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ResultFormatError(f"{where}: expected a number, got {type(value).__name__}")
    return float(value)


def _bool(value: object, where: str) -> bool:
    """A JSON boolean, and nothing else: bool("false") is True, so a string is refused."""
    if not isinstance(value, bool):
        raise ResultFormatError(f"{where}: expected true or false, got {type(value).__name__}")
    return value


_SCALARS: dict[Any, Reader] = {str: _str, int: _int, float: _float, bool: _bool}
