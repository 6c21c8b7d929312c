"""The "get started" page of each vendor (``reports/start/<vendor>.html``): for every cell whose
verification holds, how to get what was verified (``docker pull`` by digest, ``docker run`` with
the vendor's device flags, the pip commands the build proved), newest torch first, a nightly cell
beside the stable cell of the same coordinates.

Only verified cells appear: status ``passed``, or ``unsupported-here`` (every test the host could
run passed; the page says the device was not there). A failed, skipped or interrupted cell is
left out and named as such, so the page never offers what did not work.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from oota import __version__
from oota.report.data import CellGroup, CellRow, Report, channel_order
from oota.report.templating import html_environment
from oota.results.model import CellRef, Result, Sources
from oota.supply.runflags import RunFlagsError, docker_run_args

VERIFIED = ("passed", "unsupported-here")
PYPI = "https://pypi.org/simple"
REGISTRY = "REGISTRY"  # the placeholder a user replaces with their registry
UNSUPPORTED_HERE = "verified without the device: only the layers this host could run"
# A requirement that needs no quoting beyond the double quotes users expect.
_PLAIN = re.compile(r"^[A-Za-z0-9._+!=-]+$")


@dataclass(frozen=True, kw_only=True, slots=True)
class StartCell:
    """One verified cell: what it is, and the commands that get exactly that."""

    id: str
    status: str
    coordinates: tuple[tuple[str, str], ...]  # (name, value) in the order shown
    channel: str | None
    pulls: tuple[str, ...]       # `docker pull REF@DIGEST`, one per published copy
    publish: str                 # the command that would publish it ('' when published)
    run: str                     # '' when verified in place: there is no image
    pip: tuple[str, ...]         # torch's line, then the other requested packages' line
    torch_source: str
    notes: tuple[str, ...]       # where the build had to use other sources
    stale: bool
    verified_at: str

    @property
    def unsupported_here(self) -> bool:
        return self.status == "unsupported-here"


@dataclass(frozen=True, kw_only=True, slots=True)
class StartPage:
    vendor: str
    cells: tuple[StartCell, ...]
    left_out: tuple[str, ...]    # 'cell-id: failed' for each cell not shown
    make: tuple[str, ...]        # the commands that make a verified, published cell


def _requirement(name: str, version: str) -> str:
    text = f"{name}=={version}"
    return f'"{text}"' if _PLAIN.match(text) else shlex.quote(text)


def _index_options(sources: Sources | None) -> str:
    """The pip options of the sources the build used (credentials were removed when saved)."""
    if sources is None:
        return ""
    pairs = [] if sources.index_url in ("", PYPI) else [("--index-url", sources.index_url)]
    pairs += [("--extra-index-url", url) for url in sources.extra_index_urls]
    pairs += [("--find-links", url) for url in sources.find_links]
    return "".join(f" {option} {shlex.quote(url)}" for option, url in pairs)


def pip_lines(row: CellRow, sources: Sources | None) -> tuple[str, ...]:
    """``pip install "torch==X"`` with the build's sources, then one line of the other packages
    the build asked for (the result does not tell a vendor's extension from the suite's needs,
    so all of them, as the verified image holds them)."""
    options = _index_options(sources)
    lines = [f"pip install {_requirement('torch', row.torch.version)}{options}"] \
        if row.torch.version else []
    others = [_requirement(name, p.version) for name, p in sorted(row.packages.items())
              if p.requested and p.version and name != "torch"]
    if others:
        lines.append(f"pip install {' '.join(others)}{options}")
    return tuple(lines)


def _coordinates(row: CellRow, cell: CellRef) -> tuple[tuple[str, str], ...]:
    torch = row.torch.version or cell.torch
    if row.torch.nightly:
        torch += f" ({row.torch.nightly})"
    pairs = [("torch", torch), ("Python", cell.python), ("OS", cell.os)]
    if cell.toolkit:
        pairs.append(("toolkit", f"{cell.toolkit} {cell.toolkit_version or ''}".strip()))
    return tuple(pairs)


def _run_line(row: CellRow, image: str) -> str:
    try:
        flags = docker_run_args(row.image.run_flags)
    except RunFlagsError:
        flags = ()
    return " ".join(["docker run --rm -it", *flags, shlex.quote(image)])


def _stale(cell: CellRef, current: Mapping[str, str] | None) -> bool:
    """Whether today's inputs of the cell differ from those it was verified with (a cell the
    matrix no longer has is not judged: there are no inputs to compare)."""
    today = (current or {}).get(cell.id)
    return today is not None and today != cell.fingerprint


def start_cell(row: CellRow, result: Result, current: Mapping[str, str] | None) -> StartCell:
    """The page's block for one verified copy of a cell; ``current`` maps cell ids to today's
    fingerprints (None when unknown: staleness is then not judged)."""
    published = row.image.published
    pulls = tuple(f"docker pull {p.ref}@{p.digest}" for p in published)
    image = f"{published[0].ref}@{published[0].digest}" if published else row.image.tag
    # `verify --here` records a placeholder in parentheses, which no image reference can be.
    in_place = not published and (not image or image.startswith("("))
    publish = "" if published or in_place else (
        f"invoke publish --vendor {row.vendor} --cell {row.id} --registry {REGISTRY}")
    sealed = row.image.sealed
    return StartCell(
        id=row.id, status=row.status, coordinates=_coordinates(row, result.cell),
        channel=result.cell.channel, pulls=pulls, publish=publish,
        run="" if in_place else _run_line(row, image),
        pip=pip_lines(row, result.sources), torch_source=row.torch.source or "not recorded",
        notes=result.sources.notes if result.sources else (),
        stale=_stale(result.cell, current),
        verified_at=sealed.at if sealed and sealed.at else row.finished_at)


def _chosen(group: CellGroup) -> CellRow:
    """The copy to show: one that ran on the device if any did, then the newest."""
    return sorted(group.copies, key=lambda r: (r.status == "passed", r.finished_at))[-1]


def _release(text: str) -> Version:
    try:
        return Version(text)
    except ValueError:  # InvalidVersion, or more digits than int() reads
        return Version("0")


def _ordered(groups: Sequence[CellGroup], cells: Mapping[str, CellRef]) -> list[CellGroup]:
    """Newest torch first; a channel's cell (nightly) right after its stable sibling."""
    order = channel_order([cells[g.id] for g in groups])
    by_order = sorted(groups, key=lambda g: order[g.id])
    return sorted(by_order, key=lambda g: _release(cells[order[g.id][0]].torch), reverse=True)


