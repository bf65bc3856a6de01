"""`LlamaStep`: one decode step of a Llama-architecture model, written out over a `SlotKV` batch.

A decode step feeds one token per row, and at the batch sizes of a CPU run (1-18 rows) much of its time
is framework work rather than arithmetic: the HF forward calls 67 top-level aten ops per layer
(projections one by one, cache bookkeeping, dtype round trips). This step calls 38: the query, key and
value projections are one matmul, the gate and up projections another, RoPE rotates queries and keys in
one pass, RMSNorm is one fused op in float32, the mask is built once per step, and the new key and value
columns are written straight into the batch's buffers.

Most of a step's time is then its matrix products, and on CPU those are memory-bound: every weight is read
once per step. MKL streams a weight fastest when the product is written weight-first, (out, in) @ (in,
rows); the rows-first forms, `F.linear` and `x @ w_t` over transposed copies, read it at a half to a third
of that speed from 2 rows on. One row is fed as two (the same row twice), since a one-row product takes
the slower matrix-vector path, and 10-15 or 18-23 rows are padded to 16 or 24, which MKL multiplies
faster than the rows alone (`PRODUCT_ROWS`). So on CPU in float32 every product here is weight-first; on other devices
and dtypes it is `F.linear`. On the 2-core box a step with weight-first products takes 0.46-0.75x the time
of one with transposed copies at 2-16 rows (0.97x at 12) and 0.92x at 1 row (`scripts/bench_step_products.py`,
docs/benchmarks.md). Logits agree with the HF forward's to float rounding (|dlogit| ~5e-5 in fp32, the
order of the batch-shape differences `DecodeBatch` already has); in bf16 its logprobs are as close to a
full HF forward as the HF decode path's (tested on CPU, and on CUDA where a GPU is present).

Attention is the rest, and it reads every row's keys and values over the batch's width, padding
included. On CPU the rows attend in contiguous runs of slots, each over the columns its own rows reach
(`attention_segments` picks the runs): a batch that mixes 3,000-token injector rows with 600-2,000-token
solver rows holds half the columns it would read in one call, and the step takes 0.82x the time of one call
there (`scripts/bench_attention_segments.py`); a batch of equal rows stays one call.

The fused projections are built once, and the model's own projection weights become row views into them
(the HF forward, prefill included, then multiplies by the same storage), so every way weights change in
place (`HFPolicy.load_weights`, an in-memory weight sync, a test editing a parameter) changes what this step
computes too: it can never decode with stale weights.

Only plain Llama decoders qualify (`unsupported`: no biases, SiLU MLP, default RoPE, no hooks); others
decode through the HF forward, which stays the reference (prefill always uses it).
"""

from __future__ import annotations

from typing import Any

from agent_scaffold.policies.attention_segments import attention_segments

PRODUCT_ROWS = 8
"""On CPU, a product of more rows than this, 2 or more past a multiple of it, is padded with zero rows to
the next multiple: MKL multiplies 16 rows by a weight written weight-first faster than 11-15 rows. On the
2-core box a whole decode step took 0.70-0.81x the time at 11, 13, 14 and 15 rows, 0.89-0.94x at 10, 12,
19 and 22, about 1.0x at 17, 18 and 20, and 1.06x at 9 (hence not 1 past), in
`scripts/bench_step_products.py`."""


def unsupported(model: Any) -> str | None:
    """Why `model` cannot decode through `LlamaStep`, or None when it can."""
    cfg = getattr(model, "config", None)
    if getattr(cfg, "model_type", None) != "llama":
        return f"model_type {getattr(cfg, 'model_type', None)!r} is not 'llama'"
    if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        return "attention or MLP biases"
    if getattr(cfg, "hidden_act", "silu") != "silu":
        return f"hidden_act {cfg.hidden_act!r} is not 'silu'"
    if getattr(cfg, "pretraining_tp", 1) != 1:
        return "pretraining_tp > 1"
    rope = dict(getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {})
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        return f"RoPE type {rope.get('rope_type', rope.get('type'))!r} (only 'default' is written out)"
    hooked = [name for name, mod in model.named_modules() if mod._forward_hooks or mod._forward_pre_hooks]
    if hooked:
        return f"forward hooks on {hooked[:3]} (a hooked module would be bypassed)"
    return None


