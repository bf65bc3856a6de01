"""`attention_segments`: which contiguous runs of a decode batch's rows attend in one call each.

A `SlotKV` batch is left-padded to its longest row, and a batched attention call reads every row's keys and
values over the whole width, padding included (masked scores still cost their reads). A batch that mixes an
injector row of 3,000 tokens with solver rows of 800 reads about twice what its rows hold. Slices of
contiguous slots [a, b) are views of the buffers, so the batch can instead attend in several calls, each
over the columns its own rows reach. Fewer columns cost less; each extra call costs a fixed overhead, and a
call of few rows leaves CPU threads idle (the kernel parallelises over rows x key/value heads).

The split is the cheapest under that cost model, found exactly by dynamic programming over the B <= a few
dozen rows. Its constants were measured on the 2-core box with SmolLM2-135M's attention (3 key/value heads
of 64): one call's fixed cost is about the time of reading 230 row-columns of keys and values. A batch of
equal rows stays one call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

CALL_COST = 230.0
"""One attention call's fixed cost, in row-columns read (measured: ~60 us against ~0.26 us a row-column)."""


def attention_segments(firsts: Sequence[int], end: int, kv_heads: int, threads: int,
                       call_cost: float = CALL_COST) -> list[tuple[int, int]]:
    """Contiguous slot ranges [a, b), in order and covering 0..len(firsts), that minimise the modelled time
    of attending each range in one call over columns [min(firsts[a:b]), end). `firsts`: each row's first
    real column; `threads`: the CPU threads the kernel shares its rows x `kv_heads` work items among."""
    if not firsts:
        return []
    if min(firsts) == max(firsts):
        return [(0, len(firsts))]
    n = len(firsts)
    best = [0.0] + [math.inf] * n
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        lo = end
        for i in range(j - 1, -1, -1):
            lo = min(lo, firsts[i])
            rows = j - i
            items = rows * kv_heads
            busy = items / (threads * math.ceil(items / threads))  # share of thread time doing work
            cost = best[i] + call_cost + rows * (end - lo) / busy
            if cost < best[j]:
                best[j], cut[j] = cost, i
    out = []
    j = n
    while j:
        out.append((cut[j], j))
        j = cut[j]
    return out[::-1]
