r"""End-to-end throughput of `selfplay run` with the scripted policy on a real repo, and where the time goes.

The scripted injector rewrites a known-valid procedural bug of the repo (validated for real each time);
solver lists alternate the expert's right fix and a wrong change (`--pattern`, R/W), so grading, solve
rates, Eq. 1 rewards and higher-order derivation all run. The learner is a tiny random Llama (`--learner
tiny`, real DeepSpeed steps on real trajectories) or off. With a fast policy the loop should be bound by
test execution: the profile's `orchestration` share (the loop's own bookkeeping: drawing tasks, store
writes, trajectory files, metrics) should stay under 5%.

Reported (JSON on stdout, plus a markdown table): episodes/hour and validated tasks/hour over the run's
wall time (setup excluded), iteration wall times, and the time shares per phase from metrics.jsonl,
summed over iterations.

Usage: nice -n 10 .venv/bin/python scripts/bench_run.py [--repo toolz] [--iterations 3] [--injectors 1]
       [--group 4] [--workers 2] [--learner tiny|off] [--out /tmp/bench_run]

`--embedded TREE [TREE ...]`: the default `selfplay run` itself (the embedded policy, not scripted), once per
tree (git worktrees of two commits), alternating the trees `--repeats` times, each a fresh process with that
tree first on sys.path and the same `--set KEY=VALUE` overrides (budgets, model, seed, iterations). Reported per
tree (medians, min-max): sampled tokens per second over the run's wall time and over its rollout phases,
episodes per hour, and the decode batch sizes reached where the tree logs them; raw JSON with `--json`.
`--tree-set TREE KEY=VALUE` adds an override for one tree only (a key the older trees do not know).

  git worktree add /tmp/old 7924ad0 && git worktree add /tmp/new HEAD
  .venv/bin/python scripts/bench_run.py --embedded /tmp/old /tmp/new --repeats 2 \
      --set policy.model_dir=DIR --set warm_start.enabled=false --json docs/bench/run_ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PHASES = ("sandbox", "model", "validation", "grading", "learner", "orchestration")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default="toolz")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--injectors", type=int, default=1, help="injector episodes per iteration")
    ap.add_argument("--group", type=int, default=4, help="G: solver attempts per task")
    ap.add_argument("--tasks", type=int, default=1, help="tasks per iteration")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pattern", default="RW", help="solver lists in turn: R right fix, W wrong change")
    ap.add_argument("--learner", choices=("tiny", "off"), default="tiny")
    ap.add_argument("--mode", choices=("sync", "async"), default="sync")
    ap.add_argument("--out", default=None, help="directory for the run (default: a temporary one)")
    ap.add_argument("--embedded", nargs="+", default=None, metavar="TREE",
                    help="A/B the default `selfplay run` (embedded policy) across these source trees")
    ap.add_argument("--repeats", type=int, default=2, help="--embedded: runs per tree")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="--embedded: KEY=VALUE")
    ap.add_argument("--tree-set", nargs=2, action="append", default=[], metavar=("TREE", "KEY=VALUE"),
                    help="--embedded: an override for that tree only (a key older trees do not know, such as "
                         "rollout.temperature)")
    ap.add_argument("--json", default=None, help="--embedded: write the raw results here")
    ap.add_argument("--keep-runs", action="store_true",
                    help="--embedded: keep each run's directory (deleted once its figures are read)")
    args = ap.parse_args()
    if args.embedded:
        embedded_ab(args)
        return

    from repos.listfile import get_repo
    from selfplay.learner.tiny_model import save_tiny_model
    from selfplay.orchestration.loop import run_selfplay
    from tests.selfplay.orchestration.scripted_run import scripted_run_config, write_actions

    out = Path(args.out or tempfile.mkdtemp(prefix="bench_run-"))
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    actions = out / "actions.json"
    write_actions(get_repo(args.repo), actions, args.pattern)
    model = save_tiny_model(out / "tiny") if args.learner == "tiny" else None
    setup_s = time.monotonic() - t0
    config = scripted_run_config(name="bench", runs_dir=out / "runs", repo=args.repo, actions=actions,
                                 model_dir=model, iterations=args.iterations, injectors=args.injectors,
                                 tasks=args.tasks, group=args.group, workers=args.workers, mode=args.mode)
    t1 = time.monotonic()
    run_dir = run_selfplay(config)
    wall = time.monotonic() - t1
    summary = json.loads((run_dir / "summary.json").read_text())
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    seconds = {p: sum(r.get(f"time_s/{p}", 0.0) for r in records) for p in PHASES}
    total = sum(seconds.values()) or 1.0
    episodes = summary["injector_episodes"] + summary["solver_attempts"]
    result = {
        "command": " ".join(sys.argv), "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
        "setup_s": round(setup_s, 1), "run_wall_s": round(wall, 1), "iterations": summary["iterations"],
        "episodes": episodes, "valid_artifacts": summary["valid_artifacts"], "solved": summary["solved"],
        "solver_attempts": summary["solver_attempts"], "learner_updates": summary["learner_updates"],
        "episodes_per_hour": round(episodes / wall * 3600, 1),
        "validated_tasks_per_hour": round(summary["valid_artifacts"] / wall * 3600, 1),
        "iteration_wall_s": [round(r.get("iteration/wall_s", 0.0), 1) for r in records],
        "time_share": {p: round(seconds[p] / total, 4) for p in PHASES},
        "time_s": {p: round(seconds[p], 1) for p in PHASES}, "run_dir": str(run_dir),
    }
    print(json.dumps(result, indent=1))
    print("\n| phase | seconds | share |\n|---|---|---|")
    for p in PHASES:
        print(f"| {p} | {seconds[p]:.1f} | {100 * seconds[p] / total:.1f}% |")
    print(f"\n{episodes} episodes ({summary['valid_artifacts']} validated bugs, {summary['solved']}/"
          f"{summary['solver_attempts']} solved, {summary['learner_updates']} updates) in {wall:.0f} s: "
          f"{result['episodes_per_hour']} episodes/h, {result['validated_tasks_per_hour']} validated tasks/h")


def _sampled_tokens(run_dir: Path) -> tuple[int, int]:
    """(sampled tokens, episodes) over the run's trajectory files (gzip JSON lines; the loss mask marks the
    sampled tokens in every format these trees wrote)."""
    import gzip

    tokens = episodes = 0
    for path in sorted((run_dir / "trajectories").rglob("*.gz")):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                if line.strip():
                    record = json.loads(line)
                    tokens += sum(record.get("loss_mask") or ())
                    episodes += 1
    return tokens, episodes


def embedded_run(tree: Path, out: Path, overrides: list[str], *, keep: bool = False) -> dict:
    """One `selfplay run` of `tree`'s code in a fresh process; its throughput and phase times from what the
    run wrote. The run's directory is deleted afterwards unless `keep`."""
    import subprocess

    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-c", "from selfplay.cli import main; main()", "run", f"runs_dir={out}",
           f"name=ab-{tree.name}", *overrides]
    load0, t0 = os.getloadavg()[0], time.monotonic()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    (out / "stdout.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: selfplay run exited {proc.returncode}; see {out / 'stdout.log'}")
    run_dir = next(p for p in out.iterdir() if (p / "summary.json").is_file())
    summary = json.loads((run_dir / "summary.json").read_text())
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rollout_s = sum(r.get(f"time_s/{p}", 0.0) for r in records for p in ("sandbox", "model", "validation",
                                                                          "grading")) or None
    tokens, trajectories = _sampled_tokens(run_dir)
    episodes = summary["injector_episodes"] + summary["solver_attempts"]
    run_s = summary.get("wall_s") or wall
    batch = [(r["rollout/batch_size_mean"], r["rollout/batch_size_p90"]) for r in records
             if "rollout/batch_size_mean" in r]
    phases = {p: round(sum(r.get(f"time_s/{p}", 0.0) for r in records), 1) for p in PHASES}
    iteration_s = [round(r.get("iteration/wall_s", 0.0), 1) for r in records]
    if not keep:
        # each run leaves ~5 GB (checkpoints, trajectories); the figures above are all this script reads
        shutil.rmtree(out, ignore_errors=True)
    return {"tree": str(tree), "process_wall_s": round(wall, 1), "run_wall_s": round(run_s, 1),
            "rollout_s": round(rollout_s, 1) if rollout_s else None, "sampled_tokens": tokens,
            "trajectories": trajectories, "episodes": episodes,
            "tok_per_s_run": round(tokens / run_s, 2),
            "tok_per_s_rollout": round(tokens / rollout_s, 2) if rollout_s else None,
            "episodes_per_hour": round(episodes / run_s * 3600, 1), "solved": summary.get("solved"),
            "valid_artifacts": summary.get("valid_artifacts"), "learner_updates": summary.get("learner_updates"),
            "batch_size_mean_p90": batch,
            "batch_fill_mean": [round(r["rollout/batch_fill_mean"], 3) for r in records if "rollout/batch_fill_mean" in r],
            "load_avg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
            "time_s": phases, "iteration_wall_s": iteration_s,
            "run_dir": str(run_dir) if keep else None}


