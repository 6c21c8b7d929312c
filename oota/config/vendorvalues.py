"""The checks of ``vendor.yaml`` values that a JSON Schema cannot express.

They run after :func:`oota.config.schemacheck.check_against`, on the values it found well
shaped (a path it reported, or one under it, is skipped), and record located problems:

* every ``{name}`` in requirements, ``index_url``, ``local_version`` and the extensions' torch
  specifiers is a format variable the planner will define (:func:`format_names`);
* each of those strings, filled with sample values, is what it must be: a PEP 508 requirement,
  a URL, a PEP 440 local version, a version specifier;
* versions and specifiers in companions, host, facts parse with ``packaging``;
* every dtype the suite compares has its tolerance, a companion is not named like the
  toolkit axis, and no CI runner label is listed twice in another case.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Iterator
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from oota.config.yamlsrc import Doc, Path_, did_you_mean

# What each format variable looks like when a cell fills it, for checking the result's shape.
_SAMPLES = {"vendor": "demo", "os": "debian12", "python": "3.11", "torch": "2.13.0",
            "toolkit_version": "13.0", "local": "+cu130", "platform": "linux/amd64",
            "arch": "amd64", "machine": "x86_64"}
_URL = re.compile(r"^((https?|file)://[^\s\"'<>\\]+)?$")
_LOCAL = re.compile(r"^(\+[A-Za-z0-9]+([._-][A-Za-z0-9]+)*)?$")


def format_names(data: dict[str, Any]) -> dict[str, str]:
    """The format variables a cell of this vendor defines, each with a sample value (see
    ``oota.plan.Cell.format_vars``): the coordinates, the toolkit axis and ``<axis>_nodot``
    when the vendor has a toolkit, its companions, and ``local``."""
    names = dict(_SAMPLES, vendor=str(data.get("name") or "demo"))
    toolkit = data.get("toolkit")
    if isinstance(toolkit, dict) and isinstance(toolkit.get("axis"), str):
        names.update({"toolkit": toolkit["axis"], toolkit["axis"]: "13.0",
                      f"{toolkit['axis']}_nodot": "130"})
    else:
        del names["toolkit_version"]
    companions = data.get("companions")
    if isinstance(companions, (dict, list)):
        names.update({str(name): "0.28.0" for name in companions})
    return names


def placeholders(text: str) -> list[str]:
    """The ``{name}`` fields of a format string; ValueError for a malformed one."""
    found = []
    for _literal, name, spec, conversion in string.Formatter().parse(text):
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            shown = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise ValueError(f"'{{{shown}}}' is not a plain placeholder such as {{torch}}")
        found.append(name)
    return found


class _Checker:
    def __init__(self, doc: Doc, data: dict[str, Any], reported: set[Path_]):
        self.doc = doc
        self.data = data
        self.reported = reported
        self.names = format_names(data)
        # With a bad toolkit axis the format variables are unknown: unknown placeholders
        # would only echo that one problem.
        self.names_known = not any(path[:1] == ("toolkit",) for path in reported)

    def skip(self, path: Path_) -> bool:
        return any(path[:len(done)] == done for done in self.reported)

    def fill(self, path: Path_, text: str, names: dict[str, str]) -> str | None:
        """``text`` with sample values, or None after recording why it cannot be filled."""
        try:
            fields = placeholders(text)
        except ValueError as exc:
            self.doc.error(path, f"'{text}': {exc}", "write a literal brace as {{ or }}")
            return None
        unknown = [name for name in fields if name not in names]
        for name in unknown if self.names_known else ():
            self.doc.error(path, f"'{text}': unknown placeholder {{{name}}}",
                           did_you_mean(name, tuple(sorted(names))))
        return None if unknown else text.format(**names)

    def strings(self, *path: str | int) -> Iterator[tuple[Path_, str]]:
        """Every string at ``path`` (a list's items, or the value itself) not yet reported."""
        value: Any = self.data
        for part in path:
            value = value.get(part) if isinstance(value, dict) and isinstance(part, str) else None
        items = enumerate(value) if isinstance(value, list) else [(None, value)]
        for i, item in items:
            where: Path_ = tuple(path) + ((i,) if i is not None else ())
            if isinstance(item, str) and not self.skip(where):
                yield where, item

    def check_filled(self, path: Path_, text: str, test: Callable[[str], str | None],
                     names: dict[str, str] | None = None) -> None:
        filled = self.fill(path, text, names or self.names)
        if filled is not None:
            why = test(filled)
            if why:
                self.doc.error(path, f"'{text}' {why}")


def check_values(doc: Doc, data: Any, reported: set[Path_]) -> None:
    """Record every value problem of a vendor.yaml whose shape :mod:`schemacheck` checked."""
    if not isinstance(data, dict):
        return
    check = _Checker(doc, data, reported)
    _templates(check)
    _versions(check)
    _verify(check)
    _companions(check)
    _runner_labels(check)
    _source_keys(check)


def _templates(check: _Checker) -> None:
    for key in ("requirements", "test_requirements"):
        for path, text in check.strings(key):
            check.check_filled(path, text, _requirement_problem)
    for platform in _dict(check.data.get("platform_requirements")):
        for path, text in check.strings("platform_requirements", platform):
            check.check_filled(path, text, _requirement_problem)
    for path, text in check.strings("index_url"):
        check.check_filled(path, text, lambda url: None if _URL.match(url) else
                           "is not an http(s):// or file:// URL once filled in")
    without_local = {k: v for k, v in check.names.items() if k != "local"}
    for path, text in check.strings("local_version"):
        check.check_filled(path, text, lambda local: None if _LOCAL.match(local) else
                           "is not a local version such as '+cu130' once filled in",
                           without_local)
    extensions = (check.data.get("verify") or {}).get("extensions") \
        if isinstance(check.data.get("verify"), dict) else None
    for i, ext in enumerate(extensions if isinstance(extensions, list) else []):
        where: Path_ = ("verify", "extensions", i, "torch")
        if isinstance(ext, dict) and isinstance(ext.get("torch"), str) and not check.skip(where):
            check.check_filled(where, ext["torch"], _specifier_problem)


def _requirement_problem(text: str) -> str | None:
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        first = str(exc).splitlines()[0]
        return f"is not a PEP 508 requirement once filled in ({first})"
    return None


def _specifier_problem(text: str) -> str | None:
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        return "is not a version specifier once filled in"
    return None


def _versions(check: _Checker) -> None:
    """Versions and specifiers, which the schema's patterns only approximate."""
    for path, text, is_specifier in _walk_versions(check.data):
        if check.skip(path) or _parses(text, is_specifier):
            continue
        what = "a version specifier such as '>=3.10,<3.15'" if is_specifier \
            else "a version such as '2.14.0'"
        check.doc.error(path, f"'{text}' is not {what}")


def _parses(text: str, is_specifier: bool) -> bool:
    try:
        SpecifierSet(text) if is_specifier else Version(text)
    except ValueError:  # InvalidSpecifier, InvalidVersion, or more digits than int() reads
        return False
    return True


def _walk_versions(data: dict[str, Any]) -> Iterator[tuple[Path_, str, bool]]:
    """(path, text, whether it is a specifier) of every version-like value."""
    for name, pairs in _dict(data.get("companions")).items():
        for series, version in _dict(pairs).items():
            yield ("companions", name, series), str(series), False
            yield ("companions", name, series), str(version), False
    for toolkit, driver in _dict(_dict(data.get("host")).get("driver_min")).items():
        yield ("host", "driver_min", toolkit), str(toolkit), False
        yield ("host", "driver_min", toolkit), str(driver), False
    facts = _dict(data.get("facts"))
    if isinstance(facts.get("python"), str):
        yield ("facts", "python"), facts["python"], True
    for torch, toolkit in _dict(facts.get("pypi_default")).items():
        yield ("facts", "pypi_default", torch), str(torch), False
        if isinstance(toolkit, dict):
            toolkit = toolkit.get("toolkit", "0")
        yield ("facts", "pypi_default", torch), str(toolkit), False
    rules = _dict(_dict(data.get("host")).get("driver")).get("rules")
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        for key in ("toolkit", "min"):
            if isinstance(rule, dict) and isinstance(rule.get(key), str):
                yield ("host", "driver", "rules", i, key), rule[key], False
    for table, specifiers in (("compat", ("python",)), ("retired", ("torch",))):
        rows = facts.get(table)
        for i, row in enumerate(rows if isinstance(rows, list) else []):
            for key in ("torch", "extension", "toolkit", "python", "last"):
                if isinstance(row, dict) and isinstance(row.get(key), str):
                    yield ("facts", table, i, key), row[key], key in specifiers


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _verify(check: _Checker) -> None:
    verify = _dict(check.data.get("verify"))
    for dtype, pair in _dict(verify.get("tolerances")).items():
        for key, value in _dict(pair).items():
            path: Path_ = ("verify", "tolerances", dtype, key)
            if isinstance(value, str) and not check.skip(path) and not _within(value, 1):
                check.doc.error(path, f"'{value}' is not a number from 0 to 1",
                                "a tolerance above 1 lets every result pass")
    _judge(check, verify)
    dtypes, tolerances = verify.get("dtypes"), verify.get("tolerances")
    if check.skip(("verify",)) or not isinstance(dtypes, list) \
            or not isinstance(tolerances, dict):
        return
    for i, dtype in enumerate(dtypes):
        if isinstance(dtype, str) and dtype not in tolerances \
                and not check.skip(("verify", "dtypes", i)):
            check.doc.error(("verify", "dtypes", i), f"'{dtype}' has no entry in "
                            "verify.tolerances", f"add {dtype}: {{rtol: ..., atol: ...}} there")


def _judge(check: _Checker, verify: dict[str, Any]) -> None:
    """The judge's overrides: numbers within range (YAML floats arrive as text), and only for
    a dtype the suite judges (``verify.dtypes`` or ``model_dtype``): another does nothing."""
    overrides: list[tuple[Path_, Any]] = [(("verify", "judge", dtype), entry) for dtype, entry
                                          in _dict(verify.get("judge")).items()]
    overrides.append((("verify", "workload", "judge"), _dict(verify.get("workload")).get("judge")))
    for where, entry in overrides:
        for key in ("multiplier", "floor_ulps"):
            value, path = _dict(entry).get(key), (*where, key)
            if isinstance(value, str) and not check.skip(path) and not _within(value, 1000):
                check.doc.error(path, f"'{value}' is not a number from 0 to 1000",
                                "give how many times the CPU's own error (or ulps) to allow")
    judged = [d for d in _list(verify.get("dtypes")) if isinstance(d, str)]
    judged.append(str(verify.get("model_dtype") or "float32"))
    for dtype in _dict(verify.get("judge")):
        path = ("verify", "judge", dtype)
        if dtype not in judged and not check.skip(path):
            check.doc.error(path, f"'{dtype}' is not a dtype the suite judges here",
                            f"add it to verify.dtypes, or remove verify.judge.{dtype}")


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _within(text: str, top: float) -> bool:
    """A YAML float kept as text (yamlsrc) that is a finite number from 0 to ``top``."""
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) and 0 <= value <= top


