"""How the judge chooses and applies its rules (verify/oota_rules.py, standard library only):
PyTorch's rule where PyTorch judges, the float64 rule for the other floating dtypes, the
vendor's tolerance elsewhere; a vendor's override needs a reason; the numbers and messages a
reader sees. Tensors are measured by verify/oota_judge.py (tested in the images, with torch)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "verify"))
import oota_rules  # noqa: E402
from oota_rules import Errors, Rule, RuleError  # noqa: E402


@pytest.mark.parametrize(("dtype", "pytorch_judges", "kind"), [
    ("float32", True, "pytorch"),
    ("float32", False, "float64"),
    ("float16", False, "float64"),
    ("bfloat16", False, "float64"),
    ("complex64", True, "pytorch"),
    ("float64", False, "tolerance"),
    ("int64", False, "tolerance"),
    ("int64", True, "pytorch"),
], ids=lambda v: str(v))
def test_the_rule_follows_who_judges_the_pair(dtype: str, pytorch_judges: bool,
                                              kind: str) -> None:
    assert oota_rules.choose(dtype, pytorch_judges=pytorch_judges).kind == kind


def test_a_floating_result_of_integer_inputs_gets_pytorchs_tolerance() -> None:
    """tanh of an int64 is a float32: the vendor's int64 tolerance (exact) is for integers."""
    rule = oota_rules.choose("int64", pytorch_judges=False, tolerance={"rtol": 0, "atol": 0})
    assert (rule.atol, rule.rtol) == (1e-3, 1e-3)
    assert rule.describe() == ("the CPU within atol 0.001, rtol 0.001 (PyTorch's comparison "
                               "tolerance for a floating result of int64 inputs)")
    assert oota_rules.choose("float64", pytorch_judges=False,
                             tolerance={"rtol": "1e-7", "atol": "1e-7"}).atol == 1e-7


def test_pytorchs_rule_is_1e3_widened_by_the_opinfos_override() -> None:
    assert oota_rules.pytorch_rule() == Rule(kind="pytorch", atol=1e-3, rtol=1e-3,
                                             source="PyTorch")
    wider = oota_rules.pytorch_rule(5e-3, 1e-4)  # the larger of each, as PyTorch's TestCase
    assert (wider.atol, wider.rtol, wider.source) == (5e-3, 1e-3,
                                                      "the OpInfo's tolerance override")


def test_a_vendor_overrides_the_float64_rule_only_with_a_reason() -> None:
    rule = oota_rules.float64_rule("bfloat16", {"bfloat16": {
        "multiplier": "20", "floor_ulps": 8, "reason": "bf16 transcendental units"}})
    assert (rule.multiplier, rule.floor_ulps) == (20.0, 8.0)
    assert rule.source == "the vendor's override for bfloat16: bf16 transcendental units"
    with pytest.raises(RuleError, match=r"verify.judge.float16: an override says why"):
        oota_rules.float64_rule("float16", {"float16": {"multiplier": 20}})
    default = oota_rules.float64_rule("float16", {"bfloat16": {"reason": "x"}})
    assert (default.multiplier, default.floor_ulps) == (5.0, 2.0)


def test_the_float64_rule_carries_the_fallback_tolerance() -> None:
    assert oota_rules.float64_rule("float16").atol == 1e-5  # assert_close's own
    given = oota_rules.float64_rule("float16", tolerance={"rtol": "2.0e-3", "atol": "1.0e-3"})
    assert (given.atol, given.rtol) == (1e-3, 2e-3)
    assert given.describe_tolerance() == (
        "the CPU within atol 0.001, rtol 0.002 (the tolerance for a result with no float64 "
        "counterpart)")


@pytest.mark.parametrize("bad", [{"kind": "close enough"}, {"kind": "float64", "multiplier": -1},
                                 {"kind": "float64", "multiplier": "many"},
                                 {"kind": "pytorch", "atol": math.inf}])
def test_a_recorded_rule_that_makes_no_sense_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(RuleError):
        Rule.from_json(bad)


def test_a_rule_survives_its_json() -> None:
    rule = oota_rules.float64_rule("float16")
    assert Rule.from_json(rule.to_json()) == rule


def test_the_floor_is_ulps_of_the_largest_magnitude_and_never_zero() -> None:
    assert oota_rules.floor("float16", 1.0, 4) == pytest.approx(4 * (2 ** -10 + 2 ** -14))
    assert oota_rules.floor("float32", 0.0, 4) == 4 * 2.0 ** -126


