"""A release-check verdict and the claims behind it, each saying where it comes from: the
package index, or a vendor's own data (with the place in vendor.yaml, and UNVERIFIED where
the vendor marks the fact so), so a pairing read from a table never passes for an index
fact."""

from __future__ import annotations

from dataclasses import dataclass

INDEX = "index"
VENDOR = "vendor data"


@dataclass(frozen=True, kw_only=True, slots=True)
class Claim:
    """One statement behind a verdict, with its origin."""

    text: str
    origin: str                      # INDEX or VENDOR
    where: str                       # the index URL, or "vendors/x/vendor.yaml facts.compat[1]"
    verified: bool = True            # False: vendor data its vendor marks ``verified: false``

    @property
    def label(self) -> str:
        if self.origin == INDEX:
            return INDEX
        return VENDOR if self.verified else f"{VENDOR}, UNVERIFIED"

    @property
    def sentence(self) -> str:
        if self.origin == INDEX:
            return f"{self.text} (index)"
        return f"{self.text} ({self.label}: {self.where})"


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    ok: bool
    claims: tuple[Claim, ...]


def index_claim(text: str, where: str) -> Claim:
    return Claim(text=text, origin=INDEX, where=where)


def vendor_claim(file: str, text: str, where: str, verified: bool = True) -> Claim:
    return Claim(text=text, origin=VENDOR, where=f"{file} {where}", verified=verified)


def gap(*claims: Claim) -> Verdict:
    return Verdict(ok=False, claims=claims)
