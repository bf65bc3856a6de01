"""The constants of `learner.shared_prefix`'s cost model, measured on this machine for one model.

Times forward and backward of the decoder (`model.base_model`, fp32, SDPA) on random token ids:
- sequences of n tokens run whole, and fits T = L n + A n^2 (least squares): L is one token's projections
  and MLP, A the causal attention per n^2;
- remainders of r tokens against a cache of p (the prefix run without gradient, as a shared prefix's
  backward is counted once), and takes M = median of (T - L r) / (r (p + r)): the masked attention per
  element of the rectangle.
Prints CAUSAL_ATTENTION = A / L and MASKED_ATTENTION = M / L, medians of `--repeats` each.

    .venv/bin/python scripts/bench_attention_cost.py [--model DIR] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WHOLE = (512, 1024, 2048)
REMAINDERS = ((512, 1024), (1024, 1024), (256, 2048))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="HF checkpoint directory (default: the embedded SmolLM2-135M)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM

    from agent_scaffold.embedded import default_model_dir
    from agent_scaffold.policies.hf_cache import returned_cache, with_cache

    model = AutoModelForCausalLM.from_pretrained(args.model or default_model_dir(), dtype=torch.float32,
                                                 attn_implementation="sdpa").train()
    base = model.base_model
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)

    def ids(n: int) -> torch.Tensor:
        return torch.randint(0, vocab, (1, n), generator=gen)

    def timed(fn) -> float:
        out = []
        for _ in range(args.repeats):
            model.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            fn().sum().backward()
            out.append(time.perf_counter() - t0)
        return statistics.median(out)

    def remainder(p: int, r: int) -> torch.Tensor:
        with torch.no_grad():
            cache = returned_cache(base(input_ids=ids(p), use_cache=True))
        pos = torch.arange(p, p + r)[None]
        return base(input_ids=ids(r), position_ids=pos, cache_position=pos[0], use_cache=True,
                    **with_cache(base, cache)).last_hidden_state

    whole = {n: timed(lambda n=n: base(input_ids=ids(n), use_cache=False).last_hidden_state) for n in WHOLE}
    xs = torch.tensor([[float(n), float(n) ** 2] for n in WHOLE], dtype=torch.float64)
    ts = torch.tensor([[whole[n]] for n in WHOLE], dtype=torch.float64)
    lin, quad = torch.linalg.lstsq(xs, ts).solution[:, 0].tolist()
    rem = {f"{p}+{r}": timed(lambda p=p, r=r: remainder(p, r)) for p, r in REMAINDERS}
    masked = statistics.median((rem[f"{p}+{r}"] - lin * r) / (r * (p + r)) for p, r in REMAINDERS)
    result = {"model": args.model or "embedded SmolLM2-135M-Instruct", "threads": torch.get_num_threads(),
              "whole_s": whole, "remainder_s": rem, "per_token_s": lin,
              "CAUSAL_ATTENTION": quad / lin, "MASKED_ATTENTION": masked / lin}
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
