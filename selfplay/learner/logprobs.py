"""Per-token logprobs and entropy from hidden states, in chunks along the sequence (torch).

The lm_head (vocabulary 49k for SmolLM2, 150k for Qwen) is run on `chunk` positions at a time, so
neither the forward nor the backward pass ever holds full-vocabulary logits for more than `chunk`
positions: a 128k-token trajectory with a 150k vocabulary would otherwise need ~77 GB of fp32 logits.
Two ways:

- `fused_head_loss` (training default): each chunk's gradients are made in forward from a separable
  per-token loss, so backward never recomputes the head;
- `chunked_logprobs`: each chunk inside `torch.utils.checkpoint`, recomputed in backward (any loss of
  the logprobs; used under ZeRO-3 and sequence parallelism, and without grad).

The final norm is part of the decoder stack in HF models (applied once to the hidden states, cheap), so
only the head is chunked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from selfplay.learner.head_transform import logit_multiplier
from selfplay.learner.packing import IGNORE, Packed, shift_to_tokens

TokenLoss = Callable[[torch.Tensor, int, int], torch.Tensor]
"""(logprobs of positions [start, end), start, end) -> their scalar loss contribution."""


def _chunk_logprobs(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    logits = head(hidden)
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # (C, V), at least fp32
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


class _FusedHeadLoss(torch.autograd.Function):
    """lm_head + log-softmax + a per-token loss, one chunk of positions at a time, gradients made in forward.

    The loss of a position depends on its own logprob only (`token_loss` is separable: every policy-loss
    aggregation is a weighted token sum, see `losses.token_weights`). So once a chunk's logprobs are known,
    d loss / d logprob is known, and with it d loss / d logits = g * (onehot(target) - softmax): the
    chunk's gradients w.r.t. the hidden states and the head weight are computed right there and its logits
    are freed. That is one head matmul forward and two backward, as plain training does, where
    recomputing a checkpointed chunk in backward costs a third (and a second softmax).
    """

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                token_loss: TokenLoss, chunk: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = hidden.shape[0]
        # Softmax and accumulators in at least fp32: a bf16 gradient accumulator would round away small
        # contributions over many chunks.
        acc = torch.promote_types(weight.dtype, torch.float32)
        grad_hidden = torch.empty_like(hidden)
        # A frozen head (LoRA trains adapters only) needs no weight gradient: one head matmul fewer.
        need_weight = ctx.needs_input_grad[1]
        grad_weight = torch.zeros(weight.shape if need_weight else (), dtype=acc, device=weight.device)
        lp = torch.zeros(n, dtype=acc, device=hidden.device)
        ent = torch.zeros(n, dtype=acc, device=hidden.device)
        total = torch.zeros((), dtype=acc, device=hidden.device)
        for s in range(0, n, chunk):
            e = min(s + chunk, n)
            h, t = hidden[s:e], targets[s:e]
            logp = torch.log_softmax((h @ weight.T).to(acc), dim=-1)  # (C, V)
            valid = t != IGNORE
            safe = t.clamp(min=0)[:, None]
            lp_c = torch.where(valid, logp.gather(1, safe)[:, 0], 0.0).to(acc)
            probs = logp.exp()
            ent[s:e] = -torch.einsum("cv,cv->c", probs, logp)  # a batched dot: no third (C, V) buffer
            del logp
            with torch.enable_grad():
                leaf = lp_c.detach().requires_grad_()
                loss_c = token_loss(leaf, s, e)
                (g,) = torch.autograd.grad(loss_c, leaf, allow_unused=True, materialize_grads=True)
            g = torch.where(valid, g, 0.0)
            lp[s:e] = lp_c
            total += loss_c.detach()
            probs.mul_(-g[:, None]).scatter_add_(1, safe, g[:, None])  # d loss / d logits
            grad_logits = probs.to(weight.dtype)
            del probs
            grad_hidden[s:e] = grad_logits @ weight
            if need_weight:
                grad_weight.addmm_(grad_logits.T.to(acc), h.to(acc))
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.weight_dtype, ctx.need_weight = weight.dtype, need_weight
        ctx.mark_non_differentiable(lp, ent)
        return total, lp, ent

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor, *_: Any) -> tuple[Any, ...]:
        grad_hidden, grad_weight = ctx.saved_tensors
        grad_weight = (grad_weight * grad_loss).to(ctx.weight_dtype) if ctx.need_weight else None
        return grad_hidden * grad_loss.to(grad_hidden.dtype), grad_weight, None, None, None


def can_fuse(head: torch.nn.Module) -> bool:
    """The fused path computes logits as hidden @ weight.T: a plain bias-free Linear head (Llama, Qwen,
    SmolLM2); heads that scale or soft-cap logits take the checkpointed path."""
    return type(head) is torch.nn.Linear and head.bias is None


def fused_head_loss(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, token_loss: TokenLoss,
                    chunk: int = 1024, keep: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """hidden (N, H), targets (N,) with IGNORE -> (loss, logprobs (N,), entropy (N,)).

    `token_loss(lp, start, end)` is the loss contribution of positions [start, end) given their logprobs
    `lp` (end - start,), and must depend on each logprob alone. The loss is differentiable w.r.t. `hidden`
    and the head weight (tied embeddings accumulate as usual); logprobs and entropy are detached.
    Logits exist for `chunk` positions at a time, in forward and in backward.

    `keep` (N,) bool: the only positions that get logits. A trajectory's loss falls on its actions (a
    quarter of the warm start's demonstration tokens), and the head with its softmax over the vocabulary
    is a fifth of a 135M model's training compute per position. `token_loss` then sees the kept positions
    in order ([start, end) index them, not the row), and the others come back with logprob and entropy 0
    and no gradient: `keep` must cover every position whose loss is not identically 0.
    """
    if not can_fuse(head):
        raise ValueError(f"fused_head_loss needs a bias-free nn.Linear head, got {type(head).__name__}; "
                         "use chunked_logprobs")
    targets = targets.to(hidden.device)
    if keep is None:
        return _FusedHeadLoss.apply(hidden, head.weight, targets, token_loss, chunk)
    idx = keep.to(hidden.device).nonzero()[:, 0]
    loss, lp, ent = _FusedHeadLoss.apply(hidden.index_select(0, idx), head.weight, targets[idx], token_loss, chunk)
    n = hidden.shape[0]
    return loss, lp.new_zeros(n).index_copy_(0, idx, lp), ent.new_zeros(n).index_copy_(0, idx, ent)


def tempered(hidden: torch.Tensor, temperature: float, multiplier: float = 1.0) -> torch.Tensor:
    """Hidden states whose head logits are the model's divided by `temperature`.

    The head is linear and bias-free (or, on the checkpointed path, at least linear in its input for the
    heads we train), so scaling its input scales the logits: every head path (fused, chunked, sequence
    parallel) then computes logprobs, entropy and gradients of softmax(logits / T), the distribution the
    rollout engine samples from at temperature T, without a second copy of each chunk's logits.
    `multiplier` is the constant the model's class applies to its logits after the head
    (`head_transform.logit_multiplier`), applied here for the same reason.
    """
    factor = multiplier / temperature
    return hidden if factor == 1.0 else hidden * factor


def decoder_hidden(model: Any, packed: Packed, temperature: float = 1.0) -> torch.Tensor:
    """Final hidden states (N, H) of a packed row (the decoder stack, final norm included), scaled for
    sampling `temperature` and the model's logit multiplier (`tempered`)."""
    out = model.base_model(input_ids=packed.input_ids, position_ids=packed.position_ids,
                           attention_mask=packed.attention_mask, use_cache=False)
    return tempered(out.last_hidden_state[0], temperature, logit_multiplier(model.config))


def packed_token_logprobs(model: Any, packed: Packed, chunk: int = 1024,
                          temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Logprob (N,) of each token given its prefix (0 at sequence starts) and the entropy of the
    distribution that predicted it (N,), for a packed row, via the model's decoder and chunked head, at
    sampling `temperature`."""
    hidden = decoder_hidden(model, packed, temperature)
    lp, ent = chunked_logprobs(model.get_output_embeddings(), hidden, packed.targets.to(hidden.device), chunk)
    return shift_to_tokens(lp, packed.seq_lens), shift_to_tokens(ent, packed.seq_lens)
