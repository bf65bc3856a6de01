"""`attention_segments`: the contiguous runs of a decode batch's rows that attend in one call each."""

from __future__ import annotations

import itertools
import math
import random

from agent_scaffold.policies.attention_segments import attention_segments


def _cost(runs, firsts, end, kv_heads, threads, call_cost):
    total = 0.0
    for a, b in runs:
        items = (b - a) * kv_heads
        total += call_cost + (b - a) * (end - min(firsts[a:b])) * threads * math.ceil(items / threads) / items
    return total


def _all_splits(n):
    for cuts in itertools.product((False, True), repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        yield list(zip(bounds, bounds[1:]))


def test_equal_rows_attend_in_one_call():
    assert attention_segments([100] * 12, 1600, 3, 2) == [(0, 12)]
    assert attention_segments([], 10, 3, 2) == []


def test_a_long_row_among_short_ones_attends_apart():
    """An injector row of 3,000 columns among solver rows of ~800: one call would read 3,000 columns a row."""
    firsts = [2200, 2300, 0, 2250, 2100, 2200]  # end 3000: row 2 is 3,000 long, the others 700-900
    runs = attention_segments(firsts, 3000, 3, 2)
    assert (2, 3) in runs
    assert runs[0][0] == 0 and runs[-1][1] == len(firsts)
    assert all(a < b for a, b in runs) and all(x[1] == y[0] for x, y in zip(runs, runs[1:]))


def test_calls_cost_enough_that_small_differences_stay_one_call():
    assert attention_segments([0, 10, 20, 5], 1500, 3, 2) == [(0, 4)]
    assert len(attention_segments([0, 10, 20, 5], 1500, 3, 2, call_cost=0.0)) > 1


def test_the_split_is_the_cheapest_of_all_contiguous_splits():
    rng = random.Random(0)
    for _ in range(40):
        n = rng.randint(1, 8)
        end = 3000
        firsts = [rng.randint(0, end - 1) for _ in range(n)]
        kv_heads, threads, call_cost = rng.choice((1, 3, 8)), rng.choice((1, 2, 4)), rng.choice((0.0, 230.0, 2000.0))
        got = attention_segments(firsts, end, kv_heads, threads, call_cost)
        best = min(_cost(s, firsts, end, kv_heads, threads, call_cost) for s in _all_splits(n))
        assert _cost(got, firsts, end, kv_heads, threads, call_cost) <= best + 1e-6
        assert got[0][0] == 0 and got[-1][1] == n and all(x[1] == y[0] for x, y in zip(got, got[1:]))
