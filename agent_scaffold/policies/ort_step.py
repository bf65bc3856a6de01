"""`OrtStep`: the decode step of a Llama model as one ONNX Runtime graph over a `SlotKV` batch's buffers.

`LlamaStep` spends much of a CPU decode step on framework work (38 aten ops a layer, each a dispatch) and
on MKL's small-row products. The same step as an ONNX graph run by ONNX Runtime's CPU provider (MLAS
products on weights it packs once, attention in its `GroupQueryAttention` kernel, ~13 ops a layer) ran
a step 1.20-1.80x as fast as `LlamaStep` at 1-16 rows on the 2-core box (medians of per-pair ratios,
`scripts/bench_decode_step.py --arms torch,onnxruntime`), and rollouts 1.18-1.25x as fast
(`scripts/bench_rollouts.py --ort`; docs/benchmarks.md), with logprobs equal to float rounding.

The graph takes the step's token ids, each row's RoPE cos/sin (rotated in the graph, before attention,
so left padding shifts no row's positions), an additive mask over the batch's columns and every layer's
key and value buffers of the live slots, and returns the logits. Buffers are bound in place (I/O
binding on the torch memory of `kbuf[:rows]`, contiguous): `GroupQueryAttention` sees its past and
present caches share one buffer, writes the new key and value at column `kv.end` of every row (its
`seqlens_k`) and attends over columns [0, `kv.end`], so nothing of the cache is copied. Columns before a
row's own are masked out but still read (a masked score is added to -1e30 and its value weighted by 0),
so the buffers must hold finite numbers there: `SlotKV(zeroed=True)`.

ONNX Runtime holds its own copy of the weights (packed for its products), so unlike `LlamaStep` it can
decode stale weights: `HFPolicy` rebuilds the step whenever its weights change (`HFPolicy.weights_epoch`,
moved by every load and version change), which takes 3.4-3.8 s for SmolLM2-135M (graph, session and
packing): the engine's weight sync, run inside `HFPolicySync` (`HFPolicy.sync_engine`). One position a
row a step: prompt-lookup drafts (`LlamaStep.many`) are not written out here.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from agent_scaffold.policies.llama_step import unsupported

log = logging.getLogger(__name__)

MASKED = -1e30
"""Additive score of a column a row does not attend to: finite, so a fully padded buffer region never
turns a row's softmax into NaN."""

INSTALL_HINT = ("policy.decode_engine = 'onnxruntime' needs the onnxruntime and onnx packages: "
                "pip install -e '.[ort]' (or set policy.decode_engine = 'torch')")


def import_ort() -> tuple[Any, Any]:
    """(onnxruntime, onnx), or an ImportError that names the setting and the extra to install."""
    try:
        import onnx
        import onnxruntime
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} ({e})") from e
    return onnxruntime, onnx


def ort_unsupported(model: Any) -> str | None:
    """Why `model` cannot decode through `OrtStep`, or None when it can: `LlamaStep`'s conditions, on CPU,
    in float32."""
    reason = unsupported(model)
    if reason is not None:
        return reason
    weight = model.get_input_embeddings().weight
    if weight.device.type != "cpu":
        return f"the model is on {weight.device} (ONNX Runtime decodes CPU models here)"
    if str(weight.dtype) != "torch.float32":
        return f"dtype {weight.dtype} (ONNX Runtime decodes float32 models here)"
    return None