def embedded_ab(args: argparse.Namespace) -> None:
    import statistics

    trees = [Path(t).resolve() for t in args.embedded]
    root = Path(args.out or tempfile.mkdtemp(prefix="bench_run_ab-"))
    rows: list[dict] = []
    for rep in range(args.repeats):
        for tree in (trees if rep % 2 == 0 else trees[::-1]):
            own = [kv for t, kv in args.tree_set if Path(t).resolve() == tree]
            row = embedded_run(tree, root / f"r{rep}-{tree.name}", [*args.overrides, *own], keep=args.keep_runs)
            row["repeat"] = rep
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps({"command": " ".join(sys.argv), "cpus": os.cpu_count(),
                                                       "runs": rows}, indent=1) + "\n")
    print("\n| tree | runs | sampled tok/s (run), median (range) | tok/s (rollout phases) | episodes/h | "
          "episodes | solved | load |\n|---|---|---|---|---|---|---|---|")
    for tree in trees:
        mine = [r for r in rows if r["tree"] == str(tree)]

        def fmt(key: str, mine: list = mine) -> str:
            vals = [r[key] for r in mine if r[key] is not None]
            return f"{statistics.median(vals):.1f} ({min(vals):.1f}-{max(vals):.1f})" if vals else "n/a"
        loads = [x for r in mine for x in r["load_avg_1m"]]
        print(f"| {tree.name} | {len(mine)} | {fmt('tok_per_s_run')} | {fmt('tok_per_s_rollout')} | "
              f"{fmt('episodes_per_hour')} | {[r['episodes'] for r in mine]} | {[r['solved'] for r in mine]} | "
              f"{min(loads):.1f}-{max(loads):.1f} |")


if __name__ == "__main__":
    main()
