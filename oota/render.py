"""Render: one Dockerfile (plus cell.json) per cell from Jinja2 templates, committed in-tree.

Templates are looked up in the vendor's folder first, then in ``templates/dockerfile/`` (the
shared, hand-written stages; ``images/`` holds generated output only), so a vendor's
``Dockerfile.j2`` ``{% extends "base.Dockerfile.j2" %}`` and overrides only the blocks it
needs. Output is deterministic: same inputs, same bytes.

Every data value reaches a Dockerfile through a quoting filter for its place (oota/quoting.py:
``shell_words``, ``env_value``, ``image_ref`` ...); any error while rendering, Jinja's or not,
is an InputError located at the template line. Nothing is written outside ``images/``.

The build context of a cell is a fixed set of files (:func:`context_files`); its fingerprint
is the hash of exactly those files, so any change that could shape the image changes it.

A channel's cell (``torch: nightly``) installs torch, and the companions that follow it
(torchvision), with ``pip install --pre`` from the channel's index alone; its context also holds
``nightly-day.txt``, today's UTC date, so its fingerprint (and the Dockerfile layer that copies
the file before the install) changes once a day: a re-run on a later day builds that day's
nightly instead of keeping the image of the day it was first built.
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import hashlib
import json
import re
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jinja2

from oota import quoting, reproducible, sandbox, vocab
from oota.config.matrix import Matrix
from oota.config.skips import SKIPS_FILE, load_skips
from oota.config.vendors import Tolerance, Vendor, VerifySpec
from oota.contexttree import relative as _rel, walk
from oota.errors import InputError
from oota.files import write_atomic
from oota.lockfile import lock_path
from oota.net import secret_query, without_credentials
from oota.plan import Cell
from oota.project import command_name

CHANNEL_DAY_FILE = "nightly-day.txt"
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
VOCAB_FILE = Path(vocab.__file__)


@dataclass(frozen=True, kw_only=True, slots=True)
class Rendered:
    cell: Cell
    folder: Path                      # images/<vendor>/<cell-id>
    files: dict[str, str]             # file name -> text
    images_dir: Path                  # images/: nothing is written outside it
    # What the cell asks pip for (vendor.yaml's requirements, then test_requirements, formatted
    # for the cell): recorded in its result, so the history can say which pin changed.
    requirements: tuple[str, ...] = ()
    # The first part of it, vendor.yaml's requirements: what a user of the stack installs.
    vendor_requirements: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class ChannelInstall:
    """What a channel's cell installs with ``pip install --pre`` from the channel's index."""

    name: str
    index_url: str
    packages: tuple[str, ...]         # torch and the companions its requirements name
    max_age_days: int
    version: str | None = None        # the test channel's expected release

    @property
    def trusted_host(self) -> str | None:
        """The host of a plain-HTTP index (a lab's mirror, a test's local index): pip ignores
        one unless told to trust it, and the matrix naming it is that word."""
        parts = urlsplit(self.index_url)
        return parts.hostname if parts.scheme == "http" else None


def channel_day() -> str:
    """Today (UTC), the day a channel's build is for; tests replace it."""
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


def cell_folder(matrix: Matrix, cell: Cell) -> Path:
    return matrix.images_dir / cell.vendor.name / cell.id


def cell_manifest(cell: Cell) -> dict[str, Any]:
    """What the verify suite inside the image expects of itself (written as cell.json).

    ``verify`` is the vendor's ``verify:`` section (dtypes, tolerances, models, extensions,
    toolkit_version; every key, defaults filled in; ``workload`` only where the vendor runs
    it) with each extension's torch requirement formatted with the cell; ``skips`` is the
    vendor's validated ``skips.yaml`` (oota/config/skips.py), applied in the image.
    """
    v = cell.vendor
    shown = f"{v.folder.parent.name}/{v.folder.name}/{SKIPS_FILE}"
    return {
        "id": cell.id,
        **cell.coordinates(),
        "device": v.device,
        "driver_libraries": list(v.host.driver_libraries),
        # The device layer tells a container given no device access (the host's fault) from
        # a stack that cannot use its device by these (verify/test_device.py).
        "device_nodes": list(v.host.in_container),
        "smoke_imports": list(v.smoke_imports),
        # Committed and copied into the image: never the index's credentials.
        "index_url": without_credentials(cell.index_url),
        "verify": _verify_manifest(cell, v.verify),
        "skips": load_skips(v.folder / SKIPS_FILE, shown).to_json(),
    } | _companions_manifest(cell) | _channel_manifest(cell)


