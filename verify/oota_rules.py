"""How oota judges a device's result, as data and plain arithmetic: which rule judges an
operator × dtype, the numbers each rule uses, a vendor's per-dtype overrides, and the
judgement of training curves.

Standard library only, like ``oota_ops.py``: the toolkit's unit tests check every decision
here without torch; ``oota_judge.py`` measures tensors and hands the figures to these rules.

The rules, in the order they are chosen (README, "How results are judged"):

1. **PyTorch's rule**, where PyTorch judges: for the one dtype PyTorch's ``test_compare_cpu``
   compares an operator in (``oota_opinfo.compare_dtype``), the device must match the CPU with
   ``atol = rtol = 1e-3``, widened by the OpInfo's tolerance override. oota's verdict is then
   PyTorch's own.
2. **The float64 rule**, for the other floating dtypes (float16, bfloat16, float32 where PyTorch
   judges another dtype, complex64), element by element: each element's error against the
   CPU's float64 result of the same sample may be at most ``multiplier`` times the CPU's own
   error at that element, plus ``floor_ulps`` units in the last place of that element's scale
   (``oota_floats``). This follows PyTorch's benchmark accuracy checker
   (``torch._dynamo.utils.same`` with ``fp64_ref``: ``res_error <= multiplier * ref_error +
   tol / 10``) with each element in place of the root-mean-square error, so a single wrong
   element counts in full, and a floor in units of the dtype in place of a fixed ``tol``.
   Where PyTorch's rule judges a pair, the same element check runs beside it with wider
   numbers (``ADDON_*``), so it fails only a device materially worse than the CPU at some
   element. A vendor may override the numbers per dtype in vendor.yaml (``verify.judge``),
   with a reason.
3. **The vendor's tolerance** against the CPU, where no wider reference exists (float64 and
   integer dtypes, or an operator the CPU cannot run in float64): ``verify.tolerances``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PYTORCH = "pytorch"
FLOAT64 = "float64"
TOLERANCE = "tolerance"
SKIP = "skip"  # not judged: the rule's source says why (PyTorch's skips, recorded with a case)
KINDS = (PYTORCH, FLOAT64, TOLERANCE, SKIP)

# PyTorch's test_compare_cpu: self.assertEqual(device, cpu, atol=1e-3, rtol=1e-3).
PYTORCH_TOLERANCE = 1e-3
# The float64 rule's defaults, applied to each element with that element's own scale (README,
# "How results are judged"; benchmarks/bench_detection.py measures what they catch and what
# they let pass, and the H100 recordings hold a known-good stack they must pass).
DEFAULT_MULTIPLIER = 5.0
DEFAULT_FLOOR_ULPS = 2.0
# Training curves drift chaotically from float64 at a large learning rate (the CPU's own
# float32 resnet curve leaves it by 0.41); a device within 4x of that drift trains as well.
CURVE_MULTIPLIER = 4.0
CURVE_FLOOR_ULPS = 8.0

# dtype -> (machine epsilon, smallest normal): the unit in the last place at 1.0, and the floor
# for outputs of magnitude near 0. The dtypes the float64 rule judges.
FLOATS: dict[str, tuple[float, float]] = {
    "float16": (2.0 ** -10, 2.0 ** -14),
    "bfloat16": (2.0 ** -7, 2.0 ** -126),
    "float32": (2.0 ** -23, 2.0 ** -126),
    "complex32": (2.0 ** -10, 2.0 ** -14),
    "complex64": (2.0 ** -23, 2.0 ** -126),
}
FLOAT64_SOURCE = "oota's float64 rule"
# torch.testing.assert_close's defaults per dtype: the comparison with the CPU where a vendor
# gives no tolerance and no float64 reference exists.
ASSERT_CLOSE = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
                "complex32": (1e-3, 1e-5), "complex64": (1.3e-6, 1e-5),
                "float64": (1e-7, 1e-7), "complex128": (1e-7, 1e-7)}


class RuleError(ValueError):
    """A rule's data is not what the judge can use; the message says which key and why."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    """One way of judging a result, with where its numbers come from (``source``)."""

    kind: str
    atol: float = 0.0
    rtol: float = 0.0
    multiplier: float = 0.0
    floor_ulps: float = 0.0
    source: str = ""

    def describe(self) -> str:
        if self.kind == PYTORCH:
            return f"PyTorch's test_compare_cpu rule: atol {self.atol:g}, rtol {self.rtol:g}"
        if self.kind == FLOAT64:
            return (f"error against float64 at most {self.multiplier:g}x the CPU's + "
                    f"{self.floor_ulps:g} ulp ({self.source})")
        if self.kind == SKIP:
            return f"not judged: {self.source}"
        return self.describe_tolerance()

    def describe_tolerance(self) -> str:
        """The comparison with the CPU at ``atol``/``rtol`` (the float64 rule's fallback)."""
        source = self.source if self.kind == TOLERANCE else "the tolerance for a result with " \
                                                            "no float64 counterpart"
        return f"the CPU within atol {self.atol:g}, rtol {self.rtol:g} ({source})"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "atol": self.atol, "rtol": self.rtol,
                "multiplier": self.multiplier, "floor_ulps": self.floor_ulps,
                "source": self.source}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Rule:
        kind = data.get("kind")
        if kind not in KINDS:
            raise RuleError(f"rule kind {kind!r} is not one of {', '.join(KINDS)}")
        numbers = {key: _number(data, key) for key in ("atol", "rtol", "multiplier",
                                                        "floor_ulps")}
        return cls(kind=str(kind), source=str(data.get("source") or ""), **numbers)


