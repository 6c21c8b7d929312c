"""Builder-stage helper: turn pip's --report into provenance.json for the runtime image.

Keeps, per installed distribution, its name, version and where it came from, with any
user:password stripped from URLs so no credential reaches an image layer.
"""

import json
import sys
from urllib.parse import urlsplit, urlunsplit


def scrub(url: str) -> str:
    parts = urlsplit(url)
    if "@" in parts.netloc:
        parts = parts._replace(netloc=parts.netloc.rsplit("@", 1)[1])
    return urlunsplit(parts._replace(query="", fragment=""))


def main(report_path: str, out_path: str) -> None:
    with open(report_path, encoding="utf-8") as fh:
        report = json.load(fh)
    packages = {}
    for item in report.get("install", []):
        meta = item.get("metadata", {})
        info = item.get("download_info", {})
        hashes = info.get("archive_info", {}).get("hashes", {})
        packages[meta.get("name", "?").lower()] = {
            "version": meta.get("version"),
            "source": scrub(info.get("url", "")),
            "sha256": hashes.get("sha256"),
            "requested": bool(item.get("requested")),
        }
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump({"pip_version": report.get("pip_version"), "packages": packages}, fh,
                  indent=2, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
