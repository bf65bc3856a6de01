"""How one learner update's samples are split into its optimizer steps' mini-batches (pure Python).

Two splits, both seeded (the same seed gives the same split):
- ``group`` (the default): whole groups per mini-batch, as verl's contiguous mini-batches of a GRPO batch
  are. Groups go largest first (by tokens, seeded order among equals) to the mini-batch with the fewest
  tokens so far, and the mini-batches then run in a seeded order. A group's G attempts share their
  prompt, and the shared-prefix pack (`shared_prefix.py`) runs that prompt once per mini-batch that holds
  any of them: kept together, it runs once an update. Each step's advantages then come from whole groups.
  With fewer groups than steps, the samples are split as ``sample`` splits them.
- ``sample``: the samples shuffled and dealt round-robin (``order[k::steps]``), so a group's attempts spread
  over the steps. The learner's split until 2026-12-07; the learning experiments recorded before then used
  it.

Either way a batch of n samples gets min(steps, n) mini-batches, none empty (`PolicyLearner` never splits
an empty batch).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

MinibatchSplit = Literal["group", "sample"]
MINIBATCH_SPLITS: tuple[str, ...] = ("group", "sample")


def split_update(keys: Sequence[str], lengths: Sequence[int], steps: int, seed: str,
                 by: MinibatchSplit = "group") -> list[list[int]]:
    """Sample indices of each mini-batch, in the order the steps run them.

    keys: each sample's group (samples of one group share it; a compacted episode's segments too);
    lengths: each sample's token count; steps: the optimizer steps wanted; seed: the update's seed."""
    if len(keys) != len(lengths):
        raise ValueError(f"split_update got {len(keys)} keys and {len(lengths)} lengths; one of each per sample")
    if by not in MINIBATCH_SPLITS:
        raise ValueError(f"unknown mini-batch split {by!r}; choose one of {MINIBATCH_SPLITS}")
    n = len(keys)
    steps = max(1, min(steps, n))
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    if by == "sample" or len(groups) < steps:
        order = list(range(n))
        if steps > 1:
            random.Random(seed).shuffle(order)
        return [order[k::steps] for k in range(steps)]
    rng = random.Random(seed)
    units = list(groups.values())
    rng.shuffle(units)
    units.sort(key=lambda unit: -sum(lengths[i] for i in unit))  # stable: the shuffle orders equals
    parts: list[list[int]] = [[] for _ in range(steps)]
    load = [0] * steps
    for unit in units:
        k = min(range(steps), key=lambda j: (load[j], len(parts[j]), j))
        parts[k].extend(unit)
        load[k] += sum(lengths[i] for i in unit)
    rng.shuffle(parts)
    return [sorted(part) for part in parts]
