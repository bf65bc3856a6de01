"""One learner update of the default run's shape, two ways in one process, alternating: wall time per update.

An update is what `PolicyLearner.train` does with TIS on: the learner's logprobs before the update (a
separate forward pass) and `--steps` optimizer steps over seeded mini-batches. The two variants:

- `before`: gradient checkpointing on (the engine's default) and the pass over every sample, the first
  mini-batch's included (how the default run updated before 2026-11-28);
- `after`: gradient checkpointing off (the `default` preset's setting now) and the pass over the later
  mini-batches only, the first step taking its logprobs from its own forward (`train_step(old=None)`).

Each variant is its own `LearnerEngine` on the same model; samples are random tokens of the default run's
lengths (half of each sample trained on, advantages +-1), identical for both. Figures: median and range of
the update's wall time per variant, and the median of the per-repeat ratio after / before.

    .venv/bin/python scripts/bench_update.py --model DIR [--samples 4] [--tokens 1500] [--steps 2] \
        [--repeats 3] [--json docs/bench/update_time.json]
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
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

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
    # the default preset's engine (fp32, token budget 2048, LR 1e-5, TIS on), checkpointing per variant
    engines = {name: LearnerEngine(EngineConfig(model_dir=args.model, dtype="fp32", token_budget=2048, lr=1e-5,
                                                warmup_steps=1, temperature=0.5, gradient_checkpointing=gc))
               for name, gc in (("before", True), ("after", False))}
    for engine in engines.values():  # one-time allocations (gradients, Adam states) outside the timings
        engine.train_step([Sample(batch[0].input_ids[:64], batch[0].loss_mask[:64], batch[0].old_logprobs[:64], 1.0)])

    def update(name: str) -> float:
        engine = engines[name]
        t0 = time.perf_counter()
        need = [i for part in (parts if name == "before" else parts[1:]) for i in part]
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
              "samples": args.samples, "tokens": args.tokens, "steps": args.steps, "update_s": times,
              "ratio_after_before": ratios}
    for name, xs in times.items():
        print(f"{name}: median {statistics.median(xs):.1f} s ({min(xs):.1f}-{max(xs):.1f})")
    print(f"after / before, per repeat: {', '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
