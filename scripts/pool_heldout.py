"""One checkpoint's held-out figures over several splits, each episode counted once.

    .venv/bin/python scripts/pool_heldout.py F0.json F1.json ... [--phase after] [--json OUT]

Splits of other `--seed` values share tasks, and a shared task's episodes are the same draws in each
(`selfplay.experiment.splits`): this prints each split's sampled solves and the pool over distinct
episodes (greedy, pass@k, sampled with its Wilson interval), and names the shared tasks. The files are the
`--out` of `bench_learning.py --arm compare`, one checkpoint and the same draws in all. Where every file
holds both phases, of the same two checkpoints, both are pooled and paired over distinct draws too (the
sign tests of `--arm compare`, each shared draw once).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from selfplay.experiment.compare import PHASES, compare_table
from selfplay.experiment.splits import pool_pairs, pool_splits, pool_table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="the splits' result files (bench_learning.py --out)")
    ap.add_argument("--phase", default="after", help="which checkpoint of the files (before or after)")
    ap.add_argument("--json", type=Path, help="also write the pool as JSON here")
    args = ap.parse_args()
    results = []
    for path in args.files:
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            raise SystemExit(f"{path}: cannot read it as a result file ({exc})") from None
    names = [str(p) for p in args.files]
    try:
        pool = pool_splits(results, args.phase, names)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    print(pool_table(pool, names), end="")
    if all((res.get("rows") or {}).get(p) for res in results for p in PHASES):
        try:
            pairs = pool_pairs(results, names)
        except ValueError as exc:  # the other phase is another checkpoint in some file: no pooled pairs
            print(f"\nboth checkpoints not pooled: {exc}")
        else:
            print("\nBoth checkpoints over distinct draws, paired:\n")
            print(compare_table({p: pairs[p]["pooled"] for p in PHASES}, pairs["paired"]))
            pool = {**pool, "paired": pairs["paired"]}
    if args.json:
        args.json.write_text(json.dumps(pool, indent=1) + "\n")


if __name__ == "__main__":
    main()
