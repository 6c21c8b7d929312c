"""Strict YAML loading that remembers where every value came from.

PyYAML's safe loader silently keeps the last of two duplicate keys, turns ``3.10`` into the
float ``3.1`` and expands alias bombs until memory runs out. This module composes the node
graph instead and builds plain Python values from it itself, so that:

* every mapping key and sequence item keeps its ``file:line:column``;
* duplicate keys, non-string keys, documents that expand past a node budget and documents
  nested deeper than any data file needs are errors (never a RecursionError);
* floats keep their source text (everything float-shaped in our data is a version).

Nothing below the loaders sees a raw YAML node; they see :class:`Doc` (values + locations).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from oota.errors import MatrixError
from oota.files import DATA_LIMIT, NotARegularFile, TooLarge, read_bytes

# A matrix with every vendor fully spelled out is a few thousand nodes; a billion-laughs
# document needs millions. The budget sits far above the first and far below the second.
MAX_NODES = 50_000
# Our deepest real path (vendors.<v>.verify.tolerances.<dtype>.rtol) is six levels. Composing and
# building recurse per level, so a limit far below Python's recursion limit keeps a hostile
# document an input error.
MAX_DEPTH = 100

Path_ = tuple[str | int, ...]


def path_str(path: Path_) -> str:
    """Render a YAML path as ``vendors.cuda.python[2]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<document>"


@dataclass(slots=True)
class Doc:
    """A loaded YAML document: plain values plus the location of every path in it."""

    file: str
    data: Any
    marks: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def where(self, path: Path_) -> str:
        """``file:line:col`` of the nearest located ancestor of ``path``."""
        for cut in range(len(path), -1, -1):
            mark = self.marks.get(path[:cut])
            if mark:
                return f"{self.file}:{mark[0]}:{mark[1]}"
        return f"{self.file}:1:1"

    def error(self, path: Path_, message: str, suggestion: str | None = None) -> None:
        """Record one problem; they are raised together by :meth:`raise_if_problems`."""
        text = f"{self.where(path)}: {path_str(path)}: {message}"
        if suggestion:
            text += f"; {suggestion}"
        self.problems.append(text)

    def sort_problems(self) -> None:
        """Put the problems in file order (each starts ``file:line:col:``)."""
        def line_and_column(problem: str) -> tuple[int, int]:
            match = _LOCATION.search(problem)
            return (int(match.group(1)), int(match.group(2))) if match else (0, 0)
        self.problems.sort(key=line_and_column)

    def raise_if_problems(self) -> None:
        if self.problems:
            raise MatrixError(list(self.problems))


