"""Vendor plugins: everything about one accelerator lives in ``vendors/<name>/``.

A vendor folder holds ``vendor.yaml`` (data: device type, package index, requirements, how a
container reaches the device, smoke imports, what the suite checks, facts) and Jinja2
fragments (``Dockerfile.j2`` extending the shared stages in ``templates/dockerfile``). The engine
discovers vendors by listing folders, so adding one never needs a code change.

The format of ``vendor.yaml`` is ``schema/vendor-v1.json``: every key at every depth is checked
against it (:mod:`oota.config.schemacheck`), then the values the schema cannot judge (PEP 508
requirements, ``{placeholders}``, versions; :mod:`oota.config.vendorvalues`), and every problem
of the file is reported at once. Only then are the frozen dataclasses below built, so nothing
past this module sees a raw dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from oota import schemas
from oota.config.compilespec import CompileSpec, compile_spec
from oota.config.issueskips import IssueSource, issue_source
from oota.config.names import NAME_PATTERN, NAME_RULE, name_problem
from oota.config.pairing import ExtensionFacts, check_extension, extension_facts
from oota.config.provenance import Fact, Provenance, Source, provenance_of, sources_of
from oota.config.schemacheck import check_against
from oota.config.vendorhost import RELEASE, HostSpec, RunSpec, host_spec, run_spec
from oota.config.vendorvalues import check_values
from oota.config.yamlsrc import Doc, load_yaml
from oota.resources import shipped

VENDOR_FILE = "vendor.yaml"
SCHEMA_FILE = shipped("schema") / "vendor-v1.json"
# The project's one name pattern (vendor names become paths, image tags and cell ids).
# Vendor names follow the project's one name rule (oota/config/names.py); the schema's
# $defs.name says the same (a test holds them together).
VENDOR_NAME = NAME_PATTERN
# Without a verify section the suite compares float32 only, at assert_close's defaults.
_DEFAULT_VERIFY = {"dtypes": ["float32"], "tolerances": {"float32": {"rtol": 1.3e-6, "atol": 1e-5}}}
# Where a vendor without a ``ci:`` section runs in CI: GitHub's hosted Linux runner.
HOSTED_RUNNER = ("ubuntu-latest",)



def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, kw_only=True, slots=True)
class Toolkit:
    """The vendor's toolkit axis in the matrix (CUDA, ROCm, CANN, ...)."""

    axis: str          # the matrix key, e.g. "cuda"
    id_prefix: str     # how it shows in cell ids, e.g. "cu" -> "cu13.0"
    name: str          # human name, e.g. "CUDA"


@dataclass(frozen=True, kw_only=True, slots=True)
class Tolerance:
    rtol: float
    atol: float


@dataclass(frozen=True, kw_only=True, slots=True)
class Extension:
    """A torch extension the in-image compat layer checks (``verify.extensions[]``)."""

    import_name: str
    distribution: str
    torch: str = ""    # a specifier with placeholders, e.g. "=={torch}" ("" pairs with any)


@dataclass(frozen=True, kw_only=True, slots=True)
class JudgeOverride:
    """A vendor's own numbers for the judge's float64 rule (``verify.judge.<dtype>``) or its
    curve rule (``verify.workload.judge``): the device's error against the float64 CPU
    result may be ``multiplier`` times the CPU's own plus ``floor_ulps`` units in the last
    place. ``reason`` says why the vendor's hardware needs other numbers than oota's."""

    reason: str
    multiplier: float | None = None  # None: oota's default (verify/oota_rules.py)
    floor_ulps: float | None = None

    def to_json(self) -> dict[str, Any]:
        numbers = {"multiplier": self.multiplier, "floor_ulps": self.floor_ulps}
        return {"reason": self.reason, **{k: v for k, v in numbers.items() if v is not None}}


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkloadSpec:
    """The workload layer (``verify.workload``; off when absent): per model, a training run
    from a fixed seed on the device, on the CPU and on the CPU in float64, timed inference
    forwards, throughput and peak device memory (verify/test_workload.py)."""

    models: tuple[str, ...]
    train_steps: int = 20
    timed_forwards: int = 30
    warmup_forwards: int = 3
    judge: JudgeOverride | None = None  # None: oota's curve rule

    def to_json(self) -> dict[str, Any]:
        """The cell.json form, every default filled in (the suite has no defaults of its own
        but the judge's, which live with the judge)."""
        return {"models": list(self.models), "train_steps": self.train_steps,
                "timed_forwards": self.timed_forwards, "warmup_forwards": self.warmup_forwards,
                **({"judge": self.judge.to_json()} if self.judge else {})}


