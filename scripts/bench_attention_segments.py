"""The decode step with its rows attending in contiguous runs (`attention_segments`) against one call over the
whole batch, paired in one process.

For each mix of row lengths, the rows (random tokens, in a shuffled slot order) are prefilled into one
`DecodeBatch`, then one-token `LlamaStep` steps are timed both ways, alternating within each repeat. Prints
and writes each way's median step time, the median of the per-pair ratios segmented / one call with their
range, the batch's fill (real columns / rows x width), the runs chosen, and the largest |logit difference|.

Mixes (`--mixes`): `equal` (12 rows of 1,500 tokens), `solver` (12 rows of 600-2,000), `mixed` (2 injector
rows of 2,500-3,000 and 10 solver rows of 600-2,000), `full` (2 injector rows and 16 solver rows, the
default run's 18 workers).

Usage: .venv/bin/python scripts/bench_attention_segments.py --model DIR [--mixes equal,solver,mixed,full]
       [--repeats 9] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_lookup import paired_steps, step_policy  # scripts/ is on the path as the script's folder


def lengths(mix: str, rng: random.Random) -> list[int]:
    solver = lambda n: [rng.randint(600, 2000) for _ in range(n)]  # noqa: E731
    injector = [rng.randint(2500, 3000) for _ in range(2)]
    rows = {"equal": [1500] * 12, "solver": solver(12), "mixed": injector + solver(10),
            "full": injector + solver(16)}[mix]
    rng.shuffle(rows)
    return rows


def measure(model: str | None, mixes: list[str], repeats: int) -> list[dict]:
    import torch

    from agent_scaffold.policies.decode_batch import DecodeBatch
    from agent_scaffold.policy import SamplingParams

    policy, step = step_policy(model)
    segmented = type(step)._segments.__get__(step)
    one_call = lambda kv, attend, t: [(0, kv.rows, kv.start, attend)]  # noqa: E731
    rng, gen = random.Random(0), torch.Generator().manual_seed(0)
    out = []
    for mix in mixes:
        lens = lengths(mix, rng)
        batch = DecodeBatch(policy)
        batch.admit_many([(torch.randint(0, 40000, (n,), generator=gen).tolist(), SamplingParams(), i, i)
                          for i, n in enumerate(lens)])
        kv, b = batch.kv, len(lens)
        ids = torch.randint(0, 40000, (b, 1), generator=gen)
        pos = torch.tensor(lens)[:, None]
        runs = [e - a for a, e, _, _ in segmented(kv, kv.step_attend(1), 1)]
        kv.mask[:kv.rows, kv.end:kv.end + 1] = 0
        times, logits = paired_steps(step, kv, ids, pos, {arm: lambda f=fn: setattr(step, "_segments", f)
                                                          for arm, fn in (("segmented", segmented), ("one_call", one_call))},
                                     repeats)
        del step._segments
        ratios = [s / o for s, o in zip(times["segmented"], times["one_call"])]
        row = {"mix": mix, "rows": b, "lengths": lens, "fill": sum(lens) / (b * max(lens)), "runs": runs,
               "segmented_ms": statistics.median(times["segmented"]) * 1e3,
               "one_call_ms": statistics.median(times["one_call"]) * 1e3,
               "ratio": statistics.median(ratios), "ratio_range": [min(ratios), max(ratios)],
               "max_abs_dlogit": float((logits["segmented"] - logits["one_call"]).abs().max())}
        out.append(row)
        print(f"{mix}: B={b} fill {row['fill']:.2f} runs {runs}: segmented {row['segmented_ms']:.0f} ms, one call "
              f"{row['one_call_ms']:.0f} ms, {row['ratio']:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}), "
              f"|dlogit| {row['max_abs_dlogit']:.1e}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--mixes", default="equal,solver,mixed,full")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    out = measure(args.model, args.mixes.split(","), args.repeats)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
