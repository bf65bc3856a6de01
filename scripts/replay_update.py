r"""Replay one iteration's learner update at several learning rates and measure what it did to the policy.

    .venv/bin/python scripts/replay_update.py --run runs/exp_group/arms/rl-* --iteration 0 \
      --model ~/.cache/selfplay/warm_start/70b340471ba93202/model-58bac4b7ae66f117 \
      --lr 0 1e-5 3e-5 --probe runs/exp_group/arms/control-* --probe-iterations 1 2 --json OUT.json

`--model` is the policy that sampled the iteration; `--probe` directories hold injector episodes of the
same policy that the update does not train on. What each figure means: selfplay.experiment.update_replay.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from selfplay.experiment.update_replay import injector_probes, replay_update

SHOWN = ("lr", "negate", "samples", "trained_tokens", "learner/grad_norm", "learner/shift_kl",
         "learner/shift_dlogp_pos", "learner/shift_dlogp_neg", "probe/kl", "probe/dlogp_valid", "probe/dlogp_invalid",
         "probe/separation", "probe/separation_lo", "probe/separation_hi")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, nargs="+", required=True,
                    help="The run (or experiment arm) directory to replay; several: one batch of their episodes "
                         "(runs of the same --model with other seeds), the first one's config.")
    ap.add_argument("--iteration", type=int, nargs="+", default=[0],
                    help="Whose stored trajectories make the batch (several: one batch of all of them).")
    ap.add_argument("--model", type=Path, required=True, help="The weights that sampled that iteration.")
    ap.add_argument("--lr", type=float, nargs="+", required=True, help="Learning rates, each from --model.")
    ap.add_argument("--probe", type=Path, nargs="*", default=[], help="Directories of probe injector episodes.")
    ap.add_argument("--probe-iterations", type=int, nargs="*", default=[0], help="Their iterations to read.")
    ap.add_argument("--negate", action="store_true", help="Flip every advantage (the wrong-direction control).")
    ap.add_argument("--set", action="append", default=[], help="More config overrides, key=value.")
    ap.add_argument("--json", type=Path, default=None, help="Write every figure here.")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    try:
        probes = injector_probes(args.probe, args.probe_iterations)
        rows = replay_update(args.run, args.iteration, args.model, args.lr, probes=probes, negate=args.negate,
                             overrides=args.set)
    except ValueError as exc:  # a wrong directory, an empty batch, a bad --set (ConfigError names the key)
        raise SystemExit(f"replay_update: {exc}") from None
    for row in rows:
        print(json.dumps({k: row[k] for k in SHOWN if k in row}))
    if args.json:
        args.json.write_text(json.dumps({
            "run": [str(r) for r in args.run], "iterations": args.iteration, "model": str(args.model),
            "probe": [str(p) for p in args.probe], "probe_iterations": args.probe_iterations, "set": args.set,
            "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
