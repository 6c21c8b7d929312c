"""Load ``matrix.yaml`` (the single source of truth) into frozen dataclasses.

Shape of the file::

    version: 1
    os:                                  # every OS a cell may use
      debian12:
        image: debian:bookworm-slim      # pulled when a registry answers
        python: ["3.11"]                 # Python versions its package manager provides
        bootstrap:                       # optional: how to build the base when none can be pulled
          tool: debootstrap
          suite: bookworm
          mirror: http://deb.debian.org/debian
    vendors:
      cpu:                               # a folder vendors/cpu/ must exist
        os: [debian12]
        python: ["3.11"]
        torch: ["2.13.0", {channel: nightly}]   # a release, or a channel (below)
        # cuda: ["12.6", "13.0"]         # the vendor's toolkit axis, named in its vendor.yaml
        exclude: [{os: debian12, python: "3.13"}]   # GitHub Actions matrix semantics
        include: []
        default: [{python: "3.11"}]      # what `build` takes when no --cell/--all is given

A torch value is a release, or a channel whose build is resolved when the image is built::

    torch: ["2.15.0", {channel: nightly}]
    torch: [{channel: nightly, index: "https://mirror.lab/whl/nightly/cpu", max_age_days: 2}]

``nightly`` installs ``pip install --pre torch`` from ``index`` (default: the vendor's release
index on download.pytorch.org with ``nightly/`` inserted, e.g. ``/whl/nightly/cpu``); the cell's
id says ``torchnightly`` where a release cell says ``torch2.15.0``; the verify suite fails a
nightly older than ``max_age_days`` (default 3, PyTorch's own smoke test's limit). Rules
(include, exclude, default) name the channel as ``torch: nightly``.

``test`` is a release candidate: ``pip install --pre torch`` from PyTorch's test index
(``/whl/test/cpu``), or ``index``; ``{channel: test, version: "2.16.0"}`` names the release it
must be (PyTorch's smoke test checks the candidate's version the same way). The report puts
each candidate's cell beside the release cell of its coordinates: the go/no-go table.

``release-check --update`` rewrites each torch axis to the index's N and N-1. A release that
must stay through such an update is pinned, with the reason the update prints::

    torch: ["2.15.0", "2.14.1", {release: "2.13.0", pinned: "the wheel our hosts can install"}]
    default: [{python: "3.11", torch: "2.13.0", pinned: "the cell a fresh machine builds"}]

A pinned axis entry stays on the axis; a pinned ``default`` or ``include`` entry is never moved
to another release, and keeps its release on the axis. ``pinned`` takes a reason (a string);
rules with it must name a torch release, and ``exclude`` entries take none.

Every problem is reported at once, located as ``file:line:column: yaml.path: message``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.version import Version

from oota.config.companions import CompanionCache, cache_path, load_cache, resolve
from oota.config.fields import Fields, parse_version
from oota.config.names import NAME_RULE, image_problem, name_problem
from oota.config.torchaxis import (
    CHANNELS,
    PINNED,
    Channel,
    Pin as Pin,  # release-check's pins, read with the matrix
    rule_pin,
    torch_axis,
)
from oota.config.vendors import Vendor, discover, load_vendor
from oota.config.yamlsrc import Doc, Path_, did_you_mean, load_yaml
from oota.errors import MatrixError
from oota.resources import shipped

SCHEMA_VERSION = 1
CHECKOUT = Path(__file__).resolve().parents[2]   # the repository, for an editable install
CORE_AXES = ("os", "python", "torch")
# The platform an image is built for (docker build --platform); a vendor without the axis
# builds for linux/amd64 only. Its vendor.yaml says which it supports (``platforms``).
PLATFORM = "platform"
PLATFORMS = ("linux/amd64", "linux/arm64")
DEFAULT_PLATFORM = "linux/amd64"
_RULE_KEYS = ("include", "exclude", "default")


@dataclass(frozen=True, kw_only=True, slots=True)
class Bootstrap:
    tool: str
    suite: str
    mirror: str


@dataclass(frozen=True, kw_only=True, slots=True)
class OsSpec:
    key: str
    image: str
    python: tuple[Version, ...]
    bootstrap: Bootstrap | None


@dataclass(frozen=True, kw_only=True, slots=True)
class VendorMatrix:
    """One vendor's axes and rules, values already validated (axis -> tuple of strings)."""

    vendor: Vendor
    axes: tuple[tuple[str, tuple[str, ...]], ...]
    include: tuple[tuple[tuple[str, str], ...], ...]
    exclude: tuple[tuple[tuple[str, str], ...], ...]
    default: tuple[tuple[tuple[str, str], ...], ...]
    path: Path_
    channels: tuple[Channel, ...] = ()   # the torch axis's channel entries
    pins: tuple[Pin, ...] = ()           # what release-check --update keeps

    def channel(self, name: str) -> Channel:
        """The channel as the torch axis declares it, else with its defaults (a rule's
        ``torch: nightly`` needs no axis entry)."""
        return next((c for c in self.channels if c.name == name), Channel(name=name))


