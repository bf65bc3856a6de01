"""The clipped token-level policy loss (negated DAPO objective) and loss aggregation, in torch.

    ratio_t = exp(logprobs_t - old_logprobs_t)                      per assistant token
    pg_t    = max(-A_t * ratio_t, -A_t * clip(ratio_t, 1 - clip_low, 1 + clip_high))     (B, T)
    dual clip (optional, A_t < 0 only): pg_t = min(pg_t, -A_t * clip_ratio_c)
    TIS (optional): pg_t *= min(exp(old_logprobs_t - rollout_logprobs_t), tis_cap)   (detached)
    KL (optional, off): pg_t += kl_coef * (exp(ref_t - lp_t) - (ref_t - lp_t) - 1)   (k3 estimator)
    loss    = agg_loss(pg, loss_mask, agg)

`agg_loss` modes (verl core_algos style):
- ``token-mean`` (DAPO default): sum(pg * m) / sum(m), every token of the batch weighs the same;
- ``seq-mean-token-mean`` (GRPO): mean over sequences of each sequence's token mean;
- ``seq-mean-token-sum-norm`` (Dr. GRPO): sum(pg * m) / (num_seqs * norm_len), norm_len a constant
  (default the tensor's T).

For micro-batched training pass `denominator`, the whole batch's normaliser (token count, sequence
count, or num_seqs * norm_len), so that summing micro-batch losses gives exactly the full-batch loss.

Departures: DAPO's objective is exactly `token-mean` with no KL; dual-clip (Ye et al. 2020) and TIS
(Yao et al. 2025) are extras, off by default. With `rollout_logprobs` given, `old_logprobs` must be the
learner's recomputed behaviour logprobs and `rollout_logprobs` the sampler's.
"""

from __future__ import annotations

try:
    import torch
except ImportError as exc:  # pragma: no cover - depends on the install
    from selfplay.learner import TRAIN_EXTRA_HINT

    raise ImportError(TRAIN_EXTRA_HINT) from exc

from selfplay.learner.aggregations import AGGREGATIONS

Tensor = torch.Tensor


