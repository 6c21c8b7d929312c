"""Plan: expand the matrix into cells. Pure functions, no Docker, no file writes.

Expansion follows GitHub Actions' matrix semantics: the cartesian product of the axes, minus
every combination that matches an ``exclude`` entry on all the keys it names, then each
``include`` entry is merged into every combination whose original values it does not
contradict (adding keys), or appended as a new combination when it fits none.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import Version

from oota.config.matrix import CORE_AXES, DEFAULT_PLATFORM, PLATFORM, Matrix, OsSpec, VendorMatrix
from oota.config.names import NAME_RULE, cell_id_problem
from oota.config.provenance import Fact
from oota.config.torchaxis import CHANNELS, Channel
from oota.config.vendors import Vendor
from oota.config.yamlsrc import did_you_mean
from oota.errors import InputError
from oota.project import command_name

Combo = dict[str, str]
PYTORCH_WHEELS = "https://download.pytorch.org/whl/"


@dataclass(frozen=True, kw_only=True, slots=True)
class Cell:
    """One image to build and verify."""

    vendor: Vendor
    os: OsSpec
    python: Version
    torch: Version | None               # None: a channel's build, resolved at build time
    toolkit: Version | None
    channel: Channel | None = None
    platform: str = DEFAULT_PLATFORM    # what the image is built for: linux/amd64, linux/arm64

    @property
    def arch(self) -> str:
        """'amd64', 'arm64': the platform's architecture, as Docker names it."""
        return self.platform.split("/", 1)[1]

    @property
    def machine(self) -> str:
        """'x86_64', 'aarch64': the architecture as uname and wheel tags name it."""
        return {"amd64": "x86_64", "arm64": "aarch64"}.get(self.arch, self.arch)

    @property
    def torch_text(self) -> str:
        """The cell's torch as ids, labels and results name it: '2.15.0' or 'nightly'."""
        return self.channel.name if self.channel is not None else str(self.torch)

    @property
    def id(self) -> str:
        parts = [self.vendor.name, f"torch{self.torch_text}"]
        if self.vendor.toolkit and self.toolkit is not None:
            parts.append(f"{self.vendor.toolkit.id_prefix}{self.toolkit}")
        parts += [f"py{self.python}", self.os.key]
        if self.platform != DEFAULT_PLATFORM:  # linux/amd64 cells keep the ids they always had
            parts.append(self.arch)
        return "-".join(parts)

    @property
    def base_image(self) -> str:
        """FROM of both stages: the vendor's override for this OS/toolkit, else the OS's."""
        toolkit = str(self.toolkit) if self.toolkit is not None else None
        return self.vendor.base_image_for(self.os.key, toolkit) or self.os.image

    @property
    def tag(self) -> str:
        return f"oota/{self.vendor.name}:{self.id}"

    def format_vars(self) -> dict[str, str]:
        """What vendor.yaml format strings (requirements, index_url) may use: the
        coordinates, the toolkit axis by name, and ``<axis>_nodot`` (13.0 -> 130)."""
        coords = {k: v for k, v in self.coordinates().items() if v is not None}
        coords |= {"platform": self.platform, "arch": self.arch, "machine": self.machine}
        if self.vendor.toolkit and self.toolkit is not None:
            coords[self.vendor.toolkit.axis] = str(self.toolkit)
            coords[f"{self.vendor.toolkit.axis}_nodot"] = str(self.toolkit).replace(".", "")
        for name, pairs in self.vendor.companions.items():
            version = companion_for(pairs, self.torch) if self.torch is not None else None
            if version:
                coords[name] = version
        pypi_default = self.vendor.pypi_default.get(self.torch_text)
        is_pypi_wheel = pypi_default is not None and pypi_default == coords.get("toolkit_version")
        # No toolkit version (an in-place environment without one): no toolkit build to name.
        no_toolkit = self.vendor.toolkit is not None and self.toolkit is None
        coords["local"] = "" if is_pypi_wheel or no_toolkit \
            else self.vendor.local_version.format(**coords)
        return coords

    def format(self, text: str, what: str) -> str:
        """A vendor.yaml format string filled with :meth:`format_vars`; an unknown name is an
        InputError that says which file and entry to fix."""
        variables = self.format_vars()
        try:
            return text.format(**variables)
        except KeyError as exc:
            name = exc.args[0]
            where = f"vendors/{self.vendor.name}/vendor.yaml {what} '{text}'"
            if name in self.vendor.companions:
                raise InputError(f"{where}: no {name} paired with torch {self.torch} in "
                                 f"vendors/companions.yaml or companions.{name}: run "
                                 f"{command_name()} release-check --update") from None
            raise InputError(f"{where}: unknown name {{{name}}}; known: "
                             + ", ".join(sorted(variables))) from None
        except (IndexError, ValueError) as exc:
            raise InputError(f"vendors/{self.vendor.name}/vendor.yaml {what} '{text}': "
                             f"{exc}") from None

    def unverified_facts(self) -> tuple[Fact, ...]:
        """The facts of the vendor's data this cell rests on that no source confirms (its
        base image, its compatibility row, its driver rule, ...; oota/config/provenance.py)."""
        toolkit = str(self.toolkit) if self.toolkit is not None else ""
        return tuple(f for f in self.vendor.facts.unverified
                     if f.concerns(self.os.key, self.torch_text, toolkit))

    @property
    def index_url(self) -> str:
        """The index torch comes from: the vendor's release index, or the channel's."""
        if self.vendor.toolkit is not None and self.toolkit is None:
            return ""  # an in-place environment without the toolkit has no toolkit index
        release = self.format(self.vendor.index_url, "index_url")
        if self.channel is None:
            return release
        return self.channel.index_url or channel_index(release, self.channel.name) or ""

    def coordinates(self) -> dict[str, str | None]:
        """The cell's position in the matrix, as plain strings (labels, results, templates);
        a channel's cell also names its channel (release cells carry no such key), a cell for
        another platform than linux/amd64 its platform."""
        coords = {
            "vendor": self.vendor.name,
            "os": self.os.key,
            "python": str(self.python),
            "torch": self.torch_text,
            "toolkit": self.vendor.toolkit.axis if self.vendor.toolkit else None,
            "toolkit_version": str(self.toolkit) if self.toolkit is not None else None,
        }
        return coords | ({"channel": self.channel.name} if self.channel is not None else {}) \
            | ({"platform": self.platform} if self.platform != DEFAULT_PLATFORM else {})


