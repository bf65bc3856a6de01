"""`save_tiny_model`: a small random Llama with the embedded model's tokenizer.

For tests and benchmarks of the training path (the learner, the self-play loop) where SmolLM2-135M's
weights would only cost time: the tokenizer, and so every trajectory's token ids, stay the real ones.
"""

from __future__ import annotations

from pathlib import Path

from agent_scaffold.embedded import default_model_dir


def save_tiny_model(out: str | Path, *, max_position_embeddings: int = 8192, seed: int = 0) -> Path:
    """Write a 2-layer, 32-wide random Llama and the embedded tokenizer to `out`; returns `out`."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig
    except ImportError as exc:
        raise ImportError("a tiny model needs torch and transformers: pip install 'selfplay-swe[train]'") from exc

    out = Path(out)
    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    torch.manual_seed(seed)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=len(tokenizer),
                         max_position_embeddings=max_position_embeddings, tie_word_embeddings=True)
    AutoModelForCausalLM.from_config(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
