"""Micro-batch planning by token budget (pure Python).

First-fit decreasing bin packing of sequence lengths into bins of at most `token_budget` tokens; a
sequence longer than the budget gets a bin of its own (it cannot be split without sequence parallelism).
The plan is deterministic for a given list of lengths.
"""

from __future__ import annotations

from collections.abc import Sequence


def plan_microbatches(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Indices of `lengths` grouped into micro-batches; every index appears exactly once."""
    if token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    loads: list[int] = []
    for i in order:
        n = lengths[i]
        for b, load in enumerate(loads):
            if load + n <= token_budget:
                bins[b].append(i)
                loads[b] += n
                break
        else:
            bins.append([i])
            loads.append(n)
    return bins
