"""Models layer: tiny, randomly initialised real models train for one step on the device.

Each model is built from a config with its real class (transformers' LlamaForCausalLM, ...;
timm's ResNet where torchvision works), small enough to run in seconds, and nothing is
downloaded (oota_suite.py forces the Hugging Face libraries offline). The same seed gives the same
weights for the device copy, the CPU copy and a float64 CPU copy; the forward pass, the loss and
every parameter after one SGD step on the device are judged by the float64 rule
(``oota_rules``): the device's error against the float64 step may be at most ``multiplier``
times the CPU's own error in the model's dtype, plus a few ulps (the vendor's ``verify.judge``
overrides the numbers per dtype, with a reason). Which models run is the vendor's
``verify.models``; each records {model, dtype, seconds, peak_bytes, max_abs_diff (device
against the CPU), worst (the share of the rule's allowance the worst result used)}.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import oota_judge
import oota_rules
import pytest

LAYER = "models"
SEED = 20261121
BATCH, SEQ, VOCAB, IMAGE = 2, 16, 128, 32
LR = 0.05


@dataclass(frozen=True)
class ModelCase:
    family: str                               # the library that provides the real class
    build: Callable[[], Any]                  # -> torch.nn.Module, initialised from torch's RNG
    inputs: Callable[[Any], dict[str, Any]]   # CPU generator -> keyword inputs incl. labels


def _lm_inputs(gen) -> dict[str, Any]:
    import torch

    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    return {"input_ids": ids, "labels": ids.clone()}


def _image_inputs(gen) -> dict[str, Any]:
    import torch

    return {"pixel_values": torch.randn(BATCH, 3, IMAGE, IMAGE, generator=gen),
            "labels": torch.randint(0, 10, (BATCH,), generator=gen)}


def _tiny_lm(config_name: str, model_name: str, **extra) -> Callable[[], Any]:
    def build():
        import transformers

        config = getattr(transformers, config_name)(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **extra)
        return getattr(transformers, model_name)(config)
    return build


def _hf_resnet():
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32, 64, 64],
                          depths=[1, 1, 1, 1], layer_type="basic", num_labels=10)
    return ResNetForImageClassification(config)


def _timm_classifier(name: str) -> Callable[[], Any]:
    """timm models map a tensor to logits; give them the transformers call shape."""
    def build():
        import timm
        import torch
        from transformers.modeling_outputs import ImageClassifierOutput

        class TimmClassifier(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = timm.create_model(name, pretrained=False, num_classes=10)

            def forward(self, pixel_values, labels):
                logits = self.net(pixel_values)
                return ImageClassifierOutput(
                    logits=logits, loss=torch.nn.functional.cross_entropy(logits, labels))
        return TimmClassifier()
    return build


MODELS: dict[str, ModelCase] = {
    "llama": ModelCase("transformers", _tiny_lm("LlamaConfig", "LlamaForCausalLM"), _lm_inputs),
    "mistral": ModelCase("transformers", _tiny_lm("MistralConfig", "MistralForCausalLM"),
                         _lm_inputs),
    "qwen2": ModelCase("transformers", _tiny_lm("Qwen2Config", "Qwen2ForCausalLM"), _lm_inputs),
    "gemma": ModelCase("transformers", _tiny_lm("GemmaConfig", "GemmaForCausalLM", head_dim=16),
                       _lm_inputs),
    "resnet": ModelCase("transformers", _hf_resnet, _image_inputs),
    "timm_resnet18": ModelCase("timm", _timm_classifier("resnet18"), _image_inputs),
}


@dataclass
class StepResult:
    logits: Any
    loss: Any
    params: dict[str, Any]
    seconds: float
    peak_bytes: int | None


def _peak_start(device_module) -> bool:
    if hasattr(device_module, "max_memory_allocated") and hasattr(device_module,
                                                                  "reset_peak_memory_stats"):
        device_module.reset_peak_memory_stats()
        return True
    return False


def _train_step(model, inputs: dict[str, Any], device, device_module) -> StepResult:
    """Forward, loss.backward() and one SGD step on ``device``; results copied back to CPU."""
    import torch

    model = model.to(device).train()
    batch = {k: v.to(device) for k, v in inputs.items()}
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    peak = device_module is not None and _peak_start(device_module)
    started = time.perf_counter()
    out = model(**batch)
    out.loss.backward()
    optimizer.step()
    if device_module is not None and hasattr(device_module, "synchronize"):
        device_module.synchronize()
    seconds = time.perf_counter() - started
    return StepResult(logits=out.logits.detach().cpu(), loss=out.loss.detach().cpu(),
                      params={k: v.detach().cpu() for k, v in model.named_parameters()},
                      seconds=seconds,
                      peak_bytes=int(device_module.max_memory_allocated()) if peak else None)


def _diff(a, b) -> float:
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0


def _results(step: StepResult) -> dict[str, Any]:
    """Everything one step produced, by the name a message uses."""
    return {"logits": step.logits, "loss": step.loss,
            **{f"parameter {k} after one step": v for k, v in step.params.items()}}


def _named(got: StepResult, want: StepResult, wide: StepResult | None
           ) -> list[tuple[str, Any, Any, Any]]:
    """(name, device, CPU, float64 or None) of everything one step produced."""
    device, cpu = _results(got), _results(want)
    reference = _results(wide) if wide is not None else {}
    return [(name, device[name], value, reference.get(name)) for name, value in cpu.items()]


def test_forward_and_train_step(model_name, device, device_module, spec, record_data):
    import torch

    case = MODELS.get(model_name)
    if case is None:
        pytest.fail(f"verify.models names '{model_name}'; known: {', '.join(sorted(MODELS))}")
    dtype_name = str(spec.get("model_dtype") or "float32")
    dtype = getattr(torch, dtype_name)
    torch.manual_seed(SEED)
    reference = case.build().to(dtype)
    torch.manual_seed(SEED)
    on_device = case.build().to(dtype)
    # Same seed, same weights: the comparison below starts from identical parameters.
    for (name, a), b in zip(reference.state_dict().items(), on_device.state_dict().values(),
                            strict=True):
        assert torch.equal(a, b), f"{name}: the same seed gave different initial weights"
    on_device = on_device.to(device)
    assert all(torch.equal(a, b.cpu()) for a, b in zip(reference.state_dict().values(),
                                                       on_device.state_dict().values(),
                                                       strict=True)), \
        "weights changed when copied to the device"
    generator = torch.Generator().manual_seed(SEED)
    raw = case.inputs(generator)
    inputs = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in raw.items()}

    trivial = device.type == "cpu"
    # The float64 copy starts from the same weights (a float32 weight is exact in float64).
    wide = None if trivial else _train_step(
        _widened(case, dtype),
        {k: (v.to(torch.float64) if v.is_floating_point() else v) for k, v in raw.items()},
        torch.device("cpu"), None)
    want = _train_step(reference, inputs, torch.device("cpu"), None)
    got = _train_step(on_device, inputs, device, device_module)
    try:
        rule = oota_rules.float64_rule(dtype_name, spec.get("judge"),
                                       (spec.get("tolerances") or {}).get(dtype_name))
    except oota_rules.RuleError as exc:
        pytest.fail(f"cell.json verify: {exc}", pytrace=False)
    verdict = oota_judge.judge_named(_named(got, want, wide), rule=rule, dtype=dtype_name,
                                     device_name=device.type, head=f"{model_name} ({dtype_name})")
    diffs = {"logits": _diff(got.logits, want.logits), "loss": _diff(got.loss, want.loss),
             "params": max(_diff(got.params[k], want.params[k]) for k in want.params)}
    record_data(model=model_name, family=case.family, model_class=type(on_device).__name__,
                dtype=dtype_name, seconds=round(got.seconds, 4), peak_bytes=got.peak_bytes,
                max_abs_diff=max(diffs.values()), diffs=diffs, loss=float(want.loss),
                parameters=sum(p.numel() for p in want.params.values()),
                trivial=trivial, worst=verdict.ratio, judge=rule.describe())
    assert torch.isfinite(got.loss), f"non-finite loss on {device}: {got.loss}"
    assert verdict.status == "passed", verdict.message


def _widened(case: ModelCase, dtype: Any) -> Any:
    """The model in float64 with the weights the seed gives in ``dtype`` (then widened)."""
    import torch

    torch.manual_seed(SEED)
    return case.build().to(dtype).to(torch.float64)