def _number(data: Mapping[str, Any], key: str, default: float = 0.0) -> float:
    value = data.get(key, default)
    try:
        number = float(value)  # vendor.yaml numbers travel as text (oota keeps them exact)
    except (TypeError, ValueError):
        raise RuleError(f"{key}: {value!r} is not a number") from None
    if not math.isfinite(number) or number < 0:
        raise RuleError(f"{key}: {value!r} is not a finite number >= 0")
    return number


def pytorch_rule(override_atol: float = 0.0, override_rtol: float = 0.0) -> Rule:
    """PyTorch's comparison: 1e-3 each, widened by the OpInfo's override (PyTorch's TestCase
    takes the larger of the two)."""
    widened = override_atol > PYTORCH_TOLERANCE or override_rtol > PYTORCH_TOLERANCE
    return Rule(kind=PYTORCH, atol=max(PYTORCH_TOLERANCE, override_atol),
                rtol=max(PYTORCH_TOLERANCE, override_rtol),
                source="the OpInfo's tolerance override" if widened else "PyTorch")


def float64_rule(dtype: str, judge: Mapping[str, Any] | None = None,
                 tolerance: Mapping[str, Any] | None = None) -> Rule:
    """The float64 rule for ``dtype``: oota's numbers, or the vendor's ``verify.judge`` entry
    for that dtype (``multiplier``, ``floor_ulps``, ``reason``). Its ``atol``/``rtol`` are the
    vendor's tolerance for an output the CPU has no float64 result for."""
    fallback = tolerance_rule(dtype, tolerance)
    entry = (judge or {}).get(dtype)
    if not entry:
        return Rule(kind=FLOAT64, multiplier=DEFAULT_MULTIPLIER, floor_ulps=DEFAULT_FLOOR_ULPS,
                    atol=fallback.atol, rtol=fallback.rtol, source=FLOAT64_SOURCE)
    reason = str(entry.get("reason") or "").strip()
    if not reason:
        raise RuleError(f"verify.judge.{dtype}: an override says why (reason)")
    return Rule(kind=FLOAT64, multiplier=_number(entry, "multiplier", DEFAULT_MULTIPLIER),
                floor_ulps=_number(entry, "floor_ulps", DEFAULT_FLOOR_ULPS),
                atol=fallback.atol, rtol=fallback.rtol,
                source=f"the vendor's override for {dtype}: {reason}")


def tolerance_rule(dtype: str, tolerance: Mapping[str, Any] | None = None) -> Rule:
    """The vendor's tolerance for ``dtype`` (``verify.tolerances``), else assert_close's."""
    rtol, atol = ASSERT_CLOSE.get(dtype, (0.0, 0.0))
    if tolerance:
        return Rule(kind=TOLERANCE, atol=_number(tolerance, "atol"),
                    rtol=_number(tolerance, "rtol"), source="verify.tolerances")
    return Rule(kind=TOLERANCE, atol=atol, rtol=rtol, source="torch.testing's default")


def skip_rule(reason: str) -> Rule:
    return Rule(kind=SKIP, source=reason)


