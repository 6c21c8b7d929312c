"""hosts.yaml: the Docker Engines a lab runs cells on (``invoke build --hosts hosts.yaml``).

::

    hosts:
      gpu-a:                              # the name results and reports show
        endpoint: tcp://gpu-a.lab:2376    # or unix:///..., ssh://user@host, or context: NAME
        tls: {ca: certs/ca.pem, cert: certs/cert.pem, key: certs/key.pem}
        vendors: [cuda]                   # whose hardware it carries
        jobs: 2                           # cells at once (default 1)
      gpu-b:
        endpoint: ssh://oota@gpu-b.lab
        vendors: [cuda, cpu]

The file is checked against ``schema/hosts-v1.json`` and then for what a schema cannot say
(exactly one of endpoint and context, TLS files that exist and only for tcp://, vendors that
the matrix knows); every problem is reported at once with ``file:line:col``, exit 2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oota import schemas
from oota.config.schemacheck import check_against
from oota.config.yamlsrc import Doc, did_you_mean, load_yaml
from oota.errors import InputError
from oota.net import redact
from oota.resources import shipped

SCHEMA_FILE = shipped("schema") / "hosts-v1.json"


@dataclass(frozen=True, kw_only=True, slots=True)
class HostEntry:
    """One engine of the fleet. ``tls`` holds absolute paths (ca, cert, key) or is None."""

    name: str
    url: str = ""
    context: str = ""
    tls: tuple[Path, Path, Path] | None = None
    vendors: tuple[str, ...]
    jobs: int = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class HostsFile:
    file: Path
    hosts: tuple[HostEntry, ...]

    def serving(self, vendor: str) -> tuple[HostEntry, ...]:
        return tuple(h for h in self.hosts if vendor in h.vendors)


def schema() -> Mapping[str, Any]:
    """schema/hosts-v1.json, the published format of hosts.yaml."""
    return schemas.load(SCHEMA_FILE.name)


def endpoint_of(text: str, flag: str) -> tuple[str, str]:
    """(url, context) of one engine written as a host's ``endpoint`` (a URL) or ``context`` (a
    name) of hosts.yaml, checked with the schema's own patterns; InputError naming ``flag``."""
    fields = schema()["$defs"]["host"]["properties"]
    field = "endpoint" if "://" in text else "context"
    if not re.fullmatch(str(fields[field]["pattern"]), text):
        # The ssh example is not written as a URL: messages redact a URL's user.
        raise InputError(f"{flag} {redact(text)!r}: give a Docker endpoint as hosts.yaml writes "
                         "it (unix:///var/run/docker.sock, tcp://HOST:PORT, ssh:// then "
                         "USER@HOST[:PORT]) or a docker context name (`docker context ls`)")
    return (text, "") if field == "endpoint" else ("", text)


# The default Engine's name (oota.engine.base.Endpoint), shown as the machine's name.
RESERVED = "local"


def load_hosts(file: Path, vendors: tuple[str, ...]) -> HostsFile:
    """Load and check ``file``; ``vendors`` are the matrix's vendor names. Raises MatrixError
    (exit 2) listing every problem."""
    doc = load_yaml(file, str(file))
    reported = check_against(doc, schema())
    hosts = doc.data.get("hosts") if isinstance(doc.data, dict) else None
    entries: list[HostEntry] = []
    if isinstance(hosts, dict):
        for name, spec in hosts.items():
            if isinstance(spec, dict) and ("hosts", name) not in reported:
                entries.append(_entry(doc, file.parent, name, spec, vendors))
    doc.sort_problems()
    doc.raise_if_problems()
    return HostsFile(file=file, hosts=tuple(entries))


def _entry(doc: Doc, folder: Path, name: str, spec: dict[str, Any],
           vendors: tuple[str, ...]) -> HostEntry:
    path = ("hosts", name)
    if name == RESERVED:
        doc.error(path, f"'{RESERVED}' is the name of the Engine of a run without a hosts file, "
                  "which results and reports show as the machine's own name: a host called so "
                  "would be renamed", "name the host after its machine, e.g. gpu-a")
    url, context = spec.get("endpoint", ""), spec.get("context", "")
    if bool(url) == bool(context):
        doc.error(path, "give exactly one of endpoint and context",
                  "e.g. endpoint: tcp://gpu-a.lab:2376, or context: gpu-a")
    tls = spec.get("tls")
    files: tuple[Path, Path, Path] | None = None
    if isinstance(tls, dict):
        if not url.startswith("tcp://"):
            doc.error((*path, "tls"), "TLS files belong to a tcp:// endpoint",
                      "remove tls, or use endpoint: tcp://HOST:2376")
        paths = tuple((folder / str(tls.get(k, ""))).resolve() for k in ("ca", "cert", "key"))
        for key, file in zip(("ca", "cert", "key"), paths, strict=True):
            if not file.is_file():
                doc.error((*path, "tls", key), f"{file} does not exist",
                          "paths are relative to the hosts file")
        files = (paths[0], paths[1], paths[2])
    for index, vendor in enumerate(spec.get("vendors", [])):
        if isinstance(vendor, str) and vendor not in vendors:
            hint = did_you_mean(vendor, vendors)
            doc.error((*path, "vendors", index), f"'{vendor}' is not a vendor of the matrix",
                      hint or "the matrix's vendors: " + ", ".join(vendors))
    return HostEntry(name=name, url=url, context=context, tls=files,
                     vendors=tuple(spec.get("vendors", ())), jobs=int(spec.get("jobs", 1)))
