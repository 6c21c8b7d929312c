"""Record what PyTorch's dispatcher answers for the operators the must-pass list's samples
call, on some dispatch keys (verify/oota_dispatch.py ``record_answers``): the answers the ops
layer asks, and the dispatcher's own computed table's choice, which the unit tests compare.

    python record.py OUT.json KEY... [--import MODULE]

with a Python that has torch (``--import torch_refdev`` loads a backend first). The operators:
every one the must-pass operators' float32 samples call on the CPU, a few a backend serves
alone (views, fill, nonzero), and three that sparse tensors' keys serve (SparseCPU, SparseCsrCPU).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import sys
import warnings
from pathlib import Path

VERIFY = Path(__file__).resolve().parents[3] / "verify"
EXTRA = ("aten::nonzero", "aten::view", "aten::as_strided", "aten::fill_.Scalar",
         "aten::masked_select", "aten::native_layer_norm", "aten::convolution_overrideable",
         "aten::linear", "aten::matmul", "aten::softmax.int", "aten::add.out",
         "aten::sparse_sampled_addmm", "aten::_to_dense", "aten::_sparse_mm_reduce_impl")


def called_by_must_pass() -> list[str]:
    import oota_dispatch
    import oota_opinfo
    import oota_ops
    import torch

    ops, found = oota_opinfo.by_name(), set(EXTRA)
    recorder = oota_dispatch.CallRecorder("cpu")
    for entry in oota_ops.load_must_pass():
        op = ops[entry.op]
        for sample in oota_opinfo.samples(op, torch.device("cpu"), torch.float32,
                                          reference=False):
            recorder.during(lambda: op(sample.input, *sample.args, **sample.kwargs))  # noqa: B023
            found |= set(recorder.calls)
    return sorted(found)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("keys", nargs="+")
    parser.add_argument("--import", dest="modules", action="append", default=[])
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    sys.path.insert(0, str(VERIFY))
    import oota_dispatch
    import torch

    loaded = [importlib.import_module(name).__name__ for name in args.modules]
    answers = oota_dispatch.record_answers(called_by_must_pass(), args.keys)
    head = json.dumps({"torch": torch.__version__, "loaded": loaded, "keys": args.keys,
                       "recorded": dt.date.today().isoformat()})
    rows = ",\n".join(json.dumps(answer) for answer in answers)  # one answer a line
    args.out.write_text(f'{head[:-1]}, "answers": [\n{rows}\n]}}\n')


if __name__ == "__main__":
    main()