def choose(dtype: str, *, pytorch_judges: bool, override: tuple[float, float] = (0.0, 0.0),
           judge: Mapping[str, Any] | None = None,
           tolerance: Mapping[str, Any] | None = None) -> Rule:
    """The rule for one operator × dtype (see the module docstring for the order). A result
    the float64 rule is chosen for but that has no float64 reference falls back to the
    vendor's tolerance the rule carries (its ``atol``/``rtol``)."""
    if pytorch_judges:
        return pytorch_rule(*override)
    if dtype in FLOATS:
        return float64_rule(dtype, judge, tolerance)
    if dtype in ASSERT_CLOSE:  # float64, complex128: nothing wider to compare with
        return tolerance_rule(dtype, tolerance)
    return integer_rule(dtype, tolerance)


def integer_rule(dtype: str, tolerance: Mapping[str, Any] | None = None) -> Rule:
    """Integer and boolean inputs: integer results are compared exactly (always); a floating
    result (tanh of an int64) within PyTorch's comparison tolerance, or the vendor's for the
    dtype where that is wider (an integer dtype's own tolerance is usually 0)."""
    vendor = tolerance_rule(dtype, tolerance)
    return Rule(kind=TOLERANCE, atol=max(vendor.atol, PYTORCH_TOLERANCE),
                rtol=max(vendor.rtol, PYTORCH_TOLERANCE),
                source=f"PyTorch's comparison tolerance for a floating result of {dtype} inputs")


# -- per element and rounding bias (README, "How results are judged") ---------------------------

# Where PyTorch's rule passes a pair, oota's float64 check may still fail it, but only where the
# device is materially worse than the CPU at some element: beyond these numbers, wider than the
# float64 rule's own (which judges the dtypes PyTorch does not compare). Each element by its
# own numbers, never by the tensor's: 10 times the CPU's error there, plus 8 ulp of the
# element's scale, twice the largest error CUDA's programming guide lists for its common
# single-precision functions (2 ulp for expf, sinf, erff; 4 for erfcf; its looser special
# functions, the Bessel functions', are where the CPU's own error is not small either, and
# the condition below covers a function near a zero). The H100 and H200 recordings need at most
# 2.7 ulp beyond the rest of the allowance (linalg.svdvals; 2026-11-28). Until 2026-11-28 the
# floor was 16 ulp plus 2 ulp of the result's root-mean-square: an absolute tolerance that
# let an element far below the RMS be off by thousands of ulp.
ADDON_MULTIPLIER = 10.0
ADDON_FLOOR_ULPS = 8.0
# Both element rules also allow, at an element, CONDITION_ROUNDINGS times its condition: how
# far the float64 result there moves when every input moves by one float32 rounding in the
# direction that moves it most (first order: the sum over the inputs of |d output / d input|
# x the input's float32 ulp; the componentwise condition number at that input, in units;
# ``oota_condition``). A correct kernel computing in float32 is backward stable: it returns
# about the exact result of inputs a rounding away, so this is what it may be off where the
# result is ill-conditioned (pow at a large exponent, log_softmax's largest element, a
# variance of values far from 0); where it is not, the term is an ulp or two of the element,
# under the floor. It is measured only where an element is beyond the rest of its allowance:
# for every element at once by forward mode (a lower bound), then exactly, by reverse mode,
# at the CONDITION_ELEMENTS worst still beyond.
CONDITION_ROUNDINGS = 1.0
CONDITION_ELEMENTS = 32
# Where the CPU's own error at an element is beyond this many ulps of the element's scale, the
# element is ill-conditioned for the computation (cancellation inside an elementwise formula,
# a shared intermediate): it is allowed the largest CPU error of the output's such elements no
# larger than it (never a larger element's, which would be an absolute tolerance on it).
ILL_CONDITIONED = 4.0
# Where the CPU overflows (or gives NaN) and the float64 result is finite, the device is judged
# against float64 alone: within this many ulps of that element's scale.
OVERFLOW_FLOOR_ULPS = 4.0

