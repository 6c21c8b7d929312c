"""Judges hand-made cases of the judge's rules of 2026-11-28 and writes each verdict (status,
message) as JSON to the file named on the command line; run inside an image with torch by
tests/docker/test_judge.py (not a test module: it needs torch). Each case is one operator
sample of op_db's operators, computed on the CPU, with a device result made as a kernel makes
it (the detection benchmark's variants, benchmarks/detection_*.py).

* ``small-element``: float32 mul whose one small element is 1,650 ulp off where the CPU is
  exact (the old RMS floor let it pass);
* ``last-of-ties``: argmax returning the last of equal maxima;
* ``sort-ties``: float16 sort (no stable order asked) reordering equal values;
* ``faithful-erf``: bfloat16 erf, saturating, rounded faithfully at random;
* ``split-k``: bfloat16 16x1024 @ 1024x16 mm added into the output in 32 blocks;
* ``welford``: float32 var of values around 100 by Welford's update in float32;
* ``softplus-small``: float32 softplus whose smallest element is 25% off among elements the
  CPU itself gets wrong by a few ulp;
* ``toward-zero``: bfloat16 exp rounded toward zero.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path[:0] = ["/opt/oota/judge", "/opt/oota/benchmarks"]
import bench_detection as bench  # noqa: E402
import detection_bugs  # noqa: E402
import detection_kernel_bugs  # noqa: E402
import detection_variants  # noqa: E402
import oota_opinfo  # noqa: E402
from detection_common import Sample  # noqa: E402

OPS = oota_opinfo.by_name()


def _sample(name: str, dtype: torch.dtype, input_: Any, *args: Any, **kwargs: Any) -> Sample:
    def cast(value: Any) -> Any:
        return value.to(dtype) if isinstance(value, torch.Tensor) else value
    return Sample(name=name, op=OPS[name], input=cast(input_), args=[cast(a) for a in args],
                  kwargs=kwargs, dtype=dtype, extra={"origin": "hand-made"})


def _judged(sample: Sample, device: Callable[[Sample], Any]) -> dict[str, str]:
    dtype = str(sample.dtype).removeprefix("torch.")
    rule = bench._rule(OPS[sample.name], dtype)
    assert rule is not None and bench._prepare(sample), sample.name
    made = device(sample)
    assert made is not None, sample.name
    verdict = bench._judge(sample, made, rule, dtype, 0)
    return {"status": verdict.status, "message": verdict.message}


def _small_element_off(sample: Sample) -> Any:
    out = sample.cpu.clone()
    out[-1] = out[-1] + 1650 * torch.finfo(torch.float32).eps * out[-1].abs()
    return out


def _normal(*shape: int, scale: float = 1.0, seed: int = 0) -> Any:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def cases() -> dict[str, dict[str, str]]:
    large = torch.full((63,), 1000.0)
    ties = torch.randint(0, 8, (16, 64), generator=torch.Generator().manual_seed(0)).float()
    return {
        "small-element": _judged(_sample("mul", torch.float32, torch.cat(
            [large, torch.tensor([1e-3])]), torch.tensor(3.0)), _small_element_off),
        "last-of-ties": _judged(_sample("argmax", torch.float32, ties, 1),
                                detection_kernel_bugs.last_of_ties),
        "sort-ties": _judged(_sample("sort", torch.float16, ties, -1),
                             detection_variants.tie_permutation),
        "faithful-erf": _judged(_sample("erf", torch.bfloat16, _normal(4096, scale=2)),
                                detection_variants.faithful_at_random),
        "split-k": _judged(_sample("mm", torch.bfloat16, _normal(16, 1024),
                                   _normal(1024, 16, seed=1)),
                           detection_variants.split_k_in_dtype),
        "welford": _judged(_sample("var", torch.float32, _normal(64, 1024) + 100, dim=1),
                           detection_variants.welford),
        "softplus-small": _judged(_sample("nn.functional.softplus", torch.float32,
                                          _normal(20, scale=5), beta=3, threshold=0.2),
                                  detection_bugs.wrong_small_element),
        "toward-zero": _judged(_sample("exp", torch.bfloat16, _normal(4096, scale=3)),
                               detection_bugs.biased_rounding),
    }


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(cases(), indent=1) + "\n")