class LlamaStep:
    """Decode steps of one Llama model, its projections fused in place (see the module docstring)."""

    def __init__(self, model: Any, torch: Any) -> None:
        reason = unsupported(model)
        if reason is not None:
            raise ValueError(f"LlamaStep cannot decode this model: {reason}; decode it through the HF forward")
        self.torch, self.model = torch, model
        cfg = model.config
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        self.inner = model.model
        # Per layer, (out, in) weights: (q;k;v), o, (gate;up), down.
        self.layers: list[tuple[Any, Any, Any, Any]] = []
        with torch.no_grad():
            for layer in self.inner.layers:
                attn, mlp = layer.self_attn, layer.mlp
                self.layers.append((_fuse(torch, [attn.q_proj, attn.k_proj, attn.v_proj]), _fuse(torch, [attn.o_proj]),
                                    _fuse(torch, [mlp.gate_proj, mlp.up_proj]), _fuse(torch, [mlp.down_proj])))

    def __call__(self, ids: Any, positions: Any, kv: Any, mask: Any) -> Any:
        """Logits (B, V) after feeding `ids` (B,) at `positions` (B,); writes each layer's new key and value
        at column `kv.end` of the batch's buffers. `mask` (B, W + 1): 1 where a row attends."""
        attend = mask.bool()[:, None, None, :]  # (B, 1, 1, W + 1), shared by every head and layer
        return self.many(ids[:, None], positions[:, None], kv, attend)[:, 0]

    def many(self, ids: Any, positions: Any, kv: Any, attend: Any, lengths: list[int] | None = None) -> Any:
        """Logits (B, T, V) after feeding `ids` (B, T) at `positions` (B, T) (a row's sampled token and its
        drafts, `selfplay`'s lookup decoding); writes each layer's new keys and values at columns
        `kv.end`..`kv.end` + T - 1. `attend` (B, 1, T, W + T) bool: where each new position attends.

        `lengths`: how many of its T positions each row really feeds (None: all). The others are padding:
        no product computes them, their key and value columns are written as zeros (the caller masks them
        out), their logits are zeros, and a run of rows attends only over the positions its rows feed. A step
        where one row drafts 5 tokens beside 13 rows that draft none then costs products of 19 positions,
        not 6 x 14."""
        torch, F = self.torch, self.torch.nn.functional
        q_dim, kv_dim, d = self.heads * self.head_dim, self.kv_heads * self.head_dim, self.head_dim
        rows, end = kv.rows, kv.end
        b, t = ids.shape
        if lengths is not None and min(lengths) >= t:
            lengths = None
        real = None  # flat (row * T + position) indices of the fed positions, when some are padding
        if lengths is not None:
            real = torch.tensor([r * t + j for r, n in enumerate(lengths) for j in range(n)], device=ids.device)
        x = self.inner.embed_tokens(ids)  # (B, T, hidden)
        groups = self.heads // self.kv_heads
        rotary = self.inner.rotary_emb
        freqs = positions[..., None].float() * rotary.inv_freq.float()  # (B, T, D/2)
        emb = torch.cat((freqs, freqs), -1)
        scale = getattr(rotary, "attention_scaling", 1.0)
        cos, sin = (emb.cos() * scale).to(x.dtype)[:, :, None], (emb.sin() * scale).to(x.dtype)[:, :, None]  # (B, T, 1, D)
        if real is not None:  # positions flattened to the fed ones: (N, ...)
            x, cos, sin = (y.reshape(b * t, *y.shape[2:])[real] for y in (x, cos, sin))
        segments = self._segments(kv, attend, t, lengths)
        for layer, (qkv_w, o_w, gate_up_w, down_w), (kbuf, vbuf) in zip(self.inner.layers, self.layers, kv.kv):
            qkv = self._product(self._norm(x, layer.input_layernorm.weight), qkv_w)  # (B, T | N, q + 2 kv)
            qk = _rope(torch, qkv[..., :q_dim + kv_dim].unflatten(-1, (self.heads + self.kv_heads, d)), cos, sin)
            v = qkv[..., q_dim + kv_dim:].unflatten(-1, (self.kv_heads, d))
            if real is not None:  # back to (B, T, ...) with zeros at the padding
                qk, v = _unflatten(qk, real, b, t), _unflatten(v, real, b, t)
            kbuf[:rows, :, end:end + t] = qk[:, :, self.heads:].transpose(1, 2)
            vbuf[:rows, :, end:end + t] = v.transpose(1, 2)
            # GQA: each key/value head's query heads (times positions) as its "query positions".
            q = qk[:, :, :self.heads].view(b, t, self.kv_heads, groups, d).permute(0, 2, 3, 1, 4)  # (B, kv, g, T, D)
            parts = []
            for a, e, lo, n, mask in segments:
                qs = q[a:e, :, :, :n].reshape(e - a, self.kv_heads, groups * n, d)
                out = F.scaled_dot_product_attention(qs, kbuf[a:e, :, lo:end + n], vbuf[a:e, :, lo:end + n],
                                                     attn_mask=mask)
                out = out.view(e - a, self.kv_heads, groups, n, d).permute(0, 3, 1, 2, 4).reshape(e - a, n, q_dim)
                parts.append(out if n == t else F.pad(out, (0, 0, 0, t - n)))
            out = parts[0] if len(parts) == 1 else torch.cat(parts)  # (B, T, q)
            if real is not None:
                out = out.reshape(b * t, q_dim)[real]
            x = x + self._product(out, o_w)
            gate_up = self._product(self._norm(x, layer.post_attention_layernorm.weight), gate_up_w)
            half = gate_up.shape[-1] // 2
            x = x + self._product(F.silu(gate_up[..., :half]) * gate_up[..., half:], down_w)
        logits = self._head(self._norm(x, self.inner.norm.weight))
        return logits if real is None else _unflatten(logits, real, b, t)

    def _segments(self, kv: Any, attend: Any, t: int, lengths: list[int] | None) -> list[tuple[int, int, int, int, Any]]:
        """The step's attention calls, the same in every layer: (first slot, end slot, first column, positions
        fed, mask) each. On CPU the rows attend in contiguous runs over the columns each run reaches
        (`attention_segments`); elsewhere, and for a batch of equal rows, in one call over the batch's
        columns. A run feeds as many positions as its longest row (`lengths`), and rows that feed one
        position attend apart from those that feed more: one row's draft would otherwise make its whole run
        attend T query positions a row under a (rows, T, columns) mask, which cost a batch of 12 rows more
        than its products did."""
        rows, start = kv.rows, kv.start
        runs = [(0, rows)]
        if rows >= 2 and attend.device.type == "cpu":
            runs = attention_segments(kv.first[:rows], kv.end + t, self.kv_heads, self.torch.get_num_threads())
        if lengths is not None:  # rows feeding one position attend apart from the rows feeding more
            runs = [piece for a, e in runs for piece in _split(lengths, a, e)]
        groups = self.heads // self.kv_heads
        out = []
        for a, e in runs:
            lo = start if len(runs) == 1 else min(kv.first[a:e])
            n = t if lengths is None else max(lengths[a:e])
            mask = attend[a:e, :, :n, lo - start:kv.end - start + n]
            if n > 1:  # each key/value head's query heads x positions as its "query positions", in that order
                mask = mask.repeat(1, 1, groups, 1)
            elif len(runs) > 1 and bool(mask.all()):
                # A run of one position a row that attends to every column it reads needs no mask: SDPA's
                # unmasked kernel skips converting and adding one.
                mask = None
            out.append((a, e, lo, n, mask))
        return out

    def _head(self, x: Any) -> Any:
        head = self.model.lm_head
        return head(x) if head.bias is not None else self._product(x, head.weight)

    def _product(self, x: Any, weight: Any) -> Any:
        """`x` (B, T, in) times `weight` (out, in) transposed: (B, T, out). Weight-first on CPU in float32,
        padded with zero rows as `PRODUCT_ROWS` says (see the module docstring)."""
        torch = self.torch
        if weight.device.type != "cpu" or weight.dtype != torch.float32:
            return torch.nn.functional.linear(x, weight)
        flat = x.reshape(-1, x.shape[-1])
        rows = flat.shape[0]
        if rows == 1:
            flat = flat.repeat(2, 1)
        elif rows > PRODUCT_ROWS and rows % PRODUCT_ROWS >= 2:
            flat = torch.nn.functional.pad(flat, (0, 0, 0, PRODUCT_ROWS - rows % PRODUCT_ROWS))
        out = torch.mm(weight, flat.t())[:, :rows].t().contiguous()  # (rows, out)
        return out.view(*x.shape[:-1], weight.shape[0])

    def _norm(self, x: Any, weight: Any) -> Any:
        """LlamaRMSNorm: normalised in float32, scaled in the model's dtype (one fused op in float32)."""
        torch = self.torch
        if x.dtype == torch.float32:
            return torch.rms_norm(x, (x.shape[-1],), weight, self.eps)
        return weight * torch.rms_norm(x.float(), (x.shape[-1],), None, self.eps).to(x.dtype)


