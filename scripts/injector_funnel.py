"""Where the injector episodes of run or arm directories broke the expert's plan, step by step.

    .venv/bin/python scripts/injector_funnel.py runs/exp_fmt9_control/arms/control-* [--json OUT]

One row per directory: injector episodes, valid artifacts, and how many episodes had each step label of
`selfplay.experiment.injector_steps` (the function listing, the view, the bug edit) at least once.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from selfplay.experiment.injector_steps import STEPS, injector_steps, step_counts


def episodes(run_dir: Path) -> list[dict]:
    out = []
    for path in sorted(run_dir.glob("trajectories/it*-injector.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                row = json.loads(line)
                meta, validation = row["metadata"], row["metadata"].get("validation")
                out.append({"id": meta.get("id"), "repo": meta.get("repo"), "termination": meta.get("termination"),
                            "valid": bool(isinstance(validation, dict) and validation.get("valid")),
                            "steps": list(injector_steps(row["messages"]))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="Run (or experiment arm) directories.")
    ap.add_argument("--json", type=Path, default=None, help="Also write every episode's labels here.")
    args = ap.parse_args()
    result = {}
    print("| run | episodes | valid | " + " | ".join(STEPS) + " |")
    print("|---" * (3 + len(STEPS)) + "|")
    for d in args.dirs:
        eps = episodes(d)
        counts = step_counts([e["steps"] for e in eps])
        result[str(d)] = {"episodes": eps, "counts": counts}
        print(f"| {d} | {len(eps)} | {sum(e['valid'] for e in eps)} | " + " | ".join(str(counts[s]) for s in STEPS) + " |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
