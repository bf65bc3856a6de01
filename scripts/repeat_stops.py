"""What `EpisodeLimits.max_repeats` would have cut from runs that played without it.

    .venv/bin/python scripts/repeat_stops.py runs/default-* [--max-repeats 1,2,3] [--json OUT]

Replays each trajectory's turns through `agent_scaffold.repeats.cut_turn` (the loop's `RepeatCounter`),
and reports per role and K: the episodes that a limit of K repeats would have ended early, how many of
those got a reward that matters (a solver attempt that solved, an injector artifact that validated:
reward above -1), and the sampled tokens and turns after the cut, against all sampled. A cut episode
rewarded as it was says the limit loses nothing; the tokens after the cut are what it saves. A run that
played with the limit shows its own `repeated` endings (zero tokens after a cut).
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from pathlib import Path

from agent_scaffold.repeats import cut_turn


def counted(reward: float, role: str) -> bool:
    return reward > 0 if role == "solver" else reward > -1


def tally(run_dirs: list[Path], ks: list[int]) -> dict[str, dict[int, dict[str, int]]]:
    out: dict[str, dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    for run in run_dirs:
        for path in sorted(run.glob("trajectories/*.jsonl.gz")):
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                for line in fh:
                    t = json.loads(line)
                    sizes = [e - s for s, e in t["turn_spans"]]
                    for k in ks:
                        row = out[t["role"]][k]
                        row["episodes"] += 1
                        row["tokens"] += sum(sizes)
                        row["turns"] += len(sizes)
                        row["rewarded"] += counted(t["reward"], t["role"])
                        row["ended_repeated"] += t["termination"] == "repeated"
                        cut = cut_turn(t["messages"], k)
                        if cut is None:
                            continue
                        row["cut"] += 1
                        row["cut_rewarded"] += counted(t["reward"], t["role"])
                        row["tokens_after_cut"] += sum(sizes[cut + 1:])
                        row["turns_after_cut"] += len(sizes[cut + 1:])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run directories (each with trajectories/)")
    ap.add_argument("--max-repeats", default="1,2,3", help="limits to try, comma-separated")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    ks = [int(k) for k in args.max_repeats.split(",")]
    result = tally(args.runs, ks)
    print("| role | K | episodes | cut | cut, rewarded (solved / valid) | rewarded, all | sampled tokens after "
          "the cut | turns after the cut | ended `repeated` |\n|---|---|---|---|---|---|---|---|---|")
    for role in sorted(result):
        for k in ks:
            r = result[role][k]
            print(f"| {role} | {k} | {r['episodes']} | {r['cut']} | {r['cut_rewarded']} | {r['rewarded']} | "
                  f"{r['tokens_after_cut']:,} of {r['tokens']:,} ({r['tokens_after_cut'] / max(r['tokens'], 1):.1%}) | "
                  f"{r['turns_after_cut']:,} of {r['turns']:,} | {r['ended_repeated']} |")
    if args.json:
        args.json.write_text(json.dumps({"runs": [str(r) for r in args.runs], "by_role": result}, indent=1) + "\n")


if __name__ == "__main__":
    main()
