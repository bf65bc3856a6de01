r"""One learner update of the default run's shape on real trajectories, with and without shared prefixes.

Reads the solver trajectories a `selfplay run` wrote (`<run>/trajectories/itNNNNN-solver.jsonl.gz`), takes
`--groups` groups of G attempts at one task (advantages +-1 in each group), and times what
`PolicyLearner.train` does with TIS on: the logprob pass over the later mini-batches and `--steps`
optimizer steps over the learner's seeded mini-batches. One `LearnerEngine` on the same model, the default
preset's engine (fp32, no gradient checkpointing), per `--variants` entry: `plain` or `shared`, its token
budget, and the mini-batch split (`sample` when left out, the split the variants were first measured
with; `group`: `learner.minibatches`' default), rotating their order per repeat. Figures: median and range of the update's wall time per
variant, the per-repeat ratio of each to the first, the tokens each runs, and their losses (those of
variants with the same split should agree).

    .venv/bin/python scripts/bench_shared_prefix.py --model DIR --run RUN_DIR [--groups 2] [--steps 2] \
        [--variants plain:2048,shared:2048,shared:4096] [--repeats 3] [--json docs/bench/shared_prefix.json]
    .venv/bin/python scripts/bench_shared_prefix.py --model DIR --run RUN_DIR --groups 4 --steps 2 \
        --variants shared:4096:sample,shared:4096:group --json docs/bench/minibatch_split.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def load_groups(run: Path, n: int) -> list[list[dict]]:
    """The first `n` groups of solver trajectories with at least 2 attempts, in file order."""
    groups: list[list[dict]] = []
    for path in sorted((run / "trajectories").glob("it*-solver.jsonl.gz")):
        by_task: dict[str, list[dict]] = {}
        with gzip.open(path, "rt") as fh:
            for line in fh:
                row = json.loads(line)
                key = row["metadata"].get("group_id") or row["metadata"].get("task_id") or str(len(by_task))
                by_task.setdefault(key, []).append(row)
        groups += [g for g in by_task.values() if len(g) > 1]
        if len(groups) >= n:
            return groups[:n]
    raise SystemExit(f"{run} holds {len(groups)} solver groups, fewer than --groups {n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="HF checkpoint directory (the warm start's model)")
    ap.add_argument("--run", required=True, type=Path, help="a run directory with solver trajectories")
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2, help="optimizer steps per update")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--variants", default="plain:2048,shared:2048,shared:4096",
                    help="comma-separated plain|shared:TOKEN_BUDGET[:sample|group]; ratios are to the first")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from selfplay.learner.batch import Sample
    from selfplay.learner.config import EngineConfig, LossConfig
    from selfplay.learner.engine import LearnerEngine
    from selfplay.learner.microbatch import plan_microbatches
    from selfplay.learner.minibatches import split_update
    from selfplay.learner.shared_prefix import clusters, plan_shared_microbatches, segment_cost

    variants = [(v.split(":") + ["sample"])[:3] for v in args.variants.split(",")]
    variants = [(kind, int(budget), split) for kind, budget, split in variants]
    names = [f"{kind}:{budget}" + (f":{split}" if split != "sample" else "") for kind, budget, split in variants]

    batch = []
    for n, g in enumerate(load_groups(args.run, args.groups)):
        for i, row in enumerate(g):
            lm = tuple(row["loss_mask"])
            batch.append(Sample(tuple(row["input_ids"]), lm, tuple(row["logprobs"]), 1.0 if i % 2 else -1.0,
                                group=f"solver:{n}"))
    # PolicyLearner.train's split of an update (seed 0, version 0)
    splits = {name: split_update([s.group for s in batch], [len(s.input_ids) for s in batch], args.steps, "0:0",
                                 split) for name, (_, _, split) in zip(names, variants)}
    engines = {name: LearnerEngine(EngineConfig(model_dir=args.model, dtype="fp32", token_budget=budget, lr=0.0,
                                                warmup_steps=1, temperature=0.5, gradient_checkpointing=False,
                                                share_prefix=kind == "shared", loss=LossConfig(tis_cap=2.0)))
               for name, (kind, budget, _) in zip(names, variants)}
    for engine in engines.values():  # one-time allocations (gradients, Adam states) outside the timings
        s = batch[0]
        engine.train_step([Sample(s.input_ids[:64], s.loss_mask[:64], s.old_logprobs[:64], 1.0)])

    def update(name: str) -> tuple[float, list[float]]:
        engine, parts = engines[name], splits[name]
        t0 = time.perf_counter()
        need = [i for part in parts[1:] for i in part]
        old = dict(zip(need, engine.logprobs([batch[i].input_ids for i in need])))
        losses = []
        for part in parts:
            mine = [old.get(i) for i in part]
            losses.append(engine.train_step([batch[i] for i in part], None if None in mine else mine)["learner/loss"])
        return time.perf_counter() - t0, losses

    def tokens(kind: str, budget: int, parts: list[list[int]]) -> tuple[int, int]:
        """Tokens the train steps run, and their micro-batches."""
        total = count = 0
        for part in parts:
            seqs = [batch[i].input_ids for i in part]
            masks = [batch[i].loss_mask for i in part]
            if kind == "plain":
                count += len(plan_microbatches([len(s) for s in seqs], budget))
                total += sum(len(s) for s in seqs)
                continue
            for mb in plan_shared_microbatches(seqs, budget, masks):
                count += 1
                total += sum(segment_cost([len(seqs[mb[b]]) for b in seg.members], len(seg.prefix))
                             for seg in clusters([seqs[i] for i in mb], [masks[i] for i in mb]))
        return total, count

    times: dict[str, list[float]] = {name: [] for name in names}
    losses: dict[str, list[float]] = {}
    for rep in range(args.repeats):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            wall, losses[name] = update(name)
            times[name].append(wall)
            print(f"repeat {rep} {name}: {wall:.1f} s, losses {losses[name]}", flush=True)
    base = names[0]
    ratios = {name: [a / b for a, b in zip(times[name], times[base])] for name in names[1:]}
    counts = {name: tokens(kind, budget, splits[name]) for name, (kind, budget, _) in zip(names, variants)}
    result = {"command": " ".join(sys.argv), "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
              "samples": len(batch), "steps": args.steps, "sample_tokens": [len(s.input_ids) for s in batch],
              "train_step_tokens": {n: c[0] for n, c in counts.items()},
              "train_step_microbatches": {n: c[1] for n, c in counts.items()}, "update_s": times,
              f"ratio_to_{base}": ratios, "losses": losses}
    for name, xs in times.items():
        print(f"{name}: median {statistics.median(xs):.1f} s ({min(xs):.1f}-{max(xs):.1f}), "
              f"train steps run {counts[name][0]} tokens in {counts[name][1]} micro-batches")
    for name, rs in ratios.items():
        print(f"{name} / {base}, per repeat: {', '.join(f'{r:.2f}' for r in rs)} (median {statistics.median(rs):.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