_LOCATION = re.compile(r"^\S*?:(\d+):(\d+): ")


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """A ``did you mean 'x'?`` hint from the closest choice, or a list of valid ones."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    if choices:
        return "expected one of: " + ", ".join(sorted(str(c) for c in choices))
    return None


class _NodeBudgetExceeded(Exception):
    def __init__(self, path: Path_):
        self.path = path


class _TooDeep(Exception):
    def __init__(self, node: yaml.Node):
        self.node = node


class _RecursiveAlias(Exception):
    def __init__(self, node: yaml.Node):
        self.node = node


class _Builder:
    """Turns a composed node graph into plain values, recording marks and problems."""

    def __init__(self, doc: Doc):
        self.doc = doc
        self.visited = 0
        self.open: set[int] = set()   # collections being built: one seen again is a cycle

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.visited += 1
        if self.visited > MAX_NODES:
            raise _NodeBudgetExceeded(path)
        self.doc.marks.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        if len(path) >= MAX_DEPTH:  # the root collection is level 1
            raise _TooDeep(node)
        if id(node) in self.open:
            raise _RecursiveAlias(node)
        self.open.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            return [self.build(item, path + (i,)) for i, item in enumerate(node.value)]
        finally:
            self.open.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> dict[str, Any]:
        out: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged.update(self._merge_source(value_node, path))
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._problem_at(key_node, path, "mapping keys must be plain strings")
                continue
            key = key_node.value
            if key in out:
                first = self.doc.marks.get(path + (key,), (0, 0))
                self._problem_at(key_node, path + (key,),
                                 f"duplicate key '{key}' (first defined at line {first[0]})",
                                 "remove one of them")
                continue
            self.doc.marks[path + (key,)] = (key_node.start_mark.line + 1,
                                             key_node.start_mark.column + 1)
            out[key] = self.build(value_node, path + (key,))
        for key, value in merged.items():
            out.setdefault(key, value)
        return out

    def _merge_source(self, node: yaml.Node, path: Path_) -> dict[str, Any]:
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        merged: dict[str, Any] = {}
        for source in sources:
            value = self.build(source, path)
            if isinstance(value, dict):
                for key, item in value.items():
                    merged.setdefault(key, item)
            else:
                self._problem_at(source, path,
                                 "a merge key '<<' needs a mapping or list of mappings")
        return merged

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        if node.tag == "tag:yaml.org,2002:null":
            return None
        if node.tag == "tag:yaml.org,2002:bool":
            return node.value.lower() in ("true", "yes", "on")
        if node.tag == "tag:yaml.org,2002:int":
            try:
                return int(node.value.replace("_", ""), 0)
            except ValueError:
                return node.value
        # Floats stay text: '3.10' is a Python version, not 3.1.
        return node.value

    def _problem_at(self, node: yaml.Node, path: Path_, message: str,
                    suggestion: str | None = None) -> None:
        where = f"{self.doc.file}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"
        text = f"{where}: {path_str(path)}: {message}"
        self.doc.problems.append(text + (f"; {suggestion}" if suggestion else ""))


def load_yaml(path: Path, display_name: str | None = None) -> Doc:
    """Load one YAML file into a :class:`Doc`.

    A file that is not one YAML mapping (or list) raises MatrixError; problems in an otherwise
    readable document (duplicate or non-string keys) are left in ``doc.problems`` for the caller
    to raise with its own, via :meth:`Doc.raise_if_problems`."""
    name = display_name or str(path)
    return parse_yaml(read_text(path, name), name)


def read_text(path: Path, name: str) -> str:
    """A data file's UTF-8 text; a missing, unreadable, oversized (:data:`DATA_LIMIT`),
    not regular (a FIFO, /dev/zero) or non-UTF-8 file is a MatrixError."""
    try:
        raw = read_bytes(path, DATA_LIMIT)
    except FileNotFoundError:
        raise MatrixError([f"{name}: file not found"]) from None
    except IsADirectoryError:
        raise MatrixError([f"{name}: is a folder, not a file"]) from None
    except (TooLarge, NotARegularFile) as exc:
        raise MatrixError([f"{name}: {exc.strerror}"]) from None
    except OSError as exc:  # permissions, an unreadable mount: the user can fix it, not oota
        raise MatrixError([f"{name}: cannot read the file ({exc.strerror or exc}); check "
                           "that it is a readable regular file"]) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise MatrixError([f"{name}:{line}:{column}: not UTF-8 text ({exc.reason} at byte "
                           f"{exc.start}); save the file as UTF-8"]) from None


def parse_yaml(text: str, name: str, *, top: type = dict, expected: str = "",
               if_empty: str = "") -> Doc:
    """Parse YAML text; see :func:`load_yaml`. ``top`` is the type the document must be
    (``dict`` or ``list``); ``expected`` describes it, ``if_empty`` is the advice for an empty
    file."""
    expected = expected or ("a mapping at the top level" if top is dict else "a list")
    root = _one_root(text, name, if_empty or f"expected {expected}")
    wanted = yaml.MappingNode if top is dict else yaml.SequenceNode
    if not isinstance(root, wanted):
        kind = ("a list" if isinstance(root, yaml.SequenceNode) else
                "a mapping" if isinstance(root, yaml.MappingNode) else "a single value")
        raise MatrixError([f"{_at(name, root.start_mark)}: the document is {kind}; "
                           f"expected {expected}"])
    doc = Doc(file=name, data=None)
    doc.data = _build(doc, root, text)
    # Problems found while building (duplicate keys, non-string keys) stay in doc.problems:
    # the caller validates the values too and raises once with every problem of the file.
    return doc


class _Mark(Protocol):
    """A position in the text (PyYAML has two Mark classes, pure Python and libyaml's)."""

    line: int
    column: int


def _at(name: str, mark: _Mark | None) -> str:
    return f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else f"{name}:1:1"


def _one_root(text: str, name: str, if_empty: str) -> yaml.Node:
    """The root node of the file's only document."""
    nodes = _compose(text, name)
    if not nodes or nodes[0] is None or (isinstance(nodes[0], yaml.ScalarNode)  # '---' only
                                         and nodes[0].tag == "tag:yaml.org,2002:null"
                                         and nodes[0].value == ""):
        raise MatrixError([f"{name}:1:1: the file is empty; {if_empty}"])
    if len(nodes) > 1:
        starts = [e.start_mark for e in yaml.parse(text, Loader=yaml.SafeLoader)
                  if isinstance(e, yaml.DocumentStartEvent)]
        mark = starts[1] if len(starts) > 1 else nodes[1].start_mark
        raise MatrixError([f"{_at(name, mark)}: a second YAML document starts here (the file "
                           f"holds {len(nodes)}); expected exactly one, remove the '---' "
                           "separator"])
    return nodes[0]


# libyaml's composer, when PyYAML was built with it: the same nodes, tags and marks as the pure
# Python one, about twenty times faster (a command that loads the matrix and every vendor
# file spends 0.2 s in the pure one on a 2-core machine). The pure one stays the reference:
# a document the fast path cannot take as it is goes to it, so every error reads the same.
_FAST_LOADER: type | None = getattr(yaml, "CSafeLoader", None)


def _compose_fast(text: str) -> list[yaml.Node] | None:
    """The document's nodes by libyaml, or None where the pure composer must answer: PyYAML
    without libyaml, a character the pure reader refuses, anything libyaml finds malformed,
    and a document nested past MAX_DEPTH (libyaml's composer recurses in C once per level,
    where no RecursionError would stop a hostile document; its parser, walked first, does
    not recurse)."""
    if _FAST_LOADER is None or yaml.reader.Reader.NON_PRINTABLE.search(text):
        return None
    try:
        if _past_max_depth(yaml.parse(text, Loader=_FAST_LOADER)) is not None:
            return None
        return list(yaml.compose_all(text, Loader=_FAST_LOADER))
    except yaml.YAMLError:
        return None


def _compose(text: str, name: str) -> list[yaml.Node]:
    fast = _compose_fast(text)
    if fast is not None:
        return fast
    try:
        return list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = _at(name, mark) if mark else name
        problem = exc.problem or exc.context or "malformed YAML"
        if exc.problem and exc.context and exc.context_mark:  # where the unclosed thing began
            problem += (f" ({exc.context} that starts at line {exc.context_mark.line + 1}, "
                        f"column {exc.context_mark.column + 1})")
        raise MatrixError([f"{where}: malformed YAML: {problem}"]) from None
    except yaml.reader.ReaderError as exc:  # a control character: located by its offset
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise MatrixError([f"{name}:{line}:{column}: a control character YAML does not allow "
                           f"(U+{exc.character:04X}); remove it"]) from None
    except yaml.YAMLError as exc:
        raise MatrixError([f"{name}: malformed YAML: {' '.join(str(exc).split())}"]) from None
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise _too_deep(text, name) from None


def _build(doc: Doc, root: yaml.Node, text: str) -> Any:
    try:
        return _Builder(doc).build(root, ())
    except _RecursiveAlias as exc:
        raise MatrixError([f"{_at(doc.file, exc.node.start_mark)}: a recursive alias: this "
                           "anchored value contains an alias to itself; write the values out"]
                          ) from None
    except _TooDeep as exc:
        raise _too_deep_at(doc.file, exc.node.start_mark) from None
    except RecursionError:  # aliases can nest deeper than the text does
        raise _too_deep(text, doc.file) from None
    except _NodeBudgetExceeded as exc:
        first = exc.path[:1]
        raise MatrixError([f"{doc.where(first)}: {path_str(first)}: the document expands to "
                           f"more than {MAX_NODES} nodes (an alias bomb?); write the values "
                           "out or use fewer aliases"]) from None


def _too_deep(text: str, name: str) -> MatrixError:
    """The error for a document nested past MAX_DEPTH, located by walking the event stream
    (the parser keeps its own stack, so this does not recurse)."""
    try:
        event = _past_max_depth(yaml.parse(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        event = None
    if event is not None:
        return _too_deep_at(name, event.start_mark)
    return MatrixError([f"{name}: the document nests too deeply to be read (more than "
                        f"{MAX_DEPTH} levels, counting what its aliases expand to); flatten it"])


def _past_max_depth(events: Iterator[yaml.Event]) -> yaml.Event | None:
    """The event that opens a collection past MAX_DEPTH, if any (a YAMLError from the parser
    goes to the caller)."""
    depth = 0
    for event in events:
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return event
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def _too_deep_at(name: str, mark: _Mark | None) -> MatrixError:
    return MatrixError([f"{_at(name, mark)}: the document nests more than {MAX_DEPTH} levels "
                        "deep here; oota's files need a few levels: flatten it"])
