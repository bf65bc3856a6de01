"""Learning evidence on held-out procedural tasks: `--arm rft` (default) measures the solver before and after
the warm start; `--arm rl` runs the learning experiment (the self-play loop from the warm start at LR > 0
and at LR = 0 as the control, same seeds, held-out evaluations every `--eval-every` iterations; see
`selfplay.experiment`), writing results.json, a table (table.md), a page (index.html) and SVG charts.

  .venv/bin/python scripts/bench_learning.py --arm rl [--policy hf|vllm] [--preset P] [--model DIR] [--repos a,b] [--heldout c,d] [--seed S]
      [--iterations N] [--eval-every K] [--lr LR] [--samples k] [--set KEY=VALUE ...] [--work DIR] [--svg-dir DIR]
      [--control-learner off] [--demonstrated] [--train-eval N] [--resume]
  .venv/bin/python scripts/bench_learning.py --arm recheck --recheck DIR [--recheck DIR ...] [--eval-seed S]
      [--samples k] [--stratum train|heldout|untrained] [--reuse F.json ...] [--out F.json]
  .venv/bin/python scripts/bench_learning.py --arm compare --before DIR --after DIR [-n 4] [--samples k]
      [--temperature T] [--max-turns N] [--max-new-tokens N] [--eval-seed S] [--phase before|after|both] --out F.json

`--arm compare` (`selfplay.experiment.compare`) plays two checkpoints (two warm starts, say) on the same
held-out tasks and draws, greedy once and `--samples` times a task, and pairs them (sign test); `--phase`
plays one checkpoint and reads the other's rows back from `--out`.

The arms run one after the other. To run them side by side, start one process per arm (`--arms rl --work A`,
`--arms control --work B`, the same other options), then `--arm report --work A --merge B` writes the
experiment's outputs from both (it refuses arms of another warm start, seed, task split or loop settings).
A stopped experiment (a killed process, a machine that went away) continues with the command that started
it and `--resume`: the evaluations results.json saved are kept, each arm's loop resumes from its run
directory as `selfplay run --resume` does, and only what is missing is played.

Held-out tasks are seeded on repos that contributed no demonstrations (`selfplay.demos.warm_start_config.
HELDOUT_REPOS`: parse, inflection, humanize) and kept only if their prompt fits the 2k-token budget the
warm start trained on. The split is fixed by `--seed` (default 0): seeding rounds use SeedConfig seeds
`seed * 1000 + 500 + round`, disjoint from the warm start's `seed * 1000 + round`, through the seed cache
(validated once, then read back), and the chosen tasks are listed in `--work`/tasks.json. `--repo-list FILE`
names the repos in a list of the user's own (for `--arm rl` the arms' `repo_list` too). Each policy solves each task once, greedy (GREEDY), in a fresh buggy sandbox; a
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
import ast
import json
import logging
import random
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from agent_scaffold.agent import run_episode
from agent_scaffold.embedded import default_model_dir
from agent_scaffold.policies.hf import HFPolicy
from agent_scaffold.policy import GREEDY
from agent_scaffold.roles import EpisodeLimits, load_role, solver_variables
from sandboxes.docker import DockerSandbox
from sandboxes.images import repo_image
from selfplay.code_revision import code_revision
from selfplay.demos.warm_start import warm_start_checkpoint
from selfplay.demos.warm_start_config import HELDOUT_REPOS, TRAIN_REPOS
from selfplay.dir_lock import DirInUseError, DirLock
from selfplay.experiment.arms import (
    Experiment,
    ExperimentConfig,
    arm_config,
    arm_figures,
    check_experiment,
    heldout_list,
    injector_comparison,
    merge_results,
    paired,
    saved_results,
)
from selfplay.experiment.figures import (
    heldout_table,
    injector_table,
    paired_line,
    training_table,
    turns_table,
    write_outputs,
)
from selfplay.experiment.heldout import (
    EvalSettings,
    heldout_tasks,
    interleave,
    shown_task_ids,
    unlisted_repos,
)
from selfplay.experiment.stats import wilson
from selfplay.experiment.stratum import training_tasks
from selfplay.judge.grader import build_buggy_state, grade


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

    policy = HFPolicy(model_dir)
    role = load_role("solver")
    limits = EpisodeLimits(max_turns=max_turns, max_new_tokens=max_new_tokens, max_context_tokens=2048,
                           command_timeout=60.0, max_observation_chars=1500)
    rows = []
    for spec, task in tasks:
        t0 = time.monotonic()
        with DockerSandbox.create(repo_image(spec), workdir=spec.workdir) as sb:
            build_buggy_state(sb, task.artifact)
            ep = run_episode(policy, sb, role, solver_variables(task.spec, "tests"), limits=limits, sampling=GREEDY)
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


def preset_temperature(preset: str, overrides: list[str]) -> float:
    """The rollout temperature a `selfplay run` of `preset` with `overrides` samples at: what the rl arms use
    unless `--temperature` says otherwise, so the experiment plays the run it compares."""
    from selfplay.config.loader import ConfigError, load_config

    try:
        return float(load_config(preset, list(overrides)).rollout.temperature)
    except ConfigError as e:
        raise SystemExit(f"--arm rl: {e}") from None


def main() -> None:
    from sandboxes.reaper import registry

    registry.install_signal_cleanup()  # the episodes' sandboxes are created by worker threads
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default=None, help="Base checkpoint (default: the embedded model).")
    ap.add_argument("--after", default=None, help="RFT checkpoint (default: the cached default warm start).")
    ap.add_argument("--arm", choices=("rft", "rl", "report", "recheck", "compare"), default="rft",
                    help="rft: before/after the warm start; rl: the two-arm learning experiment; report: rewrite "
                         "the rl outputs from <--work>/results.json and the arms' run directories; recheck: "
                         "play the final checkpoints of the --recheck experiments again with fresh seeds.")
    ap.add_argument("--repos", default=None,
                    help="rft: held-out repos (default parse,inflection,humanize); rl: training repos "
                         "(default: the warm start's).")
    ap.add_argument("--heldout", default=",".join(HELDOUT_REPOS), help="rl: held-out repos, comma-separated.")
    ap.add_argument("--repo-list", default=None,
                    help="The repo list (repos/default.toml's format) that names --repos and --heldout (default: "
                         "the bundled one); rl: the arms' `repo_list` too (a --set repo_list= wins there).")
    ap.add_argument("--model", default=None, help="rl: the warm start both arms start from (default: the cached "
                                                  "default warm start, built if missing).")
    ap.add_argument("--policy", choices=("hf", "vllm"), default=None,
                    help="rl: the arms' rollout backend (policy.backend; default: the --preset's): hf samples in "
                         "process (on a GPU when there is one); vllm through the preset's endpoints (gpu-1node). "
                         "The evaluations load --model and its successors with the hf backend either way.")
    ap.add_argument("--preset", default="default",
                    help="rl: the `selfplay run` preset the arms start from (e.g. gpu-1node on a GPU node).")
    ap.add_argument("--iterations", type=int, default=4, help="rl: loop iterations per arm.")
    ap.add_argument("--eval-every", type=int, default=2, help="rl: held-out evaluation every K iterations.")
    ap.add_argument("--lr", type=float, default=1e-5, help="rl: the RL arm's learning rate (control: 0).")
    ap.add_argument("--samples", type=int, default=2,
                    help="rl: episodes per held-out task at the training temperature (pass@k).")
    ap.add_argument("--temperature", type=float, default=None,
                    help="rl: sampling temperature of training episodes (rollout.temperature; the learner's "
                         "logprobs follow it) and of the held-out samples (default: the --preset's, with the "
                         "--set overrides: 0.5 for `default`); the other arms: of their samples (default 1.0).")
    ap.add_argument("--workers", type=int, default=4, help="rl: held-out episodes in flight at once.")
    ap.add_argument("--control-learner", choices=("on", "off"), default="on",
                    help="rl: run the control arm's learner at LR 0 (on), or not at all (off: the same weights, "
                         "only its rollouts' cost).")
    ap.add_argument("--merge", type=Path, action="append", default=[],
                    help="report: add the arms of another experiment's --work directory (an arm run in a "
                         "process of its own with --arms), after checking that it used the same held-out tasks.")
    ap.add_argument("--arms", default="rl,control", help="rl: which arms to run.")
    ap.add_argument("--resume", action="store_true",
                    help="rl: continue the experiment in --work (a stopped or killed process; the same options): "
                         "saved evaluations are kept and each arm's loop resumes from its run directory.")
    ap.add_argument("--recheck", type=Path, action="append", default=[],
                    help="recheck: a finished experiment's --work directory (repeatable); the i-th is played "
                         "with sample seed --eval-seed + i, --samples episodes per task.")
    ap.add_argument("--reuse", type=Path, action="append", default=[],
                    help="recheck: an earlier recheck's --out (repeatable); a final checkpoint it already played "
                         "on the same tasks, sample seed and settings (an LR-0 control shared by experiments from "
                         "one start) is read back from it instead of played again.")
    ap.add_argument("--stratum", choices=("train", "heldout", "untrained"), default="train",
                    help="recheck: the training-stratum tasks (train; a --demonstrated experiment without "
                         "--train-eval: the warm start's demonstrated tasks), the held-out ones, or (untrained) the "
                         "warm start's demonstrated tasks (the store.db beside its model) that a --demonstrated "
                         "experiment did not train on, to see whether what RL taught carries to them.")
    ap.add_argument("--train-eval", type=int, default=0,
                    help="rl: also evaluate this many training-stratum tasks per training repo (the loop's own "
                         "procedural seeds) at every stage, so the arms' training solve rates pair; 0: none.")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="rl: KEY=VALUE override of both arms' run config (repeatable).")
    ap.add_argument("--demonstrated", action="store_true",
                    help="rl: the arms' stores start with the warm start's demonstrated tasks (an easier "
                         "stratum: curriculum.demonstrated_tasks, read from the store.db beside --model), and "
                         "the training stratum of --train-eval starts with them.")
    ap.add_argument("--svg-dir", type=Path, default=None, help="rl: also write the SVG charts here (e.g. docs/).")
    ap.add_argument("-n", type=int, default=4, help="Tasks per held-out repo.")
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--max-context-tokens", type=int, default=2048,
                    help="Context budget of the held-out episodes (the warm start's demonstrations fit 2,048; "
                         "SmolLM2 attends to 8,192).")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-seed", type=int, default=0,
                    help="rl: moves the evaluations' sampled episodes (0: the fixed seeds of earlier runs); give "
                         "each replicate its own so their evaluations are independent.")
    ap.add_argument("--submit-on-limit", action="store_true",
                    help="Held-out episodes that run out of turns or context are graded on the diff they left "
                         "(SWE-agent's autosubmission, `EvalSettings.submit_on_limit`).")
    ap.add_argument("--max-repeats", type=int, default=None,
                    help="Held-out episodes end when this many turns in a row repeat the one before, the same "
                         "action answered the same (`EvalSettings.max_repeats`, as the default preset's training "
                         "rollouts do with 2); default never, as every earlier evaluation.")
    ap.add_argument("--eval-device", default="auto",
                    help="Where the evaluations sample: auto (cuda when torch sees a GPU), cpu, cuda, cuda:N "
                         "(`EvalSettings.device`; not part of an experiment's identity).")
    ap.add_argument("--localize", action="store_true",
                    help="Held-out solvers get the `localize` tool (for a `--locate localize` warm start).")
    ap.add_argument("--work", type=Path, default=Path("runs/bench_learning"))
    ap.add_argument("--out", type=Path, default=None, help="Write the results as JSON here.")
    ap.add_argument("--phase", choices=("before", "after", "both"), default="both",
                    help="Run one policy only; results of the other phase are read back from --out.")
    args = ap.parse_args()
    if args.max_repeats is not None and args.max_repeats < 1:
        raise SystemExit(f"--max-repeats must be 1 or more, got {args.max_repeats}")
    if args.n < 1 and args.arm in ("rft", "rl", "compare"):
        raise SystemExit(f"-n must be 1 or more held-out tasks per repo, got {args.n}")
    if args.temperature is None:
        args.temperature = preset_temperature(args.preset, args.overrides) if args.arm == "rl" else 1.0
    if args.arm == "rl":
        return run_rl(args)
    if args.arm == "report":
        return report_rl(args)
    if args.arm == "recheck":
        return recheck_rl(args)
    if args.arm == "compare":
        return compare_checkpoints(args)
    repos = heldout_repos(args.repos or ",".join(HELDOUT_REPOS), args.repo_list)
    args.repos = ",".join(repos)  # the --out file's args record the repos played, as before the check
    if args.max_turns < 1 or args.max_new_tokens < 1:
        raise SystemExit(f"--max-turns and --max-new-tokens must be 1 or more, got {args.max_turns} and "
                         f"{args.max_new_tokens}")
    from transformers import AutoTokenizer

    lock = hold_work(args, "the same command")  # noqa: F841 (held until the process ends)
    after = args.after
    if after is None and args.phase != "before":

        after = str(warm_start_checkpoint())
    random.seed(args.seed)
    tok = AutoTokenizer.from_pretrained(default_model_dir())
    tasks = listed_heldout(repos, args.n, args.seed, args.work, tok,
                          exclude=shown_task_ids([m for m in (args.before, after) if m]), repo_list=args.repo_list)
    print(f"{len(tasks)} held-out tasks: {[t.task_id for _, t in tasks]}", flush=True)
    tasks = interleave(tasks)
    saved = json.loads(args.out.read_text())["results"] if args.out and args.out.is_file() else {}
    results = dict(saved)

    def save() -> None:  # after every episode, so a run stopped for time keeps what it measured
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({**invocation(args),
                                            "results": results}, indent=1) + "\n")

    for phase, model in (("before", args.before), ("after", after)):
        if args.phase in (phase, "both"):
            results[phase] = evaluate(model, tasks, args.max_turns, args.max_new_tokens,
                                      on_row=lambda r, p=phase: (results.__setitem__(p, r), save()))
    if "before" in results and "after" in results:
        print(table([results["before"], results["after"]]))
    save()


def invocation(args: argparse.Namespace) -> dict[str, Any]:
    """What an --out file records of the command that wrote it: its arguments, and the commit it ran
    (`selfplay.code_revision`; a file rewritten by a later re-run names that one's)."""
    return {"args": {k: str(v) for k, v in vars(args).items()}, "code": code_revision()}


def hold_work(args: argparse.Namespace, again: str) -> DirLock:
    """The lock on --work for this process's whole life (`selfplay.dir_lock`): a second process there (the
    other arm started with the same --work, a `--resume` while the first still runs, a `report`) would seed
    the same tasks.json and overwrite the first's results.json. `again`: how to go on once it is free."""
    args.work.mkdir(parents=True, exist_ok=True)
    try:
        return DirLock.acquire(args.work, f"bench_learning.py --arm {args.arm}", again)
    except DirInUseError as e:
        raise SystemExit(str(e)) from None


def listed_heldout(*args, **kwargs) -> list:
    """`heldout_tasks`, its refusal of a tasks.json that cannot be read back a SystemExit naming the file."""
    try:
        return heldout_tasks(*args, **kwargs)
    except ValueError as e:
        raise SystemExit(str(e)) from None


def heldout_repos(names: str, repo_list: str | None = None) -> list[str]:
    """The comma-separated held-out repos, each checked in `repo_list` (--repo-list; None: the bundled list),
    where `heldout_tasks` seeds them, before any is seeded."""
    from repos.errors import RepoError

    repos = [r for r in names.split(",") if r]
    try:
        problem = unlisted_repos(repos, repo_list)
    except RepoError as e:
        raise SystemExit(f"--repo-list: {e}") from None
    if problem:
        raise SystemExit(problem)
    if not repos:
        raise SystemExit("held-out repos: none named; give a comma-separated list, e.g. parse,inflection,humanize")
    return repos


def eval_settings(args: argparse.Namespace) -> EvalSettings:
    """The held-out evaluations' budgets of the options; a budget out of range is a SystemExit naming it."""
    try:
        return EvalSettings(max_turns=args.max_turns, max_new_tokens=args.max_new_tokens,
                            max_context_tokens=args.max_context_tokens, samples=args.samples,
                            workers=args.workers, temperature=args.temperature, sample_seed=args.eval_seed,
                            localize=args.localize, submit_on_limit=args.submit_on_limit,
                            max_repeats=args.max_repeats, device=args.eval_device)
    except ValueError as e:
        raise SystemExit(f"--arm {args.arm}: {e}") from None


def experiment_config(args: argparse.Namespace, model: str, stand_in: bool = False) -> ExperimentConfig:
    """The experiment of `--arm rl`'s options, starting from `model`, checked (`check_experiment`): a
    refusal is a SystemExit that names the option to fix. `stand_in`: `model` is the embedded model, standing
    in for a warm start not built yet (it has no store of demonstrations to check)."""
    shown: tuple[str, ...] = ()
    if args.demonstrated and not stand_in:
        store = Path(model).expanduser().resolve().parent / "store.db"
        if not store.is_file():
            raise SystemExit(f"--demonstrated: no warm-start store at {store}; --model must be a warm start's "
                             "model directory (its cache directory holds the store.db of its demonstrations)")
        shown = ("curriculum.demonstrated_tasks=true", f"curriculum.demonstrated_store={store}")
    settings = eval_settings(args)
    try:
        cfg = ExperimentConfig(model_dir=model, work=args.work,
                               repos=tuple(r for r in (args.repos or ",".join(TRAIN_REPOS)).split(",") if r),
                               heldout=tuple(r for r in args.heldout.split(",") if r), iterations=args.iterations,
                               eval_every=args.eval_every, lr=args.lr, seed=args.seed, preset=args.preset,
                               overrides=(*([f"policy.backend={args.policy}"] if args.policy else []),
                                          *([f"repo_list={args.repo_list}"] if args.repo_list else []),
                                          f"rollout.temperature={args.temperature}", *shown, *args.overrides),
                               eval=settings, arms=tuple(a for a in args.arms.split(",") if a),
                               train_eval=args.train_eval, control_learner=args.control_learner == "on")
        check_experiment(cfg)
    except ValueError as e:  # ConfigError is one: each names the key or option and what is allowed
        raise SystemExit(f"--arm rl: {e}") from None
    return cfg


def run_rl(args: argparse.Namespace) -> None:

    from transformers import AutoTokenizer

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    # Everything is checked before the warm start is built (when --model is not given) and before the
    # held-out tasks are seeded, each of which takes minutes: the embedded model stands in for the warm start
    # until it exists.
    cfg = experiment_config(args, args.model or str(default_model_dir()), stand_in=not args.model)
    try:
        saved_results(args.work, args.resume)
    except ValueError as e:
        raise SystemExit(f"--arm rl: {e}") from None
    lock = hold_work(args, "the same command with --resume")  # noqa: F841 (held until the process ends)
    model = args.model or str(warm_start_checkpoint())
    if not args.model:
        cfg = experiment_config(args, model)
    tok = AutoTokenizer.from_pretrained(default_model_dir())
    tasks = interleave(listed_heldout(cfg.heldout, args.n, args.seed, args.work, tok,
                                      exclude=shown_task_ids([model]), repo_list=heldout_list(cfg)))
    print(f"{len(tasks)} held-out tasks: {[t.task_id for _, t in tasks]}", flush=True)
    train = (interleave(training_tasks(arm_config(cfg, "rl", cfg.iterations), per_repo=cfg.train_eval))
             if cfg.train_eval else [])
    if train:
        print(f"{len(train)} training-stratum tasks: {[t.task_id for _, t in train]}", flush=True)
    try:
        experiment = Experiment(cfg, tasks, train_tasks=train, resume=args.resume)
    except ValueError as e:
        raise SystemExit(f"--arm rl: {e}") from None
    results = experiment.execute()
    write_outputs(results, args.work, args.svg_dir)
    print(heldout_table(results), heldout_table(results, "train_evals"), training_table(results),
          paired_line(results), injector_table(results), sep="\n\n")


def report_rl(args: argparse.Namespace) -> None:
    """The tables, page and charts again, from what a (possibly stopped) experiment saved: results.json,
    and each arm's metrics.jsonl and trajectories (so an arm cut short still shows its iterations)."""
    def read(work: Path, flag: str) -> dict:
        try:
            saved = saved_results(work, resume=True)
        except ValueError as e:
            raise SystemExit(f"{flag} {work}: {e}") from None
        if saved is None:
            raise SystemExit(f"{flag} {work}: no results.json there; name the --work of an experiment "
                             "(`--arm rl` writes it after its first evaluation)")
        return saved

    results = read(args.work, "--work")
    lock = hold_work(args, "the same command")  # noqa: F841 (it rewrites results.json)
    for other in args.merge:
        try:
            merge_results(results, read(other, "--merge"))
        except ValueError as e:
            raise SystemExit(f"--merge {other}: {e}") from None
    for info in results["arms"].values():
        info.update(arm_figures(Path(info["run_dir"])))
    # an arm stopped before its first stage ended has no entry yet: its run directory is all there is
    for arm_dir in sorted(d for work in (args.work, *args.merge) for d in (work / "arms").glob("*")):
        name = arm_dir.name.split("-")[0]
        if name not in results["arms"] and (arm_dir / "metrics.jsonl").is_file():
            results["arms"][name] = {"run_dir": str(arm_dir), **arm_figures(arm_dir), "stopped": True}
    results["injector_comparison"] = injector_comparison(results)
    if args.merge:  # the paired tests need both arms' last evaluations, which only the merge brings together
        results["paired"] = paired(results, int(results["config"]["iterations"]))
    (args.work / "results.json").write_text(json.dumps(results, indent=1) + "\n")  # with what was re-derived
    write_outputs(results, args.work, args.svg_dir)
    print(heldout_table(results), heldout_table(results, "train_evals"), paired_line(results),
          training_table(results), injector_table(results), turns_table(results), sep="\n\n")


def untrained_tasks(work: Path, results: dict) -> list:
    """The warm start's demonstrated tasks of the training repos (its store.db, beside its model directory)
    that the experiment's training stratum leaves out: a --demonstrated experiment trained on a chosen subset
    (`curriculum.demonstrated_store`) reaches these only through what it generalises."""
    from repos.listfile import get_repo
    from selfplay.orchestration.curriculum import demonstrated_tasks
    from selfplay.store import open_store

    store = Path(results["config"]["model_dir"]).expanduser().parent / "store.db"
    if not store.is_file():
        raise SystemExit(f"--recheck {work}: no warm-start store at {store}; --stratum untrained needs the "
                         "store.db beside the experiment's --model")
    trained = {t.task_id for _, t in recheck_tasks(work, results, "train")}
    repos = set(ast.literal_eval(results["config"]["repos"]))
    with open_store(str(store), create=False) as s:
        tasks = [t for t in demonstrated_tasks(s) if t.repo in repos and t.task_id not in trained]
    if not tasks:
        raise SystemExit(f"--recheck {work}: it trained on every demonstrated task of {store}; nothing is untrained")
    listed = listed_repos(work, results)  # read once: it loads the arms' config
    return interleave([(get_repo(t.repo, listed), t) for t in tasks])


def listed_repos(work: Path, results: dict) -> str | None:
    """The repo list that named the experiment's training repos (`experiment_repo_list`), a SystemExit naming
    the --recheck directory where its preset or overrides no longer load."""
    from selfplay.config.loader import ConfigError
    from selfplay.experiment.recheck import experiment_repo_list

    try:
        return experiment_repo_list(results)
    except ConfigError as e:
        raise SystemExit(f"--recheck {work}: its arms' config no longer loads ({e}); its repo list is named there") from None


def recheck_tasks(work: Path, results: dict, stratum: str) -> list:
    """The tasks an experiment evaluated: the held-out ones from its tasks.json, the training stratum from its
    rl arm's store (the loop stored every one of them before its first iteration)."""
    if stratum == "untrained":
        return untrained_tasks(work, results)
    if stratum == "heldout":
        if not (work / "tasks.json").is_file():
            raise SystemExit(f"--recheck {work}: no tasks.json there; is it an experiment's --work directory?")
        return interleave(listed_heldout((), 0, 0, work, None))
    from repos.listfile import get_repo
    from selfplay.experiment.recheck import demonstrated_store
    from selfplay.store import open_store

    ids = results.get("train_tasks") or []
    shown = demonstrated_store(results)
    if not ids and shown:  # a --demonstrated experiment's stratum is the warm start's demonstrated tasks
        from selfplay.orchestration.curriculum import demonstrated_tasks

        if not Path(shown).expanduser().is_file():
            raise SystemExit(f"--recheck {work}: the warm-start store {shown} its arms trained from is gone")
        repos = set(ast.literal_eval(results["config"]["repos"]))
        with open_store(str(Path(shown).expanduser()), create=False) as s:
            tasks = [t for t in demonstrated_tasks(s) if t.repo in repos]
        listed = listed_repos(work, results)  # read once: it loads the arms' config
        return interleave([(get_repo(t.repo, listed), t) for t in tasks])
    if not ids:
        raise SystemExit(f"--recheck {work}: the experiment evaluated no training stratum (--train-eval 0, no "
                         "--demonstrated); recheck its held-out tasks with --stratum heldout")
    store = Path(results["arms"]["rl"]["run_dir"]) / "store.db"
    if not store.is_file():
        raise SystemExit(f"--recheck {work}: its rl arm's store {store} is gone; the training stratum's tasks are read there")
    with open_store(str(store), create=False) as s:
        tasks = s.get_tasks(ids)
    listed = listed_repos(work, results)  # read once: it loads the arms' config
    return interleave([(get_repo(t.repo, listed), t) for t in tasks])


def earlier_rechecks(paths: list[Path], flag: str = "--reuse") -> list[dict]:
    """The experiment entries of earlier rechecks' --out files, each tagged with its file (`source`) and
    given its draw settings: a file written before they were recorded has them recomputed from its
    experiment's results.json, which must still be there."""
    from selfplay.experiment.recheck import draw_settings, recheck_settings

    entries = []
    for path in paths:
        try:
            saved = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"{flag} {path}: cannot read it as a recheck's output ({e})") from None
        if not isinstance(saved, dict) or not isinstance(saved.get("experiments"), list):
            raise SystemExit(f"{flag} {path}: no 'experiments' list there; name a file `--arm recheck` wrote")
        for entry in saved["experiments"]:
            if "settings" not in entry:
                results = Path(entry.get("work", "")) / "results.json"
                if not results.is_file():
                    raise SystemExit(f"{flag} {path}: its entry for {entry.get('work')!r} records no settings and "
                                     f"{results} is gone, so its draws cannot be matched; play that checkpoint again")
                entry["settings"] = draw_settings(recheck_settings(
                    json.loads(results.read_text()), samples=int(entry["samples"]),
                    sample_seed=int(entry["sample_seed"]), workers=1))
            for arm in entry.get("arms", {}).values():
                arm.setdefault("source", str(path))
            entries.append(entry)
    return entries