def _companions_manifest(cell: Cell) -> dict[str, Any]:
    """The companions the cell installs (torchvision, torch_xla) with the version each is
    paired with for the cell's torch (vendors/companions.yaml or the vendor's own table): the
    smoke layer checks the image holds exactly those. None for a channel's cell, whose
    companions follow torch's channel instead of a pairing."""
    if cell.channel is not None:
        return {}
    texts = cell.vendor.requirements_for(cell.platform) + cell.vendor.test_requirements
    paired = cell.format_vars()
    found = {name: paired[name] for name in sorted(cell.vendor.companions)
             if name in paired and any(f"{{{name}}}" in text for text in texts)}
    return {"companions": found} if found else {}


def _channel_manifest(cell: Cell) -> dict[str, Any]:
    """A channel's cell tells the suite where its torch came from and how old it may be
    (verify/oota_nightly.py); a release cell's cell.json has no such key."""
    install = channel_install(cell)
    if install is None:
        return {}
    return {"channel": {"name": install.name, "index_url": install.index_url,
                        "max_age_days": install.max_age_days,
                        **({"version": install.version} if install.version else {})}}


def channel_install(cell: Cell) -> ChannelInstall | None:
    """What a channel's cell installs, its index without credentials: they reach the build as
    the ``netrc`` secret (:func:`oota.net.netrc_for`), never the Dockerfile."""
    if cell.channel is None:
        return None
    secret = secret_query(cell.index_url)
    if secret is not None:
        raise InputError(f"matrix.yaml vendors.{cell.vendor.name}.torch: the {cell.channel.name} "
                         f"channel's index carries a secret in its query ({secret}=...), which "
                         "would be written into the Dockerfile; give it as "
                         "https://USER:PASSWORD@host/... instead (sent as a build secret)")
    return ChannelInstall(name=cell.channel.name, index_url=without_credentials(cell.index_url),
                          packages=("torch", *_channel_companions(cell)),
                          max_age_days=cell.channel.max_age_days,
                          version=cell.channel.version)


def _channel_companions(cell: Cell) -> tuple[str, ...]:
    """The companions (torchvision) the vendor's requirements name: they follow torch's
    channel, as PyTorch's own nightly instructions install them together."""
    texts = cell.vendor.requirements_for(cell.platform) + cell.vendor.test_requirements
    return tuple(name for name in sorted(cell.vendor.companions)
                 if any(f"{{{name}}}" in text for text in texts))


def _requirement_name(text: str) -> str:
    match = _REQUIREMENT_NAME.match(text)
    return match.group(1).lower() if match else ""


def _requirements(cell: Cell, items: tuple[str, ...], what: str) -> list[str]:
    """The vendor's requirements for the cell; a channel's cell leaves out what the channel
    installs, and refuses a requirement pinned to a torch release it does not have."""
    install = channel_install(cell)
    if install is None:
        return _format_all(cell, items, what)
    kept = [text for text in items if _requirement_name(text) not in install.packages]
    for text in kept:
        if "{torch}" in text:
            raise InputError(f"vendors/{cell.vendor.name}/vendor.yaml {what} '{text}' pairs "
                             f"with a torch release; cell {cell.id} takes torch from the "
                             f"{install.name} channel, which has none: leave {cell.vendor.name} "
                             "out of the channel")
    return _format_all(cell, tuple(kept), what)


