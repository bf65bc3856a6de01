"""What a causal LM does to its logits after the `lm_head`, and whether the learner can do the same.

The learner never calls the model's own `forward`: it runs `base_model`, then the head chunk by chunk
(`logprobs.chunked_logprobs`, `fused_head_loss`), so that a 150k-class vocabulary's logits never exist for
a whole sequence. A model class that changes its logits after the head would then train on other logprobs
than the ones its sampler drew with, and nothing would fail: the ratio, the TIS weights and the loss would
all be off. Two kinds exist in transformers:
- a constant factor (Granite divides by `logits_scaling`, Cohere multiplies by `logit_scale`): linear, so the
  learner applies it to the hidden state before the head, as it does the sampling temperature;
- a soft cap, `cap * tanh(logits / cap)` (Gemma 2's `final_logit_softcapping`): not linear, so refused.
"""

from __future__ import annotations

from typing import Any

from selfplay.learner.model_options import text_config


class UnsupportedHeadError(ValueError):
    """The model's class transforms its logits in a way the learner's chunked head does not reproduce."""


def logit_multiplier(config: Any) -> float:
    """The constant the model's class multiplies its head's logits by (1.0 for most); raises
    `UnsupportedHeadError` for a transform that is not a constant factor. A multimodal checkpoint's head
    settings are in its text config."""
    config = text_config(config)
    cap = getattr(config, "final_logit_softcapping", None)
    if cap:
        raise UnsupportedHeadError(
            f"{_name(config)} soft-caps its logits after the head (final_logit_softcapping={cap}); the learner "
            "computes log-softmax(lm_head(h) / T) chunk by chunk and would train on other logprobs than the "
            "sampler's. Train a model without a final logit soft cap (Gemma 3, Qwen, Llama, Mistral).")
    factor = 1.0
    scaling = getattr(config, "logits_scaling", None)  # Granite: logits / logits_scaling
    if scaling not in (None, 1, 1.0):
        factor /= float(scaling)
    scale = getattr(config, "logit_scale", None)  # Cohere: logits * logit_scale
    if scale not in (None, 1, 1.0):
        factor *= float(scale)
    return factor


def _name(config: Any) -> str:
    archs = getattr(config, "architectures", None) or [getattr(config, "model_type", "this model")]
    return str(archs[0])