@dataclass(frozen=True, kw_only=True, slots=True)
class DistributedSpec:
    """The distributed layer (``verify.distributed``; not claimed when absent): the vendor's
    c10d backend, the world sizes its host runs, its dtypes (empty: ``verify.dtypes``) and
    whether all_to_all is claimed (verify/test_distributed.py)."""

    backend: str
    world_sizes: tuple[int, ...] = (2,)
    dtypes: tuple[str, ...] = ()
    all_to_all: bool = False
    timeout_s: float = 60.0   # how long one case may take on every rank before it is a hang
    imports: tuple[str, ...] = ()  # modules that register the backend (beyond smoke_imports)

    def to_json(self) -> dict[str, Any]:
        """The cell.json form, every default filled in."""
        return {"backend": self.backend, "world_sizes": list(self.world_sizes),
                "dtypes": list(self.dtypes), "all_to_all": self.all_to_all,
                "timeout_s": self.timeout_s, "imports": list(self.imports)}


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifySpec:
    """What the in-image suite checks (``verify:``), shipped in each image's cell.json."""

    dtypes: tuple[str, ...]
    tolerances: Mapping[str, Tolerance]
    judge: Mapping[str, JudgeOverride] = field(default_factory=_empty)
    models: tuple[str, ...] = ()
    model_dtype: str = "float32"
    extensions: tuple[Extension, ...] = ()
    toolkit_version: str | None = None   # where torch reports it, e.g. "torch.version.cuda"
    workload: WorkloadSpec | None = None  # None: the workload layer is off
    torch_compile: CompileSpec | None = None  # None: the compile layer claims nothing
    compare_as: str | None = None         # whose OpInfo decisions the ops layer takes (device)
    subnormals: str = "note"              # "keep": the judge fails a subnormal result flushed
    # What the device claims of the runtime contract (streams, events, fused optimizers, ...):
    # a claim is tested, anything else is "not claimed" (schema: verify.capabilities).
    capabilities: Mapping[str, bool | str] = field(default_factory=_empty)
    distributed: DistributedSpec | None = None  # None: the distributed layer is not claimed


@dataclass(frozen=True, kw_only=True, slots=True)
class CiSpec:
    """Where CI runs the vendor's cells (``ci:``): the GitHub Actions runner labels a cell's
    job asks for (``invoke matrix --format github``)."""

    runs_on: tuple[str, ...] = HOSTED_RUNNER
    per_platform: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)

    def labels_for(self, platform: str) -> tuple[str, ...]:
        """The runner labels of a cell built for ``platform``."""
        return self.per_platform.get(platform, self.runs_on)


@dataclass(frozen=True, kw_only=True, slots=True)
class CompatRow:
    """One row of ``facts.compat``: which torch (a release, or a series such as "2.9") pairs
    with which extension / toolkit build, for which Pythons, and where that comes from."""

    torch: str
    extension: str = ""
    toolkit: str = ""
    build: str = ""
    python: str = ""
    provenance: Provenance = field(default_factory=Provenance)

    @property
    def verified(self) -> bool:
        return self.provenance.is_verified


@dataclass(frozen=True, kw_only=True, slots=True)
class RetiredExtension:
    """An extension the vendor retired (``facts.retired``): never installed."""

    distribution: str
    import_name: str = ""
    last: str = ""
    torch: str = ""
    note: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Facts:
    """What release-check reads of a vendor (``facts``), each fact with its sources."""

    sources: Mapping[str, Source] = field(default_factory=_empty)   # key -> where
    python: str = ""                  # a version specifier; "" for any
    torch_index: str = "pypi"         # "pypi" or "data"
    # torch release -> the toolkit version PyPI's default wheel of that release bundles
    pypi_default: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    extension: ExtensionFacts | None = None
    compat: tuple[CompatRow, ...] = ()   # newest first
    retired: tuple[RetiredExtension, ...] = ()
    claims: tuple[Fact, ...] = ()        # every fact of the file, with its provenance

    @property
    def unverified(self) -> tuple[Fact, ...]:
        return tuple(f for f in self.claims if not f.verified)