# Operators whose every output element is a sum of products of input elements (with scalar
# coefficients): the same operator on the inputs' squares gives the square of each element's
# magnitude before cancellation (the root of the sum of its terms' squares), the scale of the
# partial sums a correct kernel rounds, however it orders or splits the sum (split-K GEMM,
# blocked reductions).
MAGNITUDE_OPS = frozenset({
    "sum", "nansum", "mean", "nanmean", "cumsum", "sum_to_size", "trace", "masked.sum",
    "masked.mean", "matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "addmm",
    "addmm.decomposed", "addmv", "addbmm", "baddbmm", "addr", "einsum", "tensordot",
    "linalg.multi_dot", "linalg.vecdot", "chain_matmul", "nn.functional.linear",
    "nn.functional.bilinear", "nn.functional.conv1d", "nn.functional.conv2d",
    "nn.functional.conv3d", "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
    "nn.functional.conv_transpose3d", "nn.functional.avg_pool1d", "nn.functional.avg_pool2d",
    "nn.functional.avg_pool3d", "nn.functional.adaptive_avg_pool1d",
    "nn.functional.adaptive_avg_pool2d", "nn.functional.adaptive_avg_pool3d", "addcmul",
    "index_add", "scatter_add", "nn.functional.embedding_bag", "masked.cumsum"})
# Of those, the matrix products cuBLAS computes: in float16 and bfloat16 PyTorch allows them
# reduced-precision reductions by default (torch.backends.cuda.matmul.
# allow_fp16_reduced_precision_reduction and allow_bf16_..., both True: "a few truncations of
# the intermediate accumulation results to the reduced precision"), as split-K kernels that
# add their K blocks into a half-precision output do. A tensor core accumulates at least
# MMA_TERMS products in float32 per instruction (NVIDIA's mma m16n8k16, AMD's 16x16x16
# MFMA, Intel's XMX), so a correct kernel rounds an element's partial sum to the dtype at most
# once per MMA_TERMS terms: R = terms / MMA_TERMS roundings of running sums whose squares add
# up to about (R + 1) / 2 times the element's magnitude squared. Their random sum grows as the
# root of that, so the floor there is the rule's floor times sqrt((R + 1) / 2)
# (:func:`partial_roundings`): 1 for R = 1, 5.7 for a K of 1,024.
REDUCED_PRECISION_GEMMS = frozenset({
    "matmul", "mm", "bmm", "mv", "addmm", "addmm.decomposed", "addmv", "addbmm", "baddbmm",
    "einsum", "tensordot", "inner", "linalg.multi_dot", "chain_matmul", "nn.functional.linear",
    "nn.functional.bilinear"})
MMA_TERMS = 16


def partial_roundings(terms: float) -> float:
    """How much wider the floor of a half-precision matrix product of ``terms`` terms per
    element is than the rule's: sqrt((R + 1) / 2), R = ceil(terms / MMA_TERMS)."""
    rounds = max(math.ceil(terms / MMA_TERMS), 1)
    return math.sqrt((rounds + 1) / 2)


# Of those, the averages: the run on squares gives the mean of the squares, whose root is the
# terms' root-mean-square; divided by the root of the number of terms averaged (the input's
# elements per output element) it is the averaged terms' root-sum-square.
MEAN_OPS = frozenset({
    "mean", "nanmean", "masked.mean", "nn.functional.avg_pool1d", "nn.functional.avg_pool2d",
    "nn.functional.avg_pool3d", "nn.functional.adaptive_avg_pool1d",
    "nn.functional.adaptive_avg_pool2d", "nn.functional.adaptive_avg_pool3d"})

# Normalisations with an affine bias: the output is normalised * weight + bias, so where the
# two cancel a correct kernel's rounding follows their size, not the result's: CUDA's fused
# kernel rounds the per-channel scale and shift to the dtype, which adds at most half an ulp of
# each term, one ulp of the larger. So each element's magnitude is BIAS_SHARE of the larger of
# |the output without the bias| and |the bias|: the rule's 2 ulp floor of it is that one ulp.
# The argument position of ``bias`` (after the input; its keyword is ``bias``).
BIAS_ARGUMENT = {
    "nn.functional.group_norm": 2, "nn.functional.layer_norm": 2,
    "nn.functional.batch_norm": 3, "nn.functional.instance_norm": 3, "native_layer_norm": 2,
    "native_batch_norm": 1, "_batch_norm_with_update": 1}
BIAS_SHARE = 0.5

