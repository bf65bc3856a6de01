"""The loss aggregation modes (verl's `agg_loss` modes), importable without torch.

Each mode maps a loss mask (B, T) to per-token weights (B, T): every aggregation is a weighted token sum,
which is what lets micro-batches and fused chunks add up to the full-batch loss. The functions only call
tensor methods, so this module needs no torch import and config validation can name the modes from the one
registry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor


def _token_mean(mask: Tensor, norm_len: int | None, denominator: float | None) -> Tensor:
    den = mask.sum().clamp(min=1) if denominator is None else max(denominator, 1e-12)
    return mask / den


def _seq_mean_token_mean(mask: Tensor, norm_len: int | None, denominator: float | None) -> Tensor:
    tokens = mask.sum(-1, keepdim=True)  # (B, 1)
    den = (tokens > 0).sum().clamp(min=1) if denominator is None else denominator
    return mask / tokens.clamp(min=1) / den


def _seq_mean_token_sum_norm(mask: Tensor, norm_len: int | None, denominator: float | None) -> Tensor:
    den = mask.shape[0] * (norm_len or mask.shape[-1]) if denominator is None else denominator
    return mask / den


AGGREGATIONS: dict[str, Callable[[Tensor, int | None, float | None], Tensor]] = {
    "token-mean": _token_mean,
    "seq-mean-token-mean": _seq_mean_token_mean,
    "seq-mean-token-sum-norm": _seq_mean_token_sum_norm,
}
"""Registry of loss aggregation modes: each gives the per-token weights of its weighted token sum.
token-mean (DAPO), seq-mean-token-mean (GRPO), seq-mean-token-sum-norm (Dr. GRPO)."""

AGG_MODES: tuple[str, ...] = tuple(AGGREGATIONS)
"""The mode names, in registry order (`LossConfig.agg` must be one)."""
