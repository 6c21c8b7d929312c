"""What ``matrix`` and ``hosts`` print: their rows as types, each shown as a table for a person or
as JSON (``--format json``), and the exit code of ``hosts``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oota.errors import EXIT_ENVIRONMENT, EXIT_HOST_LOST, EXIT_OK
from oota.execute.hosts import HostCheck


@dataclass(frozen=True, kw_only=True, slots=True)
class MatrixRow:
    """One cell as ``matrix`` lists it; ``default``: ``build`` picks it without ``--all``."""

    id: str
    coordinates: Mapping[str, str | None]
    base: str
    tag: str
    default: bool
    fingerprint: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **self.coordinates, "base": self.base, "tag": self.tag,
                "default": self.default, "fingerprint": self.fingerprint}


def format_rows(rows: Sequence[MatrixRow], fmt: str) -> str:
    """`invoke matrix`'s output: a table, or JSON (``fmt`` is one of :data:`FORMATS`)."""
    shown = [row.to_json() for row in rows]
    if fmt == "json":
        return json.dumps(shown, indent=2)
    headers = ("id", "vendor", "torch", "python", "toolkit_version", "os", "platform",
               "default")
    # A cell says its platform only when it is not linux/amd64 (Cell.coordinates).
    shown = [{"platform": "linux/amd64", **row} for row in shown]
    table = [[str(r.get(h) if r.get(h) is not None else "-") for h in headers] for r in shown]
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h)
              for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in table]
    return "\n".join(out)


@dataclass(frozen=True, kw_only=True, slots=True)
class HostRow:
    """One line of `invoke hosts`; ``answered`` False: the host's engine did not answer."""

    host: str
    vendor: str
    supported: bool
    answered: bool
    driver: str | None
    reasons: tuple[str, ...]
    facts: Mapping[str, Any]
    # Per toolkit version of the vendor's cells, what its driver rules say of this host's
    # driver: '' (enough), the note (NVIDIA's minor-version compatibility), or why not.
    toolkits: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "vendor": self.vendor, "supported": self.supported,
                "answered": self.answered, "driver": self.driver,
                "reasons": list(self.reasons), "facts": dict(self.facts),
                "toolkits": {toolkit: verdict for toolkit, verdict in self.toolkits}}


def host_row(host: str, vendor: str, check: HostCheck | None, error: str,
             toolkits: tuple[tuple[str, str], ...] = ()) -> HostRow:
    if check is None:
        return HostRow(host=host, vendor=vendor, supported=False, answered=False, driver=None,
                       reasons=(error.splitlines()[0],), facts={})
    return HostRow(host=host, vendor=vendor, supported=check.supported, answered=True,
                   driver=check.driver, reasons=tuple(check.reasons), facts=check.facts,
                   toolkits=toolkits if check.supported else ())


def format_hosts(rows: Sequence[HostRow], fmt: str) -> str:
    """`invoke hosts`'s output: a line per vendor, or JSON (``fmt`` is one of :data:`FORMATS`)."""
    if fmt == "json":
        return json.dumps([row.to_json() for row in rows], indent=2)
    lines = []
    for row in rows:
        state = "available" if row.supported else \
            "unsupported here" if row.answered else "no answer"
        driver = f" (driver {row.driver})" if row.driver else ""
        reasons = "" if row.supported else ": " + "; ".join(row.reasons)
        lines.append(f"{row.host:<12} {row.vendor:<10} {state}{driver}{reasons}")
        lines += [f"{'':<24}{toolkit}: {verdict or 'the driver is enough'}"
                  for toolkit, verdict in row.toolkits]
    return "\n".join(lines)


def hosts_exit_code(rows: Sequence[HostRow]) -> int:
    """`invoke hosts`: 0 when every host answered, 4 when some did not, 3 when none did (the
    probe found nothing out: an environment problem, as for a build)."""
    silent = [row for row in rows if not row.answered]
    if not silent:
        return EXIT_OK
    return EXIT_HOST_LOST if len(silent) < len(rows) else EXIT_ENVIRONMENT