def test_the_float64_rule_compares_the_device_with_the_cpus_own_error() -> None:
    rule = oota_rules.float64_rule("float16")
    same = Errors(device=2e-3, cpu=4e-3, scale=1.0)  # the H100's case: better than the CPU
    assert same.ratio(rule, "float16") < 0.1
    wrong = Errors(device=0.1, cpu=4e-3, scale=1.0)
    assert wrong.ratio(rule, "float16") > 1
    assert wrong.message(rule, "float16") == (
        "error against the float64 reference 0.1, 25x the CPU's own 0.004 (allowed 0.0221: "
        "5x + 2 ulp of 1; oota's float64 rule)")
    exact = Errors(device=1e-9, cpu=0.0, scale=0.0)
    assert exact.message(rule, "float16").startswith(
        "error against the float64 reference 1e-09, while the CPU's own is 0")


def test_a_curve_override_needs_a_reason_too() -> None:
    assert oota_rules.CurveRule.from_spec(None) == oota_rules.CurveRule()
    with pytest.raises(RuleError, match="verify.workload.judge: an override says why"):
        oota_rules.CurveRule.from_spec({"multiplier": 8})
    rule = oota_rules.CurveRule.from_spec({"multiplier": 8, "reason": "large lr"})
    assert (rule.multiplier, rule.source) == (8.0, "the vendor's override: large lr")


def test_a_curve_judged_against_float64_relative_to_the_cpus_drift() -> None:
    judged = oota_rules.judge_curve([3.0, 2.02, 1.0], [3.0, 2.01, 1.0], [3.0, 2.0, 1.0],
                                    oota_rules.CurveRule())
    assert judged.passed and judged.ratio == pytest.approx(2.0)
    broken = oota_rules.judge_curve([3.0, 2.5, 1.0], [3.0, 2.01, 1.0], [3.0, 2.0, 1.0],
                                    oota_rules.CurveRule())
    assert not broken.passed
    assert broken.message("the loss").startswith(
        "the loss: drift 0.5 from the float64 CPU run, beyond the allowed 0.04")
    nan = oota_rules.judge_curve([3.0, math.nan, 1.0], [3.0, 2.0, 1.0], [3.0, 2.0, 1.0],
                                 oota_rules.CurveRule())
    assert not nan.passed and nan.device_drift == math.inf


# -- rounding bias (oota_rules.Bias): the figures a device's verdict quotes ----------------------

def test_rounding_toward_zero_sits_half_an_ulp_below_the_midpoint_and_fails() -> None:
    """Each result placed between the two numbers of the dtype around its float64 value, from
    their midpoint: toward zero is -1/2 at every element (no spread); an unbiased choice of
    either neighbour, or round-to-nearest over values spread evenly, +-1/2 with mean 0. Over
    4,096 elements the bound is 0.1 + 6 standard errors of the spread (at least 1/sqrt(12))."""
    nearest = oota_rules.Bias(mean=0.01, sd=0.5, elements=4096, nearest=0.01)
    toward_zero = oota_rules.Bias(mean=-0.5, sd=0.0, elements=4096, nearest=0.01)
    assert nearest.bound() == pytest.approx(0.1 + 6 * 0.5 / 64)
    assert toward_zero.bound() == pytest.approx(0.1 + 6 * (12 ** -0.5) / 64)
    assert not oota_rules.biased(nearest, None)
    assert oota_rules.biased(toward_zero, nearest)
    assert toward_zero.describe() == (
        "rounds toward zero: mean -0.50 ulp from the midpoint of the two nearest numbers over "
        "4096 element(s) (an unbiased rounding stays within ±0.13 of 0 and of "
        "round-to-nearest's +0.01 at this count)")


def test_a_faithful_rounding_of_a_saturating_function_is_not_a_bias() -> None:
    """bfloat16 erf near +-1 (the outside tester's false alarm, 2026-11-28: a mean signed
    error of -0.32 ulp over 285 elements against a bound of 0.31): float64 values just below a
    number of the dtype, so round-to-nearest sits at +1/2 and a faithful rounding that takes
    either neighbour at random leans toward zero in signed error, but sits at 0 between its
    neighbours. Rounding toward zero there is -1/2: beyond both."""
    faithful = oota_rules.Bias(mean=0.02, sd=0.5, elements=285, nearest=0.46)
    rounded = oota_rules.Bias(mean=0.46, sd=0.2, elements=285, nearest=0.46)
    toward_zero = oota_rules.Bias(mean=-0.5, sd=0.0, elements=285, nearest=0.46)
    assert not faithful.beyond() and not rounded.beyond()
    assert toward_zero.beyond() and oota_rules.biased(toward_zero, rounded)


