"""Padding-free packing of several sequences into one row, and back (torch).

A packed micro-batch is one row of N = sum(len_i) tokens. Position ids restart at 0 for every sequence,
so RoPE sees each sequence as if alone. Attention must not cross sequences:

- CPU / SDPA: an explicit block-diagonal causal boolean mask (1, 1, N, N) (True = attend). transformers
  passes a 4D mask through unchanged. It costs N^2 bytes, fine up to ~16k tokens; long contexts belong on
  GPU.
- GPU / flash-attention: no mask; transformers detects the position-id resets and calls the varlen
  kernel (cu_seqlens), which is O(N) memory.
- A model with sliding-window layers (`sliding_window`): no mask either. One 4D mask would serve every
  layer, and a full-attention mask lets a windowed layer see too far back; transformers builds each layer
  type's block-diagonal mask from the position-id resets (`masking_utils.find_packed_sequence_indices`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from selfplay.learner.model_options import text_config

IGNORE = -100


ATTENTION_KINDS = frozenset({"full_attention", "sliding_attention"})
"""The layer types (`config.layer_types`) whose packed masks transformers builds from position ids."""


def sliding_window(config: Any) -> int | None:
    """The attention window of a model whose layers (some or all) attend only that far back, else None.

    transformers 5 lists each layer's kind in `layer_types` (Gemma 3, Qwen 2 with `use_sliding_window`);
    older classes (Mistral, Phi-3) window every layer when `sliding_window` is set. A multimodal checkpoint
    (Gemma 3 from 4B up, Mistral 3) keeps these in its text config. Other kinds of layer (Llama 4's
    chunked attention, linear attention) raise ValueError: no test here shows packing keeps them apart.
    """
    text = text_config(config)
    kinds = getattr(text, "layer_types", None)
    other = sorted(set(kinds or ()) - ATTENTION_KINDS)
    if other:
        raise ValueError(f"{type(text).__name__} has {', '.join(other)} layers; the learner packs and masks only "
                         f"{' and '.join(sorted(ATTENTION_KINDS))} layers. Train a model without them.")
    window = getattr(text, "sliding_window", None)
    if not window:
        return None
    if kinds is not None:
        return int(window) if "sliding_attention" in kinds else None
    return int(window) if getattr(text, "use_sliding_window", True) else None


def packs_by_positions() -> bool:
    """Whether this transformers separates packed sequences by their position-id resets when given no
    mask (with SDPA as with flash-attention)."""
    from transformers import masking_utils

    return hasattr(masking_utils, "find_packed_sequence_indices")


@dataclass(frozen=True)
class Packed:
    input_ids: torch.Tensor
    """(1, N) token ids of all sequences, concatenated."""
    position_ids: torch.Tensor
    """(1, N) positions, restarting at 0 per sequence."""
    targets: torch.Tensor
    """(N,) next token of the same sequence at each position, IGNORE at each sequence's last token."""
    seq_lens: tuple[int, ...]
    """Length of each packed sequence, in order."""
    attention_mask: torch.Tensor | None
    """(1, 1, N, N) block-diagonal causal mask, or None (flash-attention varlen, or a single sequence)."""

    def rows(self, per_position: torch.Tensor) -> torch.Tensor:
        """(N,) values at the positions -> (B, T_max) values aligned to the tokens they predict (0 at each
        sequence's first token and past its end); differentiable."""
        return unpack(shift_to_tokens(per_position, self.seq_lens), self.seq_lens)

    def positions(self, rows: torch.Tensor) -> torch.Tensor:
        """(B, T) values aligned to tokens -> (N,) at the positions that predict them."""
        return to_positions(rows, self.seq_lens)


def pack(sequences: Sequence[Sequence[int]], *, block_mask: bool = True, device: str | torch.device = "cpu") -> Packed:
    """Pack token-id sequences into one row."""
    if not sequences or any(len(s) == 0 for s in sequences):
        raise ValueError("pack needs at least one sequence and no empty sequence")
    lens = [len(s) for s in sequences]
    ids = torch.tensor([t for s in sequences for t in s], dtype=torch.long, device=device)
    pos = torch.cat([torch.arange(n, device=device) for n in lens])
    seq_id = torch.repeat_interleave(torch.arange(len(lens), device=device), torch.tensor(lens, device=device))
    targets = torch.full_like(ids, IGNORE)
    same_next = seq_id[1:] == seq_id[:-1]
    targets[:-1] = torch.where(same_next, ids[1:], torch.full_like(ids[1:], IGNORE))
    mask = None
    # One sequence needs no block mask: plain causal attention (SDPA's faster is_causal kernel).
    if block_mask and len(lens) > 1:
        n = ids.numel()
        causal = torch.ones(n, n, dtype=torch.bool, device=device).tril_()
        mask = (causal & (seq_id[:, None] == seq_id[None, :]))[None, None]
    return Packed(ids[None], pos[None], targets, tuple(lens), mask)


def shift_to_tokens(per_position: torch.Tensor, seq_lens: Sequence[int]) -> torch.Tensor:
    """(N,) values computed at position i for token i+1 -> (N,) values aligned to tokens (0 at starts)."""
    out = torch.cat([per_position.new_zeros(1), per_position[:-1]])
    starts = torch.tensor([0, *list(torch.tensor(seq_lens).cumsum(0)[:-1].tolist())], device=out.device)
    keep = torch.ones_like(out, dtype=torch.bool)
    keep[starts] = False
    return out * keep.to(out.dtype)


def to_positions(rows: torch.Tensor, seq_lens: Sequence[int]) -> torch.Tensor:
    """(B, T_max) values aligned to tokens -> (N,) aligned to the packed positions that predict them.

    The inverse of `unpack(shift_to_tokens(x))` off the sequence starts: position i of a sequence
    predicts token i + 1, so it gets row[i + 1]; the last position of each sequence predicts nothing
    and gets 0.
    """
    parts = [torch.cat([rows[b, 1:n], rows.new_zeros(1)]) for b, n in enumerate(seq_lens)]
    return torch.cat(parts)


def unpack(values: torch.Tensor, seq_lens: Sequence[int], pad: float = 0.0) -> torch.Tensor:
    """(N,) packed values -> (B, T_max) right-padded rows, differentiably."""
    parts = torch.split(values, list(seq_lens))
    return torch.nn.utils.rnn.pad_sequence(parts, batch_first=True, padding_value=pad)


def pad_rows(rows: Sequence[Sequence[float]], dtype: torch.dtype = torch.float32,
             device: str | torch.device = "cpu") -> torch.Tensor:
    """Ragged rows of numbers -> (B, T_max) right-padded with 0."""
    parts = [torch.tensor(list(r), dtype=dtype, device=device) for r in rows]
    return torch.nn.utils.rnn.pad_sequence(parts, batch_first=True, padding_value=0)
