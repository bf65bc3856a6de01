"""`PrefixKVStore`: KV caches of finished generations, kept so the next turn prefills only its new tokens.

An episode's context only grows (`Transcript`): turn k+1's prompt is turn k's prompt, its sampled ids and an
observation delta. The key/value tensors of every position depend only on the tokens up to it, so the KV of
the longest stored token sequence sharing a prefix with a new prompt can be reused for that shared prefix,
and only the rest is prefilled. Solver attempts of one task (G prompts that are equal) share the prompt's KV
the same way.

Entries are tagged with the weights version that computed them; a lookup under another version finds
nothing (stale KV would silently sample from the old policy). Memory is capped: least recently used entries
go first. An entry whose tokens are a prefix of a newer entry's is dropped when that one is stored (the newer
one serves every lookup it would).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KVEntry:
    """The KV cache of `tokens` under weights `version`: per layer (keys, values), each (1, H, len(tokens), D)."""

    tokens: tuple[int, ...]
    layers: tuple[tuple[Any, Any], ...]
    version: int
    nbytes: int


@dataclass(frozen=True)
class KVHit:
    """A lookup's answer: the first `length` positions of `entry` are the new prompt's prefix."""

    entry: KVEntry
    length: int

    def layers(self) -> list[tuple[Any, Any]]:
        """Per layer (keys, values) cut to `length` positions (views: entries are never written in place)."""
        n = self.length
        return [(k[:, :, :n], v[:, :, :n]) for k, v in self.entry.layers]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    if list(a[:n]) == list(b[:n]):  # the common case (a turn extends the last one), at C speed
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]: bisect on slice equality
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if list(a[:mid]) == list(b[:mid]):
            lo = mid
        else:
            hi = mid
    return lo


class PrefixKVStore:
    """A thread-safe LRU of `KVEntry`s under `max_bytes` (0 keeps nothing)."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[int, KVEntry] = OrderedDict()  # id -> entry, least recently used first
        self._next_id = 0
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        """Lookups that found a reusable prefix."""
        self.lookups = 0
        """Lookups so far."""
        self.reused_tokens = 0
        """Prompt positions served from stored KV instead of a prefill."""

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, prompt: Sequence[int], version: int, min_tokens: int = 1) -> KVHit | None:
        """The entry sharing the longest prefix with `prompt` (at most len(prompt) - 1 positions, so at least
        one token is left to prefill and give the next token's logits); None below `min_tokens`."""
        with self._lock:
            self.lookups += 1
            best: tuple[int, int] | None = None  # (length, id)
            for key, entry in list(self._entries.items()):
                if entry.version != version:  # weights changed since: never reused
                    self._drop(key)
                    continue
                n = min(common_prefix(entry.tokens, prompt), len(prompt) - 1)
                if n >= min_tokens and (best is None or n > best[0]):
                    best = (n, key)
            if best is None:
                return None
            self._entries.move_to_end(best[1])
            self.hits += 1
            self.reused_tokens += best[0]
            return KVHit(self._entries[best[1]], best[0])

    def put(self, tokens: Sequence[int], layers: Sequence[tuple[Any, Any]], version: int) -> None:
        """Keep `layers` (per layer (keys, values) of shape (1, H, len(tokens), D), not written afterwards)."""
        if self.max_bytes == 0 or not tokens:
            return
        nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if nbytes > self.max_bytes:
            log.debug("a %d-token KV cache (%d bytes) exceeds the store's cap of %d bytes; not kept",
                      len(tokens), nbytes, self.max_bytes)
            return
        entry = KVEntry(tuple(tokens), tuple((k, v) for k, v in layers), int(version), nbytes)
        with self._lock:
            for key, old in list(self._entries.items()):
                if old.version != version or (len(old.tokens) <= len(entry.tokens)
                                              and entry.tokens[:len(old.tokens)] == old.tokens):
                    self._drop(key)  # stale, or subsumed by the new entry
            self._entries[self._next_id] = entry
            self._next_id += 1
            self._bytes += nbytes
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _drop(self, key: int) -> None:
        self._bytes -= self._entries.pop(key).nbytes
