"""Inductor's vector-ISA probes, compiled when the image is built instead of in every
verification.

Before Inductor's first C++ compile in a process it asks which vector instruction sets it may
use (``torch._inductor.cpu_vec_isa.valid_vec_isa_list``): for each one the CPU has, it compiles
a small probe program with that set's compiler flags into its cache and loads it in a child
process. In a fresh container the cache is empty: on a 2-core Intel Xeon with AVX-512 and AMX
the probes' ten g++ runs took 17.7 s of every verification whose compile layer used Inductor
(2.3 s with the probes already in the cache: what is left is loading each one on this CPU).

A probe's file in the cache is named by the hash of its source, the compiler's version, its
instruction-set flags and torch's version, and Inductor compiles one only when that file is
missing: a probe made by another compiler or another torch is never taken for this one. So the
image's build compiles every probe Inductor may ask for on any x86-64 CPU (the CPU's features
stood in for, each optional feature that changes a probe's flags both ways, and without
``-march=native``, so that the files are the same bytes on every build host), into
``/opt/oota/inductor-isa``. ``oota-verify`` gives the suite a fresh cache of its own seeded with
them (:func:`seeded_cache`): every kernel is still compiled in the verification, on the
verifying host's compiler, and every probe is still loaded on the verifying CPU, which alone
decides what Inductor may use.

    python oota_isacache.py prepare DIR    (at build time)

Preparing never fails the image's build: a torch whose Inductor probes otherwise (the functions
stood in for renamed, a probe the compiler refuses) leaves fewer probes or none, said in the
build's log, and the verification compiles what is missing, as without this cache.
"""

from __future__ import annotations

import itertools
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

IMAGE_PROBES = Path("/opt/oota/inductor-isa")
CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"
# The CPU features that change a probe's flags once the probes before it passed: AVX-512 BF16
# (-mavx512bf16 on the later AVX-512 probes) and AMX-FP16 (-mamx-fp16).
OPTIONAL = ("_is_avx512_bf16_supported", "_is_amx_fp16_supported")
ALWAYS = ("_is_avx2_supported", "_is_avx512_supported", "_is_vnni_supported",
          "_is_amx_tile_supported", "_init_amx")


def _compile_probes(optional: dict[str, bool]) -> None:
    """In a fresh process: Inductor's own probing, as on a CPU with every x86-64 vector
    feature and the ``optional`` ones as given, each probe compiled without -march=native."""
    import torch
    from torch._inductor import config, cpu_vec_isa

    config.cpp.march = ""
    for name in ALWAYS:
        setattr(torch.cpu, name, lambda: True)
    for name, present in optional.items():
        setattr(torch.cpu, name, lambda present=present: present)
    cpu_vec_isa.VecISA._probe_load = lambda self, path: True  # type: ignore[method-assign]
    cpu_vec_isa.valid_vec_isa_list()


def prepare(folder: Path) -> None:
    """Compile every x86-64 probe into ``folder`` (made here) and say how many. Elsewhere than
    x86-64 nothing is prepared."""
    if platform.machine() not in ("x86_64", "AMD64"):
        print(f"inductor-isa: {platform.machine()}: no x86-64 probes to prepare")
        return
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, CACHE_VARIABLE: str(folder), "PYTHONDONTWRITEBYTECODE": "1"}
    failed = 0
    for values in itertools.product((False, True), repeat=len(OPTIONAL)):
        optional = dict(zip(OPTIONAL, values, strict=True))
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import oota_isacache; "
                f"oota_isacache._compile_probes({optional!r})")
        done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)],
                              env=env, check=False)
        failed += done.returncode != 0
    # Only the probes stay: sources and libraries; Inductor's lock files (locks/, emptied
    # first: a folder sorts before its files) are made again.
    for path in sorted(folder.rglob("*"), reverse=True):
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
        elif path.is_file() and path.suffix not in (".cpp", ".so"):
            path.unlink()
    probes = sorted(p.name for p in folder.rglob("*.so"))
    print(f"inductor-isa: {len(probes)} probes in {folder}"
          + (f"; the probing of {failed} feature sets failed (above): the verification "
             "compiles what is missing" if failed else ""))


def seeded_cache(env: dict[str, str], probes: Path = IMAGE_PROBES) -> Path | None:
    """A fresh Inductor cache for the suite, holding the image's ``probes``, set in ``env``;
    None (``env`` unchanged) where the caller chose a cache (``TORCHINDUCTOR_CACHE_DIR``) or the
    image has no probes. The caller removes the folder."""
    if env.get(CACHE_VARIABLE) or not probes.is_dir():
        return None
    folder = Path(tempfile.mkdtemp(prefix="oota-inductor-"))
    shutil.copytree(probes, folder, dirs_exist_ok=True)
    env[CACHE_VARIABLE] = str(folder)
    return folder


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "prepare":
        sys.exit(__doc__.rsplit("\n\n", 1)[-1])
    prepare(Path(sys.argv[2]))
