r"""The lm_head over the loss-bearing positions only, against the head over every position: wall time of
one SFT step and one policy step on the warm start's own demonstrations, both ways in one process,
alternating.

`fused_head_loss(..., keep=...)` makes logits (49k-vocabulary matmul, softmax, entropy, and their
gradients) only where the loss falls: the actions, a quarter of the demonstration tokens. `before` runs
the same engine with the `keep` argument dropped (the head over every position, as before 2026-11-28),
so the two variants differ in that alone. The engine is the warm start's: fp32, token budget 2048, no
gradient checkpointing. LR 0 keeps the weights, and so each step's work, identical across repeats.

Samples: every trajectory under the warm start's `demos/` (`--demos`), its valid turns carrying loss, as
the warm start trains on them; `--batch` of them per step (the `cpu` SFT preset's 4). The policy step
gives them advantages +-1 and trains them as the default run's update does (TIS on, the ratio against
the step's own forward).

    .venv/bin/python scripts/bench_head.py --model DIR --demos ~/.cache/selfplay/warm_start/KEY/demos \
        [--batch 4] [--repeats 3] [--json docs/bench/head_positions.json]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="HF checkpoint directory (the warm start's model)")
    ap.add_argument("--demos", required=True, help="the warm start's demos/ directory (trajectory .jsonl files)")
    ap.add_argument("--batch", type=int, default=4, help="samples per step")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from dataclasses import replace

    from agent_scaffold.trajectory import load_jsonl
    from selfplay.learner import engine as engine_module
    from selfplay.learner import fused_loss
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.engine import LearnerEngine
    from selfplay.learner.logprobs import fused_head_loss
    from selfplay.learner.rft import sft_samples

    files = sorted(Path(args.demos).expanduser().glob("*/trajectories/*.jsonl"))
    if not files:
        raise SystemExit(f"no trajectory files under {args.demos}/*/trajectories/; pass the warm start's demos/")
    trajectories = [t for f in files for t in load_jsonl(f)]
    samples = sft_samples(trajectories)[:args.batch]
    policy_samples = [replace(s, advantage=1.0 if i % 2 else -1.0) for i, s in enumerate(samples)]

    def whole_row(head, hidden, targets, token_loss, chunk=1024, keep=None):
        """The head over every position; the callers' `token_loss` (made for the kept positions, in order)
        gets the kept positions of each chunk, which are consecutive in that order."""
        if keep is None:
            return fused_head_loss(head, hidden, targets, token_loss, chunk)
        before = keep.long().cumsum(0) - keep.long()  # kept positions before each position

        def row_loss(lp, s, e):
            k = keep[s:e].to(lp.device)
            first = int(before[s])
            return token_loss(lp[k], first, first + int(k.sum()))

        return fused_head_loss(head, hidden, targets, row_loss, chunk)

    variants = {"before": whole_row, "after": fused_head_loss}
    engine = LearnerEngine(EngineConfig(model_dir=args.model, dtype="fp32", token_budget=2048, lr=0.0,
                                        warmup_steps=1, temperature=0.5, gradient_checkpointing=False))
    assert engine.fused, "the fused head is the path measured"
    first = samples[0]  # one-time allocations (gradients, Adam states) outside the timings
    engine.train_step([replace(first, input_ids=first.input_ids[:64], loss_mask=first.loss_mask[:64],
                               old_logprobs=first.old_logprobs[:64])])
    steps = {"sft": lambda: engine.sft_step(samples),
             "policy": lambda: engine.train_step(policy_samples, learner_old=None)}
    times: dict[str, dict[str, list[float]]] = {s: {v: [] for v in variants} for s in steps}
    losses: dict[str, dict[str, list[float]]] = {s: {v: [] for v in variants} for s in steps}  # equal: LR 0
    for r in range(args.repeats):
        for step, run in steps.items():
            for name in (variants if r % 2 == 0 else reversed(list(variants))):
                engine_module.fused_head_loss = fused_loss.fused_head_loss = variants[name]
                t0 = time.perf_counter()
                metrics = run()
                times[step][name].append(time.perf_counter() - t0)
                losses[step][name].append(metrics["sft/loss" if step == "sft" else "learner/loss"])
                print(f"repeat {r} {step} {name}: {times[step][name][-1]:.1f} s", flush=True)
    tokens = sum(len(s.input_ids) for s in samples)
    loss_tokens = sum(sum(s.loss_mask) for s in samples)
    out = {"command": " ".join(sys.argv), "cpus": os.cpu_count(), "samples": len(samples), "tokens": tokens, "loss_tokens": loss_tokens,
           "load_avg_1m": os.getloadavg()[0], "times_s": times, "losses": losses, "summary": {}}
    print(f"{len(samples)} samples, {tokens} tokens, {loss_tokens} carrying loss")
    print("| step | before, median (range) | after, median (range) | per-repeat ratio after/before |")
    print("|---|---|---|---|")
    for step, t in times.items():
        ratios = [a / b for a, b in zip(t["after"], t["before"])]
        out["summary"][step] = {"before_s": statistics.median(t["before"]), "after_s": statistics.median(t["after"]),
                                "ratio": statistics.median(ratios), "ratios": ratios}
        print(f"| {step} | {statistics.median(t['before']):.1f} s ({min(t['before']):.1f}-{max(t['before']):.1f}) "
              f"| {statistics.median(t['after']):.1f} s ({min(t['after']):.1f}-{max(t['after']):.1f}) "
              f"| {statistics.median(ratios):.2f} ({', '.join(f'{x:.2f}' for x in ratios)}) |")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
