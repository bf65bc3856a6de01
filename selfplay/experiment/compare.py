"""Two checkpoints on the same held-out tasks and draws, paired: the comparison of two warm starts (or any
two policies) that the before/after evaluation of `--arm rft` makes with one greedy episode a task.

Each checkpoint plays every task greedily once and `samples` times at the given temperature, seeded by
(task, sample, sample_seed) as the experiment's evaluations are (`heldout.episode_seed`), so the two play
the same draws and the sampled episodes pair by (task, sample). The analysis is the recheck's: exact sign
test over the discordant pairs (one-sided: `after` solves more), with the greedy episodes paired by task
beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from selfplay.experiment.recheck import pair_episodes

PHASES = ("before", "after")


def compare_rows(after: Sequence[Mapping[str, Any]], before: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The paired tests of two checkpoints' rows (`heldout.row_dict`): sampled by (task, sample), greedy by
    task; keys name the checkpoints `after` and `before`."""
    out = {}
    for kind, mode in (("sampled", "sample"), ("greedy", "greedy")):
        p = pair_episodes(after, before, mode)
        out[kind] = {"pairs": p["pairs"], "after_solved": p["rl_solved"], "before_solved": p["control_solved"],
                     "only_after": p["only_rl"], "only_before": p["only_control"],
                     "p_greater": p["p_greater"], "p_value": p["p_value"]}
    return out


def by_repo(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Solved and played episodes per repo (greedy and sampled together), infrastructure losses left out."""
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["failure"] == "infra":
            continue
        c = out.setdefault(r["repo"], {"solved": 0, "n": 0})
        c["n"] += 1
        c["solved"] += r["reward"] > 0
    return out


def compare_table(summaries: Mapping[str, Mapping[str, Any]], paired: Mapping[str, Any]) -> str:
    """Markdown: each checkpoint's greedy, pass@k and sampled solves with Wilson intervals, empty or
    unchanged submissions beside the submit rate, then the paired tests."""
    lines = ["| checkpoint | greedy | pass@k | sampled (95% CI) | submits | empty or unchanged | top failures |",
             "|---|---|---|---|---|---|---|"]
    for phase in PHASES:
        s = summaries.get(phase)
        if not s:
            continue
        g, p, x = s.get("greedy", {}), s.get("pass_at_k", {}), s.get("sample", {})
        lo, hi = x.get("ci95", (0.0, 0.0))
        fails = sorted(((n, f) for f, n in s.get("failures", {}).items() if f != "solved"), reverse=True)[:3]
        lines.append(f"| {phase} | {g.get('solved', 0)}/{g.get('n', 0)} | {p.get('solved', 0)}/{p.get('n', 0)} | "
                     f"{x.get('solved', 0)}/{x.get('n', 0)} [{lo:.0%}, {hi:.0%}] | {s.get('submit_rate', 0):.0%} | "
                     f"{s.get('empty_or_unchanged_rate', 0):.0%} | {', '.join(f'{f} {n}' for n, f in fails)} |")
    for kind in ("sampled", "greedy"):
        p = paired.get(kind)
        if p:
            lines.append(f"\n{kind}: {p['pairs']} pairs, after {p['after_solved']} / before {p['before_solved']}, "
                         f"only after {p['only_after']}, only before {p['only_before']}, one-sided sign test "
                         f"p = {p['p_greater']:.3g} (two-sided {p['p_value']:.3g})")
    return "\n".join(lines)
