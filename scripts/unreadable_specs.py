"""What `rollout.refuse_unreadable_specs` would have refused in runs that played without it.

    .venv/bin/python scripts/unreadable_specs.py runs/default-* [--json OUT]

For every injector episode whose artifact validated, renders the solver's prompt with its spec (the
reversed test_weaken.diff of the submission kept in the trajectory) through `agent_scaffold.agent.
first_turn_room`, with the embedded tokenizer and the run's own solver limits (its config.yaml), exactly as
the worker does before validation. Reports per run: the valid artifacts, those the rule would refuse, the
injector episodes whose reward it would lower to -1 (and from what), and the solver attempts on the refused
bugs: how many there were, how many took a turn at all, and how many solved (a refused bug that was solved
would be a loss; one whose attempts all ended before a turn is what the rule is for).
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any


def _trajectories(run: Path, role: str):
    for path in sorted(run.glob(f"trajectories/*-{role}.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                yield json.loads(line)


def replay(run: Path, tokenizer: Any) -> dict[str, Any]:
    from agent_scaffold.agent import first_turn_room
    from agent_scaffold.policies.scripted import ScriptedPolicy
    from agent_scaffold.roles import load_role, solver_variables
    from repos.listfile import get_repo
    from selfplay.config.loader import load_resume_config
    from selfplay.diffs import reverse_diff
    from selfplay.rollout.worker import episode_limits

    config = load_resume_config(run)
    role = load_role("solver")
    limits = episode_limits(role, config.rollout.solver_limits)
    policy = ScriptedPolicy([], tokenizer)
    policy.context_window = 8192  # SmolLM2's window: the run's policy clamps to it too
    refused: set[str] = set()
    row: Counter[str] = Counter()
    rewards: Counter[float] = Counter()
    for t in _trajectories(run, "injector"):
        meta = t["metadata"]
        if not (meta.get("validation") or {}).get("valid"):
            continue
        row["valid_episodes"] += 1
        spec = reverse_diff(meta["submission"]["test_weaken.diff"])
        room = first_turn_room(policy, role, solver_variables(spec, "tests"),
                               get_repo(meta["repo"], config.repo_list).workdir, limits,
                               localize=config.rollout.solver_localize)
        if room < limits.min_turn_tokens:
            row["refused_episodes"] += 1
            rewards[t["reward"]] += 1
            refused.add(meta["task_id"])
    for t in _trajectories(run, "solver"):
        if t["metadata"].get("task_id") in refused:
            row["attempts_on_refused"] += 1
            row["attempts_with_a_turn"] += bool(t["turn_spans"])
            row["attempts_solved"] += t["reward"] > 0
    return {"run": str(run), **row, "refused_tasks": len(refused),
            "refused_rewards": {str(r): n for r, n in sorted(rewards.items())}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run directories (each with config.yaml and trajectories/)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    from selfplay.rollout.policy_factory import embedded_tokenizer

    tokenizer = embedded_tokenizer()
    rows = [replay(run, tokenizer) for run in args.runs]
    keys = ("valid_episodes", "refused_episodes", "refused_tasks", "attempts_on_refused", "attempts_with_a_turn",
            "attempts_solved")
    print("run | " + " | ".join(keys) + " | rewards of the refused episodes")
    for r in rows:
        print(f"{r['run']} | " + " | ".join(str(r.get(k, 0)) for k in keys) + f" | {r['refused_rewards']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
