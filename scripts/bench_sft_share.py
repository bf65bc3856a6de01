"""The warm start's SFT steps with and without shared prefixes, on the demonstrations a build stored.

Reads the demonstrations of a warm-start build (`<cache>/warm_start/<config key>/store.db`, written by
`selfplay warm-start`), turns them into SFT samples and batches as the build does (`WarmStartConfig()`'s
SFT settings), and times the first `--steps` optimizer steps (`LearnerEngine.sft_step`) on a fresh engine
per `--variants` entry (`plain` or `shared`, with its token budget and optionally the engine's dtype,
`SFTConfig.dtype`), rotating their order per repeat.
Figures: median and range of the steps' wall time per variant, the per-repeat ratio of each to the first,
micro-batches, and the losses (they should agree).

    .venv/bin/python scripts/bench_sft_share.py --warm-start ~/.cache/selfplay/warm_start/<key> \\
        [--steps 6] [--variants plain:2048,shared:2048,shared:4096] [--repeats 3] [--json out.json]
    .venv/bin/python scripts/bench_sft_share.py --warm-start ~/.cache/selfplay/warm_start/<key> \\
        --variants plain:2048:fp32,plain:2048:bf16   # bf16 SFT steps on a CPU against fp32
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warm-start", required=True, type=Path, help="a warm-start build directory (with store.db)")
    ap.add_argument("--steps", type=int, default=6, help="optimizer steps timed (the build's first ones)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--variants", default="plain:2048,shared:2048,shared:4096",
                    help="comma-separated plain|shared:TOKEN_BUDGET[:auto|fp32|bf16]; ratios are to the first")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from selfplay.demos.warm_start import sft_config
    from selfplay.demos.warm_start_config import WarmStartConfig
    from selfplay.learner.rft import collect, sft_samples
    from selfplay.learner.sft import batches, sft_engine
    from selfplay.store import open_store

    config = WarmStartConfig()
    with open_store(str(args.warm_start / "store.db")) as store:
        data = collect(store, source="demo", max_per_task=config.per_task, injector=config.injector_per_repo > 0)
    samples = sft_samples(data.trajectories, turns=config.loss_turns)
    sft = sft_config(config)
    plan = batches(samples, sft)
    steps = plan[: args.steps]
    variants = []
    for spec in args.variants.split(","):
        parts = spec.split(":")
        name, budget, dtype = (parts + ["auto"])[:3]
        if len(parts) not in (2, 3) or name not in ("plain", "shared") or not budget.isdigit() \
                or dtype not in ("auto", "fp32", "bf16"):
            raise SystemExit(f"--variants: {spec!r} is not plain|shared:TOKEN_BUDGET[:auto|fp32|bf16]")
        variants.append((name, int(budget), dtype))
    print(f"{len(samples)} samples, {len(plan)} steps in the build; timing the first {len(steps)}: "
          f"{[[s.role + ':' + str(len(s.input_ids)) for s in b] for b in steps]}", flush=True)
    times: dict[str, list[float]] = {":".join(map(str, v)): [] for v in variants}
    info: dict[str, dict] = {}
    for rep in range(args.repeats):
        order = variants[rep % len(variants):] + variants[: rep % len(variants)]
        for name, budget, dtype in order:
            key = f"{name}:{budget}:{dtype}"
            engine = sft_engine(replace(sft, token_budget=budget, share_prefix=name == "shared", dtype=dtype),
                                len(plan))
            t0 = time.perf_counter()
            metrics = [engine.sft_step(b) for b in steps]
            times[key].append(time.perf_counter() - t0)
            info[key] = {"losses": [m["sft/loss"] for m in metrics],
                         "microbatches": sum(m["sft/microbatches"] for m in metrics),
                         "step_s": [m["sft/step_s"] for m in metrics],
                         "share_prefix": engine.share_prefix, "dtype": str(engine.dtype)}
            print(f"repeat {rep} {key}: {times[key][-1]:.1f} s, {info[key]['microbatches']:.0f} micro-batches, "
                  f"losses {[round(x, 4) for x in info[key]['losses']]}", flush=True)
            engine.close()  # a dropped engine keeps its gradients and optimizer state (LearnerEngine.close)
    first = ":".join(map(str, variants[0]))
    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").is_file() else []
    result = {"machine": {"cpus": os.cpu_count(), "avx512_bf16": "avx512_bf16" in flags,
                          "amx_bf16": "amx_bf16" in flags}, "samples": len(samples), "steps_timed": len(steps),
              "variants": {}}
    for key, ts in times.items():
        ratios = [t / f for t, f in zip(ts, times[first])]
        result["variants"][key] = {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts),
                                   "ratio_median": statistics.median(ratios), "times": ts, **info[key]}
        print(f"{key}: median {statistics.median(ts):.1f} s [{min(ts):.1f}, {max(ts):.1f}], "
              f"ratio {statistics.median(ratios):.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
