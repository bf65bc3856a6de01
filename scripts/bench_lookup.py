"""Prompt-lookup decoding (`policy.lookup_tokens`), its two halves measured apart.

`replay RUN_DIR`: how many tokens a decode step would emit with lookup drafts of up to k tokens, replayed
over a run's sampled turns (`trajectories/*.jsonl.gz`): at each step the row's sampled token, then the
draft `NgramIndex` makes from the context so far, kept while it matches what the episode sampled next
("match"), or by the product of the sampled tokens' probabilities ("expected": the keep rate the
verification would have given those same tokens). Per role and k.

`cost`: the time of one `LlamaStep.many` forward of T positions a row (the sampled token and T - 1 drafts)
at B rows of `--context` tokens, against the one-token step, on the model given (the median of
`--repeats` timings each). With `--drafting 1,2`, also the step where only that many rows feed T positions
and the rest one (the rest is padding no product computes: how `DecodeBatch` spends a few drafted
positions in a large batch).

Usage: .venv/bin/python scripts/bench_lookup.py replay runs/<run_id> [--k 1,2,3,5,8]
       .venv/bin/python scripts/bench_lookup.py cost --model DIR [--batches 1,2,4,8,12,16] [--widths 1,2,3,4,6]
           [--drafting 1,2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def replay(run_dir: Path, ks: list[int]) -> dict[str, dict[int, dict[str, float]]]:
    from agent_scaffold.policies.lookup import NgramIndex

    sums: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0, 0.0]))
    for path in sorted((run_dir / "trajectories").glob("*.jsonl.gz")):
        for line in gzip.open(path, "rt"):
            t = json.loads(line)
            ids, logps = t["input_ids"], t["logprobs"]
            for start, end in t["turn_spans"]:
                for k in ks:
                    index, p = NgramIndex(ids[:start + 1]), start
                    acc = sums[t["role"]][k]
                    while p < end:  # a step: ids[p] sampled, then the draft after it
                        draft = index.draft(min(k, end - p - 1))
                        match, expected, keep = 0, 0.0, 1.0
                        for j, tok in enumerate(draft):
                            if ids[p + 1 + j] != tok:
                                break
                            match += 1
                            keep *= math.exp(logps[p + 1 + j])
                            expected += keep
                        acc[0] += 1 + match
                        acc[1] += 1 + expected
                        acc[2] += 1
                        index.extend(ids[p + 1:p + 2 + match])
                        p += 1 + match
    return {role: {k: {"match_tokens_per_step": a[0] / a[2], "expected_tokens_per_step": a[1] / a[2],
                       "steps": a[2]} for k, a in by_k.items()} for role, by_k in sums.items()}


def step_policy(model: str | None) -> tuple[object, object]:
    """The `HFPolicy` of `model` and its `LlamaStep`; exits when the model does not decode through one."""
    from agent_scaffold.policies.hf import HFPolicy

    policy = HFPolicy(model)
    step = policy.llama_step()
    if step is None:
        raise SystemExit(f"{policy.model_dir} does not decode through LlamaStep (see the log for the reason)")
    return policy, step


def random_rows(policy: object, b: int, context: int, gen: object) -> object:
    """The `SlotKV` of a `DecodeBatch` holding `b` prefilled rows of `context` random tokens."""
    import torch

    from agent_scaffold.policies.decode_batch import DecodeBatch
    from agent_scaffold.policy import SamplingParams

    batch = DecodeBatch(policy)
    batch.admit_many([(torch.randint(0, 40000, (context,), generator=gen).tolist(), SamplingParams(), i, i)
                      for i in range(b)])
    return batch.kv


def paired_steps(step: object, kv: object, ids: object, pos: object, arms: dict, repeats: int) -> tuple[dict, dict]:
    """One-token `step.many` forwards over `kv`, the arms (name -> a function that sets the step up for that
    arm) alternating within each repeat, the first round a warm-up at this shape. Per arm, the step times
    (warm-up dropped) and the last logits."""
    import torch

    times: dict[str, list[float]] = {arm: [] for arm in arms}
    logits = {}
    for _ in range(repeats + 1):
        for arm, setup in arms.items():
            setup()
            attend = kv.step_attend(1)
            t0 = time.perf_counter()
            with torch.inference_mode():
                logits[arm] = step.many(ids, pos, kv, attend)
            times[arm].append(time.perf_counter() - t0)
            kv.mask[:kv.rows, kv.end:kv.end + 1] = 0  # the batch never advanced: the column is free
    return {arm: t[1:] for arm, t in times.items()}, logits


def cost(model: str | None, batches: list[int], widths: list[int], context: int, repeats: int,
         drafting: list[int] = ()) -> list[dict]:
    import torch

    policy, step = step_policy(model)
    gen = torch.Generator().manual_seed(0)
    rows = []
    for b in batches:
        kv, ms = random_rows(policy, b, context, gen), {}
        shapes = [(str(w), w, None) for w in widths]  # (label, T, lengths)
        shapes += [(f"{w} x {r} rows", w, [w] * r + [1] * (b - r)) for w in widths if w > 1 for r in drafting if r < b]
        for label, width, lengths in shapes:
            times = []
            for _ in range(repeats + 1):  # the first is a warm-up at this shape
                attend = kv.step_attend(width)
                ids = torch.randint(0, 40000, (b, width), generator=gen)
                pos = torch.arange(context, context + width)[None].expand(b, -1)
                t0 = time.perf_counter()
                with torch.inference_mode():
                    step.many(ids, pos, kv, attend, lengths)
                times.append(time.perf_counter() - t0)
                kv.mask[:kv.rows, kv.end:kv.end + width] = 0  # the batch never advanced: the columns are free
            ms[label] = statistics.median(times[1:]) * 1e3
        row = {"batch": b, "ms": ms, "vs_one": {k: v / ms["1"] for k, v in ms.items()}}
        rows.append(row)
        print(f"B={b}: " + ", ".join(f"T={k} {v:.0f} ms ({v / ms['1']:.2f}x)" for k, v in ms.items()), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("replay")
    r.add_argument("run_dir", type=Path)
    r.add_argument("--k", default="1,2,3,5,8")
    c = sub.add_parser("cost")
    c.add_argument("--model", default=None)
    c.add_argument("--batches", default="1,2,4,8,12,16")
    c.add_argument("--widths", default="1,2,3,4,6")
    c.add_argument("--context", type=int, default=1500)
    c.add_argument("--repeats", type=int, default=7)
    c.add_argument("--drafting", default="", help="rows that feed T positions while the rest feed one, e.g. 1,2")
    for p in (r, c):
        p.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.what == "replay":
        if not (args.run_dir / "trajectories").is_dir():
            raise SystemExit(f"{args.run_dir} has no trajectories/ folder: name a run directory (runs/<run_id>)")
        out: object = replay(args.run_dir, [int(k) for k in args.k.split(",")])
        for role, by_k in out.items():  # type: ignore[attr-defined]
            print(role + ": " + ", ".join(f"k={k} {v['match_tokens_per_step']:.2f} ({v['expected_tokens_per_step']:.2f})"
                                          for k, v in by_k.items()) + " tokens a step, match (expected)")
    else:
        widths = sorted({1, *(int(w) for w in args.widths.split(","))})
        out = cost(args.model, [int(b) for b in args.batches.split(",")], widths, args.context, args.repeats,
                   [int(r) for r in args.drafting.split(",") if r])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
