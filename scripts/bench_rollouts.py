"""Benchmark rollout sampling: N episode-like callers sharing one policy, an old tree against this one.

Each caller is a thread that behaves like an episode's model side: `--calls` generate calls of at most
`--tokens` new tokens (untruncated T=1, seeded), the first on the real solver prompt (system + task
templates, ~490 tokens), each later one on the previous context plus its completion plus an `--obs`-token
stand-in for the tool observation, with a seeded `--sandbox-s` pause (the tool call) between calls so the
callers desynchronise as real episodes do. Both sides get the same prompts and seeds, so they sample the
same tokens (the token counts are printed to check) and do the same work where their samplers draw alike:
always at `--temperature 0`, and at T=1 only between trees with the same draw (this tree's inverse-CDF
draw differs from the `torch.multinomial` of trees before it).

Sides (each measurement in a fresh subprocess, old and new alternating within each repeat):
- old:  `BatchingPolicy(HFPolicy)` imported from `--base` (e.g. a `git worktree` of an older commit);
- new:  the same from this tree (continuous batching; KV reuse across turns with `--kv-cache-mb`);
- serial (with `--serial`): this tree's plain `HFPolicy`, one call at a time;
- ort (with `--ort`): the new side with `decode_engine="onnxruntime"` (`OrtStep` decode steps), its engine
  built with the policy, before the timed episodes, as a run builds it at start and in each weight sync.

Reported per N: sampled tokens / wall time, median and range over `--repeats`, the mean decode batch size
(token-weighted where the side reports it), and prompt tokens served from the KV store. `--json F` writes
every measurement.

Usage: git worktree add /tmp/base <old commit>
       .venv/bin/python scripts/bench_rollouts.py --base /tmp/base [--callers 4,8] [--calls 3] [--tokens 64]
       [--repeats 3] [--json docs/bench/rollouts.json]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def solver_prompt() -> tuple[list[int], list[int]]:
    """The real solver prompt and an observation delta, as token ids of the embedded tokenizer."""
    from agent_scaffold.roles import load_role, render_template, solver_variables
    try:
        from selfplay.rollout.policy_factory import embedded_tokenizer
    except ImportError:  # a side's tree from before selfplay/rollout/ (each side runs its own tree)
        from selfplay.orchestration.policy_factory import embedded_tokenizer

    tok = embedded_tokenizer()
    role = load_role("solver")
    values = {**role.defaults, "workdir": "/testbed", "command_timeout": "60", **solver_variables("spec")}
    messages = [{"role": "system", "content": render_template(role.system_template, values)},
                {"role": "user", "content": render_template(role.task_template, values)}]
    prompt = tok.encode(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
                        add_special_tokens=False)
    obs = tok.encode("<|im_end|>\n<|im_start|>user\n<observation>\n" + "tests/test_core.py::test_merge PASSED\n" * 30,
                     add_special_tokens=False)
    return prompt, obs


# --- worker: one measurement in a fresh process ------------------------------------------------------

def episode(policy, prompt: list[int], caller: int, args, obs: list[int], counts: list[int]) -> None:
    from agent_scaffold.policy import SamplingParams

    rng = random.Random(caller)
    context = list(prompt)
    for turn in range(args.calls):
        params = SamplingParams(temperature=args.temperature, max_new_tokens=args.tokens, seed=1000 * caller + turn)
        c = policy.generate([context], params)[0]
        counts[caller] += len(c.token_ids)
        context += list(c.token_ids) + obs[:args.obs]
        time.sleep(rng.uniform(0, 2 * args.sandbox_s))  # the tool call


def measure(args) -> dict:
    sys.path.insert(0, str(Path(args.tree).resolve()))
    import torch

    from agent_scaffold.policies.batching import BatchingPolicy
    from agent_scaffold.policies.hf import HFPolicy

    if args.threads:
        torch.set_num_threads(args.threads)
    data = json.loads(Path(args.prompts).read_text())
    # Any tree whose HFPolicy has a KV store gets one (the old, gathered tree has none).
    kwargs = {"kv_cache_mb": args.kv_cache_mb} if "kv_cache_mb" in inspect.signature(HFPolicy).parameters else {}
    if args.side == "ort":
        kwargs["decode_engine"] = "onnxruntime"
    t_build = time.perf_counter()
    hf = HFPolicy(**kwargs)
    build_s = time.perf_counter() - t_build  # model load, and the engine's build where it has one
    policy = hf if args.side == "serial" else BatchingPolicy(hf, max_batch=args.max_batch)
    counts = [0] * args.n
    threads = [threading.Thread(target=episode, args=(policy, data["prompt"], i, args, data["obs"], counts))
               for i in range(args.n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    out = {"side": args.side, "n": args.n, "tokens": sum(counts), "wall_s": wall, "tok_s": sum(counts) / wall,
           "load_1m": os.getloadavg()[0], "torch_threads": torch.get_num_threads(), "policy_build_s": build_s,
           "engine_sync_s": list(getattr(hf, "engine_sync_s", [])),
           "module": sys.modules[HFPolicy.__module__].__file__}
    sizes = getattr(policy, "sizes", None)
    if sizes:  # continuous: decode steps by size; token-weighted mean = sum(b^2 n) / sum(b n)
        out["batch_mean_steps"] = sum(b * n for b, n in sizes.items()) / sum(sizes.values())
        out["batch_mean_tokens"] = sum(b * b * n for b, n in sizes.items()) / max(1, sum(b * n for b, n in sizes.items()))
    elif getattr(policy, "batches", 0):
        out["batch_mean_steps"] = policy.rows / policy.batches  # gathered: prompts per batch
    store = getattr(hf, "kv_store", None)
    if store is not None:
        out["kv_reused_tokens"] = store.reused_tokens
    if isinstance(policy, BatchingPolicy):
        policy.close()
    return out


# --- parent: alternate sides in fresh processes ------------------------------------------------------

def run_side(side: str, tree: str, n: int, args, prompts_file: str) -> dict:
    cmd = [sys.executable, __file__, "--worker", "--side", side, "--tree", tree, "--n", str(n),
           "--prompts", prompts_file, "--calls", str(args.calls), "--tokens", str(args.tokens), "--obs", str(args.obs),
           "--temperature", str(args.temperature),
           "--sandbox-s", str(args.sandbox_s), "--threads", str(args.threads), "--max-batch", str(args.max_batch),
           "--kv-cache-mb", str(args.kv_cache_mb)]
    env = {**os.environ, "PYTHONPATH": tree}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree)
    if proc.returncode:
        raise RuntimeError(f"{side} worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", help="tree of the old side (a git worktree); omitted: only new (and serial)")
    ap.add_argument("--new", default=str(ROOT), help="tree of the new side (default: this one; pass a git worktree "
                    "to keep measuring one commit while this tree changes)")
    ap.add_argument("--serial", action="store_true", help="also measure this tree's plain HFPolicy, one call at a time")
    ap.add_argument("--ort", action="store_true", help="also measure this tree with decode_engine onnxruntime")
    ap.add_argument("--callers", default="4,8", help="comma-separated numbers of concurrent episodes")
    ap.add_argument("--calls", type=int, default=3, help="generate calls per episode")
    ap.add_argument("--tokens", type=int, default=64, help="max new tokens per call")
    ap.add_argument("--temperature", type=float, default=1.0,
                    help="0: greedy, so both sides sample the same tokens whatever their samplers draw")
    ap.add_argument("--obs", type=int, default=150, help="observation tokens appended after each call")
    ap.add_argument("--sandbox-s", type=float, default=0.5, help="mean seconds of the tool call between calls")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--kv-cache-mb", type=int, default=1024)
    ap.add_argument("--json", help="write every measurement here")
    # worker mode
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--side", default="new", help=argparse.SUPPRESS)
    ap.add_argument("--tree", default=str(ROOT), help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--prompts", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(measure(args)))
        return

    import tempfile

    prompt, obs = solver_prompt()
    prompts_file = Path(tempfile.mkdtemp()) / "prompts.json"
    prompts_file.write_text(json.dumps({"prompt": prompt, "obs": obs}))
    new = str(Path(args.new).resolve())
    sides = ([("old", str(Path(args.base).resolve()))] if args.base else []) + [("new", new)] + \
        ([("serial", new)] if args.serial else []) + ([("ort", new)] if args.ort else [])
    print(f"SmolLM2-135M fp32 CPU, {args.calls} calls x <= {args.tokens} tokens per episode on a {len(prompt)}-token "
          f"prompt, +{min(args.obs, len(obs))} observation tokens and ~{args.sandbox_s}s tool time per turn, "
          f"{args.repeats} repeats, load {os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    for n in [int(x) for x in args.callers.split(",")]:
        for rep in range(args.repeats):
            for side, tree in (sides if rep % 2 == 0 else sides[::-1]):  # alternate which side goes first
                r = run_side(side, tree, n, args, str(prompts_file))
                r["repeat"] = rep
                rows.append(r)
                print(f"  N={n} repeat {rep} {side}: {r['tok_s']:.1f} tok/s, {r['tokens']} tokens, "
                      f"{r['wall_s']:.1f} s, batch {r.get('batch_mean_steps', 1):.2f}, load {r['load_1m']:.1f}",
                      flush=True)
    first = sides[0][0]  # the side the others are compared with: old when there is one, else new
    print(f"\n{'N':>3} {'side':>7} {'median tok/s':>13} {'range':>15} {'vs ' + first:>7} {'mean batch':>11} {'tokens':>7}")
    for n in sorted({r["n"] for r in rows}):
        base = [r["tok_s"] for r in rows if r["n"] == n and r["side"] == first]
        for side, _ in sides:
            rs = [r for r in rows if r["n"] == n and r["side"] == side]
            rates = [r["tok_s"] for r in rs]
            med = statistics.median(rates)
            ratio = f"{med / statistics.median(base):.2f}x" if base else "-"
            batch = statistics.median(r.get("batch_mean_tokens", r.get("batch_mean_steps", 1.0)) for r in rs)
            print(f"{n:>3} {side:>7} {med:>13.1f} {min(rates):>7.1f}-{max(rates):<7.1f} {ratio:>7} {batch:>11.2f} "
                  f"{rs[0]['tokens']:>7}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"args": {k: v for k, v in vars(args).items() if k not in
                                                         ("worker", "side", "tree", "n", "prompts")},
                                               "prompt_tokens": len(prompt), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
