"""The distribution an HF policy samples each token from (`process_logits`), the draw from it (`inverse_cdf`),
and the torch import that names the extra to install (`import_torch`). `HFPolicy` and its `DecodeBatch` share them.
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


def process_logits(logits: Any, params: SamplingParams, seen: Any = None) -> Any:
    """Log-probabilities of the distribution to sample from, from raw logits: one row (V,) or rows (b, V)
    that share `params`, each row normalised on its own.

    `seen` holds the ids already in the context, for the repetition penalty, which takes one row (V,).
    Greedy (temperature 0) returns the temperature-1 log-softmax; the caller takes the argmax.
    """
    torch = import_torch()
    logits = logits.float()
    if params.repetition_penalty != 1.0 and seen is not None and seen.numel():
        if logits.dim() != 1:
            raise ValueError("the repetition penalty takes one row of logits (V,) and that row's seen ids")
        picked = logits[seen]
        logits[seen] = torch.where(picked > 0, picked / params.repetition_penalty,
                                   picked * params.repetition_penalty)
    if params.temperature > 0:
        logits = logits / params.temperature
    if params.top_k > 0 and params.top_k < logits.shape[-1]:
        kth = torch.topk(logits, params.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    logp = torch.log_softmax(logits, dim=-1)
    if params.min_p > 0:
        probs = logp.exp()
        logp = logp.masked_fill(probs < params.min_p * probs.amax(-1, keepdim=True), float("-inf"))
    if params.top_p < 1.0:
        sorted_logp, order = torch.sort(logp, dim=-1, descending=True)
        probs = sorted_logp.exp()
        drop = probs.cumsum(-1) - probs >= params.top_p  # keep the smallest prefix reaching top_p
        logp = logp.scatter(-1, order, sorted_logp.masked_fill(drop, float("-inf")))
    if params.min_p > 0 or params.top_p < 1.0:
        logp = torch.log_softmax(logp, dim=-1)  # renormalise after truncation
    return logp


def inverse_cdf(logp: Any, uniform: Any) -> Any:
    """One token per row of `logp` (b, V), the first whose cumulative probability exceeds `uniform` (b,) in
    [0, 1) times the row's total: a draw from the row's distribution for a uniform draw. One uniform per row,
    where `torch.multinomial` draws an exponential per vocabulary entry (~1 ms per row at 49k on CPU).
    The cumulative sum is taken in float64, so tokens of probability ~1e-9 keep their share."""
    torch = import_torch()
    cdf = logp.exp().double().cumsum(-1)  # (b, V)
    target = uniform.double() * cdf[:, -1]  # (b,)
    token = torch.searchsorted(cdf, target[:, None], right=True).squeeze(-1)  # (b,)
    return token.clamp_(max=logp.shape[-1] - 1)  # a target at the total's last rounding step
