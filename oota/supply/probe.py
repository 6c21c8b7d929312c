"""Run inside an image (``python -c``, standard library only): what it holds, for its SBOM.

Writes ``<out>/inventory.json``: the OS (``/etc/os-release``), every Debian package
(``dpkg-query``), and every Python distribution of the interpreter that runs this, with the
sha256 of its installed RECORD file and, where the image's ``/opt/oota/provenance.json`` (pip's
install report, from the hash-locked install) gives one, the sha256 of the wheel it came from.
"""

import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys

PROVENANCE = "/opt/oota/provenance.json"


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def os_release() -> dict[str, str]:
    found: dict[str, str] = {}
    try:
        with open("/etc/os-release", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.strip().partition("=")
                found[key.lower()] = value.strip('"')
    except OSError:
        pass
    return {"id": found.get("id", ""), "version_id": found.get("version_id", "")}


def debs() -> list[list[str]]:
    try:
        fields = "${Package}\t${Version}\t${Architecture}\n"
        text = subprocess.run(["dpkg-query", "-W", "-f", fields],
                              capture_output=True, text=True, check=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.split("\t") for line in text.splitlines() if line.count("\t") == 2]


def wheel_hashes() -> dict[str, str]:
    try:
        with open(PROVENANCE, encoding="utf-8") as fh:
            packages = json.load(fh).get("packages", {})
    except (OSError, ValueError):
        return {}
    return {normalized(name): info["sha256"] for name, info in packages.items()
            if isinstance(info, dict) and info.get("sha256")}


def distributions() -> list[dict[str, str]]:
    wheels, found = wheel_hashes(), []
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        record = dist.read_text("RECORD")
        found.append({"name": name, "version": dist.version,
                      "record_sha256": hashlib.sha256(record.encode()).hexdigest()
                      if record else "",
                      "wheel_sha256": wheels.get(normalized(name), "")})
    return found


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    inventory = {"os": os_release(), "debs": debs(), "python": distributions(),
                 "python_version": sys.version.split()[0]}
    with open(os.path.join(out, "inventory.json"), "w", encoding="utf-8") as fh:
        json.dump(inventory, fh)


if __name__ == "__main__":
    main(sys.argv[1])
