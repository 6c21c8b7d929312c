"""Writes hostile and forged recordings into the folder named on the command line; run inside
an image with torch by tests/docker/test_judge.py (not a test module: it needs torch).

* ``crash.pt``: cases that crashed the judge before (a sample index of infinity, a tensor
  declaring 2^40 elements through stride 0, a result nested 3,000 deep, a meta tensor as the
  device's result), then a case whose device result is 100 off;
* ``header.pt``: a recording whose ``settings`` is a list;
* ``forged.pt``: a wrong device result with a forged rule (atol and rtol 1e300), one with the
  rule's kind set to ``skip``, one whose recorded CPU result is the device's own;
* ``later.pt``: a case recorded without its tensors (too large to keep), then an honest
  failing case, after the files above in the folder's order.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, "/opt/oota/judge")
import oota_cases  # noqa: E402
import oota_rules  # noqa: E402


def case(device_offset: float = 100.0, **changes: object) -> dict[str, object]:
    x = torch.linspace(-2, 2, 12).reshape(3, 4)
    y = torch.linspace(1, 3, 12).reshape(3, 4)
    cpu = x + y
    made = oota_cases.make_case(
        op="add", dtype="float32", sample=0, input_=x, args=[y], kwargs={}, cpu=cpu,
        device=cpu + device_offset, reference=cpu.double(), rule=oota_rules.pytorch_rule(),
        device_type="cuda")
    made.update(changes)
    return made


def nested(depth: int) -> object:
    tree: object = torch.zeros(1)
    for _ in range(depth):
        tree = [tree]
    return tree


def write(path: Path, cases: list[dict[str, object]], **header: object) -> None:
    data = oota_cases.recording(cases, device="forged", device_type="cuda", torch="2.13.0",
                                cell="", settings={}, note="hostile", by="test")
    data["recorded"].update(header)
    torch.save(data, path)  # not oota_cases.save: these must be written as they are


def main(folder: Path) -> None:
    sys.setrecursionlimit(100_000)  # torch.save pickles the 3,000-deep result recursively
    huge = torch.zeros(1).expand(2 ** 20, 2 ** 20)  # 2^40 elements, one float of storage
    write(folder / "crash.pt", [
        case(sample=float("inf")),
        case(device=huge),
        case(device=nested(3000)),
        case(device=torch.empty(3, 4, device="meta")),
        case(),
    ])
    write(folder / "header.pt", [case()], settings=["cudnn_allow_tf32"])
    honest = case()
    write(folder / "forged.pt", [
        case(rule={**honest["rule"], "atol": 1e300, "rtol": 1e300}),
        case(rule={**honest["rule"], "kind": "skip", "source": "trust me"}),
        case(cpu=honest["device"]),
    ])
    # A case its recorder kept without its tensors (over oota_cases.RECORD_ELEMENTS), with
    # the verdict it was given: skipped on replay (not judged again), never an error.
    dropped = {**oota_cases.shrink({**case(), "input": torch.zeros(
        oota_cases.RECORD_ELEMENTS + 1)}), "verdict": {"status": "failed", "message": "big"}}
    write(folder / "later.pt", [dropped, case(device_offset=5.0)])


if __name__ == "__main__":
    main(Path(sys.argv[1]))
