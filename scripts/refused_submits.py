"""What injector episodes did after a refused submit (`EpisodeLimits.refused_submits`).

    .venv/bin/python scripts/refused_submits.py runs/exp_told/* [--json OUT]

For every injector episode of the runs whose trajectory holds a `Submit refused` observation, reads the
reason (the spec too long for the solver, `rollout.refuse_unreadable_specs`, or an incomplete artifact),
what the policy did in the turns after it (the tool of each reply, or a format error), and how the episode
ended: its termination and validation verdict, and whether that verdict is the spec refusal again. A
recovery is an episode refused for its spec that ends with a valid artifact.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from selfplay.orchestration.rundir import read_trajectories
from selfplay.validation.report import UNREADABLE_SPEC

REFUSED = "Submit refused ("


def _after(messages: list[dict[str, str]], at: int) -> list[str]:
    """The tool of each assistant reply after message `at` (`format error` where none parses)."""
    from agent_scaffold.actions import FormatError, parse_action

    tools = []
    for m in messages[at + 1:]:
        if m["role"] != "assistant":
            continue
        try:
            tools.append(parse_action(m["content"]).tool)
        except FormatError:
            tools.append("format error")
    return tools


def episodes(run: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(run.glob("trajectories/*-injector.jsonl.gz")):
        for t in read_trajectories(path):
            messages = list(t.messages)
            refusals = [i for i, m in enumerate(messages)
                        if m["role"] != "assistant" and m["content"].startswith(REFUSED)]
            if not refusals:
                continue
            first = messages[refusals[0]]["content"]
            validation = t.metadata.get("validation") or {}
            rows.append({"run": str(run), "id": t.metadata.get("id"), "repo": t.metadata.get("repo"),
                         "reason": "spec" if UNREADABLE_SPEC in first else "incomplete",
                         "after": _after(messages, refusals[0]), "termination": t.termination,
                         "valid": bool(validation.get("valid")),
                         "spec_refused_at_the_end": str(validation.get("error") or "").startswith(UNREADABLE_SPEC)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run directories (each with trajectories/)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    rows = [row for run in args.runs for row in episodes(run)]
    print("reason | episodes | then valid | refused for the spec at the end | first action after | endings")
    for reason in ("spec", "incomplete"):
        mine = [r for r in rows if r["reason"] == reason]
        first = Counter(r["after"][0] if r["after"] else "none" for r in mine)
        endings = Counter(r["termination"] for r in mine)
        print(f"{reason} | {len(mine)} | {sum(r['valid'] for r in mine)} | "
              f"{sum(r['spec_refused_at_the_end'] for r in mine)} | {dict(first)} | {dict(endings)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