def make_commands(vendor: str) -> tuple[str, ...]:
    return (f"invoke build --vendor {vendor}",
            f"invoke publish --vendor {vendor} --registry {REGISTRY}",
            "invoke report")


def start_page(report: Report, vendor: str,
               current: Mapping[str, str] | None = None) -> StartPage:
    """The vendor's page from the report's cells (verified ones only)."""
    results = {(r.cell.id, r.started_at, r.finished_at): r for r in report.results}
    groups = report.vendor_groups(vendor)
    cells = {g.id: results[(g.first.id, g.first.started_at, g.first.finished_at)].cell
             for g in groups}
    shown, left_out = [], []
    for group in _ordered(groups, cells):
        if group.status not in VERIFIED:
            left_out.append(f"{group.id}: {group.status}")
            continue
        row = _chosen(group)
        shown.append(start_cell(row, results[(row.id, row.started_at, row.finished_at)],
                                current))
    return StartPage(vendor=vendor, cells=tuple(shown), left_out=tuple(left_out),
                     make=make_commands(vendor))


def start_pages(report: Report, current: Mapping[str, str] | None = None
                ) -> tuple[StartPage, ...]:
    return tuple(start_page(report, vendor, current) for vendor in report.vendors)


def to_html(page: StartPage, generated_at: str) -> str:
    """start/<vendor>.html."""
    return html_environment().get_template("getstarted.html.j2").render(
        title=f"Get started: {page.vendor} — oota", page=page, generated_at=generated_at,
        version=__version__, unsupported_here=UNSUPPORTED_HERE)
