"""``release-check --update`` on this repository's own matrix.yaml and vendors/, against the
real index as recorded (tests/unit/indexreplay.py: PyPI's answers of the day it was recorded,
no network): for each vendor, what it writes is what the vendor's data allows, and for
PyPI/XLA, whose wheels declare no torch requirement, it writes nothing at all."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from oota.config.companions import load_cache
from oota.config.matrix import Matrix, load_matrix, torch_releases
from oota.config.pairing import TorchRule
from oota.config.vendors import Vendor
from oota.releases.command import run
from oota.releases.index import PackageIndex
from oota.releases.wheels import parse_metadata
from tests.unit.indexreplay import REPO, SOURCE, ReplayHttp

MATRIX = load_matrix(REPO / "matrix.yaml")
CACHE = "vendors/companions.yaml"


@pytest.fixture(scope="module")
def recorded() -> ReplayHttp:
    return ReplayHttp()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """This repository's matrix.yaml and vendors/, to be updated."""
    shutil.copy(REPO / "matrix.yaml", tmp_path / "matrix.yaml")
    shutil.copytree(REPO / "vendors", tmp_path / "vendors")
    return tmp_path


def update(checkout: Path, vendor: str, recorded: ReplayHttp) -> str:
    return run(checkout / "matrix.yaml", update=True, vendors=[vendor], http=recorded).text


def test_xla_update_writes_nothing_and_says_why(checkout: Path, recorded: ReplayHttp) -> None:
    before = {f: (checkout / f).read_bytes() for f in ("matrix.yaml", CACHE)}
    text = update(checkout, "xla", recorded)
    assert {f: (checkout / f).read_bytes() for f in before} == before
    assert "torch axes already up to date" in text
    assert "note: xla: no pairing for torch 2.15.0 or 2.14.1; torch axis left as it is" in text
    assert f"{CACHE}: already up to date" in text
    assert "--- a/" not in text
    # Every torch N / N-1 row is a gap that names both the index's silence and the rule.
    rows = [line for line in text.splitlines() if line.startswith("xla ")]
    assert rows and all(" GAP " in line for line in rows)
    assert ("no torch-xla for torch 2.15.0 (newest 2.9.0 declares no torch requirement) "
            "(index); torch-xla 2.9.0 requires torch==2.9.* (vendor data: "
            "vendors/xla/vendor.yaml facts.extension.requires_torch)") in rows[0]
    assert ("torch_xla: no release read from the index declares a torch requirement (2.9.0, "
            "2.8.1, 2.8.0, 2.7.0); vendors/xla/vendor.yaml pairs torch 2.9.0 -> 2.9.0 "
            "(companions.torch_xla[\"2.9\"]); torch 2.8.0 -> 2.8.1 "
            "(companions.torch_xla[\"2.8\"]); "
            "nothing for torch 2.15.0, 2.14.1") in text


def test_without_its_rule_xla_pairing_is_unknown_never_any_torch(
        checkout: Path, recorded: ReplayHttp) -> None:
    file = checkout / "vendors" / "xla" / "vendor.yaml"
    file.write_text(re.sub(r"(?m)^ *requires_torch:.*\n", "", file.read_text()))
    before = (checkout / "matrix.yaml").read_bytes()
    text = update(checkout, "xla", recorded)
    assert (checkout / "matrix.yaml").read_bytes() == before
    rows = [line for line in text.splitlines() if line.startswith("xla ")]
    assert rows and all(" GAP " in line for line in rows)
    assert ("torch-xla 2.9.0 declares no torch requirement (index); no rule for it: its "
            "pairing with torch 2.15.0 is unknown (add facts.extension.requires_torch)") \
        in rows[0]
    assert "torch-xla 2.9.0 (declares no torch requirement)" not in text


@pytest.mark.parametrize("vendor", sorted(MATRIX.vendors))
def test_update_writes_nothing_the_vendor_data_contradicts(
        checkout: Path, recorded: ReplayHttp, vendor: str) -> None:
    update(checkout, vendor, recorded)
    after = load_matrix(checkout / "matrix.yaml")    # what it wrote loads and plans
    metadata = Recorded(recorded)
    for name, vm in after.vendors.items():
        added = set(torch_releases(vm)) - set(torch_releases(MATRIX.vendors[name]))
        assert name == vendor or not added, f"{name} changed by release-check --vendor {vendor}"
        for torch in added:
            assert _allowed(vm.vendor, torch, metadata), f"{name}: torch {torch} written"
    _check_cache(after, metadata)


class Recorded:
    """The recorded index's releases and the torch requirement each recorded wheel states."""

    def __init__(self, recorded: ReplayHttp):
        self.http = recorded
        self.index = PackageIndex(SOURCE, http=recorded)

    def declared(self, dist: str, release: Version) -> SpecifierSet | None:
        """The torch requirement in the recorded METADATA of one of the release's wheels."""
        urls = [f.url.split("#")[0] for f in self.index.releases(dist)[release] if f.is_wheel]
        url = next((u for u in urls if u in self.http.wheels), None)
        if url is None:
            return None
        meta = parse_metadata(self.http.wheels[url]["metadata"].encode(), "recorded")
        specs = [str(r.specifier) for r in meta.requires_dist
                 if canonicalize_name(r.name) == "torch" and r.specifier]
        return SpecifierSet(",".join(specs)) if specs else None

    def accepts(self, dist: str, release: Version, torch: Version,
                rule: TorchRule | None) -> bool:
        specs = [s for s in (self.declared(dist, release),
                             rule.for_release(release) if rule else None) if s is not None]
        return bool(specs) and all(s.contains(torch, prereleases=True) for s in specs)


def _allowed(vendor: Vendor, torch: Version, metadata: Recorded) -> bool:
    """The vendor's data pairs ``torch``: a compat row covers it, and where its extension is
    on the index, a release of it requires this torch by its metadata and the vendor's rule."""
    facts = vendor.facts
    if facts.compat and not any(torch.release[:len(Version(r.torch).release)]
                                == Version(r.torch).release for r in facts.compat):
        return False
    ext = facts.extension
    if ext is None or ext.index != "pypi":
        return True
    return any(metadata.accepts(ext.distribution, release, torch, ext.requires_torch)
               for release in metadata.index.releases(ext.distribution))


def _check_cache(matrix: Matrix, metadata: Recorded) -> None:
    """Every pair of vendors/companions.yaml is one the recorded metadata makes, and no
    vendor's rule for that distribution refuses it."""
    cache = load_cache(matrix.root / CACHE, CACHE)
    rules = [vm.vendor.facts.extension for vm in matrix.vendors.values()
             if vm.vendor.facts.extension and vm.vendor.facts.extension.requires_torch]
    for name, companion in cache.companions.items():
        for torch, pair in companion.pairs.items():
            declared = metadata.declared(name, Version(pair.version))
            assert declared is not None and declared.contains(Version(torch)), (name, torch)
            for ext in (e for e in rules if e.names(name)):
                assert ext.requires_torch and ext.requires_torch.for_release(
                    Version(pair.version)).contains(Version(torch)), (name, torch)


def test_the_whole_check_agrees_with_the_cache(recorded: ReplayHttp, checkout: Path) -> None:
    """Each companion is read for the torch releases of the vendors that name it: XLA's
    torch 2.9.0 and 2.8.0 ask nothing of torchvision."""
    text = run(checkout / "matrix.yaml", http=recorded).text
    assert "companions (torchvision): vendors/companions.yaml agrees with https://pypi.org" \
        in text
    assert "not in the cache" not in text
