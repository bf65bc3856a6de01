"""The decode step's matrix products written three ways, paired in one process.

For each batch size B: B rows of `--context` random tokens are prefilled, then one-token `LlamaStep` steps
are timed with every projection and the head computed
- `weight_first`: as `LlamaStep` computes them on CPU, (out, in) @ (in, rows), one row fed as two, more
  than `PRODUCT_ROWS` rows padded with zero rows to a multiple of it;
- `unpadded`: the same without that padding;
- `linear`: `F.linear(x, w)` over the same (out, in) weights (the HF forward's form);
- `transposed`: `x @ w_t` over (in, out) contiguous copies, the head by `F.linear` (the step before
  weight-first products),
alternating within each repeat. Prints and writes each arm's median step time, the median of the per-pair
ratios to `transposed` with their range, the largest |logit difference| to `transposed`, and the per-pair
ratios of `weight_first` to `unpadded`.

Usage: .venv/bin/python scripts/bench_step_products.py --model DIR [--batches 1,2,3,4,6,8,12,16] [--repeats 9]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_lookup import (  # scripts/ is on the path as the script's folder
    paired_steps,
    random_rows,
    step_policy,
)


def measure(model: str | None, batches: list[int], context: int, repeats: int) -> list[dict]:
    import torch

    import agent_scaffold.policies.llama_step as llama_step

    policy, step = step_policy(model)
    head = policy.model.lm_head.weight
    weight_first = type(step)._product.__get__(step)

    def unpadded(x, w):
        padded, llama_step.PRODUCT_ROWS = llama_step.PRODUCT_ROWS, 1 << 30
        try:
            return weight_first(x, w)
        finally:
            llama_step.PRODUCT_ROWS = padded

    transposed = {id(w): w.t().contiguous() for layer in step.layers for w in layer}
    arms = {
        "weight_first": weight_first,
        "unpadded": unpadded,
        "linear": torch.nn.functional.linear,
        "transposed": lambda x, w: torch.nn.functional.linear(x, w) if w is head else x @ transposed[id(w)],
    }
    gen = torch.Generator().manual_seed(0)
    rows = []
    for b in batches:
        kv = random_rows(policy, b, context, gen)
        ids = torch.randint(0, 40000, (b, 1), generator=gen)
        pos = torch.full((b, 1), context)
        times, logits = paired_steps(step, kv, ids, pos, {arm: lambda p=product: setattr(step, "_product", p)
                                                          for arm, product in arms.items()}, repeats)
        del step._product
        row: dict = {"batch": b}
        for arm in arms:
            ratios = [t / base for t, base in zip(times[arm], times["transposed"])]
            row[arm] = {"ms": statistics.median(times[arm]) * 1e3, "vs_transposed": statistics.median(ratios),
                        "vs_transposed_range": [min(ratios), max(ratios)],
                        "max_abs_dlogit": float((logits[arm] - logits["transposed"]).abs().max())}
        pad = [t / u for t, u in zip(times["weight_first"], times["unpadded"])]
        row["padded_vs_unpadded"] = {"median": statistics.median(pad), "range": [min(pad), max(pad)]}
        rows.append(row)
        print(f"B={b}: padded/unpadded {statistics.median(pad):.2f}x ({min(pad):.2f}-{max(pad):.2f}); " + ", ".join(f"{arm} {row[arm]['ms']:.0f} ms ({row[arm]['vs_transposed']:.2f}x, "
                                     f"{row[arm]['vs_transposed_range'][0]:.2f}-{row[arm]['vs_transposed_range'][1]:.2f})"
                                     for arm in arms), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--batches", default="1,2,3,4,6,8,12,16")
    ap.add_argument("--context", type=int, default=1500)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    out = measure(args.model, [int(b) for b in args.batches.split(",")], args.context, args.repeats)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
