"""Write the docs site's generated pages from what they document, so they cannot drift from it:

  docs/reference/tasks.md      every task and its flags, from the typed requests
                               (oota/api/requests.py) the tasks of oota/tasks.py take
  docs/reference/result-v1.md  the result file's format, from schema/result-v1.json
  docs/reference/vendor-v1.md  vendor.yaml's format, from schema/vendor-v1.json
  docs/performance.md          the benchmarks' own output, benchmarks/results/*.json

    python scripts/gen_docs.py            write them
    python scripts/gen_docs.py --check    exit 1 and show the diff when one is stale (CI)

The pages are committed (readable on GitHub as they are, and built by ``mkdocs build``
without running oota); each starts with a banner naming this script. The data is gathered
first (:func:`task_docs`, :func:`schema_doc`, :func:`bench_docs`), then laid out by the
Jinja templates in ``scripts/docs_templates/``.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import json
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:   # run as a script: the checkout's oota
    sys.path.insert(0, str(REPO))

from oota import tasks as task_module  # noqa: E402 - the checkout is on the path now
from oota.api.fields import Flag, flags_of  # noqa: E402
from oota.tasking import FlagTask, request_of  # noqa: E402

DOCS = REPO / "docs"
BENCH_RESULTS = REPO / "benchmarks" / "results"
SCHEMAS = ("result-v1", "vendor-v1")
TEMPLATES = Path(__file__).resolve().parent / "docs_templates"
COMMAND = "python scripts/gen_docs.py"


class DocsError(Exception):
    """A source of a generated page cannot be read; the message names the file and key."""


# -- tasks and flags ----------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class FlagDoc:
    names: tuple[str, ...]   # --vendor; a flag on by default: --docker and --no-docker
    default: str
    help: str
    repeatable: bool
    required: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskDoc:
    name: str
    summary: str
    details: str
    request: str
    flags: tuple[FlagDoc, ...]


def _default(spec: Flag) -> str:
    if spec.required:
        return "required"
    if spec.default is True:
        return "on"
    if spec.default is False:
        return "off"
    return "–" if spec.default in (None, "", ()) else f"`{spec.default}`"


def _names(field: str, spec: Flag) -> tuple[str, ...]:
    name = field.replace("_", "-")
    return (f"--{name}", f"--no-{name}") if spec.default is True else (f"--{name}",)


def task_docs() -> list[TaskDoc]:
    """Every task of ``oota/tasks.py`` in name order, its docstring and its request's flags as
    invoke parses them (a flag that is on by default is turned off with ``--no-NAME``)."""
    found = []
    for name, task in sorted(vars(task_module).items()):
        if not isinstance(task, FlagTask):
            continue
        body = inspect.unwrap(task.body)
        request = request_of(body)
        doc = inspect.getdoc(body) or ""
        summary, _, details = doc.partition("\n\n")
        flags = tuple(
            FlagDoc(names=_names(field, spec),
                    default=_default(spec), help=spec.help, repeatable=spec.repeatable,
                    required=spec.required)
            for field, spec in (flags_of(request) if request else []))
        found.append(TaskDoc(name=name.replace("_", "-"), summary=summary.replace("\n", " "),
                             details=details, request=request.__name__ if request else "",
                             flags=flags))
    return found


# -- JSON Schemas -------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    path: str
    type: str
    required: bool
    description: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TypeDoc:
    """A named type (``$defs``): what a value is, and the rows of an object's fields."""
    name: str
    type: str
    description: str
    rows: tuple[Row, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class SchemaDoc:
    name: str
    title: str
    description: str
    id: str
    rows: tuple[Row, ...]
    types: tuple[TypeDoc, ...]


def _ref_name(node: Mapping[str, Any]) -> str:
    return str(node["$ref"]).rsplit("/", 1)[-1]


def _constraints(node: Mapping[str, Any]) -> list[str]:
    said = []
    if "pattern" in node:
        said.append(f"matching `{node['pattern']}`")
    if "format" in node:
        said.append(f"format {node['format']}")
    for key, words in (("minimum", "at least"), ("maximum", "at most"),
                       ("minLength", "length at least"), ("maxLength", "length at most"),
                       ("minItems", "at least N item(s)")):
        if key in node:
            said.append(words.replace("N", str(node[key])) if "N" in words
                        else f"{words} {node[key]}")
    if node.get("uniqueItems"):
        said.append("no duplicates")
    if "not" in node and "enum" in node["not"]:
        said.append("none of " + ", ".join(f"`{v}`" for v in node["not"]["enum"]))
    return said


def type_of(node: Mapping[str, Any]) -> str:
    """What a value of ``node`` is, in a few words: a link to its named type, its title, or
    its JSON type with the constraints that matter to a writer."""
    if "$ref" in node:
        return f"[{_ref_name(node)}](#{_ref_name(node)})"
    if "oneOf" in node:
        return " or ".join(type_of(alt) for alt in node["oneOf"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "title" in node and node.get("type") not in ("object", "array"):
        return str(node["title"])
    kind = node.get("type", "any")
    kinds = " or ".join(kind) if isinstance(kind, list) else str(kind)
    if kind == "array" and isinstance(node.get("items"), Mapping):
        kinds = f"list of {_inner(node['items'])}"
    elif kind == "object" and isinstance(node.get("additionalProperties"), Mapping) \
            and "properties" not in node:
        kinds = f"mapping to {_inner(node['additionalProperties'])}"
    said = _constraints(node)
    return kinds + (f" ({'; '.join(said)})" if said else "")


def _inner(node: Mapping[str, Any]) -> str:
    """:func:`type_of` inside another type's words, in parentheses when it has a choice."""
    said = type_of(node)
    return f"({said})" if " or " in said else said


def _key(node: Mapping[str, Any]) -> str:
    """How a mapping's key shows in a path: its named type, else 'key'."""
    names = node.get("propertyNames", {})
    return f"<{_ref_name(names)}>" if "$ref" in names else "<key>"


def _children(node: Mapping[str, Any], path: str) -> Iterator[Row]:
    """The rows below ``node``: its properties, its items' and its values' properties, and
    those of each alternative of a oneOf."""
    required = set(node.get("required", ()))
    for key, child in (node.get("properties") or {}).items():
        yield from _rows(child, f"{path}.{key}" if path else key, key in required)
    if isinstance(node.get("items"), Mapping):
        yield from _children(node["items"], f"{path}[]")
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        yield from _children(extra, f"{path}.{_key(node)}")
    for alternative in node.get("oneOf", ()):
        yield from _children(alternative, path)


def _rows(node: Mapping[str, Any], path: str, required: bool) -> Iterator[Row]:
    yield Row(path=path, type=type_of(node), required=required,
              description=str(node.get("description", "")))
    yield from _children(node, path)


def schema_doc(name: str) -> SchemaDoc:
    """``schema/<name>.json`` as rows: every property path with its type and description,
    then its named types (``$defs``)."""
    path = REPO / "schema" / f"{name}.json"
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DocsError(f"{path.relative_to(REPO)}: {e}") from e
    types = tuple(TypeDoc(name=key, type=type_of({k: v for k, v in node.items() if k != "title"}),
                          description=" ".join(filter(None, (node.get("title", ""),
                                                             node.get("description", "")))),
                          rows=tuple(_children(node, "")))
                  for key, node in schema.get("$defs", {}).items())
    return SchemaDoc(name=name, title=schema.get("title", name),
                     description=schema.get("description", ""), id=schema.get("$id", ""),
                     rows=tuple(_children(schema, "")), types=types)


# -- benchmarks' results ------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class BenchRun:
    file: str
    date: str
    machine: str
    load: str   # the load average before the run, where it was taken
    command: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Benchmark:
    benchmark: str
    title: str
    what: str
    runs: tuple[BenchRun, ...]   # newest first


def _field(doc: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if not isinstance(doc.get(key), kind):
        raise DocsError(f"{where}: '{key}' must be a {kind.__name__}; see benchmarks/record.py")
    return doc[key]


def _shown(value: object, where: str) -> str:
    """A cell as the table shows it (its unit is in the column's heading)."""
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DocsError(f"{where}: {value!r} is not a string, a number or null")
    if isinstance(value, str):
        return value
    return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"


# A commit named in a row's label, "(71bb646)" or "(commit dd2b124 and later)": the history of
# the change, which the result file's notes keep; the page shows what was measured.
_COMMIT = re.compile(r"\s*\((?:commit )?[0-9a-f]{7,40}(?: and later)?\)")


def _undated(text: str) -> str:
    return _COMMIT.sub("", text)


def bench_run(path: Path) -> tuple[str, str, str, BenchRun]:
    """One result file: (benchmark, title, what, the run), each key checked."""
    where = str(path.relative_to(REPO))
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DocsError(f"{where}: {e}") from e
    if not isinstance(doc, dict):
        raise DocsError(f"{where}: not a JSON object; see benchmarks/record.py")
    columns = _field(doc, "columns", list, where)
    names = []
    for i, column in enumerate(columns):
        if not isinstance(column, dict):
            raise DocsError(f"{where}: columns[{i}] must be an object {{name, unit}}")
        unit = _field(column, "unit", str, f"{where}: columns[{i}]")
        names.append(_field(column, "name", str, f"{where}: columns[{i}]")
                     + (f" ({unit})" if unit else ""))
    rows = []
    for i, row in enumerate(_field(doc, "rows", list, where)):
        if not isinstance(row, list) or len(row) != len(columns):
            raise DocsError(f"{where}: rows[{i}] must be a list of {len(columns)} cells")
        rows.append(tuple(_undated(_shown(v, f"{where}: rows[{i}]")) for v in row))
    machine = _field(doc, "machine", dict, where)
    run = BenchRun(file=where, date=_field(doc, "date", str, where),
                   machine=_field(machine, "summary", str, f"{where}: machine"),
                   load=str(machine.get("load_before", "")),
                   command=_field(doc, "command", str, where), columns=tuple(names),
                   rows=tuple(rows), notes=tuple(doc.get("notes", ())))
    return (_field(doc, "benchmark", str, where), _field(doc, "title", str, where),
            _field(doc, "what", str, where), run)


def bench_docs(folder: Path = BENCH_RESULTS) -> list[Benchmark]:
    """Every result file of ``folder``, grouped by benchmark (by name), newest run first; the
    title and description are the newest run's."""
    grouped: dict[str, list[tuple[str, str, BenchRun]]] = {}
    for path in sorted(folder.glob("*.json")):
        benchmark, title, what, run = bench_run(path)
        grouped.setdefault(benchmark, []).append((title, what, run))
    found = []
    for benchmark, runs in sorted(grouped.items()):
        runs.sort(key=lambda item: (item[2].date, item[2].file), reverse=True)
        found.append(Benchmark(benchmark=benchmark, title=runs[0][0], what=runs[0][1],
                               runs=tuple(run for _, _, run in runs)))
    return found


# -- pages --------------------------------------------------------------------------------------

def flat(text: object) -> str:
    """Text on one line, with '<' and '>' outside code spans as entities (Markdown would take
    ``<vendor>`` for an HTML tag and hide it)."""
    parts = " ".join(str(text).split()).split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def cell(text: object) -> str:
    """:func:`flat` text in a table cell: a '|' outside code spans escaped. Python-Markdown,
    which builds the site, splits no row on a '|' inside a code span and would show a
    backslash there (GitHub's own renderer differs: the site is the reference)."""
    parts = flat(text).split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("|", "\\|")
    return "`".join(parts)


def environment() -> jinja2.Environment:
    # Markdown, not HTML: no autoescape; table cells go through the `cell` filter.
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False,
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(cell=cell, flat=flat)
    env.globals["banner"] = (f"<!-- Generated by `{COMMAND}`: do not edit; "
                             f"`{COMMAND} --check` fails CI when this page is stale. -->")
    return env


def pages() -> dict[Path, str]:
    """Each generated page's path and its text."""
    env = environment()
    found = {DOCS / "reference" / "tasks.md":
             env.get_template("tasks.md.j2").render(tasks=task_docs())}
    for name in SCHEMAS:
        found[DOCS / "reference" / f"{name}.md"] = \
            env.get_template("schema.md.j2").render(schema=schema_doc(name))
    found[DOCS / "performance.md"] = \
        env.get_template("performance.md.j2").render(benchmarks=bench_docs())
    return found


def stale(generated: Mapping[Path, str]) -> str:
    """The unified diff between the committed pages and ``generated`` ('' when none)."""
    diff: list[str] = []
    for path, text in generated.items():
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        name = str(path.relative_to(REPO))
        diff += difflib.unified_diff(old.splitlines(keepends=True),
                                     text.splitlines(keepends=True), name, name + " (new)")
    return "".join(diff)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only compare; exit 1 and show the diff when a page is stale")
    args = parser.parse_args(argv)
    try:
        generated = pages()
    except DocsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.check:
        diff = stale(generated)
        if diff:
            sys.stdout.write(diff)
            print(f"the generated docs are stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        print("the generated docs are up to date")
        return 0
    for path, text in generated.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