@dataclass(frozen=True, kw_only=True, slots=True)
class Matrix:
    file: Path
    root: Path                       # folder of matrix.yaml; vendors/ and images/ live here
    os: dict[str, OsSpec]
    vendors: dict[str, VendorMatrix]
    doc: Doc                         # kept to locate problems found while planning

    @property
    def images_dir(self) -> Path:
        """Generated output only: images/<vendor>/<cell-id>/."""
        return self.root / "images"

    @property
    def templates_dir(self) -> Path:
        """The shared, hand-written Dockerfile stages that vendor templates extend: the
        project's own (``templates/dockerfile``), else those oota ships."""
        own = self.root / "templates" / "dockerfile"
        return own if own.is_dir() else shipped("templates") / "dockerfile"

    @property
    def verify_dir(self) -> Path:
        """The in-image verify suite: the project's own ``verify/``, else oota's."""
        own = self.root / "verify"
        return own if own.is_dir() else shipped("verify")


def load_matrix(file: Path | str) -> Matrix:
    """Load and validate a matrix file and every vendor it names."""
    file = Path(file)
    doc = load_yaml(file, file.name if file.parent == Path.cwd() else str(file))
    top = Fields(doc, (), doc.data, allowed=("version", "os", "vendors"),
                 required=("version", "os", "vendors"))
    if top.has("version") and top.raw("version") != SCHEMA_VERSION:
        doc.error(("version",), f"unsupported version {top.raw('version')!r}",
                  f"this oota reads version {SCHEMA_VERSION}")
    oses = {key: _load_os(doc, key, value) for key, value in top.mapping("os").items()}
    root = project_root(file)
    known = discover(root / "vendors")
    if not known:
        doc.error(("vendors",), f"no vendor folders (vendors/<name>/vendor.yaml) beside {file}, "
                  f"in the current folder or in {CHECKOUT}",
                  "run oota from its checkout, or keep the matrix file beside vendors/")
    vendors: dict[str, VendorMatrix] = {}
    problems_from_vendor_files: list[str] = []
    for name, value in top.mapping("vendors").items():
        path = ("vendors", name)
        vendor = None
        if not check_name(doc, path, name, "vendor name"):
            continue
        if name not in known:
            if known:
                doc.error(path, f"no vendor folder vendors/{name}/ with a vendor.yaml",
                          did_you_mean(name, tuple(known)))
        else:
            try:
                vendor = load_vendor(known[name], root)
            except MatrixError as exc:
                problems_from_vendor_files.extend(exc.problems)
        if vendor is None:
            # Still check what can be checked without the vendor's data, so one run reports
            # every problem of the matrix file.
            _check_core_axes(doc, path, value, oses)
            continue
        vendors[name] = _load_vendor_matrix(doc, path, value, vendor, oses)
    doc.problems.extend(problems_from_vendor_files)
    doc.raise_if_problems()
    vendors = _with_companions(doc, vendors, root / "vendors")
    doc.raise_if_problems()
    return Matrix(file=file, root=root, os=oses, vendors=vendors, doc=doc)


def torch_releases(vm: VendorMatrix) -> tuple[Version, ...]:
    """Every torch release a vendor's cells may have: its torch axis and the torch of its
    include entries (channels have no release)."""
    texts = [v for axis, values in vm.axes if axis == "torch" for v in values]
    texts += [v for rule in vm.include for k, v in rule if k == "torch"]
    found = []
    for text in dict.fromkeys(texts):
        try:
            found.append(Version(text))
        except ValueError:  # a channel's name
            continue
    return tuple(found)


