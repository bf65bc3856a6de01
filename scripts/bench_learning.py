"""Learning evidence: the solver before and after the warm start (RFT), on held-out procedural tasks.

Held-out tasks are seeded on repos that contributed no demonstrations (`selfplay.demos.warm_start.
HELDOUT_REPOS`: parse, inflection, humanize) and kept only if their prompt fits the 2k-token budget the
warm start trained on. The split is fixed by `--seed` (default 0): seeding rounds use SeedConfig seeds
`seed * 1000 + 500 + round`, disjoint from the warm start's `seed * 1000 + round`, through the seed cache
(validated once, then read back), and the chosen tasks are listed in `--work`/tasks.json. Each policy solves each task once, greedy (EVAL), in a fresh buggy sandbox; a
submitted diff is graded by the real grader. Reported per policy:

- format-valid turn rate: assistant turns that parsed as an action / all turns;
- submit rate: episodes that ended with `submit`;
- solve rate with a Wilson 95% interval: episodes graded +1;
- mean turns.

CPU cost: the base model fills every turn with text (max_new_tokens each at ~13 tokens/s on an idle
2-core machine), so turns are short by default (128 new tokens, 6 turns). Usage:
  .venv/bin/python scripts/bench_learning.py --after DIR [--before DIR] [-n 4] [--max-turns 6] [--out F.json]
(`--after` defaults to the cached default warm start, built if missing.)
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of k successes in n trials."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def heldout_tasks(repos: list[str], n: int, seed: int, out: Path, tokenizer) -> list:
    """(spec, Task) pairs, seeded once and cached in `out`/tasks.json (both phases see the same tasks)."""
    from repos.listfile import get_repo
    from sandboxes.images import repo_image
    from selfplay.artifact import load_artifact
    from selfplay.demos.collect import SEED_VALIDATION_RUNS
    from selfplay.demos.seed_cache import cached_seed
    from selfplay.demos.solver import artifact_fits, fits, fits_key
    from selfplay.procedural.seed import SeedConfig
    from selfplay.task import Task, make_task_id
    from selfplay.validation import ValidationConfig

    cache = out / "tasks.json"
    if cache.is_file():
        return [(get_repo(e["repo"]), Task(e["task_id"], e["repo"], load_artifact(e["dir"]), tuple(e["f2p"]),
                                           tuple(e["p2p"]), origin="procedural"))
                for e in json.loads(cache.read_text())]
    tasks = []
    dirs = {}
    for repo in repos:
        spec = get_repo(repo)
        found = []
        for rnd in range(5):
            try:
                seeded, _ = cached_seed(spec, n, image=repo_image(spec), config=SeedConfig(seed=seed * 1000 + 500 + rnd),
                                        validation=ValidationConfig(original_runs=SEED_VALIDATION_RUNS),
                                        accept=lambda a: artifact_fits(a, tokenizer), accept_key=fits_key(tokenizer))
            except ValueError as exc:  # e.g. no code file with a same-named test file
                print(f"skipping {repo}: {exc}", flush=True)
                break
            for r in seeded:
                t = Task(make_task_id(repo, r.artifact), repo, r.artifact, tuple(r.report.fail_to_pass),
                         tuple(r.report.pass_to_pass), origin="procedural")
                if fits(t, tokenizer) and all(x.task_id != t.task_id for x in found):
                    found.append(t)
                    dirs[t.task_id] = str(r.directory)
            if len(found) >= n:
                break
        tasks += [(spec, t) for t in found[:n]]
    out.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps([{"repo": sp.name, "task_id": t.task_id, "dir": dirs[t.task_id],
                                  "f2p": list(t.fail_to_pass), "p2p": list(t.pass_to_pass)} for sp, t in tasks]))
    return tasks


def interleave(tasks: list) -> list:
    """Round-robin over repos, so a run stopped early still covers every held-out repo."""
    by_repo: dict[str, list] = {}
    for spec, task in tasks:
        by_repo.setdefault(spec.name, []).append((spec, task))
    queues = list(by_repo.values())
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def summarize(model_dir: str | None, rows: list[dict]) -> dict:
    n = len(rows)
    turns = sum(r["turns"] for r in rows)
    solved = sum(r["reward"] > 0 for r in rows)
    return {"model": model_dir or "embedded SmolLM2-135M-Instruct", "episodes": n,
            "format_valid_turn_rate": (turns - sum(r["format_errors"] for r in rows)) / max(turns, 1),
            "submit_rate": sum(r["termination"] == "submitted" for r in rows) / max(n, 1),
            "solve_rate": solved / max(n, 1), "solve_ci95": wilson(solved, n),
            "mean_turns": turns / max(n, 1), "rows": rows}


def evaluate(model_dir: str | None, tasks: list, max_turns: int, max_new_tokens: int,
             on_row=None) -> dict:
    from agent_scaffold.agent import run_episode
    from agent_scaffold.policies.hf import HFPolicy
    from agent_scaffold.policy import EVAL
    from agent_scaffold.roles import EpisodeLimits, load_role, solver_variables
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image
    from selfplay.grader import build_buggy_state, grade

    policy = HFPolicy(model_dir)
    role = load_role("solver")
    limits = EpisodeLimits(max_turns=max_turns, max_new_tokens=max_new_tokens, max_context_tokens=2048,
                           command_timeout=60.0, max_observation_chars=1500)
    rows = []
    for spec, task in tasks:
        t0 = time.monotonic()
        with DockerSandbox.create(repo_image(spec), workdir=spec.workdir) as sb:
            build_buggy_state(sb, task.artifact)
            ep = run_episode(policy, sb, role, solver_variables(task.spec, "tests"), limits=limits, sampling=EVAL)
        reward = -1
        if ep.termination == "submitted":
            reward = grade(task.artifact, ep.submission or "", task.fail_to_pass, task.pass_to_pass, spec=spec).reward
        rows.append({"task": task.task_id, "turns": ep.turns, "format_errors": ep.format_errors,
                     "termination": ep.termination, "reward": reward, "wall_s": round(time.monotonic() - t0, 1)})
        print(json.dumps({"model": model_dir or "base", **rows[-1]}), flush=True)
        if on_row:
            on_row(summarize(model_dir, rows))
    return summarize(model_dir, rows)


def table(results: list[dict]) -> str:
    lines = ["| policy | episodes | format-valid turns | submit rate | solve rate (95% CI) | mean turns |",
             "|---|---|---|---|---|---|"]
    for name, r in zip(("before RFT", "after RFT"), results):
        lo, hi = r["solve_ci95"]
        rows = r["rows"]
        turns = sum(x["turns"] for x in rows)
        valid = turns - sum(x["format_errors"] for x in rows)
        submitted = sum(x["termination"] == "submitted" for x in rows)
        solved = sum(x["reward"] > 0 for x in rows)
        lines.append(f"| {name} | {r['episodes']} | {r['format_valid_turn_rate']:.0%} ({valid}/{turns}) | "
                     f"{r['submit_rate']:.0%} ({submitted}/{len(rows)}) | {r['solve_rate']:.0%} ({solved}/{len(rows)}) "
                     f"[{lo:.0%}, {hi:.0%}] | {r['mean_turns']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    from selfplay.demos.warm_start import HELDOUT_REPOS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default=None, help="Base checkpoint (default: the embedded model).")
    ap.add_argument("--after", default=None, help="RFT checkpoint (default: the cached default warm start).")
    ap.add_argument("--repos", default=",".join(HELDOUT_REPOS), help="Held-out repos, comma-separated.")
    ap.add_argument("-n", type=int, default=4, help="Tasks per held-out repo.")
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=Path("runs/bench_learning"))
    ap.add_argument("--out", type=Path, default=None, help="Write the results as JSON here.")
    ap.add_argument("--phase", choices=("before", "after", "both"), default="both",
                    help="Run one policy only; results of the other phase are read back from --out.")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    from agent_scaffold.embedded import default_model_dir

    after = args.after
    if after is None and args.phase != "before":
        from selfplay.demos.warm_start import warm_start_checkpoint

        after = str(warm_start_checkpoint())
    random.seed(args.seed)
    tok = AutoTokenizer.from_pretrained(default_model_dir())
    tasks = heldout_tasks([r for r in args.repos.split(",") if r], args.n, args.seed, args.work, tok)
    print(f"{len(tasks)} held-out tasks: {[t.task_id for _, t in tasks]}", flush=True)
    tasks = interleave(tasks)
    saved = json.loads(args.out.read_text())["results"] if args.out and args.out.is_file() else {}
    results = dict(saved)

    def save() -> None:  # after every episode, so a run stopped for time keeps what it measured
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                            "results": results}, indent=1) + "\n")

    for phase, model in (("before", args.before), ("after", after)):
        if args.phase in (phase, "both"):
            results[phase] = evaluate(model, tasks, args.max_turns, args.max_new_tokens,
                                      on_row=lambda r, p=phase: (results.__setitem__(p, r), save()))
    if "before" in results and "after" in results:
        print(table([results["before"], results["after"]]))
    save()


if __name__ == "__main__":
    main()