def continued_out(out: Path, entries: list[dict], plans: list) -> None:
    """Refuses an existing --out that holds episodes this recheck would not carry over: an entry of another
    experiment, or of one of these with other tasks or draws (`entries`: the file's, read by
    `earlier_rechecks`; `plans`: (work, results, tasks, settings) of this run). Its arms are read back from
    it when they match, so re-running a stopped recheck continues it; anything else would be overwritten."""
    from selfplay.experiment.recheck import draw_settings

    wanted = {(str(work.expanduser().resolve()), json.dumps(draw_settings(settings), sort_keys=True),
               tuple(sorted(t.task_id for _, t in tasks))) for work, _, tasks, settings in plans}
    for entry in entries:
        key = (str(Path(entry.get("work", "")).expanduser().resolve()),
               json.dumps(entry.get("settings"), sort_keys=True), tuple(sorted(entry.get("tasks", ()))))
        if key not in wanted:
            raise SystemExit(f"--out {out} holds a recheck of {entry.get('work')!r} (sample seed "
                             f"{entry.get('sample_seed')}, {entry.get('samples')} samples, "
                             f"{len(entry.get('tasks', ()))} tasks) that this one would overwrite; give another "
                             "--out, or move that file away")


def recheck_rl(args: argparse.Namespace) -> None:
    """`--arm recheck`: see `selfplay.experiment.recheck`. Every experiment is read and checked before any
    episode is played; --out (default <first --recheck>/recheck.json) is written after every checkpoint, so
    a stopped recheck keeps what it played, and the same command run again reads that back and plays the
    rest."""
    from selfplay.experiment.recheck import (
        final_checkpoints,
        pooled,
        recheck_experiment,
        recheck_settings,
        recheck_table,
    )

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if not args.recheck:
        raise SystemExit("--arm recheck needs at least one --recheck DIR (a finished experiment's --work)")
    if args.eval_seed < 1:
        raise SystemExit(f"--arm recheck: --eval-seed {args.eval_seed} would replay the experiments' own draws; "
                         "give 1 or more (the i-th --recheck plays with --eval-seed + i)")
    kind = "evals" if args.stratum == "heldout" else "train_evals"
    checked = []  # the cheap checks of every experiment first, then their tasks, then any episode
    for i, work in enumerate(args.recheck):
        path = work / "results.json"
        if not path.is_file():
            raise SystemExit(f"--recheck {work}: no results.json there; name an experiment's --work directory")
        try:
            results = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"--recheck {work}: {path} cannot be read ({e}); restore it, or name another "
                             "experiment") from None
        try:
            final_checkpoints(results, kind)
            settings = replace(recheck_settings(results, samples=args.samples, sample_seed=args.eval_seed + i,
                                                workers=args.workers), device=args.eval_device)
            if args.submit_on_limit:  # on top of the experiment's own settings
                settings = replace(settings, submit_on_limit=True)
            if args.max_repeats is not None:
                settings = replace(settings, max_repeats=args.max_repeats)
        except ValueError as e:
            raise SystemExit(f"--recheck {work}: {e}") from None
        checked.append((work, results, settings))
    plans = [(work, results, recheck_tasks(work, results, args.stratum), settings) for work, results, settings in checked]
    out = args.out or args.recheck[0] / "recheck.json"
    earlier = earlier_rechecks(args.reuse)
    if out.is_file() and out.resolve() not in {p.resolve() for p in args.reuse}:
        stopped = earlier_rechecks([out], "--out")
        continued_out(out, stopped, plans)
        earlier += stopped
    done: list[dict] = []

    def save(partial: dict | None = None) -> None:
        # a partial entry (one checkpoint played) is kept for a re-run to read back; only whole ones pool
        experiments = done + ([{**partial, "partial": True}] if partial else [])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({**invocation(args), "pooled": pooled(done),
                                   "experiments": experiments}, indent=1) + "\n")

    for work, results, tasks, settings in plans:
        print(f"{work}: {len(tasks)} tasks x {settings.samples} samples, sample seed {settings.sample_seed}",
              flush=True)
        done.append({"work": str(work), **recheck_experiment(
            results, tasks, settings, kind, reuse=earlier,
            played=lambda partial, work=work: save({"work": str(work), **partial}))})
        save()
        print(recheck_table(done, pooled(done)), flush=True)