def _verify_manifest(cell: Cell, spec: VerifySpec) -> dict[str, Any]:
    """The suite's ``verify`` object (read by verify/oota_suite.py and the layers' tests)."""
    def tolerances(table: Mapping[str, Tolerance]) -> dict[str, dict[str, float]]:
        return {dtype: {"rtol": t.rtol, "atol": t.atol} for dtype, t in table.items()}

    return {
        "dtypes": list(spec.dtypes),
        "tolerances": tolerances(spec.tolerances),
        # Only the dtypes a vendor overrides: the judge's own numbers live with the judge.
        **({"judge": {dtype: o.to_json() for dtype, o in spec.judge.items()}}
           if spec.judge else {}),
        "models": list(spec.models),
        "model_dtype": spec.model_dtype,
        "extensions": [{"import": ext.import_name, "distribution": ext.distribution,
                        "torch": _extension_torch(cell, ext.torch)}
                       for ext in spec.extensions],
        "toolkit_version": spec.toolkit_version,
        "compare_as": spec.compare_as or cell.vendor.device,
        **({"subnormals": spec.subnormals} if spec.subnormals != "note" else {}),
        # Every capability the suite knows, claimed or not (verify/oota_claims.py).
        "capabilities": dict(spec.capabilities),
        # Only where the vendor asks for it: the other vendors' cell.json stay as they were.
        **({"workload": spec.workload.to_json()} if spec.workload else {}),
        **({"compile": spec.torch_compile.to_json(spec.models)} if spec.torch_compile else {}),
        **({"distributed": spec.distributed.to_json()} if spec.distributed else {}),
    }


def _extension_torch(cell: Cell, text: str) -> str:
    if cell.channel is not None and "{torch}" in text:
        raise InputError(f"vendors/{cell.vendor.name}/vendor.yaml verify.extensions[].torch "
                         f"'{text}' pairs with a torch release; cell {cell.id} takes torch from "
                         f"the {cell.channel.name} channel, which has none")
    return cell.format(text, "verify.extensions[].torch")


def _environment(matrix: Matrix, cell: Cell) -> jinja2.Environment:
    return _environment_for((cell.vendor.folder, matrix.templates_dir))


@functools.lru_cache(maxsize=64)
def _environment_for(search: tuple[Path, ...]) -> jinja2.Environment:
    """One sandboxed environment per vendor (oota/sandbox.py), so each template is compiled
    once, not once per cell (compiling was ~90% of `generate`); Jinja reloads a template whose
    file changed."""
    return sandbox.environment(search)


def _format_all(cell: Cell, items: tuple[str, ...], what: str) -> list[str]:
    return [cell.format(item, what) for item in items]


def render_cell(matrix: Matrix, cell: Cell) -> Rendered:
    coords = cell.format_vars()
    vendor = cell.vendor
    requirements = {
        "requirements": _requirements(cell, vendor.requirements_for(cell.platform),
                                      "requirements"),
        "test_requirements": _requirements(cell, vendor.test_requirements, "test_requirements"),
    }
    channel = channel_install(cell)
    _check_data(matrix, cell, requirements)
    context: dict[str, object] = {
        "cell": cell,
        "cell_id": cell.id,
        "coords": coords,
        "vendor": vendor,
        "os": cell.os,
        "python": str(cell.python),
        **requirements,
        "regenerate": f"{command_name(matrix.root)} generate --vendor={vendor.name}",
        # A channel's build changes daily: a lock of yesterday's would refuse today's wheel.
        "lock": channel is None and lock_path(matrix, cell).is_file(),
        "channel": channel,
        "sources": f"{matrix.file.name} and {_shown(matrix, vendor.folder)}/",
        "shell": list(reproducible.SHELL),
        "layer_epoch": reproducible.LAYER_EPOCH,
        # The builder compiles the smoke layer's C++ extension only for a vendor that claims
        # it (verify.capabilities.cpp_extension): the others need no compiler for it.
        "smoke_extension": vendor.verify.capabilities.get("cpp_extension") is True,
        # Inductor's CPU code generator compiles C++ when the suite runs (verify.compile).
        "compile_compiler": bool(vendor.verify.torch_compile
                                 and vendor.verify.torch_compile.compiler),
    }
    dockerfile = _render(matrix, cell, context)
    manifest = json.dumps(cell_manifest(cell), indent=2, sort_keys=True) + "\n"
    return Rendered(cell=cell, folder=cell_folder(matrix, cell), images_dir=matrix.images_dir,
                    files={"Dockerfile": dockerfile, "cell.json": manifest},
                    requirements=tuple(requirements["requirements"]
                                       + requirements["test_requirements"]),
                    vendor_requirements=tuple(requirements["requirements"]))


