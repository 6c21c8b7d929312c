"""One run as the history stores it, built from :class:`~oota.results.model.Result` objects.

A run is what one command appended: a build, a verify, a merged report, or the results of one
earlier run found by ``history import``. Its key is the run id the results carry, so appending
the same results again finds the run already there; results written before run ids existed
get a key derived from what they hold, stable across imports.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from oota import times
from oota.results.assemble import now
from oota.results.jsonfields import JSON
from oota.results.model import CellRef, Result, TestOutcome
from oota.vocab import Status

Origin = Literal["build", "verify", "merge", "import"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Figure:
    """One measurement a test recorded (a model's seconds, peak bytes, max difference...)."""

    test_id: str
    name: str
    number: float | None = None
    text: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Inputs:
    """What a cell's outcome depends on, as resolved in the image: a change here between two
    runs is what ``history query`` (and the blame to come) names."""

    torch: str | None = None
    torch_git: str | None = None
    toolkit: str | None = None
    base: str | None = None
    fingerprint: str = ""
    host: str = ""
    engine: str = ""  # the Engine's identity (engine_id); '' in results older than identities
    suite: str = ""  # oota's version: the verify suite that judged the cell
    extensions: tuple[tuple[str, str | None], ...] = ()  # requested packages and versions
    requested: tuple[str, ...] = ()  # the pip requirements the cell asked for, as written
    env: tuple[tuple[str, str], ...] = ()  # the vendor's pass_env switches the run set

    def differences(self, before: Inputs) -> list[str]:
        """'torch 2.5.0 -> 2.5.1' for every input that differs from ``before``. What one of
        the two runs never resolved (a build that stopped before installing anything) is not
        known to have changed, and is left out: the inputs both runs had say what changed."""
        resolved = (("torch", before.torch, self.torch), ("torch commit", before.torch_git,
                    self.torch_git), ("toolkit", before.toolkit, self.toolkit),
                    ("base image", before.base, self.base))
        given = (("fingerprint", before.fingerprint, self.fingerprint),
                 ("oota", before.suite, self.suite))
        found = [f"{name} {old} -> {new}" for name, old, new in resolved
                 if old and new and old != new]
        found += [f"{name} {old or '-'} -> {new or '-'}" for name, old, new in given
                  if old != new]
        found += self._host_change(before) + env_changes(before.env, self.env)
        old_ext, new_ext = dict(before.extensions), dict(self.extensions)
        for name in sorted(old_ext.keys() | new_ext.keys() if old_ext and new_ext else ()):
            if name != "torch" and old_ext.get(name) != new_ext.get(name):
                found.append(f"{name} {old_ext.get(name) or '-'} -> {new_ext.get(name) or '-'}")
        return found + requirement_changes(before.requested, self.requested)

    def _host_change(self, before: Inputs) -> list[str]:
        """The host, when the Engine really changed: by identity where both runs know it (one
        Engine called 'main' in hosts.yaml and 'vm' without one is no change), else by name."""
        if self.engine and before.engine:
            if self.engine == before.engine:
                return []
            if self.host == before.host:
                return [f"host {self.host} (engine {before.engine[:8]} -> {self.engine[:8]})"]
        elif self.host == before.host:
            return []
        return [f"host {before.host or '-'} -> {self.host or '-'}"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CellRecord:
    """One cell's result in a run: which cell (the result's own reference, fingerprint
    included), outcome, where it ran, what it resolved to. Tests and figures are in id order,
    one of each (the first, if a suite reported one twice), as the store gives them back."""

    cell: CellRef
    status: Status
    message: str
    host: str             # the Engine's name (a copy's, in a merged run: 'vm, run R')
    engine: str | None
    engine_id: str | None
    hostname: str | None
    started_at: str
    finished_at: str
    image_tag: str | None
    image_id: str | None
    image_digest: str | None
    base_ref: str | None
    inputs: Inputs
    tests: tuple[TestOutcome, ...]   # without their data: figures hold the numbers
    figures: tuple[Figure, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    key: str
    origin: Origin
    started_at: str
    finished_at: str
    oota_version: str
    git_revision: str | None
    hosts: tuple[str, ...]
    cells: tuple[CellRecord, ...]


def env_changes(before: Sequence[tuple[str, str]], after: Sequence[tuple[str, str]]
                ) -> list[str]:
    """'pass_env REFDEV_WRONG_OP: unset -> tanh' for each switch set, changed or unset."""
    old, new = dict(before), dict(after)
    return [f"pass_env {name}: {old.get(name, 'unset')} -> {new.get(name, 'unset')}"
            for name in sorted(old.keys() | new.keys()) if old.get(name) != new.get(name)]


def requirement_changes(before: Sequence[str], after: Sequence[str]) -> list[str]:
    """'requirement torch==2.13.0+cpu -> torch==2.12.0+cpu' for each project whose requirement
    line changed, was added or was dropped (paired by project name)."""
    old, new = _by_project(before), _by_project(after)
    return [f"requirement {old.get(name) or '-'} -> {new.get(name) or '-'}"
            for name in sorted(old.keys() | new.keys()) if old.get(name) != new.get(name)]


def _by_project(lines: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in lines:
        try:
            name: str = canonicalize_name(Requirement(line).name)
        except InvalidRequirement:
            name = line  # not a requirement pip reads either: compare the line itself
        found.setdefault(name, line)
    return found


def place(result: Result) -> str:
    """The host a result was made on (as the report names it)."""
    return result.host.place()


def run_key(results: Sequence[Result]) -> str:
    """The run id all ``results`` share; else a digest of which results they are."""
    ids = {r.run_id for r in results}
    if len(ids) == 1 and None not in ids:
        return str(next(iter(ids)))
    members = sorted(f"{r.cell.id}|{place(r)}|{r.run_id or ''}|{r.started_at}" for r in results)
    return "sha256:" + hashlib.sha256("\n".join(members).encode()).hexdigest()[:24]


def group_by_run(results: Iterable[Result]) -> list[list[Result]]:
    """``results`` split by the run that made them (those without a run id: one group)."""
    groups: dict[str, list[Result]] = {}
    for result in results:
        groups.setdefault(result.run_id or "", []).append(result)
    return [groups[k] for k in sorted(groups)]


def run_record(results: Sequence[Result], origin: Origin, git_revision: str | None) -> RunRecord:
    """The run that ``results`` (not empty) make up. Copies of one cell made on one host (a
    merged run holding a cell's re-run) are each kept, named by their run as the report names
    them: 'vm, run R'."""
    places = [(r.cell.id, place(r)) for r in results]
    cells = tuple(cell_record(r, f"{p}, run {r.run_id or r.started_at}"
                              if places.count((r.cell.id, p)) > 1 else p)
                  for r, (_, p) in zip(results, places, strict=True))
    # A merged run is the merge itself, made now: its results' times are their own runs'.
    merged = times.utc(now()) if origin == "merge" else ""
    return RunRecord(key=run_key(results), origin=origin,
                     started_at=merged or min(times.utc(r.started_at) for r in results),
                     finished_at=merged or max(times.utc(r.finished_at) for r in results),
                     oota_version=results[0].oota_version, git_revision=git_revision,
                     hosts=tuple(sorted({p for _, p in places})), cells=cells)


def cell_record(result: Result, host: str | None = None) -> CellRecord:
    image = result.image
    return CellRecord(
        cell=result.cell, status=result.status,
        message=result.message, host=host or place(result), engine=result.host.text("engine"),
        engine_id=result.host.text("engine_id"),
        hostname=result.host.text("hostname"), started_at=times.utc(result.started_at),
        finished_at=times.utc(result.finished_at), image_tag=image.tag if image else None,
        image_id=image.id if image else None, image_digest=image.digest if image else None,
        base_ref=image.base.ref if image and image.base else None, inputs=inputs_of(result),
        tests=tuple(sorted({t.id: replace(t, data={}) for t in reversed(result.tests)}.values(),
                           key=lambda t: t.id)),
        figures=tuple(sorted({(f.test_id, f.name): f for f in reversed(figures_of(result))}
                             .values(), key=lambda f: (f.test_id, f.name))))


def inputs_of(result: Result) -> Inputs:
    installed, image = result.installed, result.image
    torch = installed.torch if installed else None
    toolkit = (torch.cuda or torch.hip) if torch else None
    declared = f"{result.cell.toolkit} {result.cell.toolkit_version}" \
        if result.cell.toolkit and result.cell.toolkit_version else None
    extensions = tuple(sorted((name, p.version) for name, p in installed.packages.items()
                              if p.requested)) if installed else ()
    return Inputs(torch=torch.version if torch else None,
                  torch_git=torch.git_version if torch else None,
                  toolkit=toolkit or declared,
                  base=image.base.ref if image and image.base else None,
                  fingerprint=result.cell.fingerprint, host=place(result),
                  engine=result.host.text("engine_id") or "",
                  suite=result.oota_version, extensions=extensions,
                  requested=result.requested, env=tuple(sorted(result.pass_env().items())))


def figures_of(result: Result) -> list[Figure]:
    """Every scalar a test recorded in its data, nested keys joined with dots."""
    found: list[Figure] = []
    for test in result.tests:
        for name, value in _leaves(test.data, ""):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                found.append(Figure(test_id=test.id, name=name, number=float(value)))
            elif value is not None:
                found.append(Figure(test_id=test.id, name=name, text=str(value)))
    return found


def _leaves(value: JSON, prefix: str) -> list[tuple[str, JSON]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items()
                for leaf in _leaves(v, f"{prefix}.{k}" if prefix else k)]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{prefix}[{i}]")]
    return [(prefix, value)]
