"""Ulysses sequence parallelism (DeepSpeed ALST): one packed row split across the ranks of an SP group.

Each rank runs the decoder on a contiguous shard of the row's positions; DeepSpeed's
`UlyssesSPAttentionHF` (registered in place of the attention function) all-to-alls heads and sequence
so attention sees the whole row. The head's logprobs of the shards are gathered so every rank computes
the same loss over the whole row.

Gradient of the gather: every rank computes the identical loss from the identical gathered logprobs,
so the upstream gradient is the same on all ranks, and a rank's shard gets its own slice of it.
`torch.distributed.nn.functional.all_gather` would instead *sum* the slices over ranks (sp times the
gradient), since it assumes each rank's loss is a different term.

Attention across packed sequences: the shards carry the row's position ids, which DeepSpeed gathers
for the attention kernel. flash-attention turns position-id resets into varlen boundaries; SDPA has no
such path (Ulysses drops 4D masks), so with SDPA the engine gives each sequence its own micro-batch.
"""

from __future__ import annotations

from typing import Any

import torch

from selfplay.learner.head_transform import logit_multiplier
from selfplay.learner.logprobs import chunked_logprobs, tempered
from selfplay.learner.packing import IGNORE, Packed, shift_to_tokens


class _GatherShards(torch.autograd.Function):
    """All-gather of equal-size shards along dim 0; backward keeps this rank's slice of the gradient."""

    @staticmethod
    def forward(ctx: Any, shard: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.rank, ctx.size = torch.distributed.get_rank(group), shard.shape[0]
        parts = [torch.empty_like(shard) for _ in range(torch.distributed.get_world_size(group))]
        torch.distributed.all_gather(parts, shard.contiguous(), group=group)
        return torch.cat(parts)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, None]:
        return grad[ctx.rank * ctx.size:(ctx.rank + 1) * ctx.size], None


def gather_shards(shard: torch.Tensor, group: Any) -> torch.Tensor:
    """Concatenate every rank's `shard` (rank order); see the module docstring for its gradient."""
    return _GatherShards.apply(shard, group)


def shard_bounds(n: int, sp: int, rank: int) -> tuple[int, int, int]:
    """(pad, start, end): the row is padded by `pad` to a multiple of `sp`; this rank owns [start, end)."""
    pad = (-n) % sp
    size = (n + pad) // sp
    return pad, rank * size, (rank + 1) * size


def sp_token_logprobs(model: Any, packed: Packed, group: Any, chunk: int,
                      temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Like `logprobs.packed_token_logprobs`, with the row's positions split across `group`'s ranks:
    (N,) token logprobs (differentiable) and entropies (detached), identical on every rank."""
    sp, rank = torch.distributed.get_world_size(group), torch.distributed.get_rank(group)
    n = packed.input_ids.shape[1]
    pad, start, end = shard_bounds(n, sp, rank)
    ids = torch.nn.functional.pad(packed.input_ids, (0, pad))
    # Padding continues the last sequence's positions, so a causal kernel sees one longer sequence and
    # the real tokens never attend to it (it comes last); its targets are ignored.
    last = packed.position_ids[0, -1]
    pos = torch.cat([packed.position_ids, last + 1 + torch.arange(pad, device=ids.device)[None]], dim=1)
    tgt = torch.nn.functional.pad(packed.targets, (0, pad), value=IGNORE)
    hidden = model.base_model(input_ids=ids[:, start:end], position_ids=pos[:, start:end],
                              use_cache=False).last_hidden_state[0]
    hidden = tempered(hidden, temperature, logit_multiplier(model.config))
    lp, ent = chunked_logprobs(model.get_output_embeddings(), hidden, tgt[start:end], chunk)
    lp = gather_shards(lp, group)[:n]
    ent = gather_shards(ent.detach(), group)[:n]
    return shift_to_tokens(lp, packed.seq_lens), shift_to_tokens(ent, packed.seq_lens)
