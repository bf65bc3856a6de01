"""Intervals and tests for solve and valid-bug rates over few episodes, and for a logprob shift's
separation of valid from invalid episodes (pure Python)."""

from __future__ import annotations

import math
import random
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
    return {"only_a": float(only_a), "only_b": float(only_b), "p_value": sign_test(only_a, only_b)["p_value"]}


def sign_test(only_a: int, only_b: int) -> dict[str, float]:
    """Exact sign test of discordant pairs (a solved and b did not: `only_a`; the reverse: `only_b`): the
    one-sided p-value that a is the better arm (`p_greater`, P(X >= only_a) for X ~ Binomial(n, 1/2)) and
    the two-sided one (`p_value`, what `mcnemar_exact` reports). 1.0 with no discordant pair."""
    if only_a < 0 or only_b < 0:
        raise ValueError(f"discordant counts must be >= 0, got {only_a} and {only_b}")
    n = only_a + only_b
    if n == 0:
        return {"p_greater": 1.0, "p_value": 1.0}
    upper = sum(math.comb(n, i) for i in range(only_a, n + 1)) / 2 ** n
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2 ** n
    return {"p_greater": min(1.0, upper), "p_value": min(1.0, 2 * tail)}


def pass_at_k(successes: Sequence[bool]) -> bool:
    """Solved by at least one of the k samples of a task."""
    return any(successes)


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> dict[str, float]:
    """Fisher's exact test of two rates from independent episodes (k1 of n1 against k2 of n2): the
    one-sided p-value that the first rate is higher (`p_greater`) and the two-sided one (`p_value`, the
    tables at most as likely as the observed one). For arms whose episodes are not paired by task, such
    as the injector's, where each episode draws its own repo and bug."""
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise ValueError(f"counts out of range: {k1}/{n1}, {k2}/{n2}")
    total, n = k1 + k2, n1 + n2
    lo, hi = max(0, total - n2), min(total, n1)
    den = math.comb(n, total)
    prob = {x: math.comb(n1, x) * math.comb(n2, total - x) / den for x in range(lo, hi + 1)}
    observed = prob[k1]
    return {"p_greater": min(1.0, sum(v for x, v in prob.items() if x >= k1)),
            "p_value": min(1.0, sum(v for v in prob.values() if v <= observed * (1 + 1e-9)))}


def separation_interval(valid: Sequence[tuple[float, int]], invalid: Sequence[tuple[float, int]], *,
                        resamples: int = 2000, seed: int = 0, level: float = 0.95) -> dict[str, float]:
    """How far an update raised valid episodes' tokens against invalid ones', with a bootstrap interval.

    Each episode is (summed logprob change of its tokens, its token count). The separation is the
    token-weighted mean change over the valid episodes minus that over the invalid ones (what
    `update_shift` reports for probes); the interval resamples episodes with replacement within each
    class (a percentile bootstrap), so it covers which episodes happened to be probes, not which batch
    the update trained on. An interval that holds 0 is a separation the probes cannot tell from none."""
    if not valid or not invalid:
        raise ValueError(f"separation needs episodes of both classes, got {len(valid)} valid and {len(invalid)} invalid")
    if not 0 < level < 1 or resamples < 1:
        raise ValueError(f"level must be in (0, 1) and resamples >= 1, got {level} and {resamples}")

    def mean(eps: Sequence[tuple[float, int]]) -> float:
        tokens = sum(n for _, n in eps)
        return sum(s for s, _ in eps) / tokens if tokens else 0.0

    rng = random.Random(seed)
    point = mean(valid) - mean(invalid)
    draws = sorted(mean(rng.choices(valid, k=len(valid))) - mean(rng.choices(invalid, k=len(invalid)))
                   for _ in range(resamples))
    tail = (1 - level) / 2
    lo = draws[min(resamples - 1, int(tail * resamples))]
    hi = draws[min(resamples - 1, int((1 - tail) * resamples))]
    return {"separation": point, "lo": lo, "hi": hi}