class OrtStep:
    """Decode steps of one Llama model's weights (as of `epoch`) through ONNX Runtime; see the module
    docstring. Call it like `LlamaStep`."""

    def __init__(self, model: Any, torch: Any, threads: int = 0, epoch: int = 0) -> None:
        """`threads`: ONNX Runtime's intra-op threads (0: torch's count). `epoch`: the weights' epoch this
        step was built from (`HFPolicy.weights_epoch`)."""
        reason = ort_unsupported(model)
        if reason is not None:
            raise ValueError(f"OrtStep cannot decode this model: {reason}; set policy.decode_engine = 'torch'")
        ort, onnx = import_ort()
        self.torch, self.model, self.epoch = torch, model, epoch
        rotary = model.model.rotary_emb
        self.inv_freq = rotary.inv_freq.float()
        self.rope_scale = getattr(rotary, "attention_scaling", 1.0)
        self.layers = len(model.model.layers)
        began = time.perf_counter()
        graph = decode_graph(model, onnx)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # its own warnings go to stderr, past the logging setup; errors raise
        # Spinning pool threads would hold the cores between steps, while the same thread prefills in torch
        # and the sandboxes run tests.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(graph.SerializeToString(), options, providers=["CPUExecutionProvider"])
        self.build_s = time.perf_counter() - began
        """Seconds to write the graph and load it (ONNX Runtime packs the weights then): the weight sync."""
        log.info("built the ONNX Runtime decode step in %.1f s (%d threads)", self.build_s,
                 options.intra_op_num_threads)

    def __call__(self, ids: Any, positions: Any, kv: Any, mask: Any) -> Any:
        """Logits (B, V) after feeding `ids` (B,) at `positions` (B,); writes each layer's new key and value
        at column `kv.end` of the batch's buffers, which must be zero-filled (`SlotKV(zeroed=True)`).
        `mask` is `kv.step_mask()`'s: it marked column `kv.end`, which the buffers' own mask now holds."""
        import numpy as np

        torch = self.torch
        rows, end = kv.rows, kv.end
        freqs = positions[:, None].float() * self.inv_freq  # (B, D/2)
        emb = torch.cat((freqs, freqs), -1)
        bias = torch.full((rows, end + 1), MASKED)
        bias.masked_fill_(kv.mask[:rows, :end + 1].bool(), 0.0)
        bind = self.session.io_binding()
        bind.bind_output("logits", "cpu")
        for name, value in (("ids", ids.numpy()), ("cos", (emb.cos() * self.rope_scale)[:, None].numpy()),
                            ("sin", (emb.sin() * self.rope_scale)[:, None].numpy()),
                            ("bias", bias[:, None, None].numpy()), ("seqlens_k", np.full(rows, end, np.int32)),
                            ("total_length", np.array(end + 1, np.int32))):
            bind.bind_cpu_input(name, value)
        for i, (k, v) in enumerate(kv.kv):
            shape = list(k[:rows].shape)  # (B, KV, capacity, D): the same memory in and out
            for past, present, buf in ((f"past_key.{i}", f"key.{i}", k), (f"past_value.{i}", f"value.{i}", v)):
                bind.bind_input(past, "cpu", 0, np.float32, shape, buf.data_ptr())
                bind.bind_output(present, "cpu", 0, np.float32, shape, buf.data_ptr())
        self.session.run_with_iobinding(bind)
        return torch.from_numpy(bind.get_outputs()[0].numpy())

    def many(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("the ONNX Runtime decode step feeds one position a row: prompt-lookup drafts need "
                         "policy.decode_engine = 'torch' (or policy.lookup_tokens = 0)")


def decode_graph(model: Any, onnx: Any) -> Any:
    """The ONNX model of one decode step of `model` (a plain Llama decoder, float32), its weights inline.

    Inputs: ids (B,) int64; cos, sin (B, 1, D) float; bias (B, 1, 1, T) float, 0 where a row attends to a
    column and `MASKED` elsewhere, over the T = end + 1 columns attended; seqlens_k (B,) int32, the column
    the new position is written at (end); total_length () int32, T; past_key.i, past_value.i (B, KV, C, D)
    per layer, C the buffers' capacity. Outputs: logits (B, V); key.i, value.i, the same buffers with the
    new position's column written (bind them to the inputs' memory)."""
    import numpy as np

    helper, tp = onnx.helper, onnx.TensorProto
    cfg = model.config
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    eps = float(cfg.rms_norm_eps)
    nodes: list[Any] = []
    inits: list[Any] = []

    def tensor(name: str, array: Any) -> str:
        inits.append(onnx.numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def weight(name: str, *parts: Any) -> str:
        """Projection weights (out, in), stacked by rows, stored (in, out) for MatMul."""
        import torch

        return tensor(name, torch.cat([p.detach() for p in parts]).float().numpy().T)

    def op(kind: str, inputs: list[str], outputs: int | list[str] = 1, **attrs: Any) -> Any:
        names = outputs if isinstance(outputs, list) else [f"n{len(nodes)}_{j}" for j in range(outputs)]
        domain = "com.microsoft" if kind == "GroupQueryAttention" else ""
        nodes.append(helper.make_node(kind, inputs, names, domain=domain, **attrs))
        return names[0] if len(names) == 1 else names

    ints = {name: tensor(name, np.array(value, np.int64)) for name, value in {
        "qkv_shape": [0, heads + kv_heads, d], "out_shape": [0, heads * d], "rope_halves": [d // 2, d // 2],
        "qk_v": [(heads + kv_heads) * d, kv_heads * d], "q_k": [heads, kv_heads],
        "gate_up": [cfg.intermediate_size] * 2, "seq_q": [0, 1, heads * d], "seq_kv": [0, 1, kv_heads * d]}.items()}
    scale = 1.0 / float(np.sqrt(d))
    inner = model.model
    x = op("Gather", [tensor("embed", inner.embed_tokens.weight.detach().float().numpy()), "ids"])
    inputs = [helper.make_tensor_value_info("ids", tp.INT64, ["B"]),
              helper.make_tensor_value_info("cos", tp.FLOAT, ["B", 1, d]),
              helper.make_tensor_value_info("sin", tp.FLOAT, ["B", 1, d]),
              helper.make_tensor_value_info("bias", tp.FLOAT, ["B", 1, 1, "T"]),
              helper.make_tensor_value_info("seqlens_k", tp.INT32, ["B"]),
              helper.make_tensor_value_info("total_length", tp.INT32, [])]
    outputs = [helper.make_tensor_value_info("logits", tp.FLOAT, ["B", cfg.vocab_size])]

    def norm(h: str, w: Any, name: str) -> str:
        return op("SimplifiedLayerNormalization", [h, tensor(name, w.detach().float().numpy())], axis=-1, epsilon=eps)

    for i, layer in enumerate(inner.layers):
        attn, mlp = layer.self_attn, layer.mlp
        past_k, past_v, new_k, new_v = f"past_key.{i}", f"past_value.{i}", f"key.{i}", f"value.{i}"
        inputs += [helper.make_tensor_value_info(n, tp.FLOAT, ["B", kv_heads, "C", d]) for n in (past_k, past_v)]
        outputs += [helper.make_tensor_value_info(n, tp.FLOAT, ["B", kv_heads, "C", d]) for n in (new_k, new_v)]
        qkv = op("MatMul", [norm(x, layer.input_layernorm.weight, f"ln_in.{i}"),
                            weight(f"qkv.{i}", attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight)])
        qk, v = op("Split", [qkv, ints["qk_v"]], 2, axis=-1)
        qk = op("Reshape", [qk, ints["qkv_shape"]])  # (B, H + KV, D): queries and keys rotate together
        lo, hi = op("Split", [qk, ints["rope_halves"]], 2, axis=-1)
        rotated = op("Concat", [op("Neg", [hi]), lo], axis=-1)
        qk = op("Add", [op("Mul", [qk, "cos"]), op("Mul", [rotated, "sin"])])
        q, k = op("Split", [qk, ints["q_k"]], 2, axis=1)
        q = op("Reshape", [q, ints["seq_q"]])  # (B, 1, H * D): one position a row
        k = op("Reshape", [k, ints["seq_kv"]])
        v = op("Reshape", [v, ints["seq_kv"]])
        out = op("GroupQueryAttention", [q, k, v, past_k, past_v, "seqlens_k", "total_length", "", "", "", "bias"],
                 [f"attn.{i}", new_k, new_v], num_heads=heads, kv_num_heads=kv_heads, scale=scale)[0]
        out = op("Reshape", [out, ints["out_shape"]])
        x = op("Add", [x, op("MatMul", [out, weight(f"o.{i}", attn.o_proj.weight)])])
        gate, up = op("Split", [op("MatMul", [norm(x, layer.post_attention_layernorm.weight, f"ln_post.{i}"),
                                              weight(f"gate_up.{i}", mlp.gate_proj.weight, mlp.up_proj.weight)]),
                                ints["gate_up"]], 2, axis=-1)
        act = op("Mul", [op("Mul", [gate, op("Sigmoid", [gate])]), up])
        x = op("Add", [x, op("MatMul", [act, weight(f"down.{i}", mlp.down_proj.weight)])])
    op("MatMul", [norm(x, inner.norm.weight, "ln_final"), weight("lm_head", model.lm_head.weight)], ["logits"])
    graph = helper.make_graph(nodes, "llama_decode_step", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=8)