@dataclass(frozen=True, kw_only=True, slots=True)
class Vendor:
    name: str
    display: str
    source: str
    folder: Path
    device: str                       # torch device type for device tests ("cpu", "cuda", ...)
    toolkit: Toolkit | None
    index_url: str                    # the vendor's own package index ("" for PyPI only)
    requirements: tuple[str, ...]     # pip requirements, formatted with the cell's coordinates
    test_requirements: tuple[str, ...]
    builder_apt: tuple[str, ...]      # extra Debian packages for the builder stage
    runtime_apt: tuple[str, ...]
    smoke_imports: tuple[str, ...]
    base_images: Mapping[str, Mapping[str, str]]  # os -> toolkit version (or "default") -> image
    env: Mapping[str, str]            # environment of the runtime image
    run: RunSpec                      # how a verify container reaches the device
    host: HostSpec                    # how to probe a host for the hardware
    verify: VerifySpec                # what the in-image suite checks
    facts: Facts = field(default_factory=Facts)   # what release-check reads
    ci: CiSpec = field(default_factory=CiSpec)    # where CI runs the cells
    known_failures: IssueSource | None = None     # skip entries kept in a tracker's issues
    # Packages whose release follows torch's, e.g. torchvision: name -> torch release or series
    # -> version (from vendors/companions.yaml, oota/config/companions.py, or typed by hand).
    # Each becomes a format variable of the requirements ("torchvision=={torchvision}").
    companions: Mapping[str, Mapping[str, str]] = field(default_factory=_empty)
    # The platforms its cells may be built for (matrix.yaml's platform axis).
    platforms: tuple[str, ...] = ("linux/amd64",)
    # The requirements of one platform's cells, where they differ from ``requirements``.
    platform_requirements: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)

    def requirements_for(self, platform: str) -> tuple[str, ...]:
        return self.platform_requirements.get(platform, self.requirements)
    # The requirements' {local}: a local version such as "+cu{cuda_nodot}", left empty for the
    # cells whose torch PyPI's default wheel already is (facts.pypi_default: torch -> toolkit).
    local_version: str = ""

    def base_image_for(self, os_key: str, toolkit: str | None) -> str | None:
        """The vendor's own base image for a cell, when it overrides the OS's."""
        per_os = self.base_images.get(os_key, {})
        return per_os.get(toolkit or "default") or per_os.get("default")

    @property
    def pypi_default(self) -> Mapping[str, str]:
        """torch release -> the toolkit version PyPI's default wheel of it bundles."""
        return self.facts.pypi_default

    @property
    def template(self) -> Path:
        return self.folder / "Dockerfile.j2"


def schema() -> Mapping[str, Any]:
    """schema/vendor-v1.json, the published format of vendor.yaml."""
    return schemas.load(SCHEMA_FILE.name)


def load_vendor(folder: Path, display_root: Path | None = None) -> Vendor:
    """Load ``folder/vendor.yaml``; raise MatrixError listing every problem in it."""
    file = folder / VENDOR_FILE
    shown = str(file.relative_to(display_root)) if display_root else str(file)
    doc = load_yaml(file, shown)
    reported = check_against(doc, schema())
    _check_folder(doc, folder)
    check_values(doc, doc.data, reported)
    check_extension(doc, doc.data, reported)
    doc.sort_problems()
    doc.raise_if_problems()
    return _build(doc.data, folder)


def _check_folder(doc: Doc, folder: Path) -> None:
    name = doc.data.get("name")
    problem = name_problem(folder.name)
    if problem:
        doc.error((), f"the folder name '{folder.name}' is not a vendor name: {problem}",
                  NAME_RULE)
    elif isinstance(name, str) and name != folder.name:
        doc.error(("name",), f"'{name}' differs from the folder name '{folder.name}'",
                  f"rename one of them so both read '{folder.name}'")
    real = _resolved(folder)
    if real is None or not real.is_relative_to(_resolved(folder.parent) or folder.parent):
        doc.error((), f"vendors/{folder.name} resolves to {real or 'a symbolic link loop'}, "
                  "outside vendors/: a vendor's folder must live in vendors/",
                  "copy (or move) it there instead of linking to it")
    if not (folder / "Dockerfile.j2").is_file():
        doc.error((), f"{folder.name}/Dockerfile.j2 is missing",
                  "add one that starts with {% extends \"base.Dockerfile.j2\" %}")


