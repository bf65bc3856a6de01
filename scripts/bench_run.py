"""End-to-end throughput of `selfplay run` with the scripted policy on a real repo, and where the time goes.

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
"""

from __future__ import annotations

import argparse
import json
import os
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
    args = ap.parse_args()

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


if __name__ == "__main__":
    main()
