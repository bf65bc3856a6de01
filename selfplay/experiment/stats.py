"""Intervals and tests for solve rates over few episodes (pure Python)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of k successes in n trials ((0, 1) when n is 0)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> dict[str, float]:
    """Paired exact (binomial) McNemar test of two arms over the same tasks: `a[i]`, `b[i]` say whether
    task i was solved by each. Returns the discordant counts and the two-sided p-value (1.0 with no
    discordant pair: the arms cannot be told apart)."""
    if len(a) != len(b):
        raise ValueError(f"paired test needs the same tasks in both arms, got {len(a)} and {len(b)}")
    only_a = sum(x and not y for x, y in zip(a, b))
    only_b = sum(y and not x for x, y in zip(a, b))
    n = only_a + only_b
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2 ** n if n else 1.0
    return {"only_a": float(only_a), "only_b": float(only_b), "p_value": min(1.0, 2 * tail) if n else 1.0}


def pass_at_k(successes: Sequence[bool]) -> bool:
    """Solved by at least one of the k samples of a task."""
    return any(successes)
