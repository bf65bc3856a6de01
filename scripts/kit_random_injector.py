r"""The valid-bug rate of an injector that makes the `kit` plan's choices at random: the control of a trained
`kit` injector's rate (`selfplay.experiment.random_injector`).

    .venv/bin/python scripts/kit_random_injector.py --repos toolz boltons marshmallow --episodes 24 --seed 0 \
        --json docs/bench/kit_random_injector.json

Episodes go round the repos in order; each is a fresh sandbox of the repo's image (built if missing) and
a real `validate`. Prints one row per episode and the rate with its 95% Wilson interval.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repos", nargs="+", default=["toolz", "boltons", "marshmallow"],
                    help="Repos of repos/default.toml (the default run's training repos).")
    ap.add_argument("--episodes", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="Also write every episode here.")
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir
    from repos.listfile import get_repo
    from sandboxes.images import repo_image
    from selfplay.experiment.random_injector import random_kit_episode
    from selfplay.experiment.stats import wilson

    tok = AutoTokenizer.from_pretrained(default_model_dir())
    specs = [get_repo(r) for r in args.repos]
    images = {s.name: repo_image(s) for s in specs}
    rng = random.Random(args.seed)
    rows, start = [], time.monotonic()
    for i in range(args.episodes):
        spec = specs[i % len(specs)]
        ep = random_kit_episode(spec, tok, rng, image=images[spec.name])
        rows.append(asdict(ep))
        c = ep.choices
        print(f"{i + 1:3d} {spec.name:12s} {c.test_file:45s} {c.function or '-':24s} {c.change or '-'!s:3s} "
              f"{'valid' if ep.valid else ep.failed_check}", flush=True)
    valid = sum(r["valid"] for r in rows)
    lo, hi = wilson(valid, len(rows))
    print(f"valid {valid}/{len(rows)} ({valid / len(rows):.0%}, 95% CI {lo:.0%}-{hi:.0%}) in {time.monotonic() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"repos": args.repos, "seed": args.seed, "valid": valid,
                                         "episodes": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
