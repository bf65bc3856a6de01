"""The decode step alone: `LlamaStep` (`fast_decode`) against the HF forward, or against `OrtStep`
(`decode_engine="onnxruntime"`), all in one process.

One `HFPolicy` of one model (`--model`, default the embedded one) per arm of `--arms` (first against
second): torch (decoding through `LlamaStep`), hf (through the HF forward), onnxruntime (through
`OrtStep`; its build, the weight sync, is timed too). For each batch size B, B greedy rows of 400-token prompts (slices
of a source file) decode `--long` and `--short` new tokens; the difference of the two calls' wall times over
`long - short` steps is the time of one decode step, with the prefill cancelled out. The paths alternate
`--repeats` times; the ratio (first / second) is taken per adjacent pair, then the median (the machine's
load drifts hit both paths alike).

On a GPU (`--device cuda --dtype bfloat16`) this is the paired in-process A/B that separate worker
processes could not give there: their runs scattered 4x from one process to the next.

Usage: .venv/bin/python scripts/bench_decode_step.py [--model DIR] [--arms torch,hf] [--batches 1,4,12]
       [--repeats 5] [--device cpu] [--dtype float32] [--json F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def step_ms(policy, prompts: list[list[int]], long: int, short: int) -> float:
    """Milliseconds per decode step of `policy` on `prompts` (greedy), the prefill cancelled out."""
    from agent_scaffold.policy import SamplingParams

    def wall(n: int) -> float:
        params = [SamplingParams(temperature=0, max_new_tokens=n, seed=i) for i in range(len(prompts))]
        t = time.perf_counter()
        policy.generate_rows(prompts, params)
        return time.perf_counter() - t

    return (wall(long) - wall(short)) / (long - short) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--arms", default="torch,hf", help="two of torch, hf, onnxruntime: first / second")
    ap.add_argument("--batches", default="1,4,12")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--long", type=int, default=48)
    ap.add_argument("--short", type=int, default=8)
    ap.add_argument("--device", default="cpu", help="torch device of both arms, e.g. cuda")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.long <= args.short:
        raise SystemExit(f"--long ({args.long}) must exceed --short ({args.short}): their difference is the steps timed")

    import torch

    from agent_scaffold.policies.hf import HFPolicy

    settings = {"torch": {}, "hf": {"fast_decode": False}, "onnxruntime": {"decode_engine": "onnxruntime"}}
    arms = args.arms.split(",")
    if len(arms) != 2 or not set(arms) <= settings.keys() or arms[0] == arms[1]:
        raise SystemExit(f"--arms takes two of {', '.join(settings)}, got {args.arms!r}")
    fast, hf = (HFPolicy(args.model, device=args.device, dtype=getattr(torch, args.dtype), **settings[a]) for a in arms)
    for arm, policy in zip(arms, (fast, hf)):
        if arm != "hf" and policy.llama_step() is None:
            raise SystemExit(f"{policy.model_dir} does not decode through LlamaStep (see the log for the reason)")
    source = Path(__file__).resolve().parents[1] / "agent_scaffold" / "policies" / "decode_batch.py"
    ids = fast.tokenizer.encode(source.read_text())
    rows = []
    for b in [int(x) for x in args.batches.split(",") if x]:
        prompts = [ids[i * 37:i * 37 + 400] for i in range(b)]
        for policy in (fast, hf):  # warm-up: kernels and allocator at these shapes
            step_ms(policy, prompts, args.short + 2, args.short)
        times: dict[str, list[float]] = {"fast": [], "hf": []}
        for _ in range(args.repeats):
            for name, policy in (("fast", fast), ("hf", hf)):
                times[name].append(step_ms(policy, prompts, args.long, args.short))
        ratios = [f / h for f, h in zip(times["fast"], times["hf"])]
        row = {"batch": b, "fast_ms": times["fast"], "hf_ms": times["hf"], "ratios": ratios,
               "median_ratio": statistics.median(ratios)}
        rows.append(row)
        print(f"B={b}: {arms[0]} {statistics.median(times['fast']):.1f} ms, {arms[1]} "
              f"{statistics.median(times['hf']):.1f} ms, per-pair ratio median {row['median_ratio']:.2f} "
              f"({', '.join(f'{r:.2f}' for r in ratios)})", flush=True)
    syncs = {arm: p.engine_sync_s for arm, p in zip(arms, (fast, hf)) if p.engine_sync_s}
    if syncs:
        print(f"engine builds (weight sync), s: {syncs}")
    if args.json:  # "fast" is the first arm and "hf" the second
        Path(args.json).write_text(json.dumps({"model": fast.model_dir, "arms": arms, "device": args.device,
                                               "dtype": args.dtype, "long": args.long,
                                               "short": args.short, "rows": rows, "engine_sync_s": syncs},
                                              indent=1))


if __name__ == "__main__":
    main()
