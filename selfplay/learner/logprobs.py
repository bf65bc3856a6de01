"""Per-token logprobs and entropy from hidden states, in chunks along the sequence (torch).

The lm_head (vocabulary 49k for SmolLM2, 150k for Qwen) is run on `chunk` positions at a time inside
`torch.utils.checkpoint`, so neither the forward nor the backward pass ever holds full-vocabulary logits
for more than `chunk` positions: a 128k-token trajectory with a 150k vocabulary would otherwise need
~77 GB of fp32 logits. The final norm is part of the decoder stack in HF models (applied once to the
hidden states, cheap), so only the head is chunked.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from selfplay.learner.packing import IGNORE, Packed, shift_to_tokens


def _chunk_logprobs(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    logits = head(hidden).float()  # (C, V)
    logz = torch.logsumexp(logits, dim=-1)  # (C,)
    safe = targets.clamp(min=0)
    lp = logits.gather(-1, safe[:, None])[:, 0] - logz  # (C,)
    lp = torch.where(targets == IGNORE, torch.zeros_like(lp), lp)
    with torch.no_grad():
        ent = logz - (torch.softmax(logits, dim=-1) * logits).sum(-1)  # (C,)
    return lp, ent


def chunked_logprobs(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor,
                     chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden (N, H), targets (N,) with IGNORE -> logprob of each target (N,) and entropy (N,) (detached)."""
    lps, ents = [], []
    for s in range(0, hidden.shape[0], chunk):
        h, t = hidden[s:s + chunk], targets[s:s + chunk]
        if torch.is_grad_enabled() and h.requires_grad:
            lp, ent = checkpoint(_chunk_logprobs, head, h, t, use_reentrant=False)
        else:
            lp, ent = _chunk_logprobs(head, h, t)
        lps.append(lp)
        ents.append(ent)
    return torch.cat(lps), torch.cat(ents).detach()


def naive_logprobs(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference computation: full logits for every position at once."""
    return _chunk_logprobs(head, hidden, targets)


def packed_token_logprobs(model: Any, packed: Packed, chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """Logprob (N,) of each token given its prefix (0 at sequence starts) and the entropy of the
    distribution that predicted it (N,), for a packed row, via the model's decoder and chunked head."""
    out = model.base_model(input_ids=packed.input_ids, position_ids=packed.position_ids,
                           attention_mask=packed.attention_mask, use_cache=False)
    hidden = out.last_hidden_state[0]  # (N, H)
    lp, ent = chunked_logprobs(model.get_output_embeddings(), hidden, packed.targets.to(hidden.device), chunk)
    return shift_to_tokens(lp, packed.seq_lens), shift_to_tokens(ent, packed.seq_lens)
