r"""One learner update of the default run's shape, two ways in one process, alternating: wall time per update.

An update is what `PolicyLearner.train` does with TIS on: the learner's logprobs before the update (a
separate forward pass) and `--steps` optimizer steps over seeded mini-batches. Two comparisons:

`--compare checkpointing` (the default), the default preset's change of 2026-11-28:
- `before`: gradient checkpointing on (the engine's default) and the pass over every sample, the first
  mini-batch's included (how the default run updated before 2026-11-28);
- `after`: gradient checkpointing off (the `default` preset's setting now) and the pass over the later
  mini-batches only, the first step taking its logprobs from its own forward (`train_step(old=None)`).

`--compare dtype`, the learner's precision on a CPU (`learner.engine.dtype`), both as the `default` preset
updates now (checkpointing off, the pass over the later mini-batches only):
- `before`: fp32 (the `default` preset's);
- `after`: bf16 (DeepSpeed's bf16 mode: bf16 weights and activations, fp32 optimizer state).
With `--run RUN_DIR`, the script also reports how far the two precisions' logprobs lie apart on real
episodes, before any step: the first `--samples` solver trajectories of the run's iteration 0, over their
sampled tokens, at the run's temperature.

Each variant is its own `LearnerEngine` on the same model; samples are random tokens of the default run's
lengths (half of each sample trained on, advantages +-1), identical for both. Figures: median and range of
the update's wall time per variant, and the median of the per-repeat ratio after / before.

    .venv/bin/python scripts/bench_update.py --model DIR [--compare checkpointing|dtype] [--run RUN_DIR] \
        [--samples 4] [--tokens 1500] [--steps 2] [--repeats 3] [--json docs/bench/update_time.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="HF checkpoint directory (the warm start's model)")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=1500, help="tokens per sample")
    ap.add_argument("--steps", type=int, default=2, help="optimizer steps per update")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compare", choices=("checkpointing", "dtype"), default="checkpointing")
    ap.add_argument("--run", default=None, help="with --compare dtype: a run directory whose iteration-0 "
                                                "solver episodes measure the logprob gap")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.run and args.compare != "dtype":
        ap.error("--run measures the bf16-fp32 logprob gap: it goes with --compare dtype")

    from selfplay.learner.batch import Sample
    from selfplay.learner.config import EngineConfig
    from selfplay.learner.engine import LearnerEngine

    rng = random.Random(0)

    def sample(adv: float) -> Sample:
        n = args.tokens
        ids = tuple(rng.randrange(1000, 40000) for _ in range(n))
        mask = (0,) * (n // 2) + (1,) * (n - n // 2)
        return Sample(ids, mask, tuple(-1.0 if m else 0.0 for m in mask), adv)

    batch = [sample(1.0 if i % 2 else -1.0) for i in range(args.samples)]
    parts = [list(range(args.samples))[k::args.steps] for k in range(args.steps)]
    # the default preset's engine (fp32, token budget 2048, LR 1e-5, TIS on), but for what is compared
    variants = {"checkpointing": {"before": ("fp32", True), "after": ("fp32", False)},
                "dtype": {"before": ("fp32", False), "after": ("bf16", False)}}[args.compare]
    engines = {name: LearnerEngine(EngineConfig(model_dir=args.model, dtype=dtype, token_budget=2048, lr=1e-5,
                                                warmup_steps=1, temperature=0.5, gradient_checkpointing=gc))
               for name, (dtype, gc) in variants.items()}
    gap = _logprob_gap(engines, Path(args.run), args.samples) if args.run else None
    for engine in engines.values():  # one-time allocations (gradients, Adam states) outside the timings
        engine.train_step([Sample(batch[0].input_ids[:64], batch[0].loss_mask[:64], batch[0].old_logprobs[:64], 1.0)])

    def update(name: str) -> float:
        engine = engines[name]
        t0 = time.perf_counter()
        full_pass = args.compare == "checkpointing" and name == "before"
        need = [i for part in (parts if full_pass else parts[1:]) for i in part]
        old = dict(zip(need, engine.logprobs([batch[i].input_ids for i in need])))
        for part in parts:
            mine = [old.get(i) for i in part]
            engine.train_step([batch[i] for i in part], None if None in mine else mine)
        return time.perf_counter() - t0

    times: dict[str, list[float]] = {"before": [], "after": []}
    for rep in range(args.repeats):
        for name in (("before", "after") if rep % 2 == 0 else ("after", "before")):
            times[name].append(update(name))
            print(f"repeat {rep} {name}: {times[name][-1]:.1f} s", flush=True)
    ratios = [a / b for a, b in zip(times["after"], times["before"])]
    result = {"command": " ".join(sys.argv), "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
              "compare": args.compare, "variants": variants, "samples": args.samples, "tokens": args.tokens,
              "steps": args.steps, "update_s": times, "ratio_after_before": ratios, "logprob_gap": gap}
    for name, xs in times.items():
        print(f"{name}: median {statistics.median(xs):.1f} s ({min(xs):.1f}-{max(xs):.1f})")
    print(f"after / before, per repeat: {', '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f})")
    if gap:
        print(f"bf16 - fp32 logprob gap over {gap['tokens']} sampled tokens: mean |d| {gap['mean_abs']:.4f}, "
              f"p99 {gap['p99_abs']:.4f}, max {gap['max_abs']:.4f}; mean d {gap['mean']:+.4f}; mean |d| to the "
              f"rollout's: fp32 {gap['mean_abs_to_rollout']['before']:.4f}, bf16 {gap['mean_abs_to_rollout']['after']:.4f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


def _logprob_gap(engines: dict, run: Path, n: int) -> dict:
    """How far the bf16 engine's logprobs lie from the fp32 one's on the sampled tokens of the run's first
    `n` iteration-0 solver episodes, before either engine takes a step."""
    from selfplay.orchestration.rundir import read_trajectories

    trajs = list(read_trajectories(run / "trajectories" / "it00000-solver.jsonl.gz"))[:n]
    if not trajs:
        raise SystemExit(f"{run}: no iteration-0 solver trajectories to measure the logprob gap on")
    segments = [seg for t in trajs for seg in t.sequences()]  # (ids, loss mask, rollout logprobs) each
    lp = {name: engine.logprobs([ids for ids, _, _ in segments]) for name, engine in engines.items()}
    d = [b - a for (_, mask, _), rows_a, rows_b in zip(segments, lp["before"], lp["after"])
         for a, b, m in zip(rows_a, rows_b, mask) if m]
    ab = sorted(abs(x) for x in d)
    # beside it, each engine's distance from the rollout's own logprobs (the mismatch TIS corrects)
    rollout = {name: statistics.fmean(abs(x - r) for (_, mask, behaviour), row in zip(segments, rows)
                                      for x, r, m in zip(row, behaviour, mask) if m)
               for name, rows in lp.items()}
    return {"episodes": len(trajs), "tokens": len(d), "mean": statistics.fmean(d),
            "mean_abs": statistics.fmean(ab), "p99_abs": ab[int(0.99 * (len(ab) - 1))], "max_abs": ab[-1],
            "mean_abs_to_rollout": rollout}


if __name__ == "__main__":
    main()
