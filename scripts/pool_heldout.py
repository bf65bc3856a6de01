"""One checkpoint's held-out figures over several splits, each episode counted once.

    .venv/bin/python scripts/pool_heldout.py docs/bench/warm_start_recovery_rebuild_split{0,1,2}_heldout.json \
      [--phase after] [--json OUT]

Splits of other `--seed` values share tasks, and a shared task's episodes are the same draws in each
(`selfplay.experiment.splits`): this prints each split's sampled solves and the pool over distinct
episodes (greedy, pass@k, sampled with its Wilson interval), and names the shared tasks. The files are the
`--out` of `bench_learning.py --arm compare`, one checkpoint and the same draws in all.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from selfplay.experiment.splits import pool_splits, pool_table


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
    if args.json:
        args.json.write_text(json.dumps(pool, indent=1) + "\n")


if __name__ == "__main__":
    main()
