"""One worker process of the autograd layer (``test_autograd.py``), on the ops layer's pool
(``oota_opsworkers.Pool``): it opens the device as the suite does, waits for the pytest
process's go, then judges the pairs it claims, in the layer's order, with
``test_autograd.judge_pair``, until none is left or the pytest process that started it is
gone. A kernel that crashes it (refdev's backward of sign, whose zero gradient refdev cannot
make, ended the process with SIGSEGV) fails the pair it held; the layer and the run go on."""

from __future__ import annotations

import faulthandler
import os
import sys
import time
from pathlib import Path

from oota_opsworkers import (
    FOLDER_VARIABLE,
    GO_FILE,
    POLL_S,
    THREADS_VARIABLE,
    PairResult,
    claim,
    write,
)

HERE = Path(__file__).resolve().parent


def main() -> int:
    """Judge the pairs this worker claims; 3 when the device cannot be opened here."""
    faulthandler.enable()  # a crash leaves the Python stack in the log the pair's failure quotes
    import torch

    parent = os.getppid()
    folder = Path(os.environ[FOLDER_VARIABLE])
    torch.set_num_threads(int(os.environ.get(THREADS_VARIABLE) or 1))
    sys.path.insert(0, str(HERE))
    import test_autograd
    from oota_suite import opened_device, read_cell

    with opened_device(read_cell()) as device:
        if isinstance(device, str):
            print(f"oota autograd worker: {device}", file=sys.stderr)
            return 3
        go = folder / GO_FILE
        while not go.exists():
            if os.getppid() != parent:
                return 0
            time.sleep(POLL_S * 5)
        started = float(go.read_text())
        test_autograd.BUDGET.started = time.monotonic() - (time.time() - started)
        for index, (key, dtype) in enumerate(test_autograd.WORK):
            if os.getppid() != parent:
                return 0
            if not claim(folder, index):
                continue
            check, _, name = key.partition(":")
            try:
                result = test_autograd.judge_pair(check, name, dtype, device)
            except Exception as exc:  # noqa: BLE001 - reported as the pair's failure
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                result = PairResult(status="failed", message=(
                    f"{name} ({dtype}, {check}): the autograd layer raised "
                    f"{type(exc).__name__}: {first}"))
            write(folder, index, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