# Rounding bias, where oota's float64 rule judges (half precision, computed in float32 and
# rounded once by a correct device). Over the elements whose float64 value the dtype cannot
# hold (rounding happened there) and where the CPU's result is within one ulp, each result is
# placed against the two numbers of the dtype around the float64 value: its distance in ulps
# above the one nearer zero, minus 1/2 (signed so that negative is toward zero). Rounding
# toward zero gives -1/2 at every element; a faithful rounding with no preference of direction
# (either neighbour, as a math library within one ulp may give) 0 on average with a standard
# deviation of 1/2 per element, whatever the values; rounding to nearest gives +-1/2 as each
# value lies above or below its midpoint (``nearest``: its mean, from float64 alone). Results
# clustered just below a number of the dtype (a saturating function near 1) move the mean
# signed error of an unbiased faithful rounding toward zero by up to half an ulp, but not this
# measure. A device fails when its mean is beyond both 0 and round-to-nearest's mean by
# BIAS_SIGMAS standard errors (of its own spread, at least 1/sqrt(12)) plus BIAS_FLOOR, and
# beyond the CPU's own. Not in float32, where PyTorch judges: a correct GPU's math library
# (CUDA's rsqrtf, log10f: within 2 ulp) leans one way by half an ulp on a sample (the H200
# evidence of 2026-11-26).
ROUND_TO_NEAREST_SD = 12 ** -0.5
BIAS_SIGMAS = 6.0
BIAS_FLOOR = 0.1  # ulp
BIAS_MIN_ELEMENTS = 16


@dataclass(frozen=True, kw_only=True, slots=True)
class Bias:
    """Where the results of one output (or of several, pooled) sit between the two numbers
    of the dtype around their float64 values, in ulps from the midpoint (``mean``, ``sd``),
    and where rounding to nearest puts them (``nearest``)."""

    mean: float
    sd: float
    elements: int
    nearest: float = 0.0

    def bound(self, floor_ulps: float = BIAS_FLOOR) -> float:
        """How far beyond 0 and ``nearest`` an unbiased rounding's mean may fall over this
        many elements."""
        spread = max(ROUND_TO_NEAREST_SD, self.sd)
        return floor_ulps + BIAS_SIGMAS * spread / math.sqrt(max(self.elements, 1))

    def beyond(self, floor_ulps: float = BIAS_FLOOR) -> bool:
        if self.elements < BIAS_MIN_ELEMENTS:
            return False
        bound = self.bound(floor_ulps)
        return self.mean < min(0.0, self.nearest) - bound or \
            self.mean > max(0.0, self.nearest) + bound

    def direction(self) -> str:
        return "toward zero" if self.mean < 0 else "away from zero"

    def describe(self, floor_ulps: float = BIAS_FLOOR) -> str:
        return (f"rounds {self.direction()}: mean {self.mean:+.2f} ulp from the midpoint of the "
                f"two nearest numbers over {self.elements} element(s) (an unbiased rounding "
                f"stays within ±{self.bound(floor_ulps):.2f} of 0 and of round-to-nearest's "
                f"{self.nearest:+.2f} at this count)")

    @classmethod
    def pooled(cls, parts: Sequence[Bias]) -> Bias:
        """Several results' errors as one sample."""
        count = sum(p.elements for p in parts)
        if not count:
            return cls(mean=0.0, sd=0.0, elements=0)
        mean = sum(p.mean * p.elements for p in parts) / count
        second = sum((p.sd ** 2 + p.mean ** 2) * p.elements for p in parts) / count
        nearest = sum(p.nearest * p.elements for p in parts) / count
        return cls(mean=mean, sd=math.sqrt(max(second - mean ** 2, 0.0)), elements=count,
                   nearest=nearest)


def biased(device: Bias, cpu: Bias | None, floor_ulps: float = BIAS_FLOOR) -> bool:
    """Whether the device rounds with a bias no unbiased rounding has, and the CPU's own
    result of the same computation does not have either (a CPU as biased, the same way, shows
    the computation's, not the device's)."""
    if not device.beyond(floor_ulps):
        return False
    if cpu is None or not cpu.beyond(floor_ulps):
        return True
    same_way = (cpu.mean < 0) == (device.mean < 0)
    return not same_way or abs(device.mean) > 2 * abs(cpu.mean) + floor_ulps


def floor(dtype: str, scale: float, ulps: float) -> float:
    """``ulps`` units in the last place of ``scale`` in ``dtype`` (never below ``ulps``
    smallest normals, for outputs of magnitude near 0)."""
    eps, tiny = FLOATS.get(dtype, FLOATS["float32"])
    return ulps * (eps * scale + tiny)