def test_where_rounding_to_nearest_is_toward_zero_toward_zero_is_no_bias() -> None:
    """Values just above a number of the dtype (sinh near 0): round-to-nearest takes the
    neighbour nearer zero (-1/2) as rounding toward zero does; no device can be told apart."""
    toward_zero = oota_rules.Bias(mean=-0.5, sd=0.0, elements=4096, nearest=-0.48)
    assert not toward_zero.beyond()


def test_too_few_elements_say_nothing_of_bias() -> None:
    few = oota_rules.Bias(mean=-0.5, sd=0.29, elements=oota_rules.BIAS_MIN_ELEMENTS - 1)
    assert not few.beyond() and not oota_rules.biased(few, None)


def test_a_cpu_biased_the_same_way_shows_the_computation_not_the_device() -> None:
    device = oota_rules.Bias(mean=-0.5, sd=0.3, elements=1000)
    assert not oota_rules.biased(device, oota_rules.Bias(mean=-0.45, sd=0.3, elements=1000))
    assert oota_rules.biased(device, oota_rules.Bias(mean=0.45, sd=0.3, elements=1000))


def test_pooled_bias_is_the_samples_taken_as_one() -> None:
    parts = [oota_rules.Bias(mean=-0.5, sd=0.0, elements=10),
             oota_rules.Bias(mean=0.5, sd=0.0, elements=30)]
    pooled = oota_rules.Bias.pooled(parts)
    assert (pooled.mean, pooled.elements) == (0.25, 40)
    assert pooled.sd == pytest.approx((0.75 ** 2 * 10 + 0.25 ** 2 * 30) ** 0.5 / 40 ** 0.5)
    assert oota_rules.Bias.pooled([]).elements == 0


def test_a_half_precision_product_may_round_its_partial_sums_once_per_16_terms() -> None:
    """The floor of a float16/bfloat16 matrix product grows with the root of its partial
    roundings (one per MMA_TERMS terms): 1 up to 16 terms, 5.7 for the outside tester's
    16x1024 @ 1024x16 split-K bfloat16 mm (its error 0.63 against the old allowance 0.534)."""
    assert oota_rules.partial_roundings(0) == 1.0
    assert oota_rules.partial_roundings(16) == 1.0
    assert oota_rules.partial_roundings(17) == pytest.approx(1.5 ** 0.5)
    assert oota_rules.partial_roundings(1024) == pytest.approx(32.5 ** 0.5)
    assert oota_rules.REDUCED_PRECISION_GEMMS <= oota_rules.MAGNITUDE_OPS
    assert not {"sum", "cumsum", "nn.functional.conv2d"} & oota_rules.REDUCED_PRECISION_GEMMS


def test_argmax_and_max_with_a_dim_point_at_the_first_of_equal_values() -> None:
    """PyTorch documents the first of equal extremes for these, and nothing for the others
    (sort without stable=True, topk, kthvalue, median, mode, cummax): only these are
    compared exactly among ties."""
    import oota_indices

    first = {op for op, spec in oota_indices.INDEX_OUTPUTS.items() if spec.first}
    assert first == {"argmax", "argmin", "max.reduction_with_dim", "min.reduction_with_dim"}
    assert not oota_indices.INDEX_OUTPUTS["sort"].first


def test_sums_products_and_affine_norms_have_their_magnitude_runs() -> None:
    """The operators the element rule gives room for cancellation: every mean-like one is a
    sum-like one, and no operator is both a sum and an affine norm."""
    assert oota_rules.MEAN_OPS <= oota_rules.MAGNITUDE_OPS
    assert not set(oota_rules.BIAS_ARGUMENT) & oota_rules.MAGNITUDE_OPS
    assert {"mm", "sum", "nn.functional.linear", "nn.functional.conv2d"} <= \
        oota_rules.MAGNITUDE_OPS


def test_a_recordings_cell_picks_its_vendors_numbers() -> None:
    """The longest vendor name the cell id starts with (then '-'); none: oota's own."""
    import oota_replay

    vendors = {"cuda": {"compare_as": "cuda"}, "cuda-sbsa": {"compare_as": "cuda"},
               "reference": {"compare_as": "refdev"}}
    assert oota_replay.vendor_spec(vendors, "cuda-sbsa-torch2.15.0-cu13.0") is \
        vendors["cuda-sbsa"]
    assert oota_replay.vendor_spec(vendors, "cuda-torch2.11.0-cu13.0-py3.12-host-here") is \
        vendors["cuda"]
    assert oota_replay.vendor_spec(vendors, "") == {}
    assert oota_replay.vendor_spec(vendors, "cudanext-torch2.15.0") == {}