def channel_index(release_index: str, channel: str) -> str | None:
    """PyTorch's index of ``channel`` for the platform of a release index on
    download.pytorch.org (``/whl/cu130`` -> ``/whl/nightly/cu130``); None for another host,
    whose channels oota cannot guess."""
    if not release_index.startswith(PYTORCH_WHEELS):
        return None
    return PYTORCH_WHEELS + channel + "/" + release_index.removeprefix(PYTORCH_WHEELS)


def companion_for(pairs: Mapping[str, str], torch: Version) -> str | None:
    """The version paired with ``torch``: '2.14' covers every 2.14.x, '2.14.1' that release;
    the most specific series wins."""
    best: tuple[int, str] | None = None
    for series, version in pairs.items():
        try:
            release = Version(series).release
        except ValueError:  # InvalidVersion, or more digits than int() reads
            continue
        if torch.release[:len(release)] == release and (best is None or len(release) > best[0]):
            best = (len(release), version)
    return best[1] if best else None


def expand_combos(axes: list[tuple[str, tuple[str, ...]]], include: list[Combo],
                  exclude: list[Combo]) -> list[Combo]:
    """GitHub Actions matrix expansion over plain string values."""
    names = [name for name, _ in axes]
    combos: list[Combo] = []
    if axes:
        combos = [dict(zip(names, values, strict=True))
                  for values in itertools.product(*(vals for _, vals in axes))]
    combos = [c for c in combos if not any(_matches(c, rule) for rule in exclude)]
    # Include entries merge into the expanded combinations only; a combination appended by an
    # earlier include entry is never extended by a later one (GitHub Actions does the same).
    expanded = [(combo, dict(combo)) for combo in combos]
    for rule in include:
        merged = False
        for combo, original in expanded:
            if all(original.get(k, v) == v for k, v in rule.items()):
                combo.update(rule)
                merged = True
        if not merged:
            combos.append(dict(rule))
    return combos


def _matches(combo: Combo, rule: Combo) -> bool:
    return all(_same(k, combo.get(k), v) for k, v in rule.items())


def _same(key: str, have: str | None, want: str) -> bool:
    """Axis values are equal as text, or as versions ('2.13' == '2.13.0') except for os."""
    if have == want or have is None or key == "os":
        return have == want
    try:
        return Version(have) == Version(want)
    except ValueError:  # InvalidVersion, or more digits than int() reads
        return False


