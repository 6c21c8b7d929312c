"""The SBOM of an image: what :mod:`oota.supply.probe` found in it, as CycloneDX 1.6 JSON.

Built and serialised with ``cyclonedx-python-lib`` (the CycloneDX project's own library), so
the document follows the schema that library ships; a unit test validates against it. Every
Python distribution carries a sha256 (property ``oota:sha256-of`` says of what): of its
wheel where pip's install report in the image recorded one (``wheel``), or where the cell's lock
pins exactly one hash for that version (``wheel (lock)``: the install ran with
``--require-hashes``, so it is the installed wheel's; torch from a wheelhouse is such a case);
else of its installed RECORD file (``RECORD``, which lists the hash of every installed file).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from oota import __version__

# The script that lists what an image holds (run inside it): the inventory an SBOM is made of.
PROBE = Path(__file__).with_name("probe.py")
HASH_OF_PROPERTY = "oota:sha256-of"


class InventoryError(ValueError):
    pass


@dataclass(frozen=True, kw_only=True, slots=True)
class OsPackage:
    name: str
    version: str
    arch: str


@dataclass(frozen=True, kw_only=True, slots=True)
class PyPackage:
    name: str
    version: str
    sha256: str
    sha256_of: str  # "wheel" or "RECORD"


@dataclass(frozen=True, kw_only=True, slots=True)
class Inventory:
    os_id: str
    os_version: str
    os_packages: tuple[OsPackage, ...]
    python: tuple[PyPackage, ...]

    @classmethod
    def from_json(cls, doc: object) -> Inventory:
        """The probe's ``inventory.json``; InventoryError when it is not one."""
        if not isinstance(doc, Mapping):
            raise InventoryError("inventory: expected an object")
        try:
            debs = tuple(OsPackage(name=str(n), version=str(v), arch=str(a))
                         for n, v, a in doc.get("debs", []))
            python = tuple(_py(p) for p in doc.get("python", []))
            os_info = doc.get("os") or {}
            return cls(os_id=str(os_info.get("id", "")),
                       os_version=str(os_info.get("version_id", "")),
                       os_packages=debs, python=python)
        except (TypeError, ValueError, AttributeError) as exc:
            raise InventoryError(f"inventory: {exc}") from None

    def find(self, name: str) -> PyPackage | None:
        return next((p for p in self.python if p.name.lower() == name.lower()), None)


def _py(item: Mapping[str, str]) -> PyPackage:
    wheel, record = item.get("wheel_sha256", ""), item.get("record_sha256", "")
    return PyPackage(name=str(item["name"]), version=str(item["version"]),
                     sha256=wheel or record, sha256_of="wheel" if wheel else "RECORD")


def with_lock(inventory: Inventory,
              locked: Mapping[str, tuple[str, frozenset[str]]]) -> Inventory:
    """``inventory`` with the wheel hashes the cell's lock pins (one hash for the version
    installed) in place of RECORD hashes (``locked``: :func:`oota.lockfile.pins`)."""
    def better(package: PyPackage) -> PyPackage:
        version, hashes = locked.get(re.sub(r"[-_.]+", "-", package.name).lower(), ("", ()))
        if package.sha256_of != "RECORD" or version != package.version or len(hashes) != 1:
            return package
        return PyPackage(name=package.name, version=package.version, sha256=next(iter(hashes)),
                         sha256_of="wheel (lock)")
    return Inventory(os_id=inventory.os_id, os_version=inventory.os_version,
                     os_packages=inventory.os_packages,
                     python=tuple(better(p) for p in inventory.python))


def build_sbom(inventory: Inventory, *, image: str, digest: str) -> bytes:
    """CycloneDX 1.6 JSON of ``inventory``, describing the image ``image@digest``."""
    # Imported here: the library takes 80 ms to import, and every oota command imports this
    # module (the build's attach step), most never building an SBOM.
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    bom = Bom()
    bom.metadata.component = root = Component(
        name=image, type=ComponentType.CONTAINER, version=digest, bom_ref=f"{image}@{digest}",
        purl=PackageURL(type="oci", name=image.rsplit("/", 1)[-1], version=digest,
                        qualifiers={"repository_url": image}))
    bom.metadata.properties.add(Property(name="oota:version", value=__version__))
    distro = f"{inventory.os_id}-{inventory.os_version}" if inventory.os_id else None
    for deb in inventory.os_packages:
        qualifiers = {"arch": deb.arch} | ({"distro": distro} if distro else {})
        purl = PackageURL(type="deb", namespace=inventory.os_id or None, name=deb.name,
                          version=deb.version, qualifiers=qualifiers)
        bom.components.add(Component(name=deb.name, version=deb.version, purl=purl,
                                     type=ComponentType.LIBRARY, bom_ref=purl.to_string()))
    for package in inventory.python:
        purl = PackageURL(type="pypi", name=package.name.lower(), version=package.version)
        hashes = [HashType(alg=HashAlgorithm.SHA_256, content=package.sha256)] \
            if package.sha256 else []
        bom.components.add(Component(
            name=package.name, version=package.version, purl=purl, hashes=hashes,
            type=ComponentType.LIBRARY, bom_ref=purl.to_string(),
            properties=[Property(name=HASH_OF_PROPERTY, value=package.sha256_of)]))
    # The image holds every component directly (no graph between packages is recorded).
    bom.register_dependency(root, list(bom.components))
    return JsonV1Dot6(bom).output_as_string(indent=None).encode()


def torch_entry(sbom: bytes) -> Mapping[str, object] | None:
    """The torch component of an SBOM (for checks and tests)."""
    for component in json.loads(sbom).get("components", []):
        if str(component.get("name", "")).lower() == "torch":
            return dict(component)
    return None