def _check_data(matrix: Matrix, cell: Cell, requirements: dict[str, list[str]]) -> None:
    """Refuse a line break in the data a template may write, naming where it came from.

    The vendor and matrix loaders refuse them already; this is the line of defence for data
    that reached the renderer another way (the quoting filters are the last one)."""
    for where, value in _data_values(matrix, cell, requirements):
        try:
            quoting.check_text(value)
        except quoting.QuotingError as exc:
            raise InputError(f"{where}: {exc}") from None


def _data_values(matrix: Matrix, cell: Cell, requirements: dict[str, list[str]]
                 ) -> Iterable[tuple[str, str]]:
    """(where it came from, value) for the data the shared templates write."""
    vendor = cell.vendor
    vendor_file = f"{_shown(matrix, vendor.folder)}/vendor.yaml"
    yield f"{vendor_file} display", vendor.display
    yield (f"{matrix.file.name} os.{cell.os.key}.image or {vendor_file} base_images",
           cell.base_image)
    listed = {**requirements, "builder_apt": list(vendor.builder_apt),
              "runtime_apt": list(vendor.runtime_apt)}
    for key, values in listed.items():
        yield from ((f"{vendor_file} {key}[{i}]", value) for i, value in enumerate(values))
    for name, value in vendor.env.items():
        yield f"{vendor_file} env", name
        yield f"{vendor_file} env.{name}", value
    yield "the matrix file's name", matrix.file.name
    if cell.channel is not None:
        yield f"{matrix.file.name} vendors.{vendor.name}.torch channel index", cell.index_url


def _render(matrix: Matrix, cell: Cell, context: dict[str, object]) -> str:
    """The vendor's Dockerfile.j2 rendered; any failure is an InputError at the template line
    (a Jinja error, a quoting filter's refusal, or Python's own: 1/0, a template that extends
    itself)."""
    env = _environment(matrix, cell)
    try:
        return sandbox.render(env.get_template("Dockerfile.j2"), context)
    except InputError:
        raise
    except Exception as exc:  # whatever a template raises is the template's fault: exit 2
        where = _template_line(matrix, exc, cell.vendor)
        shown_vendor = _shown(matrix, cell.vendor.template)
        within = "" if where.startswith(shown_vendor + ":") else \
            f" (rendering {shown_vendor} for cell {cell.id})"
        raise InputError(f"{where}: template error: {_one_line(exc)}{within}") from exc


def _template_line(matrix: Matrix, exc: BaseException, vendor: Vendor) -> str:
    """``file:line`` of the innermost template frame: Jinja maps its frames to template lines,
    so Python's own errors (1/0, too deep a recursion) are located like Jinja's."""
    if isinstance(exc, jinja2.TemplateSyntaxError) and exc.filename:
        return f"{_shown(matrix, Path(exc.filename))}:{exc.lineno}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith(".j2")]
    if frames:
        return f"{_shown(matrix, Path(frames[-1].filename))}:{frames[-1].lineno}"
    return f"{_shown(matrix, vendor.template)}:1"


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "templates extend, include or call each other in a loop (recursion too deep)"
    text = " ".join(str(exc).split()) or "no message"
    if isinstance(exc, (jinja2.TemplateError, quoting.QuotingError)):
        return text
    return f"{type(exc).__name__}: {text}"


def _shown(matrix: Matrix, path: Path) -> str:
    """A path as users see it: relative to the project when it lies inside."""
    return _rel(path, matrix.root)


