"""Benchmark the agent scaffold: hf policy sampling speed on CPU, and the scaffold's own per-turn overhead.

1. Tokens/s of `HFPolicy.generate` (our KV-cached sampling loop, untruncated T=1) against the baseline
   `model.generate(do_sample=True, top_k=0)` of transformers on the same prompt, same token count.
2. Scaffold overhead per turn excluding model time (parsing, observation rendering and tokenization,
   bookkeeping) against the baseline: a turn whose command takes 1 s (`sleep 1` in a Docker toolz sandbox).
   Target: below 5 %.

Usage: .venv/bin/python scripts/bench_scaffold.py [--tokens 32] [--repeats 3] [--turns 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from agent_scaffold.agent import run_episode
from agent_scaffold.embedded import default_model_dir
from agent_scaffold.policies.hf import HFPolicy
from agent_scaffold.policies.scripted import ScriptedPolicy
from agent_scaffold.policy import SamplingParams
from agent_scaffold.roles import EpisodeLimits, load_role, solver_variables
from repos.listfile import get_repo
from sandboxes.docker import DockerSandbox
from sandboxes.images import repo_image


def bench_tokens(tokens: int, repeats: int) -> None:
    import torch

    policy = HFPolicy()
    tok = policy.tokenizer
    prompt = tok.encode(tok.apply_chat_template([{"role": "user", "content": "Write a long story about a cat."}],
                                                add_generation_prompt=True, tokenize=False), add_special_tokens=False)
    ours, base = [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        c = policy.generate([prompt], SamplingParams(max_new_tokens=tokens, seed=r, stop_token_ids=()))[0]
        ours.append(len(c.token_ids) / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = policy.model.generate(torch.tensor([prompt]), do_sample=True, top_k=0, top_p=1.0, temperature=1.0,
                                        max_new_tokens=tokens, min_new_tokens=tokens, pad_token_id=tok.eos_token_id)
        base.append((out.shape[1] - len(prompt)) / (time.perf_counter() - t0))
    mo, mb = statistics.median(ours), statistics.median(base)
    print(f"hf policy on CPU, {tokens} new tokens, {repeats} runs, {torch.get_num_threads()} threads")
    print(f"  HFPolicy.generate        median {mo:6.1f} tok/s")
    print(f"  baseline model.generate  median {mb:6.1f} tok/s")
    print(f"  ratio ours/baseline      {mo / mb:.2f}")


def bench_overhead(turns: int, repeats: int) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(default_model_dir())
    action = "Run it.\n```bash\nsleep 1; ls toolz | head -20\n```"
    per_turn, turn_time = [], []
    with DockerSandbox.create(repo_image(get_repo("toolz")), workdir="/testbed") as box:
        for _ in range(repeats):
            ep = run_episode(ScriptedPolicy([action] * turns, tok), box, load_role("solver"),
                             solver_variables("bench", "issue"), limits=EpisodeLimits(max_turns=turns))
            per_turn.append(ep.timings["scaffold"] / ep.turns)
            turn_time.append((ep.timings["wall"] - ep.timings["model"]) / ep.turns)
    mo, mt = statistics.median(per_turn), statistics.median(turn_time)
    print(f"scaffold overhead, {turns} turns x {repeats} runs, command `sleep 1` in a Docker toolz sandbox")
    print(f"  scaffold time per turn (excl. model and sandbox)  median {mo * 1000:7.1f} ms")
    print(f"  baseline: turn time excl. model                   median {mt * 1000:7.1f} ms")
    print(f"  ratio overhead/turn                               {mo / mt:.2%}  (target < 5%)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--turns", type=int, default=5)
    args = ap.parse_args()
    bench_tokens(args.tokens, args.repeats)
    bench_overhead(args.turns, args.repeats)


if __name__ == "__main__":
    main()