def vendor_cells(matrix: Matrix, vm: VendorMatrix) -> list[Cell]:
    """All cells of one vendor; impossible combinations are located errors."""
    doc = matrix.doc
    combos = expand_combos(list(vm.axes), [dict(r) for r in vm.include],
                           [dict(r) for r in vm.exclude])
    axis_names = CORE_AXES + ((vm.vendor.toolkit.axis,) if vm.vendor.toolkit else ())
    cells, seen = [], set()
    for combo in combos:
        missing = [a for a in axis_names if a not in combo]
        if missing:
            doc.error(vm.path, f"combination {combo} has no value for {', '.join(missing)}",
                      "give the axis at the vendor level or in the include entry")
            continue
        os_spec = matrix.os[combo["os"]]
        python = Version(combo["python"])
        if python not in os_spec.python:
            provided = ", ".join(str(v) for v in os_spec.python)
            doc.error(vm.path, f"combination os={combo['os']} python={combo['python']} is "
                      f"impossible: {combo['os']} provides Python {provided}",
                      f"add exclude entry {{os: {combo['os']}, python: \"{combo['python']}\"}}")
            continue
        toolkit = vm.vendor.toolkit
        channel = vm.channel(combo["torch"]) if combo["torch"] in CHANNELS else None
        cell = Cell(vendor=vm.vendor, os=os_spec, python=python,
                    torch=None if channel else Version(combo["torch"]),
                    toolkit=Version(combo[toolkit.axis]) if toolkit else None, channel=channel,
                    platform=combo.get(PLATFORM, DEFAULT_PLATFORM))
        if cell.id not in seen and _id_is_valid(matrix, vm, cell) and _has_index(matrix, vm, cell):
            seen.add(cell.id)
            cells.append(cell)
    return cells


def _id_is_valid(matrix: Matrix, vm: VendorMatrix, cell: Cell) -> bool:
    """Defensive: names are checked at load time, but an id also holds the vendor's toolkit
    prefix; it becomes a folder and an image tag, so it must follow the name grammar."""
    problem = cell_id_problem(cell.id)
    if problem:
        matrix.doc.error(vm.path, f"cell id {cell.id!r} is not valid: {problem}", NAME_RULE)
    return problem is None


def _has_index(matrix: Matrix, vm: VendorMatrix, cell: Cell) -> bool:
    """A channel's cell needs an index: given, or derived from the vendor's release index."""
    if cell.channel is None or cell.index_url:
        return True
    matrix.doc.error(vm.path + ("torch",), f"cell {cell.id}: no {cell.channel.name} index for "
                     f"vendor {vm.vendor.name} (its release index {cell.vendor.index_url!r} is "
                     f"not on {PYTORCH_WHEELS})",
                     f"give one: {{channel: {cell.channel.name}, index: URL}}")
    return False


def plan(matrix: Matrix, vendors: list[str] | None = None) -> list[Cell]:
    """Every cell of the chosen vendors (all when None), in matrix order."""
    names = list(matrix.vendors) if not vendors else vendors
    unknown = [n for n in names if n not in matrix.vendors]
    if unknown:
        raise InputError("\n".join(
            f"{matrix.file}: vendor '{n}' is not in the matrix; "
            f"{did_you_mean(n, tuple(matrix.vendors))}" for n in unknown))
    cells = [cell for n in names for cell in vendor_cells(matrix, matrix.vendors[n])]
    matrix.doc.raise_if_problems()
    return cells


def select(matrix: Matrix, cells: list[Cell], *, ids: list[str] | None = None,
           everything: bool = False) -> list[Cell]:
    """Pick cells: by id, all of them, or each vendor's declared ``default`` entries."""
    if ids:
        by_id = {c.id: c for c in cells}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise InputError("\n".join(f"unknown cell '{i}'; {did_you_mean(i, tuple(by_id))}"
                                       for i in unknown))
        return [by_id[i] for i in dict.fromkeys(ids)]
    if everything:
        return cells
    chosen: list[Cell] = []
    used: set[tuple[str, int]] = set()
    for cell in cells:
        rules = matrix.vendors[cell.vendor.name].default
        coords = _combo_of(cell)
        # A default entry that names no platform means linux/amd64: builds without --cell or
        # --all never start an emulated build by surprise.
        hits = [i for i, rule in enumerate(rules)
                if _matches(coords, {PLATFORM: DEFAULT_PLATFORM, **dict(rule)})]
        used.update((cell.vendor.name, i) for i in hits)
        if not rules or hits:
            chosen.append(cell)
    for vendor in dict.fromkeys(c.vendor.name for c in cells):
        vm = matrix.vendors[vendor]
        for i, rule in enumerate(vm.default):
            if (vendor, i) not in used:
                matrix.doc.error(vm.path + ("default", i), f"default entry {dict(rule)} "
                                 "matches no cell", "fix it or pass --cell/--all")
    matrix.doc.raise_if_problems()
    return chosen


def _combo_of(cell: Cell) -> Combo:
    combo = {"os": cell.os.key, "python": str(cell.python), "torch": cell.torch_text,
             PLATFORM: cell.platform}
    if cell.vendor.toolkit and cell.toolkit is not None:
        combo[cell.vendor.toolkit.axis] = str(cell.toolkit)
    return combo
