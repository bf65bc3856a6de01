"""How far one learner update moved the policy on the tokens it trained on.

The loss's `approx_kl` compares the weights being stepped with the behaviour policy, so an update of one
optimizer step logs 0 (its only step is taken at the behaviour weights). `update_shift` compares the
learner's logprobs of the same sampled tokens before the update's first step and after its last:

- `shift_kl`: k3 estimate of KL(before || after) per trained token (the tokens were sampled from the
  policy before the update, so this is an unbiased, non-negative estimate);
- `shift_dlogp_pos` / `shift_dlogp_neg`: the mean change of a trained token's logprob in samples whose
  advantage was positive / negative. A correct update raises the first and lowers the second; an update
  whose step is mostly noise moves both the same way;
- `shift_tokens_pos` / `shift_tokens_neg`: how many tokens each mean is over.

`episode_shifts` keeps the same change per sample (its summed logprob change and token count), so a
figure over episodes can be resampled (`selfplay.experiment.stats.separation_interval`).

Pure: lists of floats in, floats out, so it is tested without a model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def update_shift(before: Sequence[Sequence[float]], after: Sequence[Sequence[float]],
                 masks: Sequence[Sequence[int]], advantages: Sequence[float]) -> dict[str, float]:
    """Shift metrics over the masked tokens of each sample (row i: logprobs before and after, its loss
    mask, its advantage). Means over no tokens are NaN, so an absent sign is not read as "no change"."""
    if len(advantages) != len(before):
        raise ValueError(f"update_shift needs one advantage a row: {len(before)} rows, {len(advantages)} advantages")
    kl = kl_n = 0.0
    delta = {"pos": 0.0, "neg": 0.0}
    count = {"pos": 0, "neg": 0}
    for changes, adv in zip(_masked_changes(before, after, masks, "update_shift"), advantages):
        kl += sum(math.expm1(d) - d for d in changes)
        kl_n += len(changes)
        sign = "pos" if adv > 0 else "neg" if adv < 0 else None
        if sign is not None:
            delta[sign] += sum(changes)
            count[sign] += len(changes)
    nan = float("nan")
    return {
        "shift_kl": kl / kl_n if kl_n else nan,
        "shift_dlogp_pos": delta["pos"] / count["pos"] if count["pos"] else nan,
        "shift_dlogp_neg": delta["neg"] / count["neg"] if count["neg"] else nan,
        "shift_tokens_pos": float(count["pos"]),
        "shift_tokens_neg": float(count["neg"]),
    }


def episode_shifts(before: Sequence[Sequence[float]], after: Sequence[Sequence[float]],
                   masks: Sequence[Sequence[int]]) -> list[tuple[float, int]]:
    """Per sample: the summed logprob change of its masked tokens and how many there are."""
    return [(sum(changes), len(changes)) for changes in _masked_changes(before, after, masks, "episode_shifts")]


def _masked_changes(before: Sequence[Sequence[float]], after: Sequence[Sequence[float]],
                    masks: Sequence[Sequence[int]], caller: str) -> list[list[float]]:
    """Per row, the logprob change (after - before) of each masked token; rows and lengths checked."""
    if not len(before) == len(after) == len(masks):
        raise ValueError(f"{caller} needs one row each: {len(before)} before, {len(after)} after, "
                         f"{len(masks)} masks")
    out = []
    for b, a, m in zip(before, after, masks):
        if not len(b) == len(a) == len(m):
            raise ValueError(f"a row's logprobs and mask differ in length: {len(b)}, {len(a)}, {len(m)}")
        out.append([la - lb for lb, la, keep in zip(b, a, m) if keep])
    return out
