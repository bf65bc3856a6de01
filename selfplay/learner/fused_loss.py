"""`packed_policy_loss`: the policy loss of a packed row through the fused lm_head (torch).

Takes the same token-aligned (B, T) inputs as `losses.policy_loss` plus the packed row's final hidden
states, and returns the same (loss, metrics), with logits made and freed one chunk of positions at a time
(`logprobs.fused_head_loss`). The per-token inputs are laid out along the packed row, and each chunk's
loss is `policy_loss` over its positions with the aggregation's token weights as the mask
(`losses.token_weights`), so the chunks sum to exactly the aggregated loss. The metrics come once, from
the detached logprobs the chunks leave behind (`losses.policy_metrics`), plus the mean entropy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from selfplay.learner.logprobs import fused_head_loss
from selfplay.learner.losses import policy_loss, policy_metrics, token_weights
from selfplay.learner.packing import Packed

if TYPE_CHECKING:
    from selfplay.learner.shared_prefix import SharedPack

PER_TOKEN_TERMS = ("rollout_logprobs", "ref_logprobs")
"""Optional `policy_loss` arguments that are (B, T) tensors rather than scalars."""


def packed_policy_loss(head: torch.nn.Module, hidden: torch.Tensor, packed: Packed | SharedPack, old_logprobs: torch.Tensor | None,
                       advantages: torch.Tensor, loss_mask: torch.Tensor, *, agg: str = "token-mean",
                       norm_len: int | None = None, denominator: float | None = None, chunk: int = 1024,
                       **terms: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """-> (loss, metrics): `policy_loss`'s metrics (detached scalars) plus `entropy`, the masked mean
    entropy of the distributions that predicted the tokens.

    `terms` are the remaining `policy_loss` keywords (clip_low, clip_high, clip_ratio_c, tis_cap, kl_coef,
    and the (B, T) rollout_logprobs / ref_logprobs). `old_logprobs` None: the logprobs this forward computes,
    detached (`policy_loss`'s first-step case).
    """
    metric_terms = dict(terms)
    weights = token_weights(loss_mask, agg, norm_len=norm_len, denominator=denominator)
    tensors = {"adv": advantages, "w": weights}
    if old_logprobs is not None:
        tensors["old"] = old_logprobs
    tensors.update({k: terms.pop(k) for k in PER_TOKEN_TERMS if terms.get(k) is not None})
    dtype = torch.promote_types(hidden.dtype, torch.float32)
    row = {k: packed.positions(v.to(device=hidden.device, dtype=dtype)) for k, v in tensors.items()}
    # Only the loss-mask positions get logits (`fused_head_loss`'s keep): the weights are 0 elsewhere, and
    # the metrics below read no others.
    keep = packed.positions(loss_mask.to(hidden.device)) != 0
    row = {k: v[keep] for k, v in row.items()}

    def token_loss(lp: torch.Tensor, s: int, e: int) -> torch.Tensor:
        extra = {k: row[k][None, s:e] for k in PER_TOKEN_TERMS if k in row}
        old = row["old"][None, s:e] if "old" in row else None
        loss, _ = policy_loss(lp[None], old, row["adv"][None, s:e], row["w"][None, s:e],
                              agg="token-mean", denominator=1.0, **terms, **extra)
        return loss

    loss, lp, ent = fused_head_loss(head, hidden, packed.targets, token_loss, chunk, keep=keep)
    lp, ent = packed.rows(lp), packed.rows(ent)  # (B, T)
    mask = loss_mask.to(device=lp.device, dtype=lp.dtype)
    metric_terms = {k: v.to(lp) if isinstance(v, torch.Tensor) else v for k, v in metric_terms.items()}
    old = lp if old_logprobs is None else old_logprobs.to(lp)
    metrics = policy_metrics(lp, old, advantages.to(lp), mask, **metric_terms)
    metrics["entropy"] = (ent * mask).sum() / mask.sum().clamp(min=1)
    return loss, metrics
