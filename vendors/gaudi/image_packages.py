"""Builder-stage helper for Gaudi: describe the packages that came with the base image.

torch and habana_frameworks are installed in Intel's image, not by pip in this build, so pip's
--report cannot list them. This writes the same report shape for torch and Intel's Gaudi
packages, naming the base image as their source, for verify/provenance.py to read.

    python image_packages.py BASE_IMAGE REPORT_JSON
"""

import importlib.metadata
import json
import sys

PREFIXES = ("torch", "habana", "lightning-habana", "optimum-habana")


def _wanted(name: str) -> bool:
    return name.lower().replace("_", "-").startswith(PREFIXES)


def main(base_image: str, out_path: str) -> None:
    install = []
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and _wanted(name):
            install.append({"metadata": {"name": name, "version": dist.version},
                            "download_info": {"url": f"docker-image:{base_image}"},
                            "requested": name.lower() == "torch"})
    if not any(item["metadata"]["name"].lower() == "torch" for item in install):
        sys.exit(f"{base_image} has no torch installed: is it an Intel Gaudi PyTorch image?")
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump({"version": "1", "pip_version": None, "install": install}, fh, indent=2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
