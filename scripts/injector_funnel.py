"""Where the injector episodes of run or arm directories broke the expert's plan, step by step.

    .venv/bin/python scripts/injector_funnel.py runs/exp_fmt9_control/arms/control-* [--demos WARM_START_DIR] [--json OUT]

One row per directory: injector episodes, valid artifacts, how many of those were new to the store (rewarded
above -1; a duplicate of a stored bug is rewarded as invalid; since a558e96 every episode of an iteration
that wrote one new bug is, before it only the first to finish), and how many episodes had each step label of
`selfplay.experiment.injector_steps` (the function listing, the view, the bug edit) at least once. With
`--demos` (a warm start's cache directory), a valid kit episode whose change (`kit_change`: the function
and the listed change, or the function and number of `kit_choice` where the episode printed no listing) is
its repo's demonstrated one is counted as a replay. "Store view": episodes whose `mutate` listing left changes
out for the store's view (`rollout.kit_store_view`); "moved on": those whose `mutate` listed the next
function's changes instead of refusing (`rollout.kit_next_function`). "Distinct new": the distinct tasks of the
episodes new to the store (the store files a bug written twice as one task). Per iteration: valid / new /
replays.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from selfplay.experiment.injector_steps import (
    STEPS,
    injector_steps,
    kit_change,
    kit_choice,
    moved_on,
    step_counts,
    store_filtered,
)


def demonstrated_choices(warm_start_dir: Path) -> dict[str, set[tuple]]:
    """Each repo's kit choices in the injector demonstrations of a warm start (`demos/REPO/trajectories`):
    their `kit_choice` and their `kit_change`."""
    out: dict[str, set[tuple]] = {}
    for path in sorted(warm_start_dir.glob("demos/*/trajectories/injector-*.jsonl")):
        for line in path.read_text().splitlines():
            messages = json.loads(line)["messages"]
            out.setdefault(path.parent.parent.name, set()).update(c for c in (kit_choice(messages), kit_change(messages)) if c)
    return out


def episodes(run_dir: Path, shown: dict[str, set[tuple[str, int]]]) -> list[dict]:
    out = []
    for path in sorted(run_dir.glob("trajectories/it*-injector.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                row = json.loads(line)
                meta, validation = row["metadata"], row["metadata"].get("validation")
                valid = bool(isinstance(validation, dict) and validation.get("valid"))
                choice, change = kit_choice(row["messages"]), kit_change(row["messages"])
                out.append({"id": meta.get("id"), "repo": meta.get("repo"), "iteration": meta.get("iteration"),
                            "termination": meta.get("termination"), "valid": valid, "reward": row.get("reward"),
                            "task_id": meta.get("task_id"),
                            "new": valid and row.get("reward") is not None and row["reward"] > -1,
                            "choice": list(choice) if choice else None, "change": list(change) if change else None,
                            "replay": valid and (change or choice) in shown.get(str(meta.get("repo")), set()),
                            "store_view": store_filtered(row["messages"]), "moved_on": moved_on(row["messages"]),
                            "steps": list(injector_steps(row["messages"]))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="Run (or experiment arm) directories.")
    ap.add_argument("--demos", type=Path, default=None,
                    help="A warm start's cache directory: count valid episodes that replay its injector demonstrations.")
    ap.add_argument("--json", type=Path, default=None, help="Also write every episode's labels here.")
    args = ap.parse_args()
    shown = demonstrated_choices(args.demos) if args.demos else {}
    result = {}
    print("| run | episodes | valid | new to the store | distinct new | replays | store view | moved on | per iteration | "
          + " | ".join(STEPS) + " |")
    print("|---" * (9 + len(STEPS)) + "|")
    for d in args.dirs:
        eps = episodes(d, shown)
        counts = step_counts([e["steps"] for e in eps])
        result[str(d)] = {"episodes": eps, "counts": counts,
                          "demonstrated": {r: sorted(c, key=str) for r, c in shown.items()}}
        its = sorted({e["iteration"] for e in eps if e["iteration"] is not None})
        per = ", ".join("/".join(str(sum(e[k] for e in eps if e["iteration"] == i)) for k in ("valid", "new", "replay"))
                        for i in its)
        distinct = len({(e["repo"], e["task_id"]) for e in eps if e["new"] and e["task_id"]})
        print(f"| {d} | {len(eps)} | {sum(e['valid'] for e in eps)} | {sum(e['new'] for e in eps)} | {distinct} | "
              f"{sum(e['replay'] for e in eps)} | {sum(e['store_view'] for e in eps)} | "
              f"{sum(e['moved_on'] for e in eps)} | {per} | " + " | ".join(str(counts[s]) for s in STEPS) + " |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
