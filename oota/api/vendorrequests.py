"""The requests of the tasks about a vendor's folder and data: ``init`` (scaffold one),
``lint`` (hadolint its Dockerfiles) and ``known-failures`` (read its tracker's issues). The
same kind of typed request as :mod:`oota.api.requests`, which lists them among every task's."""

from __future__ import annotations

from dataclasses import dataclass

from oota.api.fields import flag, required
from oota.project import DEFAULT_MATRIX


@dataclass(frozen=True, kw_only=True, slots=True)
class InitRequest:
    vendor: str = required("the new vendor's name: vendors/NAME/ is written (a name of lower-"
                           "case letters, digits, '.', '_' and '-')", check=str)
    matrix: str = flag("matrix file; written with the vendor's one cell when it does not exist",
                       DEFAULT_MATRIX)


@dataclass(frozen=True, kw_only=True, slots=True)
class LintRequest:
    matrix: str = flag("matrix file", DEFAULT_MATRIX)


@dataclass(frozen=True, kw_only=True, slots=True)
class KnownFailuresRequest:
    vendor: str = required("the vendor whose tracker is read (known_failures in its "
                           "vendor.yaml)", check=str)
    json: bool = flag("print the entries as JSON (the form the verify suite takes in "
                      "OOTA_KNOWN_FAILURES)", False)
    matrix: str = flag("matrix file; the list is cached in .oota-cache/ beside it",
                       DEFAULT_MATRIX)