def _rope(torch: Any, x: Any, cos: Any, sin: Any) -> Any:
    """Rotary embedding of (B, T, heads, D) at each position (HF's rotate_half convention)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


def _split(lengths: list[int], a: int, e: int) -> list[tuple[int, int]]:
    """Slots [a, e) cut where a row feeding one position meets a row feeding more."""
    cuts = [i for i in range(a + 1, e) if (lengths[i] > 1) != (lengths[i - 1] > 1)]
    return list(zip([a, *cuts], [*cuts, e]))


def _unflatten(flat: Any, real: Any, b: int, t: int) -> Any:
    """(N, ...) values of the fed positions `real` (flat row * T + position indices) as (B, T, ...), zeros at
    the padding."""
    out = flat.new_zeros(b * t, *flat.shape[1:])
    out[real] = flat
    return out.view(b, t, *flat.shape[1:])


def _fuse(torch: Any, linears: list[Any]) -> Any:
    """One (sum of outputs, in) contiguous weight holding `linears`' weights, stacked; each linear's weight
    becomes a row view into it."""
    fused = torch.cat([lin.weight.detach() for lin in linears])  # cat makes a new contiguous tensor
    row = 0
    for lin in linears:
        n = lin.weight.shape[0]
        lin.weight.data = fused[row:row + n]
        row += n
    return fused
