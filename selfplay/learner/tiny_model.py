"""`save_tiny_model`: a small random causal LM with the embedded model's tokenizer.

For tests and benchmarks of the training path (the learner, the self-play loop) where SmolLM2-135M's
weights would only cost time: the tokenizer, and so every trajectory's token ids, stay the real ones. The
default is a Llama, SmolLM2's architecture; `arch` picks another transformers model type (Qwen 2/3, Mistral,
Gemma 3, Granite...) with the same sizes, so the paths a larger model takes are tested on its own class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_scaffold.embedded import default_model_dir

ARCHITECTURES: dict[str, dict[str, Any]] = {
    "qwen2": dict(tie_word_embeddings=False, use_sliding_window=True, sliding_window=8, max_window_layers=1),
    "qwen3": dict(tie_word_embeddings=False, head_dim=8),
    "mistral": dict(sliding_window=8),
    "gemma3_text": dict(head_dim=8, sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
    "phi3": dict(sliding_window=8),
    "granite": dict(logits_scaling=4.0),
    "cohere": dict(logit_scale=0.5),
}
"""Model types besides Llama that the sampler and the learner are tested on, each with the config that makes
its own path show in 2 layers and a few dozen tokens: an 8-token sliding window on every layer (Mistral,
Phi-3) or on one of two (Qwen 2, Gemma 3), Qwen 3's normalised queries and keys, and the constant a
Granite or Cohere head puts on its logits."""


def save_tiny_model(out: str | Path, *, max_position_embeddings: int = 8192, seed: int = 0, arch: str = "llama",
                    head_scale: float = 1.0, tokenizer: Any = None, **config: Any) -> Path:
    """Write a 2-layer, 32-wide random model of type `arch` (config fields overridden by `config`) and the
    embedded tokenizer (or `tokenizer`, e.g. one with another family's chat template and special tokens; the
    vocabulary is sized to it) to `out`; returns `out`. `head_scale` multiplies the output embeddings: a
    random init's logits are so flat that a transform of them (a cap, a factor) hardly moves a logprob."""
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ImportError("a tiny model needs torch and transformers: pip install 'selfplay-swe[train]'") from exc

    out = Path(out)
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    torch.manual_seed(seed)
    sizes = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=len(tokenizer), max_position_embeddings=max_position_embeddings,
                 tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(arch, **{**sizes, **config}))
    if head_scale != 1.0:
        with torch.no_grad():
            model.get_output_embeddings().weight.mul_(head_scale)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
