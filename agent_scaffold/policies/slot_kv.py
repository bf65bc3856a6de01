"""`SlotKV`: the KV cache of a running decode batch, in buffers that rows join and leave without the batch
being copied.

Per layer, one keys and one values buffer of shape (slots, H, capacity, D). Live rows fill slots 0..B-1,
and the batch's columns are [start, end): left-padded, so every row's newest position is at end - 1 and a
decode step writes column `end` for all rows at once. A row joins by being copied into the next free slot
(its own KV only); a row leaves by the last row being copied into its slot (one row); padding that every
remaining row shares is dropped by moving `start`. The whole batch is copied only when it outgrows the
buffers, with headroom, so a few times per batch.

Before this, a join concatenated the whole batch cache and a leave indexed it, each followed by a
re-buffer: 2-3 copies of the whole batch KV per event, ~60-75 ms at 10 rows of ~1.3k tokens on a 2-core
box, once per turn of every episode.

Columns outside a row's own positions are masked out, but attention still reads them (a masked score is
added to -inf and its value weighted by 0), so they must hold finite numbers: the buffers are allocated
uninitialised and every column that becomes part of the batch's view is either written or zeroed first.
A step that reads every column left of `end` (`OrtStep`) needs `zeroed=True`: the columns left of
`start` are zeroed whenever buffers are allocated (the ones between `start` and a row's first column
already are), and the headroom right of `end`, which no step reads, is left as allocated.
"""

from __future__ import annotations

import functools
from typing import Any

LEFT_ROOM = 256
"""Free columns left of `start` after a reallocation, for joining rows longer than the batch's width."""


@functools.cache
def _slot_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class SlotLayer(DynamicLayer):
        """A transformers cache layer viewing a batch's buffers [:rows, :, start:end]; `update` writes the new
        columns in place at `end` (the caller made room for them)."""

        def __init__(self, kbuf: Any, vbuf: Any, rows: int, start: int, end: int) -> None:
            super().__init__()
            self.kbuf, self.vbuf, self.rows, self.start, self.end = kbuf, vbuf, rows, start, end
            self.device, self.is_initialized = kbuf.device, True
            self.keys, self.values = kbuf[:rows, :, start:end], vbuf[:rows, :, start:end]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            rows, end = self.rows, self.end + key_states.shape[-2]
            self.kbuf[:rows, :, self.end:end] = key_states
            self.vbuf[:rows, :, self.end:end] = value_states
            self.end = end
            self.keys, self.values = self.kbuf[:rows, :, self.start:end], self.vbuf[:rows, :, self.start:end]
            return self.keys, self.values

    return SlotLayer


