"""`DecodeBatch`: the running batch of an HF model, which rows join and leave between decode steps.

Continuous batching on one model: `admit` prefills a new row alone (batch 1, so its prompt's logits are
exactly what it would get alone) and merges its KV into the running, left-padded batch cache; `step`
samples one token for every row, lets finished rows leave at once (their cache rows are dropped), and runs
one batched forward for the rows that remain. A row never waits for the batch's longest row, and a request
arriving mid-batch starts at the next step.

Each row keeps its own `torch.Generator`, stop ids, stop strings and max_new_tokens, so its sample is the one
it gets alone; batch shape and padding move logits by float rounding only (~1e-5 in logprobs in fp32).
Position ids count each row's own tokens, so left padding shifts no row's RoPE positions.

With a `PrefixKVStore`, a row's prefill starts from the stored KV of the longest prefix it shares with an
earlier generation (the previous turn of its episode, or a group mate's prompt) and computes only the rest;
a finished row's KV (prompt + sampled ids) is stored for the episode's next turn.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from agent_scaffold.policies.kv_store import PrefixKVStore, common_prefix
from agent_scaffold.policies.sampling import import_torch, process_logits
from agent_scaffold.policy import Completion, SamplingParams

log = logging.getLogger(__name__)


def _growing_cache(layers: list[tuple[Any, Any]]) -> Any:
    """A transformers `DynamicCache` holding `layers` (per layer (keys, values), (B, H, W, D)) without a copy,
    whose layers append in place into spare capacity instead of re-concatenating the whole cache per step."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """`DynamicLayer` whose keys/values are views of a buffer with room to grow: a decode step writes
        one column in place. (DynamicLayer.update copies all W columns per step: at batch 8 and 1k tokens
        that is ~370 MB of copying per token for SmolLM2, as much memory traffic as the weights.)"""

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            import torch

            n, t = self.keys.shape[-2], key_states.shape[-2]
            buf = getattr(self, "_buf", None)
            if buf is None or n + t > buf[0].shape[-2]:
                cap = (n + t) + max(64, (n + t) // 4)
                shape = (*self.keys.shape[:-2], cap, self.keys.shape[-1])
                buf = (torch.empty(shape, dtype=self.keys.dtype, device=self.keys.device),
                       torch.empty(shape, dtype=self.values.dtype, device=self.values.device))
                buf[0][..., :n, :] = self.keys
                buf[1][..., :n, :] = self.values
                self._buf = buf
            buf[0][..., n:n + t, :] = key_states
            buf[1][..., n:n + t, :] = value_states
            self.keys, self.values = buf[0][..., :n + t, :], buf[1][..., :n + t, :]
            return self.keys, self.values

    out = []
    for k, v in layers:
        layer = GrowingLayer()
        layer.lazy_initialization(k, v)
        layer.keys, layer.values = k, v
        out.append(layer)
    cache = DynamicCache()
    cache.layers = out
    return cache


@dataclass
class _Row:
    """One sequence being sampled (mutable decode state)."""

    tag: Any
    prompt: list[int]
    params: SamplingParams
    gen: Any  # torch.Generator
    stop_ids: frozenset[int]
    seen: Any  # (n,) context ids, for the repetition penalty
    version: int
    pad: int = 0  # leading padding columns of this row in the batch cache
    ids: list[int] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)  # decode batch size when each token was sampled
    finish: str = "length"
    prefill_tokens: int = 0  # prompt positions computed (not served by the store)
    prefill_s: float = 0.0
    decode_s: float = 0.0  # share of each decode step: its seconds / the rows in it


class DecodeBatch:
    """Rows of one `HFPolicy` decoding together. Not thread-safe: one scheduler thread drives it while it holds
    the policy's lock (weights never change under a running batch)."""

    def __init__(self, policy: Any, store: PrefixKVStore | None = None) -> None:
        self.torch = import_torch()
        self.policy, self.store = policy, store
        self.rows: list[_Row] = []  # in batch-slot order
        self.kv: list[tuple[Any, Any]] | None = None  # per layer (keys, values), each (B, H, W, D)
        self.mask: Any = None  # (B, W): 1 where a row has a real position
        self.logits: Any = None  # (B, V): each row's next-token logits
        self._cache: Any = None  # the model's cache object of `kv`, while no row has joined or left since
        self.prefilled_tokens = 0
        """Prompt positions computed by prefills (the rest came from the store)."""

    def __len__(self) -> int:
        return len(self.rows)

    # --- joining ---------------------------------------------------------------------------------------

    def admit(self, prompt: list[int], params: SamplingParams, seed: int, tag: Any) -> None:
        """Prefill `prompt` (reusing stored KV of a shared prefix) and add it as a row; sampled from the next `step`."""
        self.admit_many([(prompt, params, seed, tag)])

    def admit_many(self, requests: list[tuple[list[int], SamplingParams, int, Any]]) -> None:
        """Admit (prompt, params, seed, tag) rows. Prompts with no stored prefix are prefilled together in one
        left-padded forward (on CPU 1.4-1.6x faster than one by one at 4-8 rows of 400 tokens); a prompt that
        shares most of itself with one of those waits for it and then reuses its KV from the store (G
        attempts of one task); the rest prefill only their new tokens, one by one. If the batched forward
        raises, no row of it has joined."""
        version = self.policy.version
        fresh: list[tuple] = []
        later: list[tuple] = []
        for req in requests:
            prompt = req[0]
            if self.store is not None and fresh and any(
                    common_prefix(f[0], prompt) * 2 >= len(prompt) for f in fresh):
                later.append(req)  # its group mate's prefill will be in the store
                continue
            hit = self.store.lookup(prompt, version) if self.store is not None else None
            if hit is None:
                fresh.append(req)
            else:
                self._prefill_one(req, hit)
        if fresh:
            self._prefill_fresh(fresh)
        for req in later:
            hit = self.store.lookup(req[0], version) if self.store is not None else None
            self._prefill_one(req, hit)

    def _new_row(self, req: tuple, version: int) -> _Row:
        torch, dev = self.torch, self.policy.device
        prompt, params, seed, tag = req
        return _Row(tag, list(prompt), params, torch.Generator(device=dev).manual_seed(seed),
                    self.policy.eos_ids | frozenset(params.stop_token_ids),
                    torch.tensor(prompt, dtype=torch.long, device=dev), version)

    def _prefill_one(self, req: tuple, hit: Any) -> None:
        """Prefill one prompt after the stored KV of its prefix (`hit`, or none)."""
        from transformers import DynamicCache

        torch, policy, prompt = self.torch, self.policy, req[0]
        version = policy.version
        start = hit.length if hit is not None else 0
        cache = DynamicCache(ddp_cache_data=hit.layers()) if hit is not None else None  # None: the model's own
        ids = torch.tensor([prompt[start:]], device=policy.device)  # (1, L - start)
        pos = torch.arange(start, len(prompt), device=policy.device)[None]  # (1, L - start)
        t0 = time.perf_counter()
        out = self._model(input_ids=ids, position_ids=pos, past_key_values=cache, use_cache=True, logits_to_keep=1)
        seconds = time.perf_counter() - t0
        self.prefilled_tokens += len(prompt) - start
        layers = [(layer.keys, layer.values) for layer in out.past_key_values.layers]  # (1, H, L, D) each
        if self.store is not None:
            self.store.put(prompt, layers, version)  # group mates with the same prompt reuse it
        mask = torch.ones(1, len(prompt), dtype=torch.long, device=policy.device)
        row = self._new_row(req, version)
        row.prefill_tokens, row.prefill_s = len(prompt) - start, seconds
        self._merge([row], layers, mask, out.logits[:, -1])

    def _prefill_fresh(self, reqs: list[tuple]) -> None:
        """One left-padded forward over whole prompts; position ids count each row's own tokens."""
        torch, policy = self.torch, self.policy
        dev, version = policy.device, policy.version
        prompts = [r[0] for r in reqs]
        width = max(len(p) for p in prompts)
        pad_id = policy.tokenizer.pad_token_id or 0  # any id: padded positions are masked out
        ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts], device=dev)  # (b, W)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=dev)  # (b, W)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)  # (b, W)
        t0 = time.perf_counter()
        out = self._model(input_ids=ids, attention_mask=mask if len(reqs) > 1 else None, position_ids=pos,
                          use_cache=True, logits_to_keep=1)
        seconds = time.perf_counter() - t0
        total = sum(len(p) for p in prompts)
        self.prefilled_tokens += total
        layers = [(layer.keys, layer.values) for layer in out.past_key_values.layers]  # (b, H, W, D) each
        if self.store is not None:
            for i, p in enumerate(prompts):  # cloned: a view would keep the whole padded batch alive
                self.store.put(p, [(k[i:i + 1, :, width - len(p):].clone(), v[i:i + 1, :, width - len(p):].clone())
                                   for k, v in layers], version)
        rows = [self._new_row(r, version) for r in reqs]
        for row, p in zip(rows, prompts):
            row.pad = width - len(p)
            row.prefill_tokens, row.prefill_s = len(p), seconds * len(p) / total  # shared by prompt length
        self._merge(rows, layers, mask, out.logits[:, -1])

    def _merge(self, rows: list[_Row], layers: list[tuple[Any, Any]], mask: Any, logits: Any) -> None:
        """Append `rows` (their left-padded KV (b, H, W', D) per layer, mask (b, W'), logits (b, V); each row's
        `pad` counts its padding columns) to the batch's left-padded cache."""
        torch = self.torch
        pad = torch.nn.functional.pad
        self._cache = None  # rebuilt from `kv` at the next step
        if not self.rows:
            self.kv, self.mask, self.logits, self.rows = list(layers), mask, logits.float(), list(rows)
            return
        width, length = self.mask.shape[1], mask.shape[1]
        grow, extra = max(0, length - width), max(0, width - length)
        if grow:  # the new rows are longer than every row in the batch: left-pad the batch
            self.kv = [(pad(k, (0, 0, grow, 0)), pad(v, (0, 0, grow, 0))) for k, v in self.kv]
            self.mask = pad(self.mask, (grow, 0))
            for r in self.rows:
                r.pad += grow
        for r in rows:
            r.pad += extra
        self.kv = [(torch.cat([bk, pad(k, (0, 0, extra, 0))]), torch.cat([bv, pad(v, (0, 0, extra, 0))]))
                   for (bk, bv), (k, v) in zip(self.kv, layers)]
        self.mask = torch.cat([self.mask, pad(mask, (extra, 0))])
        self.logits = torch.cat([self.logits, logits.float()])
        self.rows.extend(rows)

    # --- decoding --------------------------------------------------------------------------------------

    def step(self) -> list[tuple[Any, Completion]]:
        """Sample one token per row; return the rows that finished (tag, completion), then advance the rest."""
        size = len(self.rows)
        t0 = time.perf_counter()
        done = [slot for slot, row in enumerate(self.rows) if not self._sample(row, self.logits[slot], size)]
        sampled = time.perf_counter() - t0
        for row in self.rows:
            row.decode_s += sampled / size
        finished = [(self.rows[s].tag, self._completion(self.rows[s])) for s in done]
        if done:
            self._leave(done)
        if self.rows:
            t1 = time.perf_counter()
            self._forward()
            share = (time.perf_counter() - t1) / len(self.rows)
            for row in self.rows:
                row.decode_s += share
        return finished

    def _leave(self, slots: list[int]) -> None:
        torch = self.torch
        if self.store is not None:
            for s in slots:
                row = self.rows[s]
                # The cache holds prompt + ids[:-1]: the last sampled id was never fed back.
                layers = [(k[s:s + 1, :, row.pad:].clone(), v[s:s + 1, :, row.pad:].clone()) for k, v in self.kv]
                self.store.put(row.prompt + row.ids[:-1], layers, row.version)
        self._cache = None
        keep = [s for s in range(len(self.rows)) if s not in set(slots)]
        self.rows = [self.rows[s] for s in keep]
        if not keep:
            self.kv = self.mask = self.logits = None
            return
        index = torch.tensor(keep, device=self.mask.device)
        trim = min(r.pad for r in self.rows)  # columns that are padding in every remaining row
        for r in self.rows:
            r.pad -= trim
        self.kv = [(k[index, :, trim:], v[index, :, trim:]) for k, v in self.kv]
        self.mask, self.logits = self.mask[index, trim:], self.logits[index]

    def _forward(self) -> None:
        """Feed every row's last sampled token: one batched decode step."""
        torch, dev = self.torch, self.mask.device
        step = torch.tensor([[r.ids[-1]] for r in self.rows], device=dev)  # (B, 1)
        pos = torch.tensor([[len(r.prompt) + len(r.ids) - 1] for r in self.rows], device=dev)  # (B, 1)
        self.mask = torch.cat([self.mask, self.mask.new_ones(len(self.rows), 1)], dim=1)  # (B, W + 1)
        cache = self._cache if self._cache is not None else _growing_cache(self.kv)
        out = self._model(input_ids=step, attention_mask=self.mask, position_ids=pos, past_key_values=cache,
                          use_cache=True)
        self._cache = out.past_key_values  # kept across steps: rows only change at admit and leave
        self.kv = [(layer.keys, layer.values) for layer in self._cache.layers]
        self.logits = out.logits[:, -1].float()  # (B, V)

    def _model(self, **inputs: Any) -> Any:
        """One forward of the policy's model, on as many CPU threads as its governor allows now."""
        governor = getattr(self.policy, "threads", None)
        if governor is not None:
            governor.update()
        with self.torch.inference_mode():
            return self.policy.model(**inputs)

    def _sample(self, row: _Row, logits: Any, size: int) -> bool:
        """Sample the row's next token from its logits (V,); False once the row has finished."""
        torch, params = self.torch, row.params
        logp = process_logits(logits, params, row.seen)
        if params.temperature == 0:
            tok = int(torch.argmax(logp))
        else:
            tok = int(torch.multinomial(logp.exp(), 1, generator=row.gen))
        row.ids.append(tok)
        row.logps.append(float(logp[tok]))
        row.sizes.append(size)
        if params.repetition_penalty != 1.0:
            row.seen = torch.cat([row.seen, torch.tensor([tok], device=row.seen.device)])
        if tok in row.stop_ids or (params.stop and any(
                s in self.policy.tokenizer.decode(row.ids, skip_special_tokens=True) for s in params.stop)):
            row.finish = "stop"
            return False
        return len(row.ids) < params.max_new_tokens

    def _completion(self, row: _Row) -> Completion:
        text = self.policy.tokenizer.decode(row.ids, skip_special_tokens=True)
        for s in row.params.stop:
            if s in text:
                text = text[: text.index(s)]
        return Completion(tuple(row.ids), tuple(row.logps), text, row.finish, row.version,  # type: ignore[arg-type]
                          batch_sizes=tuple(row.sizes), prefill_tokens=row.prefill_tokens,
                          prefill_s=row.prefill_s, decode_s=row.decode_s)
