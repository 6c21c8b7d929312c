"""Typed getters over a :class:`~oota.yamlsrc.Doc`: each records a located problem and
returns a fallback instead of raising, so one run reports every problem in a file."""

from __future__ import annotations

from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from oota.config.yamlsrc import Doc, Path_, did_you_mean

# The getter named 'str' hides the type inside the class; annotations there say Text.
Text = str

_TYPE_NAMES = {dict: "a mapping", list: "a list", str: "a string", int: "a whole number",
               bool: "true or false"}


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


class Fields:
    """Reads one mapping of a document, checking keys and value types as it goes."""

    def __init__(self, doc: Doc, path: Path_, value: Any, *, allowed: tuple[str, ...],
                 required: tuple[str, ...] = ()):
        self.doc = doc
        self.path = path
        self.ok = isinstance(value, dict)
        self.data: dict[str, Any] = value if self.ok else {}
        if not self.ok:
            doc.error(path, f"expected a mapping, got {_kind(value)}")
            return
        for key in self.data:
            if key not in allowed:
                doc.error(path + (key,), f"unknown key '{key}'", did_you_mean(key, allowed))
        for key in required:
            if key not in self.data:
                doc.error(path, f"missing required key '{key}'")

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def str(self, key: Text, default: Text = "") -> str:
        value = self.data.get(key, default)
        if isinstance(value, (int, bool)) or not isinstance(value, Text):
            self.doc.error(self.path + (key,), f"expected a string, got {_kind(value)}")
            return default
        return value

    def bool(self, key: Text, default: bool = False) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            self.doc.error(self.path + (key,), f"expected true or false, got {_kind(value)}")
            return default
        return value

    def int(self, key: Text, default: int = 0) -> int:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.doc.error(self.path + (key,), f"expected a whole number, got {_kind(value)}")
            return default
        return value

    def str_list(self, key: Text) -> tuple[Text, ...]:
        value = self.data.get(key, [])
        if value is None:
            return ()
        if isinstance(value, Text):
            value = [value]
        if not isinstance(value, list):
            self.doc.error(self.path + (key,), f"expected a list of strings, got {_kind(value)}")
            return ()
        out = []
        for i, item in enumerate(value):
            if isinstance(item, (Text, int)) and not isinstance(item, bool):
                out.append(str(item))
            else:
                self.doc.error(self.path + (key, i), f"expected a string, got {_kind(item)}")
        return tuple(out)

    def mapping(self, key: Text) -> dict[Text, Any]:
        value = self.data.get(key, {})
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.doc.error(self.path + (key,), f"expected a mapping, got {_kind(value)}")
            return {}
        return value

    def str_map(self, key: Text) -> dict[Text, Text]:
        out = {}
        for name, value in self.mapping(key).items():
            if isinstance(value, (Text, int)) and not isinstance(value, bool):
                out[name] = str(value)
            else:
                self.doc.error(self.path + (key, name), f"expected a string, got {_kind(value)}")
        return out

    def version_list(self, key: Text, *, known: tuple[Text, ...] = ()) -> tuple[Version, ...]:
        return tuple(v for i, text in enumerate(self.str_list(key))
                     if (v := parse_version(self.doc, self.path + (key, i), text, known)))

    def specifier(self, key: Text, default: Text = "") -> SpecifierSet:
        text = self.str(key, default)
        try:
            return SpecifierSet(text)
        except InvalidSpecifier:
            self.doc.error(self.path + (key,), f"'{text}' is not a version specifier",
                           "write it like '>=3.10,<3.15'")
            return SpecifierSet(default)


# No real version is longer; a longer text is shown cut (a 5,000-digit one would fill a screen).
_LONGEST_VERSION = 64


def parse_version(doc: Doc, path: Path_, text: str, known: tuple[str, ...] = ()) -> Version | None:
    """Parse with packaging; on failure record a located problem with the closest fix."""
    if len(text) > _LONGEST_VERSION:
        doc.error(path, f"'{text[:24]}...' ({len(text)} characters) is not a version",
                  "write it like '2.13.0'")
        return None
    try:
        return Version(text)
    except ValueError:  # InvalidVersion, or more digits than int() reads
        # A typo'd digit ('3.1O') is fixed mechanically first: a fuzzy match against the known
        # versions would pick whichever looks closest ('3.13'), not what the user meant.
        repaired = text.replace("O", "0").replace("o", "0").replace("l", "1").replace(",", ".")
        hint = None
        if repaired != text:
            try:
                hint = f"did you mean '{Version(repaired)}'?"
            except ValueError:
                hint = None
        if hint is None and known:
            hint = did_you_mean(text, known)
        doc.error(path, f"'{text}' is not a version", hint or "write it like '2.13.0'")
        return None