def _resolved(path: Path) -> Path | None:
    """Where ``path`` really is; None for a symbolic link loop."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a link loop (Python 3.11; OSError later)
        return None


def _build(data: dict[str, Any], folder: Path) -> Vendor:
    """The dataclasses of a file that passed every check."""
    sources = sources_of(data.get("facts", {}).get("sources"))
    return Vendor(
        name=folder.name, display=data.get("display", folder.name),
        source=data.get("source", ""), folder=folder, device=data["device"],
        toolkit=_toolkit(data.get("toolkit")), index_url=data.get("index_url", ""),
        requirements=tuple(data["requirements"]),
        test_requirements=tuple(data.get("test_requirements", ())),
        builder_apt=tuple(data.get("builder_apt", ())),
        runtime_apt=tuple(data.get("runtime_apt", ())),
        smoke_imports=tuple(data.get("smoke_imports", ())),
        base_images=_nested(_values(data.get("base_images", {}), "image")),
        env=MappingProxyType(dict(data.get("env", {}))),
        run=run_spec(data.get("run", {})), host=host_spec(data.get("host", {}), sources),
        verify=_verify(data.get("verify", _DEFAULT_VERIFY)),
        facts=_facts(data, folder.name, sources),
        ci=CiSpec(runs_on=tuple(data.get("ci", {}).get("runs-on", HOSTED_RUNNER)),
                  per_platform=MappingProxyType({
                      k: tuple(v) for k, v in data.get("ci", {}).get("platforms", {}).items()})),
        known_failures=issue_source(data.get("known_failures")),
        companions=_companions(data.get("companions", {})),
        local_version=data.get("local_version", ""),
        platforms=tuple(data.get("platforms", ("linux/amd64",))),
        platform_requirements=MappingProxyType({
            k: tuple(v) for k, v in data.get("platform_requirements", {}).items()}),
    )


def _companions(value: list[str] | dict[str, dict[str, str]]
                ) -> Mapping[str, Mapping[str, str]]:
    """A list of names (pairs from the companions cache, filled in by the matrix loader) or
    hand-typed pairs."""
    return _nested({name: {} for name in value} if isinstance(value, list) else value)


def _values(table: dict[str, dict[str, Any]], key: str) -> dict[str, dict[str, str]]:
    """A two-level table whose leaves are a value or ``{<key>: value, source: ...}``."""
    return {outer: {inner: str(v[key]) if isinstance(v, dict) else str(v)
                    for inner, v in row.items()} for outer, row in table.items()}


def _nested(table: dict[str, dict[str, str]]) -> Mapping[str, Mapping[str, str]]:
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in table.items()})


def _toolkit(data: dict[str, str] | None) -> Toolkit | None:
    if data is None:
        return None
    return Toolkit(axis=data["axis"], id_prefix=data["id_prefix"],
                   name=data.get("name", data["axis"]))


def _tolerances(table: dict[str, dict[str, Any]]) -> Mapping[str, Tolerance]:
    # YAML floats arrive as their text (yamlsrc keeps versions exact); the schema checked it.
    return MappingProxyType({dtype: Tolerance(rtol=float(t["rtol"]), atol=float(t["atol"]))
                             for dtype, t in table.items()})


def _judge(data: dict[str, Any] | None) -> JudgeOverride | None:
    if data is None:
        return None
    numbers = {k: float(data[k]) for k in ("multiplier", "floor_ulps") if k in data}
    return JudgeOverride(reason=str(data["reason"]), **numbers)


def _judges(table: dict[str, dict[str, Any]]) -> Mapping[str, JudgeOverride]:
    return MappingProxyType({dtype: override for dtype, entry in table.items()
                             if (override := _judge(entry)) is not None})


def _verify(data: dict[str, Any]) -> VerifySpec:
    return VerifySpec(
        dtypes=tuple(data["dtypes"]), tolerances=_tolerances(data["tolerances"]),
        judge=_judges(data.get("judge", {})),
        models=tuple(data.get("models", ())), model_dtype=data.get("model_dtype", "float32"),
        extensions=tuple(Extension(import_name=e["import"], distribution=e["distribution"],
                                   torch=e.get("torch", ""))
                         for e in data.get("extensions", ())),
        toolkit_version=data.get("toolkit_version"), workload=_workload(data.get("workload")),
        torch_compile=compile_spec(data.get("compile")),
        compare_as=data.get("compare_as"), subnormals=data.get("subnormals", "note"),
        capabilities=MappingProxyType(dict(data.get("capabilities", {}))),
        distributed=_distributed(data.get("distributed")))


def _distributed(data: dict[str, Any] | None) -> DistributedSpec | None:
    if data is None:
        return None
    # The defaults are DistributedSpec's own: only the keys the file gives are passed.
    given: dict[str, Any] = {k: data[k] for k in ("all_to_all",) if k in data}
    if "world_sizes" in data:
        given["world_sizes"] = tuple(int(w) for w in data["world_sizes"])
    for key in ("dtypes", "imports"):
        if key in data:
            given[key] = tuple(data[key])
    if "timeout_s" in data:
        given["timeout_s"] = float(data["timeout_s"])
    return DistributedSpec(backend=str(data["backend"]), **given)


def _workload(data: dict[str, Any] | None) -> WorkloadSpec | None:
    if data is None:
        return None
    # The counts' defaults are WorkloadSpec's own: only the keys the file gives are passed.
    counts = {k: data[k] for k in ("train_steps", "timed_forwards", "warmup_forwards")
              if k in data}
    return WorkloadSpec(models=tuple(data["models"]), **counts, judge=_judge(data.get("judge")))


def _facts(data: dict[str, Any], vendor: str, sources: Mapping[str, Source]) -> Facts:
    facts = data.get("facts", {})
    compat = tuple(CompatRow(torch=str(row["torch"]), extension=str(row.get("extension", "")),
                             toolkit=str(row.get("toolkit", "")),
                             build=str(row.get("build", "")), python=row.get("python", ""),
                             provenance=provenance_of(row, sources))
                   for row in facts.get("compat", ()))
    pypi_default = _values({"_": facts.get("pypi_default", {})}, "toolkit")["_"]
    return Facts(
        sources=MappingProxyType(dict(sources)), python=facts.get("python", ""),
        torch_index=facts.get("torch_index", "pypi"),
        pypi_default=MappingProxyType(pypi_default),
        extension=extension_facts(facts.get("extension"), sources),
        compat=compat,
        retired=tuple(RetiredExtension(distribution=r["distribution"],
                                       import_name=r.get("import", ""),
                                       last=str(r.get("last", "")), torch=r.get("torch", ""),
                                       note=r.get("note", ""))
                      for r in facts.get("retired", ())),
        claims=tuple(_claims(data, vendor, sources)))


def _claims(data: dict[str, Any], vendor: str, sources: Mapping[str, Source]) -> list[Fact]:
    """Every fact of the file, in file order, with the provenance it states."""
    facts = data.get("facts", {})
    found: list[Fact] = []

    def add(where: str, what: str, entry: Any, about: dict[str, str] | None) -> None:
        found.append(Fact(vendor=vendor, where=where, what=what, about=about,
                          provenance=provenance_of(entry, sources)))

    for os_key, row in data.get("base_images", {}).items():
        for toolkit, entry in row.items():
            image = entry.get("image") if isinstance(entry, dict) else entry
            add(f"base_images.{os_key}.{toolkit}", f"base image {image}", entry,
                {"os": os_key, "toolkit": str(toolkit)})
    driver = data.get("host", {}).get("driver")
    for i, rule in enumerate(driver.get("rules", ()) if isinstance(driver, dict) else ()):
        add(f"host.driver.rules[{i}]", f"{driver.get('name', 'driver')} >= {rule['min']} for "
            f"toolkit {rule['toolkit']} ({rule.get('scope', RELEASE)})", rule,
            {"toolkit": str(rule["toolkit"])})
    if isinstance(driver, dict) and driver.get("unverified"):
        add("host.driver", f"the minimum {driver.get('name', 'driver')}", driver, {})
    if facts.get("python"):
        add("facts", f"Python {facts['python']}, torch from {facts.get('torch_index', 'pypi')}",
            facts, {})
    for torch, entry in facts.get("pypi_default", {}).items():
        toolkit = entry.get("toolkit") if isinstance(entry, dict) else entry
        add(f"facts.pypi_default.{torch}", f"PyPI's torch {torch} bundles toolkit {toolkit}",
            entry, {"torch": str(torch), "toolkit": str(toolkit)})
    for i, row in enumerate(facts.get("compat", ())):
        pairs = ", ".join(f"{k} {row[k]}" for k in ("extension", "toolkit", "build", "python")
                          if row.get(k))
        about = {"torch": str(row["torch"])} | ({"toolkit": str(row["toolkit"])}
                                                if row.get("toolkit") else {})
        add(f"facts.compat[{i}]", f"torch {row['torch']}: {pairs or 'supported'}", row, about)
    rule = (facts.get("extension") or {}).get("requires_torch")
    if rule:  # every cell's extension pairs by it
        add("facts.extension.requires_torch", f"{facts['extension']['distribution']} "
            f"{{major}}.{{minor}}.{{micro}} requires torch{rule['requires']}", rule, {})
    for i, row in enumerate(facts.get("retired", ())):
        add(f"facts.retired[{i}]", f"{row['distribution']} retired (last {row.get('last')})",
            row, None)
    return found


def discover(vendors_dir: Path) -> dict[str, Path]:
    """Map vendor name -> folder for every ``vendors/<name>/vendor.yaml``."""
    if not vendors_dir.is_dir():
        return {}
    return {p.parent.name: p.parent for p in sorted(vendors_dir.glob(f"*/{VENDOR_FILE}"))}
