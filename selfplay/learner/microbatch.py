"""Micro-batch planning by token budget (pure Python).

First-fit decreasing bin packing of sequence lengths into bins of at most `token_budget` tokens; a
sequence longer than the budget gets a bin of its own (it cannot be split without sequence parallelism).
The plan is deterministic for a given list of lengths.
"""

from __future__ import annotations

from collections.abc import Sequence


def plan_microbatches(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Indices of `lengths` grouped into micro-batches; every index appears exactly once."""
    return first_fit([(n, [i]) for i, n in enumerate(lengths)], token_budget)


def first_fit(items: Sequence[tuple[int, list[int]]], token_budget: int) -> list[list[int]]:
    """(cost, indices) items binned first-fit, costliest first (ties by first index), into bins of at most
    `token_budget`; an item over the budget gets a bin of its own. -> each bin's indices, in order added."""
    if token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    bins: list[list[int]] = []
    loads: list[int] = []
    for cost, idx in sorted(items, key=lambda item: (-item[0], item[1][0])):
        for b, load in enumerate(loads):
            if load + cost <= token_budget:
                bins[b].extend(idx)
                loads[b] += cost
                break
        else:
            bins.append(list(idx))
            loads.append(cost)
    return bins