@dataclass(frozen=True, kw_only=True, slots=True)
class Errors:
    """What the float64 rule compares for one output: the largest elementwise error of the
    device and of the CPU against the float64 reference, and the reference's largest
    magnitude (where all three are finite)."""

    device: float
    cpu: float
    scale: float

    def allowed(self, rule: Rule, dtype: str) -> float:
        return rule.multiplier * self.cpu + floor(dtype, self.scale, rule.floor_ulps)

    def ratio(self, rule: Rule, dtype: str) -> float:
        """The device's error over what the rule allows (<= 1 passes)."""
        allowed = self.allowed(rule, dtype)
        if allowed > 0:
            return self.device / allowed
        return 0.0 if self.device == 0 else math.inf

    def message(self, rule: Rule, dtype: str) -> str:
        times = (f"{self.device / self.cpu:.3g}x the CPU's own {self.cpu:.3g}" if self.cpu
                 else f"while the CPU's own is {self.cpu:.3g}")
        return (f"error against the float64 reference {self.device:.3g}, {times} (allowed "
                f"{self.allowed(rule, dtype):.3g}: {rule.multiplier:g}x + {rule.floor_ulps:g} "
                f"ulp of {self.scale:.3g}; {rule.source})")


# -- training curves --------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class CurveRule:
    multiplier: float = CURVE_MULTIPLIER
    floor_ulps: float = CURVE_FLOOR_ULPS
    source: str = "oota's curve rule"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None) -> CurveRule:
        """``verify.workload.judge`` (multiplier, floor_ulps, reason) or oota's numbers."""
        if not spec:
            return cls()
        reason = str(spec.get("reason") or "").strip()
        if not reason:
            raise RuleError("verify.workload.judge: an override says why (reason)")
        return cls(multiplier=_number(spec, "multiplier", CURVE_MULTIPLIER),
                   floor_ulps=_number(spec, "floor_ulps", CURVE_FLOOR_ULPS),
                   source=f"the vendor's override: {reason}")


def drift(curve: Sequence[float], reference: Sequence[float]) -> float:
    """The largest distance of ``curve`` from ``reference`` over the steps (inf where a step
    is not finite in ``curve`` but is in ``reference``)."""
    worst = 0.0
    for value, ref in zip(curve, reference, strict=True):
        if not math.isfinite(ref):
            continue
        worst = max(worst, abs(value - ref) if math.isfinite(value) else math.inf)
    return worst


@dataclass(frozen=True, kw_only=True, slots=True)
class CurveJudgement:
    """A device's curve against the float64 CPU run, relative to the CPU's float32 run."""

    device_drift: float
    cpu_drift: float
    allowed: float
    rule: CurveRule

    @property
    def passed(self) -> bool:
        return self.device_drift <= self.allowed

    @property
    def ratio(self) -> float:
        """The device's drift over the CPU's own (inf when the CPU did not drift at all)."""
        if self.cpu_drift:
            return self.device_drift / self.cpu_drift
        return 0.0 if self.device_drift == 0 else math.inf

    def message(self, what: str) -> str:
        verb = "within" if self.passed else "beyond"
        return (f"{what}: drift {self.device_drift:.3g} from the float64 CPU run, "
                f"{verb} the allowed {self.allowed:.3g} ({self.rule.multiplier:g}x the CPU "
                f"float32 run's own drift {self.cpu_drift:.3g} + {self.rule.floor_ulps:g} ulp; "
                f"{self.rule.source})")


def judge_drifts(device_drift: float, cpu_drift: float, scale: float, rule: CurveRule,
                 dtype: str = "float32") -> CurveJudgement:
    """Judge a device's drift from the float64 run against the CPU float32 run's own drift;
    ``scale`` is the float64 run's largest magnitude (for the floor in ulps)."""
    allowed = rule.multiplier * cpu_drift + floor(dtype, scale, rule.floor_ulps)
    return CurveJudgement(device_drift=device_drift, cpu_drift=cpu_drift, allowed=allowed,
                          rule=rule)


def judge_curve(device: Sequence[float], cpu: Sequence[float], reference: Sequence[float],
                rule: CurveRule, dtype: str = "float32") -> CurveJudgement:
    """Judge the device's values (losses per step) against the float64 run."""
    scale = max((abs(r) for r in reference if math.isfinite(r)), default=0.0)
    return judge_drifts(drift(device, reference), drift(cpu, reference), scale, rule, dtype)
