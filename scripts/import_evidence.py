"""Import recorded cases from the first real-hardware evidence format into oota's recording
format (``verify/oota_judge.py``, version 1).

The evidence files (``{"device", "torch", "cases": [...]}``, a case holding ``op``, ``dtype``,
``sample``, ``input``, ``args``, ``kwargs``, ``cpu_out``, ``device_out``, ``fp64_ref``) are
arbitrary pickles: they are read with ``torch.load(weights_only=False)``, which can run code,
so import only files from a source you trust. What is written loads as data only.

Each case gets the rule the ops layer would choose for it today (PyTorch's decisions read
from this torch's op_db for the device type given, and the vendor's tolerances), and the
verdict the judge gives it now, so that ``oota judge --check`` shows what a later change of
the judge moves. Run with a Python that has torch (and PyYAML)::

    python scripts/import_evidence.py SRC.pt DEST.pt --device-type cuda \\
        --vendor vendors/cuda/vendor.yaml [--tf32 cudnn] [--note TEXT]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "verify"))

import oota_cases  # noqa: E402 - the suite's modules, beside it in verify/
import oota_judge  # noqa: E402 - the suite's modules, beside it in verify/
import oota_opinfo  # noqa: E402


def _vendor_verify(path: Path) -> dict[str, Any]:
    import yaml

    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("verify") or {}


def convert(source: dict[str, Any], device_type: str, verify: dict[str, Any],
            settings: dict[str, Any]) -> list[dict[str, Any]]:
    ops = oota_opinfo.by_name()
    cases = []
    for old in source["cases"]:
        op = ops.get(old["op"])
        if op is None:
            print(f"import_evidence: {old['op']} is not in this torch's op_db; left out",
                  file=sys.stderr)
            continue
        case = oota_cases.make_case(
            op=old["op"], dtype=old["dtype"], sample=int(old["sample"]), input_=old["input"],
            args=old["args"], kwargs=old["kwargs"], cpu=old["cpu_out"],
            device=old["device_out"], reference=old["fp64_ref"],
            rule=oota_opinfo.rule_for(op, old["dtype"], device_type, verify, declared=False),
            device_type=device_type)
        case = oota_cases.shrink(case)
        case["verdict"] = oota_judge.judge(case, device_type, settings).to_json()
        cases.append(case)
    return cases


def main() -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--device-type", required=True, help="cuda, xpu, refdev, ...")
    parser.add_argument("--vendor", type=Path, required=True, help="the vendor's vendor.yaml")
    parser.add_argument("--tf32", choices=("off", "cudnn", "all"), default="off",
                        help="what TF32 was allowed when the cases were recorded")
    parser.add_argument("--note", default="", help="where the cases come from, in words")
    args = parser.parse_args()
    source = torch.load(args.source, map_location="cpu", weights_only=False)  # trusted input
    settings = {"cudnn_allow_tf32": args.tf32 in ("cudnn", "all"),
                "matmul_allow_tf32": args.tf32 == "all"}
    cases = convert(source, args.device_type, _vendor_verify(args.vendor), settings)
    data = oota_cases.recording(
        cases, device=str(source.get("device", "")), device_type=args.device_type,
        torch=str(source.get("torch", "")), cell="", settings=settings, note=args.note,
        by=f"scripts/import_evidence.py (PyTorch's decisions from torch {torch.__version__}'s "
           "op_db)")
    oota_cases.save(args.dest, data)
    print(f"{args.dest}: {len(cases)} cases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
