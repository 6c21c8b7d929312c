"""Build the smoke layer's C++ extension against this environment's torch (the builder stage).

    /opt/venv/bin/python build_ext.py SOURCE OUT_DIR

Compiles SOURCE with ``torch.utils.cpp_extension.load`` (PyTorch's JIT extension builder: the
installed torch's headers, flags and C++ ABI, linked against its libraries; ninja runs the
compiler), loads the result once, and keeps only the built library and ``build.json`` (what it
was built against, or why it was not) in OUT_DIR: the runtime stage gets those and no compiler.
A build that fails is recorded, not raised: the claim it was made for fails in the smoke layer
with the compiler's message, the image still builds. Nothing here depends on the clock, so two
builds of the same inputs write the same files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

NAME = "oota_smoke_ops"
# A fixed folder: the build's paths stay the same from one build to the next.
BUILD_DIR = Path("/tmp/oota-smoke-build")
LOG_TAIL = 4000


def _compiler() -> str:
    try:
        out = subprocess.run(["c++", "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        return f"no c++ compiler: {exc}"
    return out.stdout.splitlines()[0] if out.stdout else out.stderr.strip()


def build(source: Path, out: Path) -> dict[str, object]:
    import torch
    from torch.utils import cpp_extension

    record: dict[str, object] = {
        "api": "torch.utils.cpp_extension.load", "source": source.name,
        "torch": torch.__version__, "git_version": torch.version.git_version,
        "cxx11_abi": bool(torch.compiled_with_cxx11_abi()), "compiler": _compiler()}
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    try:
        cpp_extension.load(name=NAME, sources=[str(source)], build_directory=str(BUILD_DIR),
                           is_python_module=False, verbose=True)
    except Exception as exc:  # noqa: BLE001 - recorded for the smoke layer, which fails on it
        return {**record, "status": "failed",
                "error": f"{type(exc).__name__}: {exc}"[-LOG_TAIL:],
                "traceback": traceback.format_exc()[-LOG_TAIL:]}
    shutil.copy2(BUILD_DIR / f"{NAME}.so", out / f"{NAME}.so")
    return {**record, "status": "built", "library": f"{NAME}.so",
            "operators": sorted(n for n in torch._C._dispatch_get_all_op_names()
                                if n.startswith("oota_smoke::"))}


def main() -> int:
    source, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    record = build(source, out)
    (out / "build.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"smoke extension: {record['status']} against torch {record['torch']}", file=sys.stderr)
    shutil.rmtree(BUILD_DIR, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