def _companions(check: _Checker) -> None:
    toolkit = _dict(check.data.get("toolkit"))
    companions = check.data.get("companions")
    for name in companions if isinstance(companions, (dict, list)) else ():
        if not isinstance(name, str):
            continue
        if name == toolkit.get("axis") or name == f"{toolkit.get('axis')}_nodot":
            check.doc.error(("companions", name), f"'{name}' is also the toolkit axis's "
                            "format variable", "name the companion after its distribution")


def _runner_labels(check: _Checker) -> None:
    """GitHub matches runner labels without regard to case: ``Linux`` beside ``linux`` (which
    the schema's uniqueItems lets through) asks for the same label twice."""
    seen: dict[str, str] = {}
    for path, label in check.strings("ci", "runs-on"):
        first = seen.setdefault(label.lower(), label)
        if first != label:
            check.doc.error(path, f"'{label}' is the label '{first}' again (GitHub compares "
                            "runner labels without regard to case)", "remove one of them")


def _source_keys(check: _Checker) -> None:
    """Every fact's ``source`` names a key of ``facts.sources``."""
    facts = _dict(check.data.get("facts"))
    declared = facts.get("sources")
    keys = tuple(str(k) for k in (declared if isinstance(declared, (dict, list)) else ()))
    for path, key in _named_sources(check.data):
        if key not in keys and not check.skip(path):
            hint = did_you_mean(key, keys) if keys else "add facts.sources with this key"
            check.doc.error(path, f"'{key}' is not a key of facts.sources", hint)


def _named_sources(data: dict[str, Any]) -> Iterator[tuple[Path_, str]]:
    facts = _dict(data.get("facts"))
    entries: list[tuple[Path_, Any]] = [(("facts",), facts)]
    for table in ("compat", "retired"):
        entries += [(("facts", table, i), row) for i, row in enumerate(_list(facts.get(table)))]
    defaults = _dict(facts.get("pypi_default"))
    entries += [(("facts", "pypi_default", t), e) for t, e in defaults.items()]
    for os_key, row in _dict(data.get("base_images")).items():
        entries += [(("base_images", os_key, t), e) for t, e in _dict(row).items()]
    driver = _dict(_dict(data.get("host")).get("driver"))
    entries += [(("host", "driver"), driver)]
    entries += [(("facts", "extension", "requires_torch"),
                 _dict(facts.get("extension")).get("requires_torch"))]
    rules = _list(driver.get("rules"))
    entries += [(("host", "driver", "rules", i), r) for i, r in enumerate(rules)]
    for path, entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("source"), str):
            yield path + ("source",), entry["source"]
