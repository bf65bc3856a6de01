"""Prompt-lookup drafts for speculative decoding (`DecodeBatch` with `lookup_tokens` > 0), and the test that
keeps the sampled distribution exact.

An agent's actions copy their context: a `str_replace` repeats lines the episode viewed, a command names
paths the listing printed, a turn repeats the plan of the last. So the tokens that followed the latest
earlier occurrence of the row's last n tokens (n = 3, 2, 1) are a draft that is often right: replayed over
the default run's trajectories, one forward would emit 2.0-2.3 solver tokens and 2.5-3.6 injector tokens
with 5 drafted (docs/benchmarks.md). A decode step feeds a row's sampled token and its draft together, and
the row keeps the drafted tokens the verification accepts.

Exactness: the draft is a point mass q = 1[d]. Accepting d with probability p(d) and, on rejection,
drawing from p with d removed (renormalised) emits each token with probability exactly p (speculative
sampling, Leviathan et al. 2023, with a deterministic draft), so what a row samples, and the logprob it
records for each token (log p of the token under the distribution it is drawn from), are those of plain
decoding; only the random stream differs. Greedy rows accept a drafted token when it is the argmax.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

NGRAMS = (3, 2, 1)
"""Suffix lengths tried, longest first."""


class NgramIndex:
    """Where each n-gram of a growing token sequence last continued: `draft` is O(1) a token."""

    def __init__(self, tokens: Sequence[int] = ()) -> None:
        self.tokens: list[int] = []
        self._next: dict[tuple[int, ...], int] = {}  # n-gram -> index of the token after its latest occurrence
        self.extend(tokens)

    def extend(self, tokens: Sequence[int]) -> None:
        seq, index = self.tokens, self._next
        for tok in tokens:
            i = len(seq)
            for n in NGRAMS:  # the n-grams ending just before `tok` now have a continuation
                if i >= n:
                    index[tuple(seq[i - n:i])] = i
            seq.append(tok)

    def draft(self, k: int) -> list[int]:
        """Up to `k` tokens that followed the latest earlier occurrence of the sequence's longest suffix (3, 2
        or 1 tokens) seen before; [] when none was."""
        seq = self.tokens
        if k <= 0:
            return []
        for n in NGRAMS:
            if len(seq) > n:
                at = self._next.get(tuple(seq[-n:]))
                if at is not None:
                    return seq[at:at + k]
        return []


def accepted(logp: object, draft: Sequence[int], uniform: Callable[[], float], greedy: bool) -> int:
    """How many leading tokens of `draft` the row keeps: token j is kept with probability p_j(d_j), where
    `logp` (>= len(draft), V) holds the log-probabilities each position samples from (after the row's
    temperature, top-k, top-p, min-p); greedy keeps it when it is the argmax. `uniform` draws from [0, 1)
    (the row's generator), once per token tested."""
    for j, tok in enumerate(draft):
        row = logp[j]  # type: ignore[index]
        if greedy:
            if int(row.argmax()) != tok:
                return j
        elif not uniform() < float(row[tok].exp()):
            return j
    return len(draft)


def draft_lengths(available: Sequence[int], keep_rates: Sequence[float], budget: int) -> list[int]:
    """How many drafted tokens each row feeds, `budget` in all: one at a time to the row whose next token
    is likeliest kept, modelling a row's j-th drafted token as kept with probability rate**j (each is tested
    only if the ones before it were kept). Rows at equal rates share the budget evenly; a row that copies
    its context (an injector writing a patch of lines it viewed) gets more than one that does not.
    `available`: each row's draft length; `keep_rates`: each row's share of drafted tokens kept so far."""
    lengths = [0] * len(available)
    heap = [(-rate, i) for i, (n, rate) in enumerate(zip(available, keep_rates)) if n > 0 and rate > 0]
    heapq.heapify(heap)
    while budget > 0 and heap:
        neg, i = heapq.heappop(heap)
        lengths[i] += 1
        budget -= 1
        if lengths[i] < available[i]:
            heapq.heappush(heap, (neg * keep_rates[i], i))
    return lengths