def _with_companions(doc: Doc, vendors: dict[str, VendorMatrix], vendors_dir: Path
                     ) -> dict[str, VendorMatrix]:
    """Each vendor with its companions paired for every torch release of its cells, from
    the companions cache (oota/config/companions.py); a typed pair the index's metadata
    contradicts is a problem located at the vendor's torch axis."""
    if not any(vm.vendor.companions for vm in vendors.values()):
        return vendors
    cache = _companion_cache(doc, vendors_dir)
    out = {}
    for name, vm in vendors.items():
        if not vm.vendor.companions:
            out[name] = vm
            continue
        resolved = resolve(name, vm.vendor.companions, torch_releases(vm), cache)
        for problem in resolved.problems:
            doc.error(vm.path + ("torch",), problem)
        out[name] = replace(vm, vendor=replace(vm.vendor, companions=resolved.pairs))
    return out


def _companion_cache(doc: Doc, vendors_dir: Path) -> CompanionCache | None:
    file = cache_path(vendors_dir)
    if not file.is_file():
        return None
    try:
        return load_cache(file, f"vendors/{file.name}")
    except MatrixError as exc:
        doc.problems.extend(exc.problems)
        return None


def project_root(file: Path) -> Path:
    """The folder holding vendors/, images/ and verify/: the matrix file's own folder, else the
    current folder, else the checkout oota runs from (so a copy of the matrix kept elsewhere,
    say under /tmp, still uses this checkout's vendors)."""
    for candidate in (file.parent, Path.cwd(), CHECKOUT):
        if (candidate / "vendors").is_dir():
            return candidate
    return file.parent


def _check_core_axes(doc: Doc, path: Path_, value: Any, oses: dict[str, OsSpec]) -> None:
    """The os, python and torch values of a vendor entry whose vendor could not be loaded."""
    if not isinstance(value, dict):
        return
    for axis in CORE_AXES:
        items = value.get(axis)
        if isinstance(items, list):
            for i, text in enumerate(items):
                if isinstance(text, str):
                    _check_value(doc, path + (axis, i), axis, text, oses)


def check_name(doc: Doc, path: Path_, text: str, what: str) -> bool:
    """A name that becomes part of a path, an image name or a tag (oota/config/names.py);
    a bad one is a located problem."""
    problem = name_problem(text)
    if problem:
        doc.error(path, f"{text!r} is not a valid {what}: {problem}", NAME_RULE)
    return problem is None


def _load_os(doc: Doc, key: str, value: Any) -> OsSpec:
    path = ("os", key)
    check_name(doc, path, key, "os key")
    f = Fields(doc, path, value, allowed=("image", "python", "bootstrap"),
               required=("image", "python"))
    bootstrap = None
    if f.raw("bootstrap") is not None:
        b = Fields(doc, path + ("bootstrap",), f.raw("bootstrap"),
                   allowed=("tool", "suite", "mirror"), required=("tool", "suite", "mirror"))
        tool = b.str("tool", "debootstrap")
        if b.has("tool") and tool != "debootstrap":
            doc.error(path + ("bootstrap", "tool"), f"unknown bootstrap tool '{tool}'",
                      did_you_mean(tool, ("debootstrap",)))
        bootstrap = Bootstrap(tool=tool, suite=b.str("suite"), mirror=b.str("mirror"))
    image = f.str("image")
    problem = image_problem(image) if isinstance(f.raw("image"), str) else None
    if problem:  # FROM cannot quote it: a newline or a space there would change the Dockerfile
        doc.error(path + ("image",), problem)
    return OsSpec(key=key, image=image, python=f.version_list("python"), bootstrap=bootstrap)


