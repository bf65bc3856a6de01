"""`DecodeBatch`: the running batch of an HF model, which rows join and leave between decode steps.

Continuous batching on one model: `admit` prefills a new row alone (batch 1, so its prompt's logits are
exactly what it would get alone) and copies its KV into a slot of the running, left-padded batch cache
(`SlotKV`); `step` samples one token for every row, lets finished rows leave at once (their slots are
freed), and runs one batched forward for the rows that remain. A row never waits for the batch's longest
row, and a request arriving mid-batch starts at the next step.

A decode step runs the policy's `llama_step` when it has one (`LlamaStep`, a Llama decoder written out
over the batch's buffers, 1.05-1.19x faster a step on CPU, or `OrtStep`, the same step as an ONNX Runtime
graph), else the HF forward; prefills always run the HF forward.

Each row keeps its own `torch.Generator` (one uniform per token, `inverse_cdf`), stop ids, stop strings and
max_new_tokens, so its sample is the one it gets alone; batch shape and padding move logits by float
rounding only (~1e-5 in logprobs in fp32). Position ids count each row's own tokens, so left padding shifts no row's RoPE positions.

With `lookup_tokens` > 0 a step also feeds each row's prompt-lookup draft (`lookup.py`) after its sampled
token, through `LlamaStep.many`, and the row keeps the drafted tokens its verification accepts: several
tokens for one forward, with the distribution unchanged. A step feeds at most `lookup_rows` positions; the
drafted ones go one at a time to the row whose next drafted token is likeliest kept (its keep rate so
far), and a row feeds only its own positions (the others are padding no product computes), so a large
batch can still give a few rows drafts. The columns of drafts it did not keep stay in the batch, masked
out, and leave its KV when it is stored.

With a `PrefixKVStore`, a row's prefill starts from the stored KV of the longest prefix it shares with an
earlier generation (the previous turn of its episode, or a group mate's prompt) and computes only the rest;
a finished row's KV (prompt + sampled ids) is stored for the episode's next turn.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from agent_scaffold.policies.hf_cache import returned_cache, with_cache
from agent_scaffold.policies.kv_store import PrefixKVStore, common_prefix
from agent_scaffold.policies.lookup import NgramIndex, accepted, draft_lengths
from agent_scaffold.policies.sampling import import_torch, inverse_cdf, process_logits
from agent_scaffold.policies.slot_kv import SlotKV
from agent_scaffold.policy import Completion, SamplingParams

log = logging.getLogger(__name__)


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
    pad: int = 0  # leading padding columns of this row in its prefill's KV
    ids: list[int] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)  # decode batch size when each token was sampled
    fill: float = 0.0  # sum over its sampled tokens of the batch's KV fill (`SlotKV.fill`) at that step
    finish: str = "length"
    prefill_tokens: int = 0  # prompt positions computed (not served by the store)
    prefill_s: float = 0.0
    decode_s: float = 0.0  # share of each decode step: its seconds / the rows in it
    index: NgramIndex | None = None  # prompt + ids, for lookup drafts (None: this row drafts nothing)
    exclude: int | None = None  # a drafted token its verification rejected: its next draw leaves it out
    drafted: int = 0  # lookup tokens drafted for this row, and kept by their verification
    kept: int = 0


class DecodeBatch:
    """Rows of one `HFPolicy` decoding together. Not thread-safe: one scheduler thread drives it while it holds
    the policy's lock (weights never change under a running batch)."""

    def __init__(self, policy: Any, store: PrefixKVStore | None = None, lookup_tokens: int = 0,
                 lookup_rows: int = 0) -> None:
        """`lookup_tokens`: the most tokens a row drafts a step (prompt lookup, `lookup.py`; 0: off).
        `lookup_rows`: the most positions one step feeds, all rows' sampled and drafted tokens together;
        the lookup_rows - B drafted positions go to the rows likeliest to keep them (`draft_lengths`)."""
        self.torch = import_torch()
        self.policy, self.store = policy, store
        self.lookup_tokens, self.lookup_rows = lookup_tokens, lookup_rows
        self.rows: list[_Row] = []  # in batch-slot order
        # An ONNX Runtime step reads every column left of the batch's end: they must hold finite numbers.
        self.onnxruntime = getattr(policy, "decode_engine", "torch") == "onnxruntime"
        self.kv = SlotKV(self.torch, zeroed=self.onnxruntime)
        self.logits: Any = None  # (B, V): each row's next-token logits
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
        # A repetition penalty changes each position's distribution with the tokens before it: no drafts.
        index = NgramIndex(prompt) if self.lookup_tokens and params.repetition_penalty == 1.0 else None
        return _Row(tag, list(prompt), params, torch.Generator(device=dev).manual_seed(seed),
                    self.policy.eos_ids | frozenset(params.stop_token_ids),
                    torch.tensor(prompt, dtype=torch.long, device=dev), version, index=index)

    def _prefill_one(self, req: tuple, hit: Any) -> None:
        """Prefill one prompt after the stored KV of its prefix (`hit`, or none)."""
        from transformers import DynamicCache

        torch, policy, prompt = self.torch, self.policy, req[0]
        version = policy.version
        start = hit.length if hit is not None else 0
        # A cache made without the model's config keeps every column of every layer: the model's own would
        # keep only a sliding-window layer's last `window - 1`, and the batch's KV needs all layers as wide.
        cache = DynamicCache(ddp_cache_data=hit.layers()) if hit is not None else DynamicCache()
        ids = torch.tensor([prompt[start:]], device=policy.device)  # (1, L - start)
        pos = torch.arange(start, len(prompt), device=policy.device)[None]  # (1, L - start)
        t0 = time.perf_counter()
        out = self._model(input_ids=ids, position_ids=pos, use_cache=True, logits_to_keep=1,
                          **with_cache(policy.model, cache))
        seconds = time.perf_counter() - t0
        self.prefilled_tokens += len(prompt) - start
        layers = [(layer.keys, layer.values) for layer in returned_cache(out).layers]  # (1, H, L, D) each
        if self.store is not None:
            self.store.put(prompt, layers, version)  # group mates with the same prompt reuse it
        row = self._new_row(req, version)
        row.prefill_tokens, row.prefill_s = len(prompt) - start, seconds
        self._merge([row], layers, out.logits[:, -1])

    def _prefill_fresh(self, reqs: list[tuple]) -> None:
        """One left-padded forward over whole prompts; position ids count each row's own tokens."""
        from transformers import DynamicCache

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
                          use_cache=True, logits_to_keep=1, **with_cache(policy.model, DynamicCache()))  # `_prefill_one`
        seconds = time.perf_counter() - t0
        total = sum(len(p) for p in prompts)
        self.prefilled_tokens += total
        layers = [(layer.keys, layer.values) for layer in returned_cache(out).layers]  # (b, H, W, D) each
        if self.store is not None:
            for i, p in enumerate(prompts):  # cloned: a view would keep the whole padded batch alive
                self.store.put(p, [(k[i:i + 1, :, width - len(p):].clone(), v[i:i + 1, :, width - len(p):].clone())
                                   for k, v in layers], version)
        rows = [self._new_row(r, version) for r in reqs]
        for row, p in zip(rows, prompts):
            row.pad = width - len(p)
            row.prefill_tokens, row.prefill_s = len(p), seconds * len(p) / total  # shared by prompt length
        self._merge(rows, layers, out.logits[:, -1])

    def _merge(self, rows: list[_Row], layers: list[tuple[Any, Any]], logits: Any) -> None:
        """Append `rows` (their left-padded KV (b, H, W', D) per layer, logits (b, V); each row's `pad` counts
        its padding columns) to the batch."""
        self.kv.join(layers, [r.pad for r in rows])
        logits = logits.float()
        self.logits = logits if self.logits is None else self.torch.cat([self.logits, logits])
        self.rows.extend(rows)

    # --- decoding --------------------------------------------------------------------------------------

    def step(self) -> list[tuple[Any, Completion]]:
        """Sample one token per row; return the rows that finished (tag, completion), then advance the rest."""
        size, fill = len(self.rows), self.kv.fill()
        t0 = time.perf_counter()
        tokens, logps = self._draw()
        done = [slot for slot, row in enumerate(self.rows)
                if not self._record(row, tokens[slot], logps[slot], size, fill)]
        sampled = time.perf_counter() - t0
        for row in self.rows:
            row.decode_s += sampled / size
        finished = [(self.rows[s].tag, self._completion(self.rows[s])) for s in done]
        if done:
            self._leave(done)
        if self.rows:
            t1 = time.perf_counter()
            drafts = self._drafts()
            done = self._forward_drafts(drafts) if drafts else self._forward()
            share = (time.perf_counter() - t1) / len(self.rows)
            for row in self.rows:
                row.decode_s += share
            if done:
                finished += [(self.rows[s].tag, self._completion(self.rows[s])) for s in done]
                self._leave(done)
        return finished

    def _leave(self, slots: list[int]) -> None:
        if self.store is not None:
            for s in slots:
                row = self.rows[s]
                # The cache holds prompt + ids[:-1]: the last sampled id was never fed back.
                self.store.put(row.prompt + row.ids[:-1], self.kv.row_kv(s, len(row.prompt) + len(row.ids) - 1),
                               row.version)
        order = self.kv.leave(slots)
        self.rows = [self.rows[s] for s in order]
        self.logits = self.logits[self.torch.tensor(order, device=self.logits.device)] if order else None

    def _forward(self) -> list[int]:
        """Feed every row's last sampled token: one batched decode step. No row finishes in it ([])."""
        torch, dev = self.torch, self.logits.device
        step = torch.tensor([r.ids[-1] for r in self.rows], device=dev)  # (B,)
        pos = torch.tensor([len(r.prompt) + len(r.ids) - 1 for r in self.rows], device=dev)  # (B,)
        fast = self.policy.llama_step() if hasattr(self.policy, "llama_step") else None
        if fast is not None:
            mask = self.kv.step_mask()
            logits = self._run(fast, step, pos, self.kv, mask)
        else:
            cache, mask = self.kv.step_inputs()
            logits = self._run(self.policy.model, input_ids=step[:, None], attention_mask=mask,
                               position_ids=pos[:, None], use_cache=True,
                               **with_cache(self.policy.model, cache)).logits[:, -1]
        self.kv.advanced()
        self.logits = logits.float()  # (B, V)
        return []

    def _drafts(self) -> list[list[int]] | None:
        """Each row's lookup draft for this step, or None when no row drafts anything (or the policy decodes
        through the HF forward). A step feeds at most `lookup_rows` positions: the B sampled tokens, and
        drafted tokens given out one at a time to the row whose next drafted token is likeliest kept
        (`draft_lengths`)."""
        budget = self.lookup_rows - len(self.rows)
        if self.lookup_tokens <= 0 or budget <= 0 or getattr(self.policy, "llama_step", lambda: None)() is None:
            return None
        candidates = [row.index.draft(min(self.lookup_tokens, budget, row.params.max_new_tokens - len(row.ids)))
                      if row.index is not None else [] for row in self.rows]
        if not any(candidates):
            return None
        lengths = draft_lengths([len(c) for c in candidates], [(r.kept + 1) / (r.drafted + 2) for r in self.rows],
                                budget)
        drafts = [c[:n] for c, n in zip(candidates, lengths)]
        return drafts if any(drafts) else None

    def _forward_drafts(self, drafts: list[list[int]]) -> list[int]:
        """Feed every row's last sampled token and its draft in one forward (`LlamaStep.many`), keep the drafted
        tokens each row's verification accepts (`lookup.accepted`), and mask the columns of the rest out of
        the batch's KV. Returns the slots of rows that finished on a kept token."""
        torch, dev = self.torch, self.logits.device
        rows, width = self.rows, 1 + max(len(d) for d in drafts)
        ids = torch.tensor([[r.ids[-1], *d, *[r.ids[-1]] * (width - 1 - len(d))] for r, d in zip(rows, drafts)],
                           device=dev)  # (B, T): padding repeats the fed token and is masked out below
        first = torch.tensor([len(r.prompt) + len(r.ids) - 1 for r in rows], device=dev)
        pos = first[:, None] + torch.arange(width, device=dev)[None]  # (B, T)
        attend = self.kv.step_attend(width)  # (B, 1, T, W + T)
        fill = self.kv.fill()
        lengths = [1 + len(d) for d in drafts]  # rows with shorter drafts feed only their own positions
        logits = self._run(self.policy.llama_step().many, ids, pos, self.kv, attend, lengths).float()  # (B, T, V)
        end = self.kv.end
        self.kv.advanced(width)
        done, nxt, most = [], [], 0
        verify = self._draft_logprobs(logits, drafts)
        for slot, (row, draft) in enumerate(zip(rows, drafts)):
            kept = 0
            if draft:
                logp = verify[slot]  # (>= len(draft), V)
                kept = accepted(logp, draft, lambda g=row.gen: float(torch.rand(1, generator=g, device=dev)),
                                greedy=row.params.temperature == 0)
                row.drafted, row.kept = row.drafted + len(draft), row.kept + kept
                for j in range(kept):
                    if not self._record(row, draft[j], float(logp[j, draft[j]]), len(rows), fill):
                        kept = j + 1
                        done.append(slot)
                        break
                else:
                    if kept < len(draft) and row.params.temperature > 0:
                        row.exclude = draft[kept]
            self.kv.mask[slot, end + 1 + kept:end + width] = 0  # the unkept drafts' columns, and padding
            nxt.append(logits[slot, kept])
            most = max(most, kept)
        self.kv.drop_after(end + 1 + most)  # columns no row kept: the batch need not grow by them
        self.logits = torch.stack(nxt)  # (B, V)
        return done

    def _draft_logprobs(self, logits: Any, drafts: list[list[int]]) -> dict[int, Any]:
        """Per slot with a draft, the distributions (T - 1, V) its drafted tokens are tested against: rows that
        share their sampling settings are processed as one tensor."""
        groups: dict[Any, list[int]] = {}
        for slot, (row, draft) in enumerate(zip(self.rows, drafts)):
            if draft:
                p = row.params
                groups.setdefault((p.temperature, p.top_p, p.top_k, p.min_p), []).append(slot)
        out = {}
        for slots in groups.values():
            picked = logits[self.torch.tensor(slots, device=logits.device), :-1]  # (b, T - 1, V)
            logp = process_logits(picked.reshape(-1, picked.shape[-1]), self.rows[slots[0]].params)
            out.update(zip(slots, logp.view(picked.shape).unbind(0)))
        return out

    def _model(self, **inputs: Any) -> Any:
        """One forward of the policy's model."""
        return self._run(self.policy.model, **inputs)

    def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """`fn` (a forward) without autograd, on as many CPU threads as the policy's governor allows now."""
        governor = getattr(self.policy, "threads", None)
        if governor is not None:
            governor.update()
        with self.torch.inference_mode():
            out = fn(*args, **kwargs)
        if self.onnxruntime and governor is not None:
            # The draws between forwards run on one torch thread: after a parallel op torch's OpenMP workers
            # spin for a while, on the cores ONNX Runtime's next step needs (with them made to sleep at
            # once, OMP_WAIT_POLICY=PASSIVE, a step at 8 rows took 42.6 ms instead of 46.9). The next
            # prefill's `update` gives torch its threads back.
            self.torch.set_num_threads(1)
        return out

    def _draw(self) -> tuple[list[int], list[float]]:
        """Each row's next token and its logprob. Rows that share a distribution (temperature, top-p, top-k,
        min-p, no repetition penalty) are processed as one tensor; each row draws with its own generator, so
        a row's sample does not depend on the rows beside it."""
        torch = self.torch
        groups: dict[Any, list[int]] = {}
        for slot, row in enumerate(self.rows):
            p = row.params
            shared = p.repetition_penalty == 1.0 and row.exclude is None
            key = (p.temperature, p.top_p, p.top_k, p.min_p) if shared else slot
            groups.setdefault(key, []).append(slot)
        tokens, logps = [0] * len(self.rows), [0.0] * len(self.rows)
        for slots in groups.values():
            rows, params = [self.rows[s] for s in slots], self.rows[slots[0]].params
            if len(slots) == 1:
                logp = process_logits(self.logits[slots[0]], params, rows[0].seen)[None]  # (1, V)
            else:
                logits = self.logits if len(slots) == len(self.rows) else self.logits[torch.tensor(slots)]
                logp = process_logits(logits, params)  # (b, V)
            pick = logp
            if rows[0].exclude is not None:  # the rest of the distribution its rejected draft came from
                pick = logp.clone()
                pick[0, rows[0].exclude] = float("-inf")
                rows[0].exclude = None
            if params.temperature == 0:
                tok = pick.argmax(-1)
            else:
                uniform = torch.cat([torch.rand(1, generator=r.gen, device=logp.device) for r in rows])
                tok = inverse_cdf(pick, uniform)
            for s, t, lp in zip(slots, tok.tolist(), logp.gather(-1, tok[:, None]).squeeze(-1).tolist()):
                tokens[s], logps[s] = t, lp
        return tokens, logps

    def _record(self, row: _Row, tok: int, logp: float, size: int, fill: float) -> bool:
        """Append the row's sampled token (sampled in a batch of `size` rows whose KV was `fill` full); False
        once the row has finished."""
        params = row.params
        row.ids.append(tok)
        row.logps.append(logp)
        row.sizes.append(size)
        row.fill += fill
        if row.index is not None:
            row.index.extend((tok,))
        if params.repetition_penalty != 1.0:
            row.seen = self.torch.cat([row.seen, self.torch.tensor([tok], device=row.seen.device)])
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
                          batch_sizes=tuple(row.sizes), batch_fill=row.fill, prefill_tokens=row.prefill_tokens,
                          prefill_s=row.prefill_s, decode_s=row.decode_s, drafted=row.drafted,
                          drafts_kept=row.kept)
