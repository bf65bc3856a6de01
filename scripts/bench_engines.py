"""Compare CPU sampling engines at the batch sizes continuous batching reaches, against the memory roofline.

Engines (torch, through the scaffold's own `DecodeBatch` path, so the numbers are what rollouts get):
- fp32: `HFPolicy(dtype=float32)`, the default;
- bf16: `HFPolicy(dtype=bfloat16)` (logprobs still computed in fp32 from bf16 logits);
- with `--compile`: fp32 with `torch.compile` on the model's forward;
- with `--int8`: fp32 with every decoder-layer `nn.Linear` dynamically quantized to int8 (per-channel
  weights, activations quantized per call; the head stays fp32), `torch.ao.quantization.quantize_dynamic`.

Accuracy, for every engine against fp32: the prompt teacher-forced through both, then over its positions
the mean |logp_engine - logp_fp32| of the actual next token (what truncated importance sampling sees as
rollout-learner mismatch), KL(fp32 || engine) and how often the two argmaxes agree.

For each engine and batch size B: B rows of the real solver prompt (~490 tokens) are admitted (prefill
timed apart) and decoded for `--tokens` steps; decode tokens/s = B * tokens / decode time. Engines alternate
within each repeat; medians and ranges over `--repeats`.

Roofline: a decode step must read every weight once and each row's KV cache, so tokens/s <= B * bandwidth
/ (weight bytes + B * KV bytes per row). Bandwidth is measured here (median of large tensor copies, read +
write counted). `--json F` writes every measurement.

Usage: .venv/bin/python scripts/bench_engines.py [--batches 1,4,8] [--tokens 32] [--repeats 3] [--compile] [--int8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def bandwidth_gb_s(torch, mb: int = 512, repeats: int = 5) -> float:
    a = torch.ones(mb * 2**20 // 4)
    b = torch.empty_like(a)
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        b.copy_(a)
        rates.append(2 * a.numel() * 4 / (time.perf_counter() - t0) / 1e9)  # read + write
    return statistics.median(rates)


def agreement(torch, reference, model, prompt: list[int]) -> dict[str, float]:
    """How far `model`'s next-token distributions over `prompt` are from `reference`'s (teacher-forced)."""
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        ref = torch.log_softmax(reference(input_ids=ids).logits[0, :-1].float(), -1)
        got = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
    nxt = ids[0, 1:, None]
    return {"mean_abs_dlogp": float((ref.gather(1, nxt) - got.gather(1, nxt)).abs().mean()),
            "kl": float((ref.exp() * (ref - got)).sum(-1).mean()),
            "argmax_agree": float((ref.argmax(-1) == got.argmax(-1)).float().mean())}


def decode_rate(policy, prompt: list[int], batch: int, tokens: int) -> tuple[float, float]:
    """(prefill tokens/s, decode tokens/s) of `batch` rows through one DecodeBatch."""
    from agent_scaffold.policy import SamplingParams

    params = SamplingParams(max_new_tokens=tokens, stop_token_ids=())
    b = policy.decode_batch()
    t0 = time.perf_counter()
    for i in range(batch):
        b.admit(prompt, params, seed=i, tag=i)
    t1 = time.perf_counter()
    steps = 0
    while len(b):
        b.step()
        steps += 1
    t2 = time.perf_counter()
    return batch * len(prompt) / (t1 - t0), batch * tokens / (t2 - t1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1,4,8")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--int8", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()

    import torch

    from agent_scaffold.policies.hf import HFPolicy
    from scripts.bench_rollouts import solver_prompt

    prompt, _ = solver_prompt()
    engines = {"fp32": HFPolicy(dtype=torch.float32), "bf16": HFPolicy(dtype=torch.bfloat16)}
    if args.compile:
        compiled = HFPolicy(dtype=torch.float32)
        compiled.model.forward = torch.compile(compiled.model.forward, dynamic=True)
        engines["fp32+compile"] = compiled
    if args.int8:
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        quantized = HFPolicy(dtype=torch.float32)
        quantized.model = quantize_dynamic(quantized.model, {"model.layers": per_channel_dynamic_qconfig},
                                           dtype=torch.qint8)
        engines["int8"] = quantized
    model = engines["fp32"].model
    accuracy = {name: agreement(torch, model, pol.model, prompt) for name, pol in engines.items() if name != "fp32"}
    for name, acc in accuracy.items():
        print(f"accuracy of {name} against fp32 over the prompt: mean |dlogp| {acc['mean_abs_dlogp']:.4f}, "
              f"KL {acc['kl']:.5f}, argmax agreement {acc['argmax_agree']:.1%}", flush=True)
    cfg = model.config
    params = sum(p.numel() for p in model.parameters())
    kv_per_token = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * (cfg.hidden_size // cfg.num_attention_heads)
    bw = bandwidth_gb_s(torch)
    print(f"SmolLM2-135M ({params / 1e6:.1f}M params), {torch.get_num_threads()} torch threads, "
          f"{len(prompt)}-token prompt, {args.tokens} decode steps, {args.repeats} repeats, "
          f"memory bandwidth {bw:.1f} GB/s, load {os.getloadavg()[0]:.1f}", flush=True)
    batches = [int(x) for x in args.batches.split(",")]
    for name, pol in list(engines.items()):  # warm-up at every batch size (compile and its recompiles, allocator)
        try:
            for b in batches:
                decode_rate(pol, prompt, b, 4)
        except Exception as exc:
            if name != "fp32+compile":
                raise
            print(f"{name} failed in its warm-up and is left out: {exc.__class__.__name__}: "
                  f"{str(exc).splitlines()[0] if str(exc) else ''}", flush=True)
            del engines[name]
    rows = []
    for rep in range(args.repeats):
        for b in batches:
            for name, pol in (engines.items() if rep % 2 == 0 else reversed(engines.items())):
                pre, dec = decode_rate(pol, prompt, b, args.tokens)
                rows.append({"engine": name, "batch": b, "repeat": rep, "prefill_tok_s": pre, "decode_tok_s": dec,
                             "load_1m": os.getloadavg()[0]})
                print(f"  repeat {rep} B={b} {name}: prefill {pre:.0f} tok/s, decode {dec:.1f} tok/s", flush=True)
    print(f"\n{'B':>3} {'engine':>13} {'decode tok/s':>13} {'range':>13} {'prefill tok/s':>14} {'roofline':>9} "
          f"{'of roofline':>12}")
    for b in batches:
        for name in engines:
            rs = [r for r in rows if r["engine"] == name and r["batch"] == b]
            dec = [r["decode_tok_s"] for r in rs]
            elt = 2 if name == "bf16" else 4
            ctx = len(prompt) + args.tokens // 2  # mean context over the decode
            roof = b * bw * 1e9 / (params * elt + b * ctx * kv_per_token * elt)
            med = statistics.median(dec)
            print(f"{b:>3} {name:>13} {med:>13.1f} {min(dec):>6.1f}-{max(dec):<6.1f} "
                  f"{statistics.median(r['prefill_tok_s'] for r in rs):>14.0f} {roof:>9.0f} {med / roof:>11.0%}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"args": vars(args), "bandwidth_gb_s": bw, "params": params,
                                               "prompt_tokens": len(prompt), "accuracy": accuracy, "rows": rows},
                                              indent=1))


if __name__ == "__main__":
    main()
