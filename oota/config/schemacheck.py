"""Check a loaded YAML :class:`~oota.config.yamlsrc.Doc` against a JSON Schema, reporting every
problem the way the rest of the loaders do: ``file:line:col: yaml.path: message; suggestion``.

jsonschema finds the problems; this module says them in the user's words. An unknown key (an
``additionalProperties`` failure) becomes one problem per key with a did-you-mean against the
keys the schema allows; a value failing a ``pattern``, ``enum`` or ``not`` is described by the
failing subschema's ``title`` (what a good value is) and its first ``examples`` entry. The
schema is thus both the check and the documentation of the format, and they cannot drift.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator, ValidationError

from oota.config.yamlsrc import Doc, Path_, did_you_mean

_TYPE_NOUNS = {"object": "a mapping", "array": "a list", "string": "a string",
               "integer": "a whole number", "number": "a number", "boolean": "true or false",
               "null": "empty"}


def kind(value: Any) -> str:
    """What a loaded YAML value is, in the words of the messages."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "true or false"
    names = {dict: "a mapping", list: "a list", str: "a string", int: "a whole number",
             float: "a number"}
    return names.get(type(value), type(value).__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class Problem:
    path: Path_
    message: str
    suggestion: str | None = None
    missing: str | None = None     # a required key that is absent
    meant: str | None = None       # the key an unknown key's did-you-mean points at


def check_against(doc: Doc, schema: Mapping[str, Any]) -> set[Path_]:
    """Record every schema problem of ``doc`` (in file order); return the paths reported."""
    validator = Draft202012Validator(schema)
    found: dict[tuple[Path_, str], Problem] = {}
    for error in validator.iter_errors(doc.data):
        for problem in describe(error, schema):
            found.setdefault((problem.path, problem.message), problem)
    problems = _one_per_path(_drop_explained_missing(list(found.values())))
    for problem in sorted(problems, key=lambda p: _position(doc, p.path)):
        doc.error(problem.path, problem.message, problem.suggestion)
    return {p.path for p in problems}


def _position(doc: Doc, path: Path_) -> tuple[int, int, str]:
    where = doc.where(path).rsplit(":", 2)
    return int(where[1]), int(where[2]), repr(path)


def _drop_explained_missing(problems: list[Problem]) -> list[Problem]:
    """``dtyeps:`` is reported as an unknown key with "did you mean 'dtypes'?"; saying
    "missing required key 'dtypes'" as well would only repeat it."""
    meant = {(p.path[:-1], p.meant) for p in problems if p.meant}
    return [p for p in problems if not (p.missing and (p.path, p.missing) in meant)]


def _one_per_path(problems: list[Problem]) -> list[Problem]:
    """One message per value: a string with a newline that also fails a pattern is reported
    once, for the newline. Missing keys share their parent's path and are all kept."""
    out: list[Problem] = []
    taken: set[Path_] = set()
    for problem in sorted(problems, key=lambda p: not _is_control(p)):
        if problem.missing or problem.path not in taken:
            out.append(problem)
            taken.add(problem.path)
    return out


def _is_control(problem: Problem) -> bool:
    return "control character" in problem.message


def describe(error: ValidationError, root: Mapping[str, Any]) -> list[Problem]:
    """The user-facing problems of one jsonschema error."""
    path: Path_ = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    if "propertyNames" in error.absolute_schema_path:  # the key itself is wrong
        key = str(error.instance)
        return [Problem(path=path + (key,), message=f"key {_value_problem(key, schema)}",
                        suggestion=_example(schema))]
    instance: Any = error.instance
    validator = str(error.validator)
    if validator == "additionalProperties":
        return _unknown_keys(path, instance, schema)
    if validator in ("oneOf", "anyOf"):
        return _branch_problems(path, error, schema, root)
    if validator == "required":
        return [Problem(path=path, message=f"missing required key '{key}'", missing=key)
                for key in schema.get("required", ()) if key not in instance]
    if validator == "type":
        return [_type_problem(path, instance, schema, root)]
    if validator == "enum":
        choices = tuple(str(c) for c in schema.get("enum", ()))
        text = str(instance)
        hint = did_you_mean(text, choices) if isinstance(instance, str) else None
        return [Problem(path=path, message=_value_problem(instance, schema), suggestion=hint)]
    if validator == "not" and isinstance(schema.get("not"), Mapping) \
            and "required" in schema["not"]:
        keys = " and ".join(str(k) for k in schema["not"]["required"])
        return [Problem(path=path, message=f"gives both {keys}", suggestion="keep one of them")]
    if validator in ("pattern", "not", "minimum", "maximum"):
        return [Problem(path=path, message=_value_problem(instance, schema),
                        suggestion=_example(schema))]
    if validator in ("minItems", "minLength"):
        return [Problem(path=path, message="must not be empty",
                        suggestion="give at least one entry, or leave the key out")]
    if validator == "uniqueItems":
        return [Problem(path=path, message=f"lists {_first_repeat(instance)!r} more than "
                        "once", suggestion="remove the repeated entry")]
    return [Problem(path=path, message=error.message)]


def _branch_problems(path: Path_, error: ValidationError, schema: Mapping[str, Any],
                     root: Mapping[str, Any]) -> list[Problem]:
    """A value that fits none of its alternatives: the problems of the alternative of its own
    type (a list checked as the list form), else what the alternatives are."""
    branches = [_resolve(b, root) for b in schema.get(str(error.validator), ())]
    mine = [i for i, b in enumerate(branches) if _is_type(error.instance, b.get("type"))]
    if len(mine) == 1:
        inner = [e for e in error.context or () if e.relative_schema_path[0] == mine[0]]
        return [p for e in inner for p in describe(e, root)]
    titles = [str(b.get("title") or _TYPE_NOUNS.get(str(b.get("type")), "")) for b in branches]
    return [Problem(path=path, message=f"expected {' or '.join(t for t in titles if t)}, "
                    f"got {kind(error.instance)}")]


def _is_type(value: Any, name: Any) -> bool:
    wanted = {"object": dict, "array": list, "string": str}.get(str(name))
    return wanted is not None and isinstance(value, wanted)


def _unknown_keys(path: Path_, instance: Any, schema: Mapping[str, Any]) -> list[Problem]:
    known = tuple(schema.get("properties", {}))
    out = []
    for key in instance:
        if key in known:
            continue
        hint = did_you_mean(str(key), known) if known else "this mapping takes no keys"
        meant = hint[len("did you mean '"):-2] if hint and hint.startswith("did you mean") else None
        out.append(Problem(path=path + (key,), message=f"unknown key '{key}'", suggestion=hint,
                           meant=meant))
    return out


def _type_problem(path: Path_, instance: Any, schema: Mapping[str, Any],
                  root: Mapping[str, Any]) -> Problem:
    types = schema.get("type")
    if isinstance(types, list):
        wanted = str(schema.get("title") or " or ".join(_TYPE_NOUNS[t] for t in types))
    else:
        wanted = _TYPE_NOUNS.get(str(types), str(types))
    items = _resolve(schema.get("items"), root)
    if types == "array" and items.get("type") in ("string", "object"):
        wanted += " of strings" if items["type"] == "string" else " of mappings"
    hint = None
    if types == "array" and isinstance(instance, (str, int)):
        hint = f"write it as a list: [{instance}]"
    elif "string" in (types if isinstance(types, list) else [types]) \
            and isinstance(instance, (int, float)) and not isinstance(instance, bool):
        hint = f"quote it: \"{instance}\""
    return Problem(path=path, message=f"expected {wanted}, got {kind(instance)}",
                   suggestion=hint)


def _resolve(schema: Any, root: Mapping[str, Any]) -> Mapping[str, Any]:
    """A subschema, following a local ``$ref`` ("#/$defs/name") once."""
    if not isinstance(schema, Mapping):
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
        return found if isinstance(found, Mapping) else {}
    return schema


def _value_problem(value: Any, schema: Mapping[str, Any]) -> str:
    if isinstance(value, str):
        control = _control_character(value)
        if control:
            return (f"{value!r} contains a control character ({control}); data that reaches "
                    "Dockerfiles and commands must be one line of plain text")
    title = schema.get("title")
    shown = f"'{value}'" if isinstance(value, str) else repr(value)
    return f"{shown} is not {title}" if title else f"{shown} is not allowed here"


def _control_character(text: str) -> str:
    for char in text:
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            name = {"\n": "a line break", "\r": "a carriage return", "\t": "a tab"}.get(char)
            return f"U+{ord(char):04X}" + (f", {name}" if name else "")
    return ""


def _example(schema: Mapping[str, Any]) -> str | None:
    examples = schema.get("examples") or ()
    return f"e.g. '{examples[0]}'" if examples else None


def _first_repeat(items: Iterable[Any]) -> Any:
    seen: list[Any] = []
    for item in items:
        if item in seen:
            return item
        seen.append(item)
    return None