def _load_vendor_matrix(doc: Doc, path: Path_, value: Any, vendor: Vendor,
                        oses: dict[str, OsSpec]) -> VendorMatrix:
    axis_names = CORE_AXES + ((vendor.toolkit.axis,) if vendor.toolkit else ()) + (PLATFORM,)
    f = Fields(doc, path, value, allowed=axis_names + _RULE_KEYS)
    axes = []
    channels: tuple[Channel, ...] = ()
    pins: list[Pin] = []
    for axis in axis_names:
        if not f.has(axis):
            continue
        reported = len(doc.problems)
        if axis == "torch":
            values, channels = torch_axis(doc, path + (axis,), f.raw(axis), pins)
        else:
            values = f.str_list(axis)
        if not values and len(doc.problems) == reported:  # not after "expected a list ..."
            doc.error(path + (axis,), "the axis is empty", "list at least one value or remove it")
        for i, text in enumerate(values):
            if axis == PLATFORM:
                _check_platform(doc, path + (axis, i), text, vendor)
            else:
                _check_value(doc, path + (axis, i), axis, text, oses)
        axes.append((axis, values))
    rules = {key: _load_rules(doc, path + (key,), f.raw(key), axis_names, oses, pins)
             for key in _RULE_KEYS}
    if f.ok and not axes and not rules["include"]:
        doc.error(path, "declares no axes and no include entries", "add os, python and torch")
    return VendorMatrix(vendor=vendor, axes=tuple(axes), include=rules["include"],
                        exclude=rules["exclude"], default=rules["default"], path=path,
                        channels=channels, pins=tuple(pins))


def _check_platform(doc: Doc, path: Path_, text: str, vendor: Vendor) -> None:
    """A platform oota builds for, and one the vendor's data says it supports."""
    if text not in PLATFORMS:
        doc.error(path, f"unknown platform '{text}'", did_you_mean(text, PLATFORMS)
                  or "write linux/amd64 or linux/arm64")
    elif text not in vendor.platforms:
        doc.error(path, f"vendor {vendor.name} does not support {text} (its vendor.yaml "
                  f"platforms: {', '.join(vendor.platforms)})",
                  f"add {text} to vendors/{vendor.name}/vendor.yaml platforms, or remove it here")


def _check_value(doc: Doc, path: Path_, axis: str, text: str, oses: dict[str, OsSpec]) -> None:
    if axis == "os":
        if text not in oses:
            doc.error(path, f"unknown os '{text}'", did_you_mean(text, tuple(oses)))
        return
    if axis == PLATFORM:
        if text not in PLATFORMS:
            doc.error(path, f"unknown platform '{text}'", did_you_mean(text, PLATFORMS))
        return
    if axis == "torch" and text in CHANNELS:
        return
    if axis == "torch" and text[:1].isalpha():   # no release starts with a letter
        near = [c for c in CHANNELS if abs(len(c) - len(text)) <= 1]  # 'latest' is no 'test'
        hint = did_you_mean(text, tuple(near)) or ""
        doc.error(path, f"'{text}' is neither a release nor a channel",
                  hint if hint.startswith("did you mean") else
                  "write it like '2.13.0', or name a channel: " + ", ".join(CHANNELS))
        return
    # Every other axis is a version: a typo gets parse_version's hint ('3.1O' -> '3.10'); a
    # value that parses may still hold what no id may ('2.13.0+cpu', '1!2.0', non-ASCII).
    if not text.isascii():
        check_name(doc, path, text, f"{axis} value")
        return
    known = tuple(sorted({str(v) for spec in oses.values() for v in spec.python})) \
        if axis == "python" else ()
    if parse_version(doc, path, text, known) is not None:
        check_name(doc, path, text, f"{axis} value")


def _load_rules(doc: Doc, path: Path_, value: Any, axis_names: tuple[str, ...],
                oses: dict[str, OsSpec], pins: list[Pin]
                ) -> tuple[tuple[tuple[str, str], ...], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        doc.error(path, "expected a list of mappings", "write each entry as {os: ..., python: ...}")
        return ()
    out = []
    for i, entry in enumerate(value):
        f = Fields(doc, path + (i,), entry, allowed=axis_names + (PINNED,))
        if f.ok and not [k for k in entry if k != PINNED]:
            doc.error(path + (i,), "the entry is empty", "name at least one axis")
        if f.has(PINNED):
            rule_pin(doc, path + (i,), f, pins)
        pairs = []
        for key in axis_names:
            if f.has(key):
                reported = len(doc.problems)
                text = f.str(key) if not isinstance(f.raw(key), int) else str(f.raw(key))
                if len(doc.problems) == reported:  # not after "expected a string, got ..."
                    _check_value(doc, path + (i, key), key, text, oses)
                pairs.append((key, text))
        out.append(tuple(pairs))
    return tuple(out)
