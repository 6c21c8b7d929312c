"""PyTorch's release smoke checks, in a process of their own (the smoke layer, test_smoke.py).

    python oota_smokecheck.py checks [--import MODULE ...] [--device TYPE]
    python oota_smokecheck.py first-call --device TYPE [--import MODULE ...]

Prints one JSON object on stdout. ``checks`` is what PyTorch's own smoke test checks of every
binary it releases (pytorch/pytorch .ci/pytorch/smoke_test/smoke_test.py: torch imports,
it was built with OpenMP, numpy arrays become tensors, conv2d and linalg.svd work), with the
numpy this process imports (the smoke layer puts numpy 1.x first on its path for the second
run) and, given ``--device``, numpy data through the device and back. ``first-call`` is the
"full stack, no hardware" run: torch and the vendor's modules import on a host without the
device, ``torch.<type>.is_available()`` answers False, and the first call that needs the device
raises; it records what it raised. A fresh process, so that call really is the first.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Callable
from typing import Any

SEED = 20261128


def _imports(names: list[str]) -> dict[str, float]:
    """Import each module (torch first), with the seconds each took."""
    seconds = {}
    for name in ["torch", *[n for n in names if n != "torch"]]:
        started = time.perf_counter()
        importlib.import_module(name)
        seconds[name] = round(time.perf_counter() - started, 3)
    return seconds


def _numpy_to_torch(np: Any, torch: Any) -> None:
    values = torch.tensor(np.arange(5))
    assert values.tolist() == [0, 1, 2, 3, 4], f"torch.tensor(np.arange(5)) is {values}"
    array = np.zeros(4, dtype=np.float32)
    shared = torch.from_numpy(array)
    array[2] = 7.0  # from_numpy shares the array's memory
    assert shared.tolist() == [0.0, 0.0, 7.0, 0.0], f"from_numpy shares no memory: {shared}"
    pairs = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64,
             "int64": torch.int64, "int32": torch.int32, "bool": torch.bool}
    for name, dtype in pairs.items():
        back = torch.ones(3, dtype=dtype).numpy()
        assert str(back.dtype) == name, f"a {dtype} tensor became a numpy {back.dtype} array"
        assert torch.from_numpy(back).dtype == dtype, f"numpy {name} did not become {dtype}"


def _conv2d(np: Any, torch: Any) -> None:
    """The smoke test's conv2d: non-square kernel, unequal stride, padding and dilation."""
    torch.manual_seed(SEED)
    conv = torch.nn.Conv2d(16, 33, (3, 5), stride=(2, 1), padding=(4, 2), dilation=(3, 1))
    x = torch.randn(2, 16, 50, 100)
    with torch.no_grad():
        out = conv(x)
        wide = conv.double()(x.double())
    assert tuple(out.shape) == (2, 33, 26, 100), f"conv2d gave shape {tuple(out.shape)}"
    error = float((out.double() - wide).abs().max())
    assert error < 1e-3, f"conv2d differs from its float64 result by {error}"


def _svd(np: Any, torch: Any) -> None:
    torch.manual_seed(SEED)
    for shape in ((5, 3), (7, 5, 3)):
        a = torch.randn(*shape)
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        error = float(torch.dist(a, u @ torch.diag_embed(s) @ vh))
        assert error < 1e-4, f"linalg.svd of a {shape} matrix rebuilds it {error} off"


def _openmp(np: Any, torch: Any) -> None:
    assert torch.backends.openmp.is_available(), (
        "torch was built without OpenMP (PyTorch's smoke test requires it of every binary)")


def _device_round_trip(device: str) -> Callable[[Any, Any], None]:
    def check(np: Any, torch: Any) -> None:
        array = np.linspace(-2.0, 2.0, 12, dtype=np.float32).reshape(3, 4)
        on_device = torch.from_numpy(array).to(device)
        assert on_device.device.type == device, f"the tensor went to {on_device.device}"
        back = (on_device * 2).cpu().numpy()
        assert (back == array * 2).all(), f"numpy data through {device} came back as {back}"
    return check


def checks(device: str | None) -> dict[str, Any]:
    import numpy as np
    import torch

    steps: dict[str, Callable[[Any, Any], None]] = {
        "openmp": _openmp, "numpy_to_torch": _numpy_to_torch, "conv2d": _conv2d, "svd": _svd}
    if device:
        steps["numpy_through_device"] = _device_round_trip(device)
    failures = {}
    for name, step in steps.items():
        try:
            step(np, torch)
        except Exception as exc:  # noqa: BLE001 - every check is reported, not just the first
            failures[name] = f"{type(exc).__name__}: {exc}"
    return {"torch": torch.__version__, "numpy": np.__version__, "numpy_file": np.__file__,
            "checked": list(steps), "failures": failures}


def first_call(device: str) -> dict[str, Any]:
    import torch

    module = getattr(torch, device, None)
    available = None
    if module is not None and hasattr(module, "is_available"):
        available = bool(module.is_available())
    record: dict[str, Any] = {"torch": torch.__version__, "module": module is not None,
                              "is_available": available}
    try:
        tensor = torch.empty(1, device=device)
    except Exception as exc:  # noqa: BLE001 - what it raises is what this run records
        return {**record, "raised": type(exc).__name__, "message": str(exc)[:2000]}
    return {**record, "raised": None, "message": f"made a tensor on {tensor.device}"}


def main() -> int:
    parser = argparse.ArgumentParser(prog="oota_smokecheck")
    parser.add_argument("mode", choices=["checks", "first-call"])
    parser.add_argument("--import", dest="imports", action="append", default=[])
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    record: dict[str, Any] = {"python": sys.version.split()[0], "sys_path0": sys.path[:3]}
    try:
        record["imports_s"] = _imports(args.imports)
    except Exception as exc:  # noqa: BLE001 - a stack that does not import is the finding
        record["import_error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(record))
        return 0
    if args.mode == "checks":
        record |= checks(args.device)
    else:
        record |= first_call(args.device)
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
