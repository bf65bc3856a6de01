"""Low-rank adapters (LoRA) on a causal LM's linear layers, for RL updates that move few directions.

`add_adapters(model, rank, alpha, targets)` freezes every weight of `model` and gives each targeted
`nn.Linear` two trainable matrices, A (r, in) and B (out, r), whose product scaled by alpha / r is added to
the layer's output (a forward hook, so parameter names stay the HF ones: `...q_proj.weight` beside
`...q_proj.lora_A` and `...q_proj.lora_B`). B starts at zero, so the adapted model computes exactly what
the base model does until a step moves B.

Why: with a batch of 8-16 episodes from a memorised warm start, a full-rank AdamW step moves every weight
by about the LR whatever its gradient says, and that drift costs the sharp optimum more likelihood than the
signal gains (docs/benchmarks.md, "What one update does to the injector"). An update confined to rank r per
layer has far fewer directions to drift in; policy-gradient RL carries little information per episode,
and low-rank adapters have been reported to match full fine-tuning there at about ten times the LR
(Schulman et al., "LoRA Without Regret", Thinking Machines, 2025).

`merged_state_dict` folds the adapters into the weights (W + alpha / r * B @ A) and drops their keys: what
checkpoints, weight sync and rollout engines see is a plain HF state dict.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from selfplay.learner import TRAIN_EXTRA_HINT

try:
    import torch
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(TRAIN_EXTRA_HINT) from exc

SUFFIX_A, SUFFIX_B = ".lora_A", ".lora_B"

log = logging.getLogger(__name__)


def add_adapters(model: torch.nn.Module, rank: int, alpha: float, targets: Sequence[str]) -> int:
    """Freeze `model` and add rank-`rank` adapters to every `nn.Linear` whose attribute name is in `targets`;
    returns the number of trainable parameters. Raises ValueError when no layer matches."""
    if rank < 1:
        raise ValueError(f"LoRA rank must be >= 1, got {rank}")
    model.requires_grad_(False)
    scale = alpha / rank
    count = 0
    matched: set[str] = set()
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] not in targets or type(module) is not torch.nn.Linear:
            continue
        matched.add(name.rsplit(".", 1)[-1])
        weight = module.weight
        a = torch.empty(rank, module.in_features, dtype=weight.dtype, device=weight.device)
        torch.nn.init.kaiming_uniform_(a, a=math.sqrt(5))  # as nn.Linear initialises its weight (and PEFT A)
        module.lora_A = torch.nn.Parameter(a)
        module.lora_B = torch.nn.Parameter(torch.zeros(module.out_features, rank, dtype=weight.dtype,
                                                       device=weight.device))
        module.lora_scale = scale
        module.register_forward_hook(_adapter_hook)
        count += a.numel() + module.lora_B.numel()
    if not count:
        raise ValueError(f"no nn.Linear layer named one of {list(targets)} in {type(model).__name__}; "
                         "set learner.engine.lora_targets to the model's projection names")
    unmatched = [t for t in targets if t not in matched]
    if unmatched:
        # e.g. Phi-3 fuses q/k/v into qkv_proj and gate/up into gate_up_proj: the default targets then adapt
        # only o_proj and down_proj, a much smaller update than intended, with nothing else said
        log.warning("LoRA: no nn.Linear layer named %s in %s; adapters only on %s. Set learner.engine.lora_targets "
                    "to the model's projection names", ", ".join(unmatched), type(model).__name__,
                    ", ".join(sorted(matched)))
    return count


def _adapter_hook(module: torch.nn.Module, inputs: tuple[Any, ...], output: torch.Tensor) -> torch.Tensor:
    x = inputs[0]
    return output + (x @ module.lora_A.T @ module.lora_B.T) * module.lora_scale


def merged_state_dict(state: Mapping[str, Any], scale: float) -> dict[str, Any]:
    """`state` with each adapted weight replaced by W + `scale` * B @ A (computed in at least fp32, stored in
    W's dtype) and the adapter keys dropped."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        if key.endswith((SUFFIX_A, SUFFIX_B)):
            continue
        prefix = key[: -len(".weight")] if key.endswith(".weight") else None
        if prefix is not None and prefix + SUFFIX_A in state:
            a, b = state[prefix + SUFFIX_A], state[prefix + SUFFIX_B]
            acc = torch.promote_types(value.dtype, torch.float32)
            value = (value.to(acc) + scale * (b.to(acc) @ a.to(acc))).to(value.dtype)
        out[key] = value
    return out
