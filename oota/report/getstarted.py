"""The "get started" page of each vendor (``reports/start/<vendor>.html``): for every cell whose
verification holds, how to get what was verified (``docker pull`` by digest, ``docker run`` with
the vendor's device flags, the pip command that installs the very stack the build verified),
newest torch first, a nightly cell beside the stable cell of the same coordinates.

The pip command installs the vendor's stack and nothing of the in-image test suite (the result
tells the two apart: ``Result.requirements``), from the vendor's index as the build used it
(``--extra-index-url`` for a release index, ``--index-url`` for a channel's), and for a locked
cell through a requirements file beside the page holding the lock's pins and hashes of that
stack (``--require-hashes``). The build's own package sources (a host's wheelhouse, a lab's
mirror) are the host's business and are not offered to users.

Only verified cells appear: status ``passed``, or ``unsupported-here`` (every test the host could
run passed; the page says the device was not there). A failed, skipped or interrupted cell is
left out and named as such, so the page never offers what did not work.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from oota import __version__
from oota.project import command_name
from oota.report.data import Report, channel_order
from oota.report.rows import CellGroup, CellRow
from oota.report.templating import html_environment
from oota.results.model import CellRef, Result
from oota.results.software import Package, Requirements, TorchInfo
from oota.supply.runflags import RunFlagsError, docker_run_args
from oota.vocab import MaybeStatus

VERIFIED = ("passed", "unsupported-here")
REGISTRY = "REGISTRY"  # the placeholder a user replaces with their registry
UNSUPPORTED_HERE = "verified without the device: only the layers this host could run"
# A requirement that needs no quoting beyond the double quotes users expect.
_PLAIN = re.compile(r"^[A-Za-z0-9._+!=-]+$")


@dataclass(frozen=True, kw_only=True, slots=True)
class PipInstall:
    """How to install the verified stack with pip: the command, the requirements file it reads
    (for a locked cell: the lock's pins and hashes of the vendor's stack), and what it pins."""

    command: str                  # '' when the stack installs nothing from an index
    how: str                      # one sentence: what the command pins, and from where
    file_name: str = ""           # the requirements file beside the page ('' for none)
    file_text: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class StartCell:
    """One verified cell: what it is, and the commands that get exactly that."""

    id: str
    vendor: str
    status: MaybeStatus
    coordinates: tuple[tuple[str, str], ...]  # (name, value) in the order shown
    channel: str | None
    pulls: tuple[str, ...]       # `docker pull REF@DIGEST`, one per published copy
    publish: str                 # the command that would publish it ('' when published)
    run: str                     # '' when verified in place: there is no image
    pip: PipInstall
    platform: str                # 'Python 3.11 on Linux x86_64': where the pip command fits
    torch_source: str
    notes: tuple[str, ...]       # where the build had to use other sources
    stale: bool
    verified_at: str
    unverified: tuple[str, ...] = ()  # the vendor facts it rests on that no source confirms

    @property
    def unsupported_here(self) -> bool:
        return self.status == "unsupported-here"


@dataclass(frozen=True, kw_only=True, slots=True)
class StartPage:
    vendor: str
    cells: tuple[StartCell, ...]
    left_out: tuple[str, ...]    # 'cell-id: failed' for each cell not shown
    make: tuple[str, ...]        # the commands that make a verified, published cell


def _requirement(text: str) -> str:
    return f'"{text}"' if _PLAIN.match(text) else shlex.quote(text)


def _index_option(req: Requirements) -> str:
    """The vendor's index as the build used it: beside PyPI (a release index), or instead
    of it (a channel's index)."""
    if req.index_url:
        return f" --index-url {shlex.quote(req.index_url)}"
    return f" --extra-index-url {shlex.quote(req.extra_index_url)}" if req.extra_index_url else ""


def requirements_file(cell_id: str, req: Requirements) -> tuple[str, str]:
    """(name, text) of the requirements file a locked cell's page offers."""
    name = f"{cell_id}-requirements.txt"
    head = [f"# The software stack oota verified in cell {cell_id}: the vendor's requirements",
            f"# ({', '.join(req.vendor)}) and everything they need, pinned with the hashes of",
            "# the cell's lock; the in-image test suite's packages are not here. Install with:",
            f"#   pip install --require-hashes{_index_option(req)} -r {name}"]
    pins = [f"{p.name}=={p.version}" + "".join(f" \\\n    --hash=sha256:{h}" for h in p.hashes)
            for p in req.locked]
    return name, "\n".join(head + pins) + "\n"


def _pinned(text: str, packages: Mapping[str, Package], torch: TorchInfo) -> str:
    """A requirement pinned to the version the verified image holds (as written when the
    image does not say)."""
    try:
        name = canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        return text
    found = {canonicalize_name(n): p.version for n, p in packages.items()}
    version = torch.version if name == "torch" and torch.version else found.get(name)
    return f"{Requirement(text).name}=={version}" if version else text


def pip_install(row: CellRow, req: Requirements | None) -> PipInstall:
    """The pip command that installs exactly the verified stack and nothing of the suite: the
    lock's pins with their hashes (a locked cell), else each vendor requirement pinned to the
    version the image holds; from the vendor's index as the build used it."""
    if req is None:
        return PipInstall(command="", how="This result does not tell the vendor's packages "
                          "from the test suite's (it was written by an older oota): build the "
                          "cell again for its pip command.")
    # A channel's cell installs torch from the channel (vendor.yaml's torch pin is dropped).
    wanted = (("torch",) if req.index_url else ()) + req.vendor
    if not wanted:
        return PipInstall(command="", how="The vendor installs nothing from a package index: "
                          "its torch comes with the base image.")
    pre = " --pre" if req.index_url else ""
    if req.locked:
        name, text = requirements_file(row.id, req)
        return PipInstall(
            command=f"pip install --require-hashes{_index_option(req)} -r {shlex.quote(name)}",
            how=f"{name} holds the lock's pins of the vendor's packages and everything they "
                "need, with their sha256 hashes: pip installs the very files the verified "
                "build installed, and refuses any other.",
            file_name=name, file_text=text)
    pins = [_requirement(_pinned(t, row.packages, row.torch)) for t in wanted]
    return PipInstall(
        command=f"pip install{pre} {' '.join(pins)}{_index_option(req)}",
        how="The versions the verified image holds (the cell has no lock, so no hashes).")


def _coordinates(row: CellRow, cell: CellRef) -> tuple[tuple[str, str], ...]:
    torch = row.torch.version or cell.torch
    if row.torch.nightly:
        torch += f" ({row.torch.nightly})"
    pairs = [("torch", torch), ("Python", cell.python), ("OS", cell.os)]
    if cell.platform:  # recorded for cells of another platform than linux/amd64
        pairs.append(("platform", cell.platform))
    if cell.toolkit:
        pairs.append(("toolkit", f"{cell.toolkit} {cell.toolkit_version or ''}".strip()))
    return tuple(pairs)


def _machine(cell: CellRef, row: CellRow) -> str:
    """The machine a cell's wheels are for: its platform's (an arm64 cell verified under
    emulation on an x86_64 host is for aarch64), else the host's."""
    if cell.platform:
        return {"linux/arm64": "aarch64", "linux/amd64": "x86_64"}.get(cell.platform, "")
    return row.host.text("arch") or ""


def _run_line(row: CellRow, image: str) -> str:
    """The ``docker run`` line, as oota ran the verification: with an init as PID 1 (a program
    that crashes by a signal, as QEMU does for an emulated one, would otherwise live on)."""
    try:
        flags = docker_run_args(row.image.run_flags)
    except RunFlagsError:
        flags = ()
    return " ".join(["docker run --rm -it --init", *flags, shlex.quote(image)])


def _stale(cell: CellRef, current: Mapping[str, str] | None) -> bool:
    """Whether today's inputs of the cell differ from those it was verified with (a cell the
    matrix no longer has is not judged: there are no inputs to compare)."""
    today = (current or {}).get(cell.id)
    return today is not None and today != cell.fingerprint


def start_cell(row: CellRow, result: Result, current: Mapping[str, str] | None,
               unverified: tuple[str, ...] = ()) -> StartCell:
    """The page's block for one verified copy of a cell; ``current`` maps cell ids to today's
    fingerprints (None when unknown: staleness is then not judged)."""
    published = row.image.published
    pulls = tuple(f"docker pull {p.ref}@{p.digest}" for p in published)
    image = f"{published[0].ref}@{published[0].digest}" if published else row.image.tag
    # `verify --here` records a placeholder in parentheses, which no image reference can be.
    in_place = not published and (not image or image.startswith("("))
    publish = "" if published or in_place else (
        f"{command_name()} publish --vendor {row.vendor} --cell {row.id} --registry {REGISTRY}")
    sealed = row.image.sealed
    return StartCell(
        id=row.id, vendor=row.vendor, status=row.status,
        coordinates=_coordinates(row, result.cell),
        channel=result.cell.channel, pulls=pulls, publish=publish,
        run="" if in_place else _run_line(row, image),
        pip=pip_install(row, result.requirements),
        platform=f"Python {result.cell.python} on Linux {_machine(result.cell, row)}".rstrip(),
        torch_source=row.torch.source or "not recorded",
        notes=result.sources.notes if result.sources else (),
        stale=_stale(result.cell, current),
        verified_at=sealed.at if sealed and sealed.at else row.finished_at,
        unverified=unverified)


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
    """How the lab makes the page's images, as the project's user types oota (the report runs in
    the project's folder)."""
    oota = command_name()
    return (f"{oota} build --vendor {vendor}", f"{oota} publish --vendor {vendor} --registry "
            f"{REGISTRY}", f"{oota} report")


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
                                current, report.unverified.get(group.id, ())))
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
