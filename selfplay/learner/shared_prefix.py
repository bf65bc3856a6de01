"""Micro-batches whose sequences share a prompt: the prompt runs through the decoder once (torch).

A group's G rollouts of one task open with the same prompt: the system prompt and the task, 770-1,050
tokens of a default solver episode's 1,000-2,050. A plain pack (`packing.pack`) runs that prompt G times.
Here a cluster of sequences with a common opening (`clusters`) runs it once, with a KV cache, and each
sequence's remainder runs against that cache. The remainders attend to the prefix's keys and values, so
backward reaches the prefix's weights through them, and every token's logprob and gradient equal the plain
pack's up to float rounding (tests/selfplay/learner/test_shared_prefix.py).

The shared prefix stops one token short of the common opening, so every position predicts one token: the
prefix's last position predicts the common opening's last token, and each remainder starts with that token,
whose position predicts the sequence's first token of its own. When loss masks are given, the prefix also
stops before the first loss-bearing token of any member, so a shared position never carries two members'
losses (their advantages differ).

The engine uses this where transformers keeps the cache in training and the attention is plain causal:
SDPA or eager attention (flash-attention's is untested here), no gradient checkpointing, no sequence
parallelism, no sliding-window layers (`LearnerEngine.share_prefix`).
Each remainder is its own forward of one row, where a plain pack runs one row with a block-diagonal mask:
on CPU that mask's quadratic attention made a 3,300-token row slower than four 1,200-token ones. A
remainder's own attention to the cache is masked too, so `clusters` shares an opening only where it saves
more than that costs (`sharing_gain`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agent_scaffold.policies.hf_cache import returned_cache, with_cache
from selfplay.learner.head_transform import logit_multiplier
from selfplay.learner.logprobs import tempered
from selfplay.learner.microbatch import first_fit
from selfplay.learner.packing import IGNORE

MIN_PREFIX = 64
"""Fewest tokens a shared prefix must save to be worth its own forward (below it, the cluster's sequences
run on their own)."""

CAUSAL_ATTENTION = 2.0e-4
"""What a sequence of n tokens run whole costs in attention, per n squared, in units of one token's
projections and MLP (forward and backward): SDPA's causal kernel skips the masked half. Measured for
SmolLM2-135M in fp32 on the AVX2-only 2-core CPU (`scripts/bench_attention_cost.py`, 1.95e-4)."""

MASKED_ATTENTION = 4.5e-4
"""What a remainder of r tokens against a cache of p costs in attention, per r x (p + r), in the same
units (4.54e-4 measured with it): with a cache, transformers hands SDPA an explicit mask, and the kernel
computes the whole rectangle. So sharing a prefix that is short next to its remainders costs more than it
saves (`sharing_gain`): a role's 440-token system prompt ahead of two 1,400-token demonstrations does not
pay, a group's 900-token prompt ahead of its attempts' 600-token remainders does."""


@dataclass(frozen=True)
class Segment:
    """A cluster of a micro-batch's sequences: the prefix they share, run once, and each one's remainder."""

    prefix: tuple[int, ...]
    """Token ids run once; () when the segment is one sequence run whole."""
    members: tuple[int, ...]
    """Indices of the sequences (in the micro-batch) whose remainders follow, in order."""


def common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of `a` and `b`."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _shareable(seq: Sequence[int], mask: Sequence[int] | None) -> int:
    """How many leading tokens of `seq` may be shared: all of them, or those before its first loss token."""
    if mask is None:
        return len(seq)
    for i, m in enumerate(mask):
        if m:
            return i
    return len(seq)


def whole_cost(n: int) -> float:
    """Cost of running a sequence of `n` tokens on its own (`CAUSAL_ATTENTION`'s units)."""
    return n + CAUSAL_ATTENTION * n * n


def sharing_gain(lengths: Sequence[int], prefix: int) -> float:
    """What running `prefix` once and each sequence's remainder against it saves over running the
    sequences (of `lengths`) whole, in `whole_cost`'s units; negative when it costs more."""
    remainders = sum(n - prefix + MASKED_ATTENTION * (n - prefix) * n for n in lengths)
    return sum(whole_cost(n) for n in lengths) - whole_cost(prefix) - remainders


def clusters(sequences: Sequence[Sequence[int]], loss_masks: Sequence[Sequence[int]] | None = None,
             min_prefix: int = MIN_PREFIX) -> list[Segment]:
    """The sequences as segments that save the most (`sharing_gain`): runs of the sequences in sorted
    order whose common opening (before any loss token, when `loss_masks` are given), less its last token,
    is over `min_prefix` tokens and saves more than it costs, the rest one per segment. Every index
    appears once; deterministic.

    Sorted, a set's common opening is that of its neighbours', so the best split into runs is a dynamic
    programme over the sorted order. It matters: a group's attempts share their whole prompt, attempts at
    other tasks only the system prompt, and one run over two groups would share only that."""
    order = sorted(range(len(sequences)), key=lambda i: (tuple(sequences[i]), i))
    n = len(order)
    limit = [_shareable(sequences[i], loss_masks[i] if loss_masks else None) for i in order]
    # common[k]: the opening sorted sequences k and k + 1 may share
    common = [min(limit[k], limit[k + 1], common_length(sequences[order[k]], sequences[order[k + 1]]))
              for k in range(n - 1)]
    lens = [len(sequences[i]) for i in order]
    best = [0.0] * (n + 1)  # best[j]: most saved by segments of the first j sorted sequences
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        best[j], cut[j] = best[j - 1], j - 1  # sequence j - 1 alone
        shared = None
        for i in range(j - 2, -1, -1):  # segment order[i:j]
            shared = common[i] if shared is None else min(shared, common[i])
            prefix = shared - 1
            if prefix <= min_prefix:
                break
            gain = sharing_gain(lens[i:j], prefix)
            saved = best[i] + gain
            if gain > 0 and saved > best[j]:
                best[j], cut[j] = saved, i
    segments: list[Segment] = []
    j = n
    while j > 0:
        i = cut[j]
        members = tuple(order[i:j])
        prefix = () if len(members) == 1 else tuple(sequences[members[0]][: min(common[i:j - 1]) - 1])
        segments.append(Segment(prefix, members))
        j = i
    return segments[::-1]


def segment_cost(lengths: Sequence[int], prefix: int) -> int:
    """Tokens a segment runs: its prefix once, and each member's remainder."""
    return prefix + sum(n - prefix for n in lengths)


def plan_shared_microbatches(sequences: Sequence[Sequence[int]], token_budget: int,
                             loss_masks: Sequence[Sequence[int]] | None = None,
                             min_prefix: int = MIN_PREFIX) -> list[list[int]]:
    """Indices of `sequences` grouped into micro-batches of at most `token_budget` tokens as run with
    shared prefixes (a sequence longer than the budget gets one of its own); every index appears once.

    A cluster's members are taken longest first into runs that fit the budget, each run paying the prefix
    once; the runs are then binned first-fit, longest first, as `microbatch.plan_microbatches` bins
    sequences. `pack_shared` clusters each micro-batch again and finds the same prefixes."""
    if token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    runs: list[tuple[int, list[int]]] = []
    for seg in clusters(sequences, loss_masks, min_prefix):
        p = len(seg.prefix)
        members = sorted(seg.members, key=lambda i: (-len(sequences[i]), i))
        cur: list[int] = []
        for i in members:
            if cur and segment_cost([len(sequences[m]) for m in cur + [i]], p) > token_budget:
                runs.append((segment_cost([len(sequences[m]) for m in cur], p), cur))
                cur = []
            cur.append(i)
        runs.append((segment_cost([len(sequences[m]) for m in cur], p), cur))
    return first_fit(runs, token_budget)


@dataclass(frozen=True)
class SharedPack:
    """A micro-batch laid out as one row of positions: each segment's prefix, then its members' remainders.

    Position i of the row predicts `targets[i]`; `index[b, k]` is the position that predicts token k of
    sequence b (-1 for its first token and past its end)."""

    segments: tuple[Segment, ...]
    sequences: tuple[tuple[int, ...], ...]
    targets: torch.Tensor
    """(N,) the token each position predicts; IGNORE at each remainder's (or whole sequence's) last position."""
    index: torch.Tensor
    """(B, T_max) long: the position predicting each token of each sequence."""
    seq_lens: tuple[int, ...]
    """Length of each sequence, in micro-batch order."""

    def rows(self, per_position: torch.Tensor) -> torch.Tensor:
        """(N,) values at the positions -> (B, T_max) values aligned to the tokens they predict (0 at each
        sequence's first token and past its end); differentiable."""
        found = self.index >= 0
        picked = per_position[self.index.clamp(min=0)]
        return picked * found.to(picked.dtype)

    def positions(self, rows: torch.Tensor) -> torch.Tensor:
        """(B, T) values aligned to tokens -> (N,) at the positions that predict them. A prefix position
        predicts the same token for every member; it takes the last member's value (the callers' values
        there are loss-free and equal: masks, weights, logprobs of the same context)."""
        out = rows.new_zeros(self.targets.numel())
        found = self.index >= 0
        width = min(rows.shape[1], self.index.shape[1])
        sel = found[:, :width]
        out[self.index[:, :width][sel]] = rows[:, :width][sel]
        return out


def pack_shared(sequences: Sequence[Sequence[int]], loss_masks: Sequence[Sequence[int]] | None = None, *,
                min_prefix: int = MIN_PREFIX, device: str | torch.device = "cpu") -> SharedPack:
    """Lay out a micro-batch by its shared prefixes (`clusters`)."""
    if not sequences or any(len(s) == 0 for s in sequences):
        raise ValueError("pack_shared needs at least one sequence and no empty sequence")
    segments = clusters(sequences, loss_masks, min_prefix)
    lens = [len(s) for s in sequences]
    index = torch.full((len(sequences), max(lens)), -1, dtype=torch.long)
    targets: list[int] = []
    for seg in segments:
        p = len(seg.prefix)
        base = len(targets)
        if p:
            # the prefix's positions predict its next tokens, the last one the common opening's last token
            targets += [*seg.prefix[1:], sequences[seg.members[0]][p]]
        for b in seg.members:
            seq = sequences[b]
            start = len(targets)
            rest = seq[p:]
            targets += [*rest[1:], IGNORE]
            # token k (k >= 1) is predicted by the position of token k - 1
            pred = [base + k - 1 if k - 1 < p else start + (k - 1 - p) for k in range(1, len(seq))]
            index[b, 1: len(seq)] = torch.tensor(pred, dtype=torch.long)
    return SharedPack(tuple(segments), tuple(tuple(s) for s in sequences),
                      torch.tensor(targets, dtype=torch.long, device=device), index.to(device), tuple(lens))


def _fresh_cache(layers: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    """A cache holding `layers`' keys and values, which a remainder's forward extends without changing them
    (built as the sampler's decode batch builds one from a cached prompt)."""
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=layers)


def shared_hidden(model: Any, packed: SharedPack, temperature: float = 1.0) -> torch.Tensor:
    """Final hidden states (N, H) at `packed`'s positions, scaled like `logprobs.decoder_hidden`'s: each
    prefix runs once, each remainder against a copy of its prefix's cache."""
    base = model.base_model
    device = packed.targets.device
    pieces: list[torch.Tensor] = []
    for seg in packed.segments:
        p = len(seg.prefix)
        if not p:
            ids = torch.tensor([packed.sequences[seg.members[0]]], dtype=torch.long, device=device)
            pieces.append(base(input_ids=ids, use_cache=False).last_hidden_state[0])
            continue
        out = base(input_ids=torch.tensor([seg.prefix], dtype=torch.long, device=device), use_cache=True)
        layers = [(layer.keys, layer.values) for layer in returned_cache(out).layers]
        pieces.append(out.last_hidden_state[0])
        for b in seg.members:
            rest = packed.sequences[b][p:]
            pos = torch.arange(p, p + len(rest), device=device)
            o = base(input_ids=torch.tensor([rest], dtype=torch.long, device=device), position_ids=pos[None],
                     cache_position=pos, use_cache=True, **with_cache(base, _fresh_cache(layers)))
            pieces.append(o.last_hidden_state[0])
    return tempered(torch.cat(pieces), temperature, logit_multiplier(model.config))
