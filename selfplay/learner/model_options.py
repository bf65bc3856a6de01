"""Model options shared by the learner and the rollout engines: RoPE scaling (YaRN) and context length.

Nebius trained Qwen2.5-72B at 131k with YaRN factor 4. The scaling must be *identical* in the learner
and in every rollout engine, or the behaviour logprobs stop matching the learner's. We guarantee that by
writing it into the model config: the learner applies `apply_model_options` to the config before building
the model, and every checkpoint it saves carries the same config.json, which HFPolicy
(`from_pretrained`) and `vllm serve` read. transformers 5 keeps RoPE settings in `rope_parameters`; we
also write the legacy `rope_scaling` key into config.json for readers on transformers 4 (older vLLM).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROPE_TYPES = ("yarn", "linear", "dynamic", "longrope", "llama3")
FULL = "full_attention"
"""The layer type whose RoPE a per-layer-type `rope_parameters` (Gemma 3) scales."""


def rope_parameters(config: Any, rope_scaling: dict[str, Any]) -> dict[str, Any]:
    """The config's `rope_parameters` with `rope_scaling` merged in (rope_theta kept)."""
    kind = rope_scaling.get("rope_type", rope_scaling.get("type"))
    if kind not in ROPE_TYPES:
        raise ValueError(f"rope_scaling needs rope_type in {ROPE_TYPES}, got {rope_scaling!r}")
    if float(rope_scaling.get("factor", 0)) <= 1.0 and kind != "llama3":
        raise ValueError(f"rope_scaling.factor must be > 1, got {rope_scaling.get('factor')}")
    base = dict(getattr(config, "rope_parameters", None) or {})
    # RoPE per layer type (Gemma 3): only the full-attention layers attend past their window, so only they
    # are scaled, as Gemma 3's own long-context checkpoints do. Merged at the top level, the keys were
    # ignored and no layer was scaled.
    per_type = isinstance(base.get(FULL), dict)
    scaled = {**(base[FULL] if per_type else base), **{k: v for k, v in rope_scaling.items() if k != "type"},
              "rope_type": kind}
    scaled.setdefault("original_max_position_embeddings", int(config.max_position_embeddings))
    return {**base, FULL: scaled} if per_type else scaled


def text_config(config: Any) -> Any:
    """The config a model's language model reads: a multimodal checkpoint's `text_config`, else itself."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def apply_model_options(config: Any, rope_scaling: dict[str, Any] | None,
                        max_position_embeddings: int | None) -> Any:
    """Mutate an HF config in place with the learner's model options; returns it. A multimodal checkpoint's
    options are set on its text config, which its language model reads."""
    text = text_config(config)
    if rope_scaling:
        text.rope_parameters = rope_parameters(text, rope_scaling)
    if max_position_embeddings:
        text.max_position_embeddings = int(max_position_embeddings)
    if hasattr(config, "quantization_config"):
        # The embedded model was converted from GGUF; its config still says so, which would make vLLM
        # look for a .gguf file. The saved weights are plain fp32/bf16.
        del config.quantization_config
    return config


def write_legacy_rope_key(checkpoint_dir: Path) -> None:
    """Mirror `rope_parameters` into `rope_scaling` in config.json for transformers-4-era readers."""
    path = Path(checkpoint_dir) / "config.json"
    cfg = json.loads(path.read_text())
    holder = cfg if "rope_parameters" in cfg or "text_config" not in cfg else cfg["text_config"]
    params = holder.get("rope_parameters") or {}
    params = params[FULL] if isinstance(params.get(FULL), dict) else params
    if params.get("rope_type", "default") != "default":
        holder["rope_scaling"] = {k: v for k, v in params.items() if k != "rope_theta"}
        holder.setdefault("rope_theta", params.get("rope_theta"))
        path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