def context_files(matrix: Matrix, rendered: Rendered) -> dict[str, bytes | Path]:
    """Archive name -> content (bytes) or source file, for everything the build sees
    except the host's wheelhouse (host-specific, recorded separately). ``verify/`` and the
    vendor's folder as oota.contexttree walks them: links followed only inside the project,
    the vendor's folder and the suite's, an InputError naming any other."""
    files: dict[str, bytes | Path] = {name: text.encode() for name, text in rendered.files.items()}
    vendor = rendered.cell.vendor.folder
    allowed = (matrix.root.resolve(), vendor.resolve(), matrix.verify_dir.resolve())
    for root_name, folder in (("verify", matrix.verify_dir), ("vendor", vendor)):
        for rel, path in walk(folder, allowed, matrix.root):
            files[f"{root_name}/{rel}"] = path
    # The vocabulary the suite shares with oota (statuses, layers), beside oota-verify.
    files["verify/oota_vocab.py"] = VOCAB_FILE
    files[reproducible.ETC_LAYER] = reproducible.etc_layer()
    lock = lock_path(matrix, rendered.cell)
    if lock.is_file() and rendered.cell.channel is None:
        files["lock.txt"] = lock
    if rendered.cell.channel is not None:
        files[CHANNEL_DAY_FILE] = f"{channel_day()}\n".encode()
    return files


def cell_fingerprint(matrix: Matrix, cell: Cell) -> str:
    """The cell's fingerprint from today's inputs (render it, then hash its build context)."""
    return fingerprint(context_files(matrix, render_cell(matrix, cell)))


def fingerprint(files: dict[str, bytes | Path]) -> str:
    """sha256 over (name, content hash, executable bit) of every context file, in name order."""
    digest = hashlib.sha256()
    for name in sorted(files):
        source = files[name]
        data = source if isinstance(source, bytes) else source.read_bytes()
        executable = (not isinstance(source, bytes)) and bool(source.stat().st_mode & 0o111)
        digest.update(f"{name}\0{hashlib.sha256(data).hexdigest()}\0{int(executable)}\n".encode())
    return "sha256:" + digest.hexdigest()


def render_all(matrix: Matrix, cells: list[Cell]) -> list[Rendered]:
    return [render_cell(matrix, cell) for cell in cells]


@dataclass(frozen=True, kw_only=True, slots=True)
class Drift:
    changed: list[Path]
    stale_diff: str

    @property
    def clean(self) -> bool:
        return not self.changed


def write_all(rendered: list[Rendered]) -> list[Path]:
    """Write every rendered file whose content changed; return those paths."""
    written = []
    for item in rendered:
        for name, text in item.files.items():
            path = inside(item.images_dir, item.folder / name)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                write_atomic(path, text)
                written.append(path)
    return written


def inside(base: Path, path: Path) -> Path:
    """``path``, refused unless it lies inside ``base`` once '..' and symbolic links are
    resolved: the second line of defence behind the name checks (oota/config/names.py)."""
    if not path.resolve().is_relative_to(base.resolve()):
        raise InputError(f"{path}: refusing to use a path outside {base}/ (it resolves to "
                         f"{path.resolve()}); vendor names and cell ids must be plain names")
    return path


def orphans(matrix: Matrix, rendered: list[Rendered], vendors: list[str]) -> list[Path]:
    """Generated cell folders of the given vendors that no cell renders any more."""
    live = {item.folder for item in rendered}
    found = []
    for vendor in vendors:
        base = inside(matrix.images_dir, matrix.images_dir / vendor)
        if base.is_dir():
            found += [p for p in sorted(base.iterdir())
                      if p.is_dir() and (p / "Dockerfile").exists() and p not in live]
    return found


def check(matrix: Matrix, rendered: list[Rendered], vendors: list[str]) -> Drift:
    """Compare rendered output with the files on disk; nothing is written."""
    changed: list[Path] = []
    diff: list[str] = []
    for item in rendered:
        for name, text in item.files.items():
            path = inside(matrix.images_dir, item.folder / name)
            old = path.read_text(encoding="utf-8") if path.exists() else ""
            if old != text:
                changed.append(path)
                rel = path.relative_to(matrix.root)
                diff += difflib.unified_diff(old.splitlines(keepends=True),
                                             text.splitlines(keepends=True),
                                             f"a/{rel}", f"b/{rel}")
    for folder in orphans(matrix, rendered, vendors):
        changed.append(folder)
        diff.append(f"stale: {folder.relative_to(matrix.root)}/ belongs to no cell any more\n")
    return Drift(changed=changed, stale_diff="".join(diff))