def token_weights(mask: Tensor, mode: str = "token-mean", *, norm_len: int | None = None,
                  denominator: float | None = None) -> Tensor:
    """Per-token weights w (B, T) of an aggregation: agg_loss(mat, mask, mode, ...) == (mat * w).sum().

    Every aggregation is a weighted token sum; the weights also let the loss be evaluated chunk by chunk
    along a packed row (`logprobs.fused_head_loss`).
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"unknown loss aggregation {mode!r}; choose one of {sorted(AGGREGATIONS)}")
    return AGGREGATIONS[mode](mask if mask.is_floating_point() else mask.float(), norm_len, denominator)


def agg_loss(mat: Tensor, mask: Tensor, mode: str = "token-mean", *, norm_len: int | None = None,
             denominator: float | None = None) -> Tensor:
    """Reduce a per-token matrix (B, T) under mask (B, T) to a scalar."""
    return (mat * token_weights(mask.to(mat.dtype), mode, norm_len=norm_len, denominator=denominator)).sum()


def batch_denominator(masks: list[Tensor], mode: str, norm_len: int | None = None) -> float:
    """The normaliser `agg_loss` would use on the concatenation of `masks` (each (b_i, T_i))."""
    if mode == "token-mean":
        return float(sum(float(m.sum()) for m in masks))
    if mode == "seq-mean-token-mean":
        return float(sum(int((m.sum(-1) > 0).sum()) for m in masks))
    if mode == "seq-mean-token-sum-norm":
        if norm_len is None:
            raise ValueError("seq-mean-token-sum-norm over micro-batches needs norm_len (a constant, e.g. the "
                             "max response length), since micro-batches have different T")
        return float(sum(m.shape[0] for m in masks) * norm_len)
    raise ValueError(f"unknown loss aggregation {mode!r}; choose one of {sorted(AGGREGATIONS)}")


def policy_loss(logprobs: Tensor, old_logprobs: Tensor | None, advantages: Tensor, loss_mask: Tensor, *,
                clip_low: float = 0.2, clip_high: float = 0.28, agg: str = "token-mean",
                clip_ratio_c: float | None = None, rollout_logprobs: Tensor | None = None,
                tis_cap: float | None = None, ref_logprobs: Tensor | None = None, kl_coef: float = 0.0,
                norm_len: int | None = None, denominator: float | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """Negated DAPO objective over (B, T) tensors; returns (loss, metrics).

    logprobs: learner logprobs with grad; old_logprobs: behaviour logprobs, or None for `logprobs` itself
    detached (the first step of an update, whose weights are still those that sampled: ratio 1, and with
    TIS the learner's own logprobs in its weight, without a forward pass of their own); advantages: per
    token; loss_mask: 1 on assistant tokens. Metrics (detached scalars): clipfrac, clipfrac_low,
    clipfrac_high, approx_kl (k3 of old vs new over masked tokens), ratio_mean, and tis_weight_mean /
    mismatch_abs / tis_clipfrac / kl when enabled.
    """
    if old_logprobs is None:
        old_logprobs = logprobs.detach()
    if not (logprobs.shape == old_logprobs.shape == advantages.shape == loss_mask.shape):
        raise ValueError(f"shape mismatch: logprobs {tuple(logprobs.shape)}, old_logprobs "
                         f"{tuple(old_logprobs.shape)}, advantages {tuple(advantages.shape)}, loss_mask "
                         f"{tuple(loss_mask.shape)}; all four must be (batch, tokens)")
    if clip_ratio_c is not None and clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 (dual-clip lower bound), got {clip_ratio_c}")
    mask = loss_mask.to(logprobs.dtype)
    ratio = torch.exp(logprobs - old_logprobs)  # (B, T)
    pg = torch.maximum(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high))
    if clip_ratio_c is not None:
        pg = torch.where(advantages < 0, torch.minimum(pg, -advantages * clip_ratio_c), pg)
    if rollout_logprobs is not None:
        if tis_cap is None:
            raise ValueError("rollout_logprobs given without tis_cap; pass tis_cap (e.g. 2.0) to enable TIS")
        pg = pg * torch.exp(old_logprobs - rollout_logprobs).clamp(max=tis_cap).detach()
    if ref_logprobs is not None and kl_coef != 0.0:
        d = ref_logprobs - logprobs
        pg = pg + kl_coef * (torch.exp(d) - d - 1)  # (B, T), k3 estimator of KL(pi || ref)
    loss = agg_loss(pg, mask, agg, norm_len=norm_len, denominator=denominator)
    metrics = policy_metrics(logprobs, old_logprobs, advantages, mask, clip_low=clip_low, clip_high=clip_high,
                             clip_ratio_c=clip_ratio_c, rollout_logprobs=rollout_logprobs, tis_cap=tis_cap,
                             ref_logprobs=ref_logprobs, kl_coef=kl_coef)
    return loss, metrics


@torch.no_grad()
def policy_metrics(logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, loss_mask: Tensor, *,
                   clip_low: float = 0.2, clip_high: float = 0.28, clip_ratio_c: float | None = None,
                   rollout_logprobs: Tensor | None = None, tis_cap: float | None = None,
                   ref_logprobs: Tensor | None = None, kl_coef: float = 0.0) -> dict[str, Tensor]:
    """The metrics `policy_loss` reports, as detached scalars (masked means over (B, T)): clipfrac,
    clipfrac_low, clipfrac_high, approx_kl, ratio_mean, and dualclipfrac / tis_weight_mean / kl when those
    terms are on. With TIS, the rollout-learner mismatch too: mismatch_abs (mean |logp_learner_old -
    logp_rollout|) and tis_clipfrac (the share of tokens whose TIS weight hits the cap). Apart from the
    loss so that the fused head (`fused_loss.packed_policy_loss`), which never holds all logprobs with
    grad at once, computes them once from its detached logprobs."""
    lp = logprobs.detach()
    mask = loss_mask.to(lp.dtype)
    log_ratio = lp - old_logprobs
    ratio = torch.exp(log_ratio)  # (B, T)
    metrics: dict[str, Tensor] = {}
    if clip_ratio_c is not None:
        pg = torch.maximum(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high))
        dual = (advantages < 0) & (pg > -advantages * clip_ratio_c)
        metrics["dualclipfrac"] = _masked_mean(dual.to(mask.dtype), mask)
    if rollout_logprobs is not None and tis_cap is not None:
        gap = old_logprobs - rollout_logprobs
        weight = torch.exp(gap)
        metrics["tis_weight_mean"] = _masked_mean(weight.clamp(max=tis_cap), mask)
        metrics["mismatch_abs"] = _masked_mean(gap.abs(), mask)
        metrics["tis_clipfrac"] = _masked_mean((weight > tis_cap).to(mask.dtype), mask)
    if ref_logprobs is not None and kl_coef != 0.0:
        d = ref_logprobs - lp
        metrics["kl"] = _masked_mean(torch.exp(d) - d - 1, mask)
    low = (ratio < 1 - clip_low) & (advantages < 0)
    high = (ratio > 1 + clip_high) & (advantages > 0)
    metrics["clipfrac"] = _masked_mean((low | high).to(mask.dtype), mask)
    metrics["clipfrac_low"] = _masked_mean(low.to(mask.dtype), mask)
    metrics["clipfrac_high"] = _masked_mean(high.to(mask.dtype), mask)
    metrics["approx_kl"] = _masked_mean((ratio - 1) - log_ratio, mask)
    metrics["ratio_mean"] = _masked_mean(ratio, mask)
    return metrics


def _masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1)