def compare_checkpoints(args: argparse.Namespace) -> None:
    """`--arm compare`: see `selfplay.experiment.compare`. --out is written after every episode, so a stopped
    comparison keeps what it played, and a later --phase reads the other checkpoint's rows from it."""
    from transformers import AutoTokenizer

    from selfplay.config.refs import checkpoint_problem
    from selfplay.experiment.compare import PHASES, by_repo, compare_rows, compare_table
    from selfplay.experiment.heldout import evaluate, row_dict, row_from_dict
    from selfplay.experiment.heldout import summarize as summarize_rows
    from selfplay.experiment.recheck import draw_settings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.out is None:
        raise SystemExit("--arm compare needs --out F.json: both phases' episodes are kept there")
    given = {"before": args.before, "after": args.after}
    for phase in PHASES:
        if args.phase in (phase, "both") and not given[phase]:
            raise SystemExit(f"--arm compare: --{phase} DIR is needed to play the {phase} phase")
        if given[phase] and not Path(given[phase]).expanduser().is_dir():
            raise SystemExit(f"--{phase} {given[phase]}: no such checkpoint directory")
        if given[phase] and (problem := checkpoint_problem(given[phase])):
            raise SystemExit(f"--{phase} {given[phase]}: {problem}")
    if args.samples < 0:
        raise SystemExit(f"--samples must be >= 0, got {args.samples}")
    repos = heldout_repos(args.repos or ",".join(HELDOUT_REPOS), args.repo_list)
    try:
        saved = json.loads(args.out.read_text()) if args.out.is_file() else {}
    except (OSError, ValueError) as e:
        raise SystemExit(f"--out {args.out} cannot be read ({e}); restore it, or give another --out") from None
    models = {p: given[p] if args.phase in (p, "both") else saved.get("models", {}).get(p) for p in PHASES}
    rows: dict[str, list] = {p: list(saved.get("rows", {}).get(p, [])) for p in PHASES}
    settings = eval_settings(args)
    # the other phase's rows pair with this one's only on the same budgets and draws (`draw_settings`)
    # a setting missing from an older file had its default then; a new file pairs with anything
    was_set = {**asdict(EvalSettings()), **saved["settings"]} if saved.get("settings") else asdict(settings)
    differ = sorted(k for k, v in draw_settings(settings).items() if was_set[k] != v)
    if differ:
        was = ", ".join(f"{k}={was_set[k]}" for k in differ)
        raise SystemExit(f"--out {args.out} holds episodes played with other {', '.join(differ)} ({was}); give "
                         "the same options, or another --out")
    lock = hold_work(args, "the same command")  # noqa: F841 (held until the process ends)
    tok = AutoTokenizer.from_pretrained(default_model_dir())
    tasks = interleave(listed_heldout(repos, args.n, args.seed, args.work, tok,
                                     exclude=shown_task_ids([m for m in models.values() if m]),
                                     repo_list=args.repo_list))
    print(f"{len(tasks)} held-out tasks: {[t.task_id for _, t in tasks]}", flush=True)
    if saved.get("tasks") and saved["tasks"] != [t.task_id for _, t in tasks]:
        raise SystemExit(f"--out {args.out} holds episodes of other held-out tasks than --work {args.work} lists; "
                         "give the --work (and -n, --seed, --repos) it was played with, or another --out")

    def save() -> dict:
        summaries = {p: summarize_rows([row_from_dict(r) for r in rows[p]])
                     for p in PHASES if rows[p]}
        out = {**invocation(args), "models": models, "settings": asdict(settings),
               "tasks": [t.task_id for _, t in tasks], "summaries": summaries,
               "by_repo": {p: by_repo(rows[p]) for p in PHASES if rows[p]}, "rows": rows}
        if rows["before"] and rows["after"]:
            out["paired"] = compare_rows(rows["after"], rows["before"])
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")
        return out

    for phase in PHASES:
        if args.phase in (phase, "both"):
            t0 = time.monotonic()
            rows[phase] = []
            evaluate(models[phase], tasks, settings, on_row=lambda r, p=phase: (rows[p].append(row_dict(r)), save()),
                     transcripts=args.work / "transcripts" / phase)
            print(f"{phase}: {len(rows[phase])} episodes in {time.monotonic() - t0:.0f} s", flush=True)
    out = save()
    print(compare_table(out["summaries"], out.get("paired", {})), flush=True)


if __name__ == "__main__":
    main()