class SlotKV:
    """The batch's KV: rows in slots 0..`rows`-1, columns [`start`, `end`). Not thread-safe (the batch's
    scheduler thread owns it)."""

    def __init__(self, torch: Any, zeroed: bool = False) -> None:
        """`zeroed`: keep every column left of `end` finite, the ones left of `start` included."""
        self.torch = torch
        self.zeroed = zeroed
        self.kv: list[tuple[Any, Any]] = []  # per layer (keys, values), each (slots, H, capacity, D)
        self.mask: Any = None  # (slots, capacity) long: 1 where a row has a real position
        self.rows = 0
        self.start = self.end = 0
        self.first: list[int] = []  # per live slot: the column of its first real position

    @property
    def width(self) -> int:
        return self.end - self.start

    def fill(self) -> float:
        """The share of the rows' attended span, from the earliest row's first column to `end`, that
        holds each row's own columns: 1.0 when the rows are as long as each other, low when one long row
        pads short ones (the cost `attention_segments` recovers)."""
        if not self.first:
            return 1.0
        span = self.end - min(self.first)
        return sum(self.end - f for f in self.first) / (len(self.first) * span) if span else 1.0

    def join(self, layers: list[tuple[Any, Any]], pads: list[int]) -> None:
        """Add rows from their own left-padded KV (b, H, W', D) per layer; row i's real positions are its
        last W' - pads[i] columns. They go in slots rows..rows+b-1, in order."""
        width_in = layers[0][0].shape[2]
        lengths = [width_in - p for p in pads]
        need = max(lengths)
        if not self.kv:
            self._allocate(layers, len(pads), need)
        if need > self.width:  # a longer row: the batch's columns extend to the left
            if self.end - need < 0:
                self._reallocate(self.rows + len(pads), need)
            old, new = self.start, self.end - need
            for k, v in self.kv:
                k[:self.rows, :, new:old] = 0
                v[:self.rows, :, new:old] = 0
            self.mask[:self.rows, new:old] = 0
            self.start = new
        if self.rows + len(pads) > self.mask.shape[0]:
            self._reallocate(self.rows + len(pads), self.width)
        for i, n in enumerate(lengths):
            slot, first = self.rows + i, self.end - n
            for (k, v), (nk, nv) in zip(self.kv, layers):
                k[slot, :, self.start:first] = 0
                v[slot, :, self.start:first] = 0
                k[slot, :, first:self.end] = nk[i, :, width_in - n:]
                v[slot, :, first:self.end] = nv[i, :, width_in - n:]
            self.mask[slot, self.start:first] = 0
            self.mask[slot, first:self.end] = 1
            self.first.append(first)
        self.rows += len(pads)

    def leave(self, slots: list[int]) -> list[int]:
        """Drop the rows in `slots`; the last rows move into the freed slots. Returns the old slot of each
        row left, in its new slot order."""
        gone = set(slots)
        order = list(range(self.rows))
        new_rows = self.rows - len(gone)
        movers = [s for s in range(self.rows - 1, new_rows - 1, -1) if s not in gone]  # live rows past the end
        for hole in sorted(s for s in gone if s < new_rows):
            src = movers.pop()
            first = self.first[src]
            for k, v in self.kv:
                k[hole, :, first:self.end] = k[src, :, first:self.end]
                v[hole, :, first:self.end] = v[src, :, first:self.end]
            self.mask[hole, self.start:self.end] = self.mask[src, self.start:self.end]
            self.first[hole], order[hole] = first, src
        self.rows = new_rows
        del self.first[new_rows:]
        if not self.rows:
            self.kv, self.mask, self.start, self.end = [], None, 0, 0
            return []
        self.start = min(self.first)  # padding that every row left shares is no longer the batch's
        return order[:new_rows]

    def row_kv(self, slot: int, length: int | None = None) -> list[tuple[Any, Any]]:
        """A copy of one row's KV, per layer (1, H, its length, D): its first `length` positions (None: all).
        Columns masked out inside the row (a lookup step's rejected drafts) are left out."""
        first = self.first[slot]
        live = self.mask[slot, first:self.end]
        if bool(live.all()):
            stop = self.end if length is None else first + length
            return [(k[slot:slot + 1, :, first:stop].clone(), v[slot:slot + 1, :, first:stop].clone())
                    for k, v in self.kv]
        cols = live.nonzero().squeeze(-1)[:length] + first
        return [(k[slot:slot + 1, :, cols], v[slot:slot + 1, :, cols]) for k, v in self.kv]  # indexing copies

    def step_mask(self, columns: int = 1) -> Any:
        """Make room for a decode step's `columns` columns from `end` (one token a row, or a lookup step's
        sampled token and drafts); the attention mask (B, W + columns) of that step. A step writes every
        layer's keys and values there (through `step_inputs`' cache, or directly), then calls `advanced`."""
        if not 1 <= columns <= _room(0):
            raise ValueError(f"a decode step feeds 1..{_room(0)} columns a row, not {columns}")
        if self.end + columns > self.mask.shape[1]:
            self._reallocate(self.rows, self.width)
        self.mask[:self.rows, self.end:self.end + columns] = 1
        return self.mask[:self.rows, self.start:self.end + columns]

    def step_attend(self, columns: int) -> Any:
        """`step_mask(columns)` as the (B, 1, T, W + T) bool mask of a step that feeds T = `columns` positions a
        row: each new position attends to the row's live columns and, causally, to the new ones."""
        torch = self.torch
        mask = self.step_mask(columns).bool()  # (B, W + T)
        old = mask.shape[1] - columns
        causal = torch.ones(columns, columns, dtype=torch.bool, device=mask.device).tril()
        return torch.cat([mask[:, None, :old].expand(-1, columns, -1),
                          causal[None].expand(self.rows, -1, -1)], -1)[:, None]

    def step_inputs(self) -> tuple[Any, Any]:
        """A transformers cache over the batch and the attention mask (B, W + 1), for one decode step of the
        HF forward; call `advanced` after it."""
        mask = self.step_mask()
        from transformers import DynamicCache

        cache = DynamicCache()
        layer = _slot_layer_class()
        cache.layers = [layer(k, v, self.rows, self.start, self.end) for k, v in self.kv]
        return cache, mask

    def advanced(self, columns: int = 1) -> None:
        """The decode step wrote `columns` columns from `end` in every row."""
        self.end += columns

    def drop_after(self, end: int) -> None:
        """Give back the columns from `end` on, which no row keeps (a lookup step's trailing drafts that every
        row rejected); the next step writes over them."""
        if not self.start <= end <= self.end:
            raise ValueError(f"drop_after({end}) outside the batch's columns [{self.start}, {self.end}]")
        self.end = end

    def _allocate(self, layers: list[tuple[Any, Any]], rows: int, width: int) -> None:
        """Empty buffers shaped like `layers`' for `rows` rows of `width` columns, `start` = `end` where a
        join of that width leaves `LEFT_ROOM` columns on the left."""
        torch, like = self.torch, layers[0][0]
        slots, capacity = _slots(rows), LEFT_ROOM + width + _room(width)
        shape = (slots, like.shape[1], capacity, like.shape[3])
        self.kv = [(torch.empty(shape, dtype=like.dtype, device=like.device),
                    torch.empty(shape, dtype=like.dtype, device=like.device)) for _ in layers]
        self.mask = torch.zeros(slots, capacity, dtype=torch.long, device=like.device)
        self.start = self.end = LEFT_ROOM + width
        self._zero_left()

    def _reallocate(self, rows: int, width: int) -> None:
        """New buffers for `rows` slots and `width` columns with headroom, the live rows copied over and
        `LEFT_ROOM` columns left of the widest of them."""
        torch = self.torch
        width = max(width, self.width)
        begin = LEFT_ROOM + width - self.width  # data starts where a row of `width` would
        slots, capacity = _slots(max(rows, self.rows)), begin + self.width + _room(width)
        old_k = self.kv[0][0]
        shape = (slots, old_k.shape[1], capacity, old_k.shape[3])
        kv = []
        for k, v in self.kv:
            nk, nv = torch.empty(shape, dtype=k.dtype, device=k.device), torch.empty(shape, dtype=v.dtype, device=v.device)
            nk[:self.rows, :, begin:begin + self.width] = k[:self.rows, :, self.start:self.end]
            nv[:self.rows, :, begin:begin + self.width] = v[:self.rows, :, self.start:self.end]
            kv.append((nk, nv))
        mask = torch.zeros(slots, capacity, dtype=torch.long, device=self.mask.device)
        mask[:self.rows, begin:begin + self.width] = self.mask[:self.rows, self.start:self.end]
        shift = begin - self.start
        self.kv, self.mask = kv, mask
        self.first = [f + shift for f in self.first]
        self.start, self.end = begin, begin + self.width
        self._zero_left()

    def _zero_left(self) -> None:
        """With `zeroed`, zero every slot's columns left of `start` in fresh buffers."""
        if self.zeroed:
            for k, v in self.kv:
                k[:, :, :self.start] = 0
                v[:, :, :self.start] = 0


def _slots(rows: int) -> int:
    """Slots for `rows` rows: a quarter more (at least 4), so the batch is copied a few times as it grows."""
    return rows + max(4, rows // 4)


def _room(width: int) -> int:
    """Free columns right of `width` columns: a quarter more (at least 64), for the same reason."""
    return max(64, width // 4)
