"""Benchmark batched generation across episodes: N episode-like callers through `BatchingPolicy` vs serialised.

Each caller is a thread that behaves like an episode's model side: `--calls` generate calls of
`--tokens` new tokens (untruncated T=1, seeded), each on the previous context plus its completion plus a
`--obs`-token stand-in for the tool observation, so contexts grow turn by turn. Both modes sample exactly
the same tokens (same seeds per caller and turn), so they do the same work:

- serial:  the callers share one `HFPolicy` directly; its lock samples one call at a time (the old path).
- batched: the callers share `BatchingPolicy(HFPolicy, max_batch=N)`.

Reported: total sampled tokens / wall time, median over `--repeats`, and the mean batch size. No sandbox
time sits between calls here; real episodes desynchronise and batch less (see docs/scaling.md).

Usage: nice -n 10 .venv/bin/python scripts/bench_rollouts.py [--callers 1,4,8] [--calls 3] [--tokens 64]
       [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

QUESTIONS = ["List the files in the repo.", "Find the failing test and explain why it fails in detail.",
             "Show me utils.py.", "Run pytest on tests/test_core.py and summarise the output for me, please.",
             "What does the function merge_sorted do?", "Fix the bug.", "Write a regression test for the fix.",
             "Print the diff of your changes."]


def episode(policy, prompt: list[int], caller: int, calls: int, tokens: int, obs: list[int]) -> int:
    from agent_scaffold.policy import SamplingParams

    context, sampled = list(prompt), 0
    for turn in range(calls):
        params = SamplingParams(max_new_tokens=tokens, seed=1000 * caller + turn)
        c = policy.generate([context], params)[0]
        sampled += len(c.token_ids)
        context += list(c.token_ids) + obs
    return sampled


def run(policy, prompts: list[list[int]], calls: int, tokens: int, obs: list[int]) -> tuple[int, float]:
    counts = [0] * len(prompts)

    def work(i: int) -> None:
        counts[i] = episode(policy, prompts[i], i, calls, tokens, obs)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(prompts))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--callers", default="1,4,8", help="comma-separated numbers of concurrent episodes")
    ap.add_argument("--calls", type=int, default=3, help="generate calls per episode")
    ap.add_argument("--tokens", type=int, default=64, help="max new tokens per call")
    ap.add_argument("--obs", type=int, default=48, help="observation tokens appended after each call")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--max-wait", type=float, default=0.02, help="BatchingPolicy.max_wait_s")
    args = ap.parse_args()

    import torch

    from agent_scaffold.policies.batching import BatchingPolicy
    from agent_scaffold.policies.hf import HFPolicy

    if args.threads:
        torch.set_num_threads(args.threads)
    hf = HFPolicy()
    tok = hf.tokenizer
    prompts = [tok.encode(tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                                  tokenize=False), add_special_tokens=False) for q in QUESTIONS]
    obs = tok.encode("\n<observation>\n" + "src/module.py: line 12: ok\n" * 8, add_special_tokens=False)[:args.obs]
    print(f"SmolLM2-135M fp32 CPU, {torch.get_num_threads()} torch threads, {args.calls} calls x {args.tokens} "
          f"tokens per episode, +{len(obs)} observation tokens per turn, {args.repeats} repeats")
    print(f"{'N':>3} {'serial tok/s':>13} {'batched tok/s':>14} {'speed-up':>9} {'mean batch':>11} {'tokens':>7}")
    for n in [int(x) for x in args.callers.split(",")]:
        batched = BatchingPolicy(hf, max_batch=n, max_wait_s=args.max_wait)
        serial_rates, batched_rates, tokens = [], [], 0
        for _ in range(args.repeats):  # alternate, so load drifts hit both sides alike
            tokens, wall = run(hf, [prompts[i % len(prompts)] for i in range(n)], args.calls, args.tokens, obs)
            serial_rates.append(tokens / wall)
            tokens_b, wall = run(batched, [prompts[i % len(prompts)] for i in range(n)], args.calls, args.tokens, obs)
            batched_rates.append(tokens_b / wall)
        s, b = statistics.median(serial_rates), statistics.median(batched_rates)
        print(f"{n:>3} {s:>13.1f} {b:>14.1f} {b / s:>8.2f}x {batched.rows / max(batched.batches, 1):>11.2f} "
              f"{tokens:>7}", flush=True)
        batched.close()


if __name__ == "__main__":
    main()
