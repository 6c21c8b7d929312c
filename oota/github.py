"""GitHub Actions as the scale-out engine: the job matrix of ``.github/workflows/oota.yml``.

``invoke matrix --format github`` prints one line of compact JSON, ``{"include": [...]}``, that
the workflow's plan job hands to ``fromJSON`` as the cell job's ``strategy.matrix``: one job per
cell, on the runners its vendor's ``ci.runs-on`` labels name (vendor.yaml). Pure: cells in, text
out; the workflow, not oota, talks to GitHub.

An empty selection prints ``{"include": []}``, which is valid JSON but a matrix GitHub refuses
("Matrix vector 'include' does not contain any values"): the workflow skips its fan-out when
the plan job counts no cell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from oota.errors import InputError
from oota.plan import Cell

# What the shipped workflow reads as ``matrix.<key>`` in its cell job (a test holds the
# workflow to these): every entry has them all.
KEYS = ("cell", "vendor", "name", "runs-on", "torch", "python", "os", "fingerprint")
# GitHub starts at most this many jobs from one matrix and fails the run past it.
MAX_JOBS = 256


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """One cell's job in the workflow's matrix."""

    cell: str                    # the cell id: `oota build --cell`, the artifact's name
    vendor: str
    name: str                    # the job's title in GitHub's list of jobs
    runs_on: tuple[str, ...]     # runner labels, all of which the runner must have
    torch: str
    python: str
    os: str
    # The cell's fingerprint (its inputs): the key of the cache that carries its last
    # verification from one run to the next, where it still holds.
    fingerprint: str
    toolkit: str | None = None   # e.g. "13.2" for a CUDA cell; absent from the entry when None

    def entry(self) -> dict[str, str | list[str]]:
        """The job as an ``include`` entry (``runs-on`` spelled as GitHub spells it)."""
        out: dict[str, str | list[str]] = {
            "cell": self.cell, "vendor": self.vendor, "name": self.name,
            "runs-on": list(self.runs_on), "torch": self.torch, "python": self.python,
            "os": self.os, "fingerprint": self.fingerprint}
        if self.toolkit is not None:
            out["toolkit"] = self.toolkit
        return out


def job_for(cell: Cell, fingerprint: str) -> Job:
    coords = cell.coordinates()
    toolkit = coords["toolkit_version"]
    return Job(cell=cell.id, vendor=cell.vendor.name, name=title(cell),
               runs_on=cell.vendor.ci.labels_for(cell.platform), torch=cell.torch_text,
               python=str(cell.python), os=cell.os.key, fingerprint=fingerprint,
               toolkit=toolkit)


def title(cell: Cell) -> str:
    """A short job title: ``cuda / torch 2.15.0 / cu13.2 / py3.11 / debian12`` (the toolkit as
    the cell id spells it: a display name such as "Intel Gaudi software" crowds the list)."""
    parts = [cell.vendor.name, f"torch {cell.torch_text}"]
    if cell.vendor.toolkit is not None and cell.toolkit is not None:
        parts.append(f"{cell.vendor.toolkit.id_prefix}{cell.toolkit}")
    parts += [f"py{cell.python}", cell.os.key]
    if cell.platform != "linux/amd64":
        parts.append(cell.arch)
    return " / ".join(parts)


def matrix_json(jobs: list[Job]) -> str:
    """The one line ``fromJSON`` reads: compact, so it fits a ``$GITHUB_OUTPUT`` line.
    InputError past :data:`MAX_JOBS`: better one clear line here than a run GitHub refuses."""
    if len(jobs) > MAX_JOBS:
        raise InputError(f"{len(jobs)} cells are more jobs than GitHub starts from one matrix "
                         f"({MAX_JOBS}); select fewer with --vendor, or leave out --all")
    return json.dumps({"include": [job.entry() for job in jobs]}, separators=(",", ":"))
