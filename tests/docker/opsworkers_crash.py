"""Runs inside an image with torch (tests/docker/test_ops_layer.py; not a test module): the ops
layer's pool of worker processes (verify/oota_opsworkers.py) when its workers keep crashing.

Each "worker" claims pair 0 if no one has, then kills itself with SIGSEGV, as a vendor kernel
that crashes would. After MAX_RESTARTS restarts no worker is left: the pool must give every
pair a result (the held one failed with the signal, a must-pass operator's failed, any other's
skipped) instead of waiting for ever. Prints the results as JSON.
"""

from __future__ import annotations

import json
import sys
import tempfile
import types
from pathlib import Path

sys.path.insert(0, "/opt/oota/verify")
import oota_opsworkers  # noqa: E402

CRASH = ("import os, signal, sys\n"
         "claim = os.path.join(sys.argv[1], '0.claim')\n"
         "if not os.path.exists(claim):\n"
         "    open(claim, 'w').write(str(os.getpid()))\n"
         "print('judging a pair, then a crash', flush=True)\n"
         "os.kill(os.getpid(), signal.SIGSEGV)\n")


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    pool = oota_opsworkers.Pool(folder=folder, _going=True,
                                command=(sys.executable, "-c", CRASH, str(folder)))
    pool.index = {("tanh", "float32"): 0, ("tanh", "bfloat16"): 1, ("erf", "float32"): 2}
    pool.must = frozenset({"tanh"})
    pool._spawn()
    budget = types.SimpleNamespace(started=None)
    results = {f"{name}-{dtype}": vars(pool.result(name, dtype, budget))
               for name, dtype in pool.index}
    print(json.dumps({"restarts": pool.restarts, "results": results}))


if __name__ == "__main__":
    main()
