"""Vendor plugins: everything about one accelerator lives in ``vendors/<name>/``.

A vendor folder holds ``vendor.yaml`` (data: device type, package index, requirements,
device flags, smoke imports) and Jinja2 fragments (``Dockerfile.j2`` extending the shared
stages in ``templates/dockerfile``). The engine discovers vendors by listing folders, so adding
one never needs a code change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oota.config.fields import Fields
from oota.config.yamlsrc import did_you_mean, load_yaml
from oota.errors import InputError

VENDOR_FILE = "vendor.yaml"


@dataclass(frozen=True, kw_only=True, slots=True)
class Toolkit:
    """The vendor's toolkit axis in the matrix (CUDA, ROCm, CANN, ...)."""

    axis: str          # the matrix key, e.g. "cuda"
    id_prefix: str     # how it shows in cell ids, e.g. "cu" -> "cu13.0"
    name: str          # human name, e.g. "CUDA"


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
    run_flags: tuple[str, ...]        # `docker run` flags that expose the device
    smoke_imports: tuple[str, ...]
    base_images: dict[str, dict[str, str]]  # os -> toolkit version (or "default") -> image
    env: dict[str, str]               # environment of the runtime image
    host: dict[str, Any]              # how to probe a Docker host for the hardware (oota/hosts.py)
    facts: dict[str, Any]             # vendor data: python range, extension, compat table
    verify: dict[str, Any]            # what the in-image suite checks (dtypes, tolerances, models)
    # Packages whose release follows torch's, e.g. torchvision: name -> torch series -> version.
    # Each becomes a format variable of the requirements ("torchvision=={torchvision}").
    companions: dict[str, dict[str, str]] = field(default_factory=dict)
    # The requirements' {local}: a local version such as "+cu{cuda_nodot}", left empty for the
    # cells whose torch PyPI's default wheel already is (facts.pypi_default: torch -> toolkit).
    local_version: str = ""

    def base_image_for(self, os_key: str, toolkit: str | None) -> str | None:
        """The vendor's own base image for a cell, when it overrides the OS's."""
        per_os = self.base_images.get(os_key, {})
        return per_os.get(toolkit or "default") or per_os.get("default")

    @property
    def template(self) -> Path:
        return self.folder / "Dockerfile.j2"


_KEYS = ("name", "display", "source", "device", "toolkit", "index_url", "requirements",
         "test_requirements", "builder_apt", "runtime_apt", "run_flags", "smoke_imports",
         "base_images", "env", "host", "facts", "verify", "companions", "local_version")


def load_vendor(folder: Path, display_root: Path | None = None) -> Vendor:
    """Load ``folder/vendor.yaml``; raise MatrixError listing every problem in it."""
    file = folder / VENDOR_FILE
    shown = str(file.relative_to(display_root)) if display_root else str(file)
    doc = load_yaml(file, shown)
    f = Fields(doc, (), doc.data, allowed=_KEYS, required=("name", "device", "requirements"))
    name = f.str("name")
    if name and name != folder.name:
        doc.error(("name",), f"'{name}' differs from the folder name '{folder.name}'",
                  f"rename one of them so both read '{folder.name}'")
    toolkit = None
    if f.raw("toolkit") is not None:
        t = Fields(doc, ("toolkit",), f.raw("toolkit"), allowed=("axis", "id_prefix", "name"),
                   required=("axis", "id_prefix"))
        toolkit = Toolkit(axis=t.str("axis"), id_prefix=t.str("id_prefix"),
                          name=t.str("name", t.str("axis")))
    if not (folder / "Dockerfile.j2").is_file():
        doc.error((), f"{folder.name}/Dockerfile.j2 is missing",
                  "add one that starts with {% extends \"base.Dockerfile.j2\" %}")
    vendor = Vendor(
        name=folder.name, display=f.str("display", folder.name), source=f.str("source"),
        folder=folder, device=f.str("device", "cpu"), toolkit=toolkit,
        index_url=f.str("index_url"), requirements=f.str_list("requirements"),
        test_requirements=f.str_list("test_requirements"), builder_apt=f.str_list("builder_apt"),
        runtime_apt=f.str_list("runtime_apt"), run_flags=f.str_list("run_flags"),
        smoke_imports=f.str_list("smoke_imports"),
        base_images={os_key: {str(k): str(v) for k, v in (per_os or {}).items()}
                     for os_key, per_os in f.mapping("base_images").items()
                     if _is_map(doc, ("base_images", os_key), per_os)},
        env=f.str_map("env"), host=f.mapping("host"), facts=f.mapping("facts"),
        verify=f.mapping("verify"),
        companions={name: {str(k): str(v) for k, v in pairs.items()}
                    for name, pairs in f.mapping("companions").items()
                    if _is_map(doc, ("companions", name), pairs,
                               "a mapping of torch series (e.g. '2.14') to a version")},
        local_version=f.str("local_version"),
    )
    doc.raise_if_problems()
    return vendor


def _is_map(doc, path, value,
            what: str = "a mapping of toolkit version (or 'default') to image") -> bool:
    if isinstance(value, dict):
        return True
    doc.error(path, f"expected {what}")
    return False


def discover(vendors_dir: Path) -> dict[str, Path]:
    """Map vendor name -> folder for every ``vendors/<name>/vendor.yaml``."""
    if not vendors_dir.is_dir():
        return {}
    return {p.parent.name: p.parent for p in sorted(vendors_dir.glob(f"*/{VENDOR_FILE}"))}


def check_vendor_names(requested: list[str], known: dict[str, Path]) -> None:
    """Raise InputError naming every unknown vendor, with a suggestion."""
    unknown = [name for name in requested if name not in known]
    if unknown:
        lines = [f"unknown vendor '{n}'; {did_you_mean(n, tuple(known))}" for n in unknown]
        raise InputError("\n".join(lines))
