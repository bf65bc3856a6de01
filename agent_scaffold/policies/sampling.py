"""The distribution an HF policy samples each token from (`process_logits`), and the torch import that
names the extra to install (`import_torch`). `HFPolicy` and its `DecodeBatch` share both.
"""

from __future__ import annotations

from typing import Any

from agent_scaffold.policy import SamplingParams

EXTRA_HINT = "the hf policy needs torch and transformers: pip install 'selfplay-swe[train]'"


def import_torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        raise ImportError(EXTRA_HINT) from exc
    return torch


def process_logits(logits: Any, params: SamplingParams, seen: Any) -> Any:
    """Log-probabilities of the distribution to sample from, shape (V,), from raw logits (V,).

    `seen` holds the ids already in the context (for the repetition penalty). Greedy (temperature 0)
    returns the temperature-1 log-softmax; the caller takes the argmax.
    """
    torch = import_torch()
    logits = logits.float()
    if params.repetition_penalty != 1.0 and seen.numel():
        picked = logits[seen]
        logits[seen] = torch.where(picked > 0, picked / params.repetition_penalty,
                                   picked * params.repetition_penalty)
    if params.temperature > 0:
        logits = logits / params.temperature
    if params.top_k > 0 and params.top_k < logits.numel():
        kth = torch.topk(logits, params.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    logp = torch.log_softmax(logits, dim=-1)
    if params.min_p > 0:
        logp = logp.masked_fill(logp.exp() < params.min_p * logp.exp().max(), float("-inf"))
    if params.top_p < 1.0:
        sorted_logp, order = torch.sort(logp, descending=True)
        cum = sorted_logp.exp().cumsum(-1)
        drop = cum - sorted_logp.exp() >= params.top_p  # keep the smallest prefix reaching top_p
        logp = logp.scatter(0, order[drop], float("-inf"))
    if params.min_p > 0 or params.top_p < 1.0:
        logp = torch.log_softmax(logp, dim=-1)  # renormalise after truncation
    return logp
