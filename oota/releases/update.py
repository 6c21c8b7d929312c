"""``release-check --update``: rewrite the torch axes of matrix.yaml to N and N-1.

The text is edited at the YAML nodes' positions, so comments and formatting survive. A rule
(``default``, ``include``, ``exclude``) that names a release the update removes from the axis
is MOVED to the release that replaces it: the newest kept release of the same minor, else the
oldest newer one, else the newest (2.13.0 -> 2.14.1 when the axis becomes 2.15.0, 2.14.1).
Each move is listed in the output. A default left naming a removed release would match no
cell and make every task fail; an include would bring the removed release back.

What matrix.yaml pins (``{release: "2.13.0", pinned: REASON}`` on the axis, or ``pinned:
REASON`` on a default or include entry; :mod:`oota.config.matrix`) survives: the release stays
on the axis, the pinned rule is not moved, and each is listed as ``kept:`` with its reason.

The rewritten text is then loaded, planned and its defaults selected exactly as every task
does; when that fails the file is left unchanged and the update is refused with the list of
what to edit. Only a matrix that loads is written, atomically.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.version import Version

from oota.config.companions import CompanionCache, cache_path, dump_cache
from oota.config.matrix import Matrix, Pin, load_matrix
from oota.errors import EnvironmentProblem, InputError, OotaError
from oota.files import DATA_LIMIT, read_text, write_atomic
from oota.plan import plan, select
from oota.releases.check import ReleaseCheck
from oota.releases.facts import vendor_facts

RULES = ("default", "include", "exclude")


@dataclass(frozen=True, kw_only=True, slots=True)
class MatrixUpdate:
    file: Path
    changed: dict[str, tuple[str, ...]]     # vendor -> new torch axis
    moved: tuple[str, ...]                  # "matrix.yaml:37: vendors.cpu.default[0].torch ..."
    notes: tuple[str, ...]
    kept: tuple[str, ...] = ()              # "matrix.yaml:31:33: vendors.cpu.torch[2] 2.13.0 ..."
    diff: str = ""                          # what was written, as a unified diff ("" nothing)


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheUpdate:
    """vendors/companions.yaml after ``--update``: written only when a pair changed."""

    file: str                               # as shown: vendors/companions.yaml
    changed: bool
    read: str                               # the date of the reading it holds
    index: str
    diff: str = ""                          # what was written, as a unified diff
    exists: bool = True                     # False: no file, and no pair to write into one


@dataclass(frozen=True, kw_only=True, slots=True)
class _Edit:
    start: int
    end: int
    text: str


def planned_torch(check: ReleaseCheck, matrix: Matrix) -> dict[str, tuple[str, ...]]:
    """Per checked vendor the torch axis --update writes, newest first (matrix.yaml's order):
    N and N-1 for vendors that track torch, otherwise those of the two that the vendor's data
    (``facts.compat`` or its extension's metadata) pairs with for at least one Python."""
    targets = [v for v in (check.current, check.previous) if v is not None]
    out = {}
    for name in dict.fromkeys(r.vendor for r in check.rows):
        tracks = vendor_facts(matrix.vendors[name].vendor).tracks_torch
        out[name] = tuple(str(v) for v in targets if tracks or check.supported(name, v))
    return out


def update_matrix(matrix: Matrix, check: ReleaseCheck) -> MatrixUpdate:
    """Rewrite each checked vendor's torch axis in matrix.yaml (and move the rules that named
    a removed release); refuse, leaving the file as it is, when the result would not load."""
    text = original = read_text(matrix.file, DATA_LIMIT)
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    edits: list[_Edit] = []
    changed: dict[str, tuple[str, ...]] = {}
    moved: list[str] = []
    notes: list[str] = []
    kept: list[str] = []
    for name, planned in planned_torch(check, matrix).items():
        node = _find(root, ("vendors", name, "torch"))
        if not planned:
            notes.append(f"{name}: no pairing for torch {check.current} or {check.previous}; "
                         "torch axis left as it is")
            continue
        if not isinstance(node, yaml.SequenceNode):
            notes.append(f"{name}: has no torch list (only include entries); left as it is")
            continue
        axis = _Axis.of(node, text)
        pins = [p for p in matrix.vendors[name].pins if _among(p.torch, axis.releases)]
        versions = _with_pins(planned, pins)
        kept += [_kept_line(p, planned, matrix.file.name) for p in pins]
        if axis.releases == list(versions):
            continue
        edits.append(_axis_edit(node, versions, text, axis))
        changed[name] = versions
        removed = [v for v in axis.releases if not _among(v, versions)]
        for edit, line in _rule_moves(root, name, removed, versions, matrix.file.name):
            edits.append(edit)
            moved.append(line)
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[:edit.start] + edit.text + text[edit.end:]
    diff = file_diff(original, text, str(matrix.file.relative_to(matrix.root)))
    if changed:
        _write_if_valid(matrix.file, text, changed, moved, diff)
    return MatrixUpdate(file=matrix.file, changed=changed, moved=tuple(moved), notes=tuple(notes),
                        kept=tuple(dict.fromkeys(kept)), diff=diff)


def update_companions(vendors_dir: Path, cache: CompanionCache,
                      changed: bool = True) -> CacheUpdate:
    """Write vendors/companions.yaml (atomically) when a pair ``changed`` and its text with
    it; a file whose pairs all stand is left as it is."""
    file = cache_path(vendors_dir)
    shown = f"{vendors_dir.name}/{file.name}"
    old = read_text(file, DATA_LIMIT) if file.is_file() else ""
    # No pair to keep and no file yet (a companion that declares nothing): nothing to write.
    text = dump_cache(cache, file) if changed and (old or cache.companions) else old
    if text != old:
        try:
            write_atomic(file, text)
        except OSError as exc:
            raise EnvironmentProblem(f"{file}: cannot write ({exc.strerror}); left "
                                     "unchanged") from None
    return CacheUpdate(file=shown, changed=text != old, read=cache.read, index=cache.index,
                       diff=file_diff(old, text, shown), exists=bool(text))


def file_diff(old: str, new: str, shown: str) -> str:
    """A unified diff of one file, as ``git diff`` and ``generate --check`` show it."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True),
                                        new.splitlines(keepends=True), f"a/{shown}", f"b/{shown}"))


@dataclass(frozen=True, kw_only=True, slots=True)
class _Axis:
    """A torch axis as written: its releases (plain or pinned) and each entry's own text, so
    a pinned entry or a channel ({channel: nightly}) is written back exactly as it was."""

    releases: list[str]
    texts: dict[str, str]       # release -> its entry's text, for pinned mapping entries
    channels: tuple[str, ...]   # the channel entries' texts, kept after the releases

    @classmethod
    def of(cls, node: yaml.SequenceNode, text: str) -> _Axis:
        releases, texts, channels = [], {}, []
        for item in node.value:
            source = text[item.start_mark.index:item.end_mark.index]
            release = _find(item, ("release",))
            if isinstance(item, yaml.ScalarNode):
                releases.append(str(item.value))
            elif isinstance(release, yaml.ScalarNode):
                releases.append(str(release.value))
                texts[str(release.value)] = source
            else:
                channels.append(source)
        return cls(releases=releases, texts=texts, channels=tuple(channels))

    def items(self, versions: tuple[str, ...], style: str | None) -> list[str]:
        """The new axis's entries: each release as it was written when it stays (a pinned
        entry keeps its mapping), a new one quoted in the axis's style, then the channels."""
        def written(version: str) -> str:
            old = next((r for r in self.texts if _among(r, [version])), None)
            return self.texts[old] if old is not None else _quote(version, style)
        return [written(v) for v in versions] + list(self.channels)


def _with_pins(planned: tuple[str, ...], pins: list[Pin]) -> tuple[str, ...]:
    """N and N-1, plus each pinned release not among them, newest first."""
    extra = [p.torch for p in pins if not _among(p.torch, planned)]
    versions = list(dict.fromkeys([*planned, *extra]))
    return tuple(sorted(versions, key=lambda v: _version(v) or Version("0"), reverse=True))


def _kept_line(pin: Pin, planned: tuple[str, ...], file: str) -> str:
    what = f"{pin.rule} stays on torch {pin.torch}" if pin.rule else f"torch {pin.torch} stays"
    why = "" if not _among(pin.torch, planned) else ", and is N or N-1 anyway"
    return f"{file}:{pin.at}: {what} (pinned: {pin.reason}{why})"


def _axis_edit(node: yaml.SequenceNode, versions: tuple[str, ...], text: str,
               axis: _Axis) -> _Edit:
    # A block sequence's end mark lies at the next key, past trailing comments: end the edit
    # at its last item instead, so those comments stay.
    end = node.end_mark.index if node.flow_style or not node.value \
        else node.value[-1].end_mark.index
    style = next((n.style for n in node.value if isinstance(n, yaml.ScalarNode)), '"')
    return _Edit(start=node.start_mark.index, end=end,
                 text=_sequence_text(node, axis.items(versions, style), text))


def _rule_moves(root: yaml.Node | None, vendor: str, removed: list[str], versions: tuple[str, ...],
                file: str) -> list[tuple[_Edit, str]]:
    out = []
    for rule in RULES:
        entries = _find(root, ("vendors", vendor, rule))
        if not isinstance(entries, yaml.SequenceNode):
            continue
        for i, entry in enumerate(entries.value):
            torch = _find(entry, ("torch",))
            if not isinstance(torch, yaml.ScalarNode) or not _among(str(torch.value), removed):
                continue
            new = replacement(str(torch.value), versions)
            edit = _Edit(start=torch.start_mark.index, end=torch.end_mark.index,
                         text=_quote(new, torch.style))
            out.append((edit, f"{file}:{torch.start_mark.line + 1}: vendors.{vendor}.{rule}[{i}]"
                              f".torch {torch.value} -> {new} ({torch.value} left the axis)"))
    return out


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except ValueError:  # InvalidVersion, or more digits than int() reads
        return None


def _among(value: str, versions: tuple[str, ...] | list[str]) -> bool:
    """Is ``value`` one of ``versions``, as versions ('2.13' is '2.13.0', as plan reads it)?"""
    mine = _version(value)
    return any(value == v or (mine is not None and mine == _version(v)) for v in versions)


def replacement(removed: str, versions: tuple[str, ...]) -> str:
    """The release on the new axis that takes over a removed one's rules: the newest of the
    same minor, else the oldest newer one, else the newest."""
    old = _version(removed)
    axis = sorted((v for v in (_version(t) for t in versions) if v is not None), reverse=True)
    if old is None or not axis:
        return versions[0]
    same = [v for v in axis if v.release[:2] == old.release[:2]]
    newer = [v for v in axis if v > old]
    pick = same[0] if same else newer[-1] if newer else axis[0]
    return next(t for t in versions if _version(t) == pick)


def _write_if_valid(file: Path, text: str, changed: dict[str, tuple[str, ...]],
                    moved: list[str], diff: str) -> None:
    """Load, plan and select the rewritten matrix as every task does; write it only if that
    works. The check copy sits beside the file: the vendors/ folder is found from there."""
    try:
        fd, name = tempfile.mkstemp(prefix=".release-check-", suffix=".yaml", dir=file.parent)
    except OSError as exc:
        raise EnvironmentProblem(f"{file}: cannot write beside it ({exc.strerror}); "
                                 "release-check --update needs a writable folder") from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        candidate = load_matrix(tmp)
        select(candidate, plan(candidate))
    except (OotaError, yaml.YAMLError) as exc:
        planned = "; ".join(f"{n} torch [{', '.join(v)}]" for n, v in changed.items())
        problems = str(exc).replace(str(tmp), file.name).replace(tmp.name, file.name)
        raise InputError(
            f"release-check --update: {file} left unchanged; with the planned axes "
            f"({planned}{'; ' + '; '.join(moved) if moved else ''}) it would not load:\n"
            f"{problems}\nedit these in {file.name} by hand (line numbers are those of the "
            "rewritten file), then run release-check --update again; the change it would "
            f"have written:\n{diff.rstrip()}") from None
    finally:
        tmp.unlink(missing_ok=True)
    try:
        write_atomic(file, text)
    except OSError as exc:
        raise EnvironmentProblem(f"{file}: cannot write ({exc.strerror}); left unchanged") from None


def _find(node: yaml.Node | None, path: tuple[str, ...]) -> yaml.Node | None:
    for key in path:
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next((v for k, v in node.value if k.value == key), None)
    return node


def _quote(value: str, style: str | None) -> str:
    if style in ("'", '"'):
        return f"{style}{value}{style}"
    # A plain "2.15" would load as the float 2.15: quote whatever is not a plain string.
    plain = yaml.safe_load(value)
    return value if isinstance(plain, str) else f'"{value}"'


def _sequence_text(node: yaml.SequenceNode, items: list[str], text: str) -> str:
    if node.flow_style:
        return "[" + ", ".join(items) + "]"
    line_start = text.rfind("\n", 0, node.start_mark.index) + 1
    indent = text[line_start:node.start_mark.index]
    indent = indent if not indent.strip() else " " * node.start_mark.column
    # The node ends after its last item; the text after it (newline, comments) is kept.
    return ("\n" + indent).join(f"- {item}" for item in items)
